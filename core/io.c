/* SPDX-License-Identifier: MIT */
/*
 * io.c - the public data calls: up_write(), up_writev(), up_read(),
 * up_readv(), up_reserve(), up_commit(), up_peek(), up_consume(). Each
 * checks its arguments, runs its short way inline (short.h) and tail-calls
 * an out-of-line general path, which retries once after an idle point
 * (a look at the peers, and for a reader the trim) when it would return
 * -EAGAIN.
 */
#include <limits.h>
#include <string.h>

#include "short.h"

#define UP_IOV_MAX 1024

static int check_iov(const struct iovec *iov, int iovcnt, size_t *total)
{
	size_t sum = 0;
	int i;

	if (iovcnt < 0 || iovcnt > UP_IOV_MAX || (iovcnt > 0 && !iov))
		return -EINVAL;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		if (iov[i].iov_len > (size_t)SSIZE_MAX - sum)
			return -EINVAL;
		sum += iov[i].iov_len;
	}
	*total = sum;
	return 0;
}

/*
 * A call about to fail with -EAGAIN: a parked poll-mode wait is looked at
 * (poll.c), and the peers may be asked (below). True when the call should
 * be tried again.
 */
static bool would_block(struct up_end *e)
{
	if (up__unlikely(e->parked))
		up__ring_parked_look(e);
	return up__live_poll(e);
}

/*
 * Every call that may return without sleeping ticks the liveness clock
 * (up__live_tick()), and one about to fail with -EAGAIN asks the peers'
 * locks first (at most every UP_LIVE_CHECK_NS): a peer that died is
 * noticed by an end that streams or retries, not only by one that sleeps,
 * and the retry then returns end of stream or -EPIPE as pipe(7) has it.
 */
ssize_t up_writev(struct up_end *w, const struct iovec *iov, int iovcnt)
{
	ssize_t n;
	size_t len;
	int r;

	if (!w)
		return -EINVAL;
	if (!(w->flags & UP_WR))
		return -EBADF;
	r = check_iov(iov, iovcnt, &len);
	if (r < 0)
		return r;
	up__live_tick(w);
	n = up__ring_write(w, iov, iovcnt, len);
	if (up__unlikely(n == -EAGAIN) && would_block(w))
		n = up__ring_write(w, iov, iovcnt, len);
	return n;
}

/* up_write()'s general path, out of line: the entry point runs the short
 * way inline (short.h) and tail-calls this. */
static __attribute__((noinline)) ssize_t write_general(struct up_end *w, const void *buf,
						       size_t len)
{
	struct iovec v = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	ssize_t n = up__ring_write(w, &v, 1, len);

	if (up__unlikely(n == -EAGAIN) && would_block(w))
		n = up__ring_write(w, &v, 1, len);
	return n;
}

ssize_t up_write(struct up_end *w, const void *buf, size_t len)
{
	if (!w)
		return -EINVAL;
	if (!(w->flags & UP_WR))
		return -EBADF;
	if (len && !buf)
		return -EINVAL;
	if (len > SSIZE_MAX)
		return -EINVAL;
	up__live_tick(w);
	/* The lone writer's small write, when it fits the last page. */
	if (w->last_ok && len != 0 && up__ring_write_small(w, buf, len) == len)
		return (ssize_t)len;
	return write_general(w, buf, len);
}

/* A read found nothing: a reader's idle point. The peers are asked (a retry
 * may find end of stream), and the trim looks (reclaim.c): a non-blocking or
 * poll-mode reader never sleeps in the library, so this is where its pipe
 * gives back what the traffic no longer needs. */
static ssize_t read_again(struct up_end *r, const struct iovec *iov, int iovcnt, size_t len)
{
	ssize_t n = -EAGAIN;

	if (would_block(r))
		n = up__ring_read(r, iov, iovcnt, len);
	if (n == -EAGAIN)
		up__pool_trim(r);
	return n;
}

ssize_t up_readv(struct up_end *r, const struct iovec *iov, int iovcnt)
{
	ssize_t n;
	size_t len;
	int rc;

	if (!r)
		return -EINVAL;
	if (!(r->flags & UP_RD))
		return -EBADF;
	rc = check_iov(iov, iovcnt, &len);
	if (rc < 0)
		return rc;
	n = up__ring_read(r, iov, iovcnt, len);
	if (up__unlikely(n == -EAGAIN))
		n = read_again(r, iov, iovcnt, len);
	return n;
}

/* up_read()'s general path, out of line, as write_general(). */
static __attribute__((noinline)) ssize_t read_general(struct up_end *r, void *buf, size_t len)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };
	ssize_t n = up__ring_read(r, &v, 1, len);

	if (up__unlikely(n == -EAGAIN))
		n = read_again(r, &v, 1, len);
	return n;
}

ssize_t up_read(struct up_end *r, void *buf, size_t len)
{
	if (!r)
		return -EINVAL;
	if (!(r->flags & UP_RD))
		return -EBADF;
	if (len && !buf)
		return -EINVAL;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	/* A small read inside the slot this end is reading. */
	if (r->fin_valid && len != 0 && up__ring_read_small(r, buf, len) == len)
		return (ssize_t)len;
	return read_general(r, buf, len);
}

/* The general paths of up_reserve() and up_peek(), out of line: the entry
 * points run the short ways (short.h) and tail-call these. */
