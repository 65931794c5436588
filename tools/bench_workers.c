/* SPDX-License-Identifier: MIT */
/*
 * bench_workers.c - the writer and reader threads of one --bench run, for
 * each transport: write/read on a kernel pipe, up_write/up_read, and the
 * zero-copy pair up_reserve/up_commit and up_peek/up_consume, and the kernel
 * transports of --vs (bench_kernel.c).
 *
 * Every reader, of every transport, asks for at most --read-size bytes per
 * call (the zero-copy reader consumes at most that per peek) and sums every
 * byte it gets, in timed runs too: a consumer uses what it reads, and a
 * zero-copy reader that never touched the bytes would be measured against
 * copying readers that do. In a verification pass the writer sums what it
 * wrote and the run fails unless the reader's sum is the same.
 *
 * In a verification pass the writer fills every chunk with a pattern that is
 * a function of the absolute stream offset and the reader checks every byte.
 * The pattern is a 64-bit hash of the offset, not a short period, so that a
 * ring which swapped or repeated whole pages would fail it; it is generated
 * per chunk, outside any timed run.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define BENCH_IOV 64

/* Byte at stream offset o is byte (o & 7) of mix64((o >> 3) + key). */
void bench_pattern_fill(unsigned char *dst, uint64_t off, size_t n, uint64_t key)
{
	size_t i = 0;
	while (i < n) {
		uint64_t o = off + i;
		uint64_t word = mix64((o >> 3) + key);
		for (unsigned sh = (unsigned)(o & 7); sh < 8 && i < n; sh++, i++)
			dst[i] = (unsigned char)(word >> (8 * sh));
	}
}

/* Every worker of a run starts at once: threads at the barrier, worker
 * processes (--processes) at the gate the parent opens. */
static void start_line(struct worker *w)
{
	if (w->sh->gate)
		bench_gate_pass(w->sh->gate, GATE_GO);
	else
		pthread_barrier_wait(&w->sh->bar);
}

/* A copying writer's call; the zero-copy writer's is zc_write(). */
static ssize_t do_write(struct worker *w, const void *p, size_t n)
{
	if (is_up(w->sh->t))
		return up_write(w->end, p, n);
	return bench_kernel_write(w, p, n);
}

static ssize_t do_read(struct worker *w, void *p, size_t n)
{
	if (is_up(w->sh->t))
		return up_read(w->end, p, n);
	return bench_kernel_read(w, p, n);
}

/* @e is a positive errno; up_strerror() takes the library's negative code. */
static const char *err_str(const struct worker *w, int e)
{
	return is_up(w->sh->t) ? up_strerror(-e) : strerror(e);
}

/*
 * The zero-copy writer: fill the reserved spans from the same source buffer
 * the copying writers use (standing in for a producer that generates data in
 * place), then publish them. A message writer makes one call per write, as
 * the copying writer does: up_commit_reserve() publishes this write and
 * reserves room for the next, which the next call fills; up_reserve() only
 * where that declined (a new page, a large write, the first write), and
 * up_commit() for the last. So one "write" for the latency is the fill and
 * the call that publishes it. Inline into the writer's loop, as up_write()
 * is for the copying writer: a call of the harness's own between every two
 * messages would be charged to zero copy alone.
 */
struct zc_resv {
	struct iovec iov[BENCH_IOV];
	int cnt; /* the spans reserved; BENCH_IOV before a reservation */
};

/* Write up to @n bytes from @p, the rest of a write after which @after
 * bytes are left to write (the next write asks for up to @size of them), so
 * that this call can reserve the next one. *@have: the bytes reserved for
 * this call by the last one (0: none). */
static inline __attribute__((always_inline)) ssize_t
zc_write(struct worker *w, struct zc_resv *z, size_t *have, const unsigned char *p, size_t n,
	 uint64_t after)
{
	ssize_t r;
	size_t k = 0, next, size;

	if (*have == 0 || *have > n) {
		z->cnt = BENCH_IOV;
		r = up_reserve(w->end, n, z->iov, &z->cnt);
		if (r <= 0)
			return r;
	}
	if (__builtin_expect(z->cnt == 1, 1)) {
		memcpy(z->iov[0].iov_base, p, z->iov[0].iov_len);
		k = z->iov[0].iov_len;
	} else {
		for (int i = 0; i < z->cnt; i++) {
			memcpy(z->iov[i].iov_base, p + k, z->iov[i].iov_len);
			k += z->iov[i].iov_len;
		}
	}
	/* Worked out after the copy: nothing more to carry across it. */
	size = (size_t)w->sh->size;
	next = k < n ? n - k : after > size ? size : (size_t)after;
	*have = 0;
	if (next == 0)
		return (r = up_commit(w->end, k)) < 0 ? r : (ssize_t)k;
	/* z->cnt is 1 or more: capacity enough for a short-way reservation,
	 * which is one span; up_reserve() gets BENCH_IOV above. */
	r = up_commit_reserve(w->end, k, next, z->iov, &z->cnt);
	if (r < 0)
		return r;
	*have = (size_t)r;
	return (ssize_t)k;
}

/* One call of the transport measured: up to @rem bytes at @p, the rest of a
 * write after which @after bytes are left (zero copy looks ahead). */
static inline __attribute__((always_inline)) ssize_t
writer_call(struct worker *w, const bool zc, struct zc_resv *z, size_t *have,
	    const unsigned char *p, size_t rem, uint64_t after)
{
	return zc ? zc_write(w, z, have, p, rem, after) : do_write(w, p, rem);
}

/* writer_call(), timed into the latency samples. Out of line: the loop's
 * registers then carry no clock reading across the call. */
static __attribute__((noinline)) ssize_t
writer_call_timed(struct worker *w, const bool zc, struct zc_resv *z, size_t *have,
		  const unsigned char *p, size_t rem, uint64_t after)
{
	uint64_t a = now_ns();
	ssize_t r = writer_call(w, zc, z, have, p, rem, after);

	if (w->nlat < w->lat_cap)
		w->lat[w->nlat++] = now_ns() - a;
	return r;
}

void bench_close_end(struct worker *w)
{
	if (is_up(w->sh->t)) {
		up_close(w->end);
		w->end = NULL;
	} else {
		bench_kernel_close(w);
	}
}

/*
 * The writer's loop runs between every two calls of the transport measured:
 * what it costs is charged to the transport. At 100-byte writes a call takes
 * 10-20 ns, and a value the loop keeps across it beyond the six registers a
 * call preserves is a store to the stack per write, which waits in the
 * store buffer as the transport's own stores do. So the loop keeps five
 * (the worker, the bytes left, the current write's bytes done, the calls,
 * zero copy's reservation), reloads the rest from the worker, times its
 * samples out of line, and stores the progress hint every 64 calls. It is compiled for each of @zc and @verify,
 * constants, so that no run pays for another's registers.
 */
static inline __attribute__((always_inline)) void writer_loop(struct worker *w, const bool zc,
							      const bool verify)
{
	uint64_t left = w->quota, calls = 0;
	uint64_t sample_at = w->lat ? 0 : UINT64_MAX; /* the next call timed */
	size_t done = 0; /* the current write's bytes already taken */
	struct zc_resv z = { .cnt = BENCH_IOV };
	size_t zc_have = 0;
	ssize_t r = 1;

	start_line(w);
	clock_gettime(CLOCK_MONOTONIC, &w->t0);
	while (left > 0) {
		const size_t size = (size_t)w->sh->size;
		/* The current write: n bytes, of which left + done were left
		 * when it began. */
		const uint64_t at = left + done;
		const size_t n = at < size ? (size_t)at : size;

		if (verify && done == 0) {
			bench_pattern_fill(w->buf, w->quota - left, n, w->sh->key);
			w->sum += bench_byte_sum(w->buf, n);
		}
		if (__builtin_expect(calls == sample_at, 0)) {
			size_t h = zc_have; /* only this copy's address escapes */

			sample_at += w->every;
			r = writer_call_timed(w, zc, &z, &h, w->buf + done, n - done, at - n);
			zc_have = h;
		} else {
			r = writer_call(w, zc, &z, &zc_have, w->buf + done, n - done, at - n);
		}
		calls++;
		if (r <= 0)
			break;
		left -= (uint64_t)r;
		done += (size_t)r;
		if (done == n)
			done = 0;
		if (__builtin_expect((calls & 63) == 0, 0))
			/* relaxed: a progress hint for the watchdog, publishes
			 * nothing. */
			atomic_store_explicit(&w->progress, w->quota - left, memory_order_relaxed);
	}
	w->moved = w->quota - left;
	w->calls = calls;
	if (left > 0) {
		if (r == 0)
			snprintf(w->err, sizeof(w->err),
				 "writer %u: write returned 0 after %" PRIu64 " bytes", w->idx,
				 w->moved);
		else
			snprintf(w->err, sizeof(w->err),
				 "writer %u: write failed after %" PRIu64 " bytes: %s (%d)", w->idx,
				 w->moved, err_str(w, (int)-r), (int)r);
	}
	bench_close_end(w); /* the last writer's close is the readers' EOF */
	clock_gettime(CLOCK_MONOTONIC, &w->t1);
}

static void writer_main(struct worker *w)
{
	const bool zc = w->sh->t == T_URING_ZC;

	if (w->sh->verify)
		zc ? writer_loop(w, true, true) : writer_loop(w, false, true);
	else
		zc ? writer_loop(w, true, false) : writer_loop(w, false, false);
}