static __attribute__((noinline)) ssize_t reserve_general(struct up_end *w, size_t len,
							 struct iovec *iov, int *iovcnt)
{
	int cap = *iovcnt;
	ssize_t n = up__ring_reserve(w, len, iov, iovcnt);

	if (up__unlikely(n == -EAGAIN) && would_block(w)) {
		*iovcnt = cap;
		n = up__ring_reserve(w, len, iov, iovcnt);
	}
	return n;
}

static __attribute__((noinline)) ssize_t peek_general(struct up_end *r, struct iovec *iov,
						      int *iovcnt)
{
	int cap = *iovcnt;
	ssize_t n = up__ring_peek(r, iov, iovcnt);

	if (up__unlikely(n == -EAGAIN) && would_block(r)) {
		*iovcnt = cap;
		n = up__ring_peek(r, iov, iovcnt);
	}
	return n;
}

ssize_t up_reserve(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt)
{
	size_t n;

	if (!w || !iov || !iovcnt)
		return -EINVAL;
	if (!(w->flags & UP_WR))
		return -EBADF;
	up__live_tick(w);
	n = up__reserve_small(w, len, iov, iovcnt);
	if (n > 0)
		return (ssize_t)n;
	return reserve_general(w, len, iov, iovcnt);
}

int up_commit(struct up_end *w, size_t n)
{
	if (!w)
		return -EINVAL;
	if (!(w->flags & UP_WR))
		return -EBADF;
	if (up__commit_small(w, n))
		return 0;
	return up__ring_commit(w, n);
}

/* up_commit_reserve() after its short way published and kept the lock
 * (short.h): leave it as up__merge_close() does, then reserve afresh. */
static __attribute__((noinline)) ssize_t commit_reserve_out(struct up_end *w, size_t len,
							    struct iovec *iov, int *iovcnt)
{
	w->resv_bytes = 0;
	up__merge_leave_own(w, w->p->ln);
	up__live_tick(w);
	return (ssize_t)up__reserve_small(w, len, iov, iovcnt);
}

/* up_commit_reserve() where its short way declined, nothing done yet. */
static __attribute__((noinline)) ssize_t commit_reserve_general(struct up_end *w, size_t n,
								size_t len, struct iovec *iov,
								int *iovcnt)
{
	int r = up_commit(w, n);

	if (r < 0)
		return r;
	up__live_tick(w);
	return (ssize_t)up__reserve_small(w, len, iov, iovcnt);
}

/*
 * A message writer's one call per message: the commit, then the next
 * reservation by a short way only (short.h), which never waits and never
 * fails. Anything the short ways decline is left to up_reserve() (return
 * 0), so every error returned here is the commit's and means nothing new is
 * reserved: the two outcomes cannot be confused. The rare ways are
 * tail-called, so the short way saves no register on entry.
 */
ssize_t up_commit_reserve(struct up_end *w, size_t n, size_t len, struct iovec *iov,
			  int *iovcnt)
{
	ssize_t r;

	if (!w || !iov || !iovcnt)
		return -EINVAL;
	if (!(w->flags & UP_WR))
		return -EBADF;
	r = up__commit_reserve_small(w, n, len, iov, iovcnt);
	if (up__likely(r > 0))
		return r;
	if (r < 0)
		return commit_reserve_out(w, len, iov, iovcnt);
	return commit_reserve_general(w, n, len, iov, iovcnt);
}

ssize_t up_peek(struct up_end *r, struct iovec *iov, int *iovcnt)
{
	size_t n;

	if (!r || !iov || !iovcnt)
		return -EINVAL;
	if (!(r->flags & UP_RD))
		return -EBADF;
	n = up__peek_small_entry(r, iov, iovcnt);
	if (n > 0)
		return (ssize_t)n;
	return peek_general(r, iov, iovcnt);
}

/* up_consume_peek() where the consume's short way declined. */
static __attribute__((noinline)) ssize_t consume_peek_general(struct up_end *r, size_t n,
							      struct iovec *iov, int *iovcnt)
{
	int c = up__ring_consume(r, n);

	return c < 0 ? c : up_peek(r, iov, iovcnt);
}

/*
 * A message reader's one call per message: the consume, then the next peek,
 * each by its short way where it can. The consume's errors (-EINVAL for n
 * past what is readable, -EPROTO) and the arguments' are the only ones
 * returned before the peek; -EINVAL means nothing was consumed.
 */
ssize_t up_consume_peek(struct up_end *r, size_t n, struct iovec *iov, int *iovcnt)
{
	ssize_t s;

	/* The peek's argument errors come first too: after the consume, an
	 * -EINVAL would say nothing was consumed when something was. */
	if (!r || !iov || !iovcnt || *iovcnt <= 0)
		return -EINVAL;
	if (!(r->flags & UP_RD))
		return -EBADF;
	s = up__consume_peek_small(r, n, iov, iovcnt);
	if (up__likely(s > 0))
		return s;
	if (s < 0)
		return up_peek(r, iov, iovcnt);
	if (!up__consume_small_entry(r, n))
		return consume_peek_general(r, n, iov, iovcnt);
	return up_peek(r, iov, iovcnt);
}

int up_consume(struct up_end *r, size_t n)
{
	if (!r)
		return -EINVAL;
	if (!(r->flags & UP_RD))
		return -EBADF;
	if (up__consume_small_entry(r, n))
		return 0;
	return up__ring_consume(r, n);
}