static void verify_chunk(struct worker *w, const unsigned char *got, size_t n)
{
	bench_pattern_fill(w->scratch, w->moved, n, w->sh->key);
	if (memcmp(w->scratch, got, n) == 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (w->scratch[i] != got[i]) {
			snprintf(w->err, sizeof(w->err),
				 "integrity: stream offset %" PRIu64 ": expected 0x%02x, read 0x%02x"
				 " (read of %zu bytes at offset %" PRIu64 ")",
				 w->moved + i, w->scratch[i], got[i], n, w->moved);
			break;
		}
	}
	w->bad = true; /* keep draining so the writer finishes */
}

/* The zero-copy reader: peek, use at most buflen (--read-size) bytes in
 * place (their sum, and in a verification pass the check), then consume
 * those and peek again in one call (up_consume_peek()), as a reader of
 * messages in place would. Its counters live in registers, as the writer's
 * do (writer_loop()). */
static void zc_reader(struct worker *w)
{
	const size_t buflen = w->buflen;
	const bool verify = w->sh->verify;
	uint64_t sum = 0, moved = 0, calls = 1;
	struct iovec iov[BENCH_IOV];
	int cnt = BENCH_IOV;
	ssize_t r = up_peek(w->end, iov, &cnt);

	while (r > 0) {
		size_t take = 0;

		/* The spans up to buflen bytes: what this step uses. */
		for (int i = 0; i < cnt; i++) {
			if (take == buflen) {
				cnt = i;
				break;
			}
			if (iov[i].iov_len > buflen - take)
				iov[i].iov_len = buflen - take;
			take += iov[i].iov_len;
		}
		for (int i = 0; i < cnt; i++)
			sum += bench_byte_sum(iov[i].iov_base, iov[i].iov_len);
		if (verify) {
			/* scratch holds max(1 MiB, size): verify in slices;
			 * verify_chunk() takes the offset from w->moved. */
			w->moved = moved;
			for (int i = 0; i < cnt && !w->bad; i++) {
				for (size_t done = 0; done < iov[i].iov_len && !w->bad;) {
					size_t k = iov[i].iov_len - done;
					if (k > buflen)
						k = buflen;
					verify_chunk(w, (const unsigned char *)iov[i].iov_base + done, k);
					w->moved += k;
					done += k;
				}
			}
		}
		cnt = BENCH_IOV;
		r = up_consume_peek(w->end, take, iov, &cnt);
		calls++;
		if (r == -EINVAL) /* refused: nothing consumed */
			break;
		moved += take;
		/* relaxed: a progress hint for the watchdog, publishes nothing. */
		atomic_store_explicit(&w->progress, moved, memory_order_relaxed);
	}
	if (r < 0) {
		snprintf(w->err, sizeof(w->err), "reader %u: %s failed after %" PRIu64
			 " bytes: %s (%d)", w->idx, r == -EINVAL ? "consume" : "peek", moved,
			 up_strerror((int)r), (int)r);
		bench_close_end(w);
	}
	w->sum = sum;
	w->moved = moved;
	w->calls = calls;
}

static void reader_main(struct worker *w)
{
	const struct shared *sh = w->sh;
	const size_t buflen = w->buflen;
	const bool verify = sh->verify;
	unsigned char *buf = w->buf;
	uint64_t sum = 0, moved = 0, calls = 0;

	start_line(w);
	clock_gettime(CLOCK_MONOTONIC, &w->t0);
	if (sh->t == T_URING_ZC) {
		zc_reader(w);
		goto out;
	}
	for (;;) {
		ssize_t r = do_read(w, buf, buflen);
		calls++;
		if (r == 0)
			break;
		if (r < 0) {
			snprintf(w->err, sizeof(w->err), "reader %u: read failed after %" PRIu64
				 " bytes: %s (%d)", w->idx, moved, err_str(w, (int)-r), (int)r);
			bench_close_end(w); /* so a blocked writer sees EPIPE, not a hang */
			break;
		}
		sum += bench_byte_sum(buf, (size_t)r);
		if (verify && !w->bad) {
			w->moved = moved; /* verify_chunk()'s offset */
			verify_chunk(w, buf, (size_t)r);
		}
		moved += (uint64_t)r;
		/* relaxed: a progress hint for the watchdog, publishes nothing. */
		atomic_store_explicit(&w->progress, moved, memory_order_relaxed);
	}
	w->sum = sum;
	w->moved = moved;
	w->calls = calls;
out:
	clock_gettime(CLOCK_MONOTONIC, &w->t1);
}

void bench_worker_main(struct worker *w)
{
	char name[16];

	/* Named by role and transport, so that a profile of a whole --bench
	 * (perf report --sort comm) splits by what each thread measured. */
	snprintf(name, sizeof(name), "%c:%s", w->writer ? 'w' : 'r', bench_tname[w->sh->t]);
	(void)prctl(PR_SET_NAME, name);
	/* A failed set-up still passes the start line, or the others would
	 * wait there for ever; it then reads or writes nothing. */
	if (!is_up(w->sh->t) && bench_kernel_thread_init(w) < 0) {
		start_line(w);
		bench_close_end(w);
		return;
	}
	if (w->writer)
		writer_main(w);
	else
		reader_main(w);
}
