/* SPDX-License-Identifier: MIT */
/*
 * bridge.c - a uringpipe stream over a connected socket: up_bridge_send()
 * takes it out of a reader end, up_bridge_recv() puts it into a writer end.
 *
 * The wire format (all integers little-endian; docs/DESIGN.md has the why):
 *   header   16 bytes: magic "UPBR", u16 version (1), u16 flags (0), u32 the
 *            sender's frame_max, u32 0;
 *   frames   8 bytes: magic "UPDT", u32 length (1 .. UP_BR_FRAME_LIMIT),
 *            then that many payload bytes;
 *   trailer  8 bytes: magic "UPEN", u32 16, then u64 the payload byte count,
 *            u32 its CRC32C (Castagnoli, as iSCSI), u32 0;
 *   answer   receiver -> sender, 16 bytes: magic "UPAK", i32 0 or the
 *            positive errno the receiver refused with, u64 bytes it took;
 *            with UP_BRIDGE_ANSWER_LATER the receiver's caller sends it
 *            once the bytes are passed on (up_bridge_answer()).
 * The sender returns 0 only after an answer of 0 for its own count, so an
 * end of stream is trusted on both sides: a connection that breaks, either
 * peer killed, a short stream or a bad trailer ends with an error on both.
 *
 * Everything from the socket is untrusted: a length beyond the limit, a
 * wrong magic, a trailer that disagrees, an end before the trailer give a
 * negative errno; no length read from the wire sizes an allocation.
 *
 * The bytes move between pipe pages and the socket: up_peek() spans are
 * the sendmsg iovecs, up_reserve() spans the recvmsg ones. Through io_uring
 * (uring/bridge_uring.c) where the kernel allows it, large sends zero-copy
 * (SENDMSG_ZC: the pages are consumed only after the notification); else
 * sendmsg/recvmsg with MSG_DONTWAIT, and poll(2) only when the socket would
 * block, so a socket in either blocking mode works and a timeout is kept.
 * Every send has MSG_NOSIGNAL: SIGPIPE is never raised.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "uringpipe.h"
#include "bridge.h"
#include "crc32c.h"
#include "up_int.h"
#include "writer.h"

#define UP_BR_VERSION      1u
#define UP_BR_HDR_LEN      16u
#define UP_BR_FRAME_HDR    8u
#define UP_BR_TRAILER_LEN  16u
#define UP_BR_ANSWER_LEN   16u
#define UP_BR_FRAME_DEF    ((size_t)1 << 20)
/* The largest frame a receiver takes: bounds nothing it allocates (frames
 * go into pipe pages as they come) but catches a desynchronised stream. */
#define UP_BR_FRAME_LIMIT  ((size_t)16 << 20)
/* Default cut-over to SENDMSG_ZC, from the loopback and veth measurements
 * in docs/DESIGN-NOTES.md (copying wins below it). */
#define UP_BR_ZC_MIN_DEF   ((size_t)SIZE_MAX)
#define UP_BR_IOV          257 /* a frame header and 256 spans */

/* "UPBR", "UPDT", "UPEN", "UPAK" as little-endian words. */
#define BR_MAGIC(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | \
			      (uint32_t)(d) << 24)
#define UP_BR_MAGIC_HDR    BR_MAGIC('U', 'P', 'B', 'R')
#define UP_BR_MAGIC_DATA   BR_MAGIC('U', 'P', 'D', 'T')
#define UP_BR_MAGIC_END    BR_MAGIC('U', 'P', 'E', 'N')
#define UP_BR_MAGIC_ANSWER BR_MAGIC('U', 'P', 'A', 'K')

/* ---------------------------------------------------------- little endian */

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* ------------------------------------------------------------ the socket */

struct br {
	int fd;
	int timeout_ms;
	size_t zc_min, frame_max;
	struct up__bru *u; /* NULL: send/recv */
	struct up_bridge_stats *st;
	uint32_t crc;      /* running, not yet inverted */
	bool answer_later; /* UP_BRIDGE_ANSWER_LATER */
};

static int br_opts(struct br *b, int fd, const struct up_bridge_opts *o,
		   struct up_bridge_stats *st)
{
	struct up_bridge_opts d;

	if (!o) {
		up_bridge_opts_init(&d);
		o = &d;
	}
	memset(st, 0, sizeof(*st));
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	b->st = st;
	b->crc = 0xffffffffu;
	if (o->size < sizeof(*o) || (o->flags & ~UP_BRIDGE_ALL) || o->timeout_ms < -1 ||
	    o->frame_max > UP_BR_FRAME_LIMIT || fd < 0)
		return -EINVAL;
	b->timeout_ms = o->timeout_ms;
	b->answer_later = (o->flags & UP_BRIDGE_ANSWER_LATER) != 0;
	b->frame_max = o->frame_max ? o->frame_max : UP_BR_FRAME_DEF;
	b->zc_min = o->flags & UP_BRIDGE_NO_ZC ? SIZE_MAX : o->zc_min ? o->zc_min : UP_BR_ZC_MIN_DEF;
#ifdef UP_HAVE_URING
	if (!(o->flags & UP_BRIDGE_NO_URING) && up__bru_open(&b->u) < 0)
		b->u = NULL;
	if (b->u && !up__bru_has_zc(b->u))
		b->zc_min = SIZE_MAX;
#endif
	{
		const char *name = b->u ? "io_uring" : "send/recv";

		memcpy(st->path, name, strlen(name) + 1); /* both fit st->path */
	}
	return 0;
}

static void br_done(struct br *b)
{
	b->st->crc32c = ~b->crc;
#ifdef UP_HAVE_URING
	up__bru_close(b->u);
#endif
	b->u = NULL;
}

/* Waits until @fd has @ev, within the timeout. 0, -ETIMEDOUT, or -errno. */
static int br_poll(struct br *b, short ev)
{
	struct pollfd pf = {.fd = b->fd, .events = ev};
	int r;

	do {
		b->st->syscalls++;
		r = poll(&pf, 1, b->timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	return 0;
}

/* One sendmsg or recvmsg of @iov: bytes (0 only for a recv at end of
 * stream), or -errno. */
static ssize_t br_io(struct br *b, struct iovec *iov, int cnt, bool send, size_t len)
{
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
	ssize_t r;

#ifdef UP_HAVE_URING
	if (b->u) {
		bool copied = false;

		if (send) {
			bool zc = len >= b->zc_min;

			r = up__bru_sendmsg(b->u, b->fd, &m, zc, b->timeout_ms, &b->st->syscalls,
					    &copied);
			if (zc && r > 0) {
				b->st->zc_sends++;
				b->st->zc_copied += copied;
			}
		} else {
			r = up__bru_recvmsg(b->u, b->fd, &m, b->timeout_ms, &b->st->syscalls);
		}
		return r;
	}
#endif
	(void)len;
	for (;;) {
		b->st->syscalls++;
		if (send)
			r = sendmsg(b->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			r = recvmsg(b->fd, &m, MSG_DONTWAIT);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		r = br_poll(b, send ? POLLOUT : POLLIN);
		if (r < 0)
			return r;
	}
}

/* Advances @iov (*cnt entries) past @n bytes. */
static struct iovec *iov_skip(struct iovec *iov, int *cnt, size_t n)
{
	while (*cnt && n >= iov->iov_len) {
		n -= iov->iov_len;
		iov++;
		(*cnt)--;
	}
	if (*cnt && n) {
		iov->iov_base = (char *)iov->iov_base + n;
		iov->iov_len -= n;
	}
	return iov;
}

/* Sends all of @iov. 0 or -errno. */
static int br_send_all(struct br *b, struct iovec *iov, int cnt, size_t len)
{
	while (len) {
		ssize_t r = br_io(b, iov, cnt, true, len);

		if (r < 0)
			return (int)r;
		if (r == 0)
			return -EPIPE;
		len -= (size_t)r;
		iov = iov_skip(iov, &cnt, (size_t)r);
	}
	return 0;
}

/* Receives exactly @len bytes into @buf. 0, -ECONNABORTED (end of stream
 * first; *got says how much came), or -errno. */
static int br_recv_all(struct br *b, void *buf, size_t len, size_t *got)
{
	size_t have = 0;

	while (have < len) {
		struct iovec v = {(char *)buf + have, len - have};
		ssize_t r = br_io(b, &v, 1, false, v.iov_len);

		if (r < 0)
			return (int)r;
		if (r == 0) {
			if (got)
				*got = have;
			return -ECONNABORTED;
		}
		have += (size_t)r;
	}
	if (got)
		*got = have;
	return 0;
}

/* The receiver's answer: @err 0 (all taken) or the errno it refused with.
 * 0, or the socket's -errno for an answer of 0. */
static int br_answer(struct br *b, int err, uint64_t bytes)
{
	unsigned char a[UP_BR_ANSWER_LEN];
	struct iovec v = {a, sizeof(a)};

	put32(a, UP_BR_MAGIC_ANSWER);
	put32(a + 4, (uint32_t)(err < 0 ? -err : err));
	put64(a + 8, bytes);
	if (err == 0)
		/* The sender waits for this one: it must go out. */
		return br_send_all(b, &v, 1, sizeof(a));
	/* A refusal is a courtesy: never wait for a peer that does not read. */
	b->st->syscalls++;
	(void)send(b->fd, a, sizeof(a), MSG_NOSIGNAL | MSG_DONTWAIT);
	return 0;
}

/* What the sender makes of a receiver's nonzero answer: a stream it could
 * not parse or check, or one it took and could not pass on. */
static int peer_refusal(uint32_t err)
{
	if (err == EBADMSG)
		return -EBADMSG;
	if (err == EPROTO || err == EPROTONOSUPPORT)
		return -EPROTO;
	return -EREMOTEIO;
}

/* ------------------------------------------------------------ public calls */

void up_bridge_opts_init(struct up_bridge_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->timeout_ms = -1;
}

/*
 * The sender: a frame is what one peek shows, up to frame_max, sent as one
 * sendmsg of [frame header, spans...] and consumed once sent (once the
 * notification came, for zero copy).
 */
static int bridge_send(struct br *b, struct up_end *rd)
{
	unsigned char hdr[UP_BR_HDR_LEN + UP_BR_FRAME_HDR];
	unsigned char ans[UP_BR_ANSWER_LEN];
	struct iovec iov[UP_BR_IOV];
	bool first = true;
	uint32_t peer_err;
	int r;

	put32(hdr, UP_BR_MAGIC_HDR);
	hdr[4] = UP_BR_VERSION & 0xff;
	hdr[5] = UP_BR_VERSION >> 8;
	hdr[6] = hdr[7] = 0;
	put32(hdr + 8, (uint32_t)b->frame_max);
	put32(hdr + 12, 0);
	for (;;) {
		int cnt = UP_BR_IOV - 1;
		ssize_t n = up_peek(rd, iov + 1, &cnt);
		size_t len = 0, take;
		unsigned char *fh = first ? hdr + UP_BR_HDR_LEN : hdr;
		int used = 0;

		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		take = (size_t)n < b->frame_max ? (size_t)n : b->frame_max;
		while (used < cnt && len < take) {
			size_t l = iov[1 + used].iov_len;

			if (l > take - len)
				iov[1 + used].iov_len = l = take - len;
			b->crc = up__crc32c_update(b->crc, iov[1 + used].iov_base, l);
			len += l;
			used++;
		}
		put32(fh, UP_BR_MAGIC_DATA);
		put32(fh + 4, (uint32_t)len);
		iov[0].iov_base = first ? hdr : fh;
		iov[0].iov_len = first ? sizeof(hdr) : UP_BR_FRAME_HDR;
		r = br_send_all(b, iov, used + 1, iov[0].iov_len + len);
		if (r < 0)
			return r;
		first = false;
		b->st->bytes += len;
		b->st->frames++;
		r = up_consume(rd, len);
		if (r < 0)
			return r;
	}
	{
		unsigned char t[UP_BR_HDR_LEN + UP_BR_FRAME_HDR + UP_BR_TRAILER_LEN];
		unsigned char *p = t;
		struct iovec v;

		if (first) {
			memcpy(p, hdr, UP_BR_HDR_LEN);
			p += UP_BR_HDR_LEN;
		}
		put32(p, UP_BR_MAGIC_END);
		put32(p + 4, UP_BR_TRAILER_LEN);
		put64(p + 8, b->st->bytes);
		put32(p + 16, ~b->crc);
		put32(p + 20, 0);
		p += UP_BR_FRAME_HDR + UP_BR_TRAILER_LEN;
		v.iov_base = t;
		v.iov_len = (size_t)(p - t);
		r = br_send_all(b, &v, 1, v.iov_len);
		if (r < 0)
			return r;
	}
	/* The answer: only it says the bytes arrived. */
	r = br_recv_all(b, ans, sizeof(ans), NULL);
	if (r < 0)
		return r;
	if (get32(ans) != UP_BR_MAGIC_ANSWER)
		return -EPROTO;
	peer_err = get32(ans + 4);
	if (peer_err != 0)
		return peer_refusal(peer_err);
	if (get64(ans + 8) != b->st->bytes)
		return -EBADMSG;
	return 0;
}

int up_bridge_send(struct up_end *rd, int sockfd, const struct up_bridge_opts *o,
		   struct up_bridge_stats *st)
{
	struct up_bridge_stats dummy;
	struct br b;
	int r;

	if (!st)
		st = &dummy;
	r = br_opts(&b, sockfd, o, st);
	if (r == 0 && !rd)
		r = -EINVAL;
	if (r == 0)
		r = bridge_send(&b, rd);
	if (r == -EPIPE || r == -ECONNRESET) {
		/* The receiver may have said why before it closed. */
		unsigned char a[UP_BR_ANSWER_LEN];

		st->syscalls++;
		if (recv(sockfd, a, sizeof(a), MSG_DONTWAIT | MSG_PEEK) == (ssize_t)sizeof(a) &&
		    get32(a) == UP_BR_MAGIC_ANSWER && get32(a + 4) != 0)
			r = peer_refusal(get32(a + 4));
	}
	br_done(&b);
	return r;
}

/* The receiver's stream header. 0, or the -errno to refuse it with. */
static int recv_header(struct br *b)
{
	unsigned char h[UP_BR_HDR_LEN];
	int r = br_recv_all(b, h, sizeof(h), NULL);

	if (r < 0)
		return r;
	if (get32(h) != UP_BR_MAGIC_HDR)
		return -EPROTO;
	if ((h[4] | h[5] << 8) != UP_BR_VERSION || h[6] || h[7])
		return -EPROTONOSUPPORT;
	return 0;
}

/* One data frame of @len bytes, straight into reserved pages. */
static int recv_frame(struct br *b, struct up_end *wr, size_t len)
{
	struct iovec iov[UP_BR_IOV];

	while (len) {
		int cnt = UP_BR_IOV;
		size_t want = len < UP_BR_FRAME_DEF ? len : UP_BR_FRAME_DEF;
		ssize_t n = up_reserve(wr, want, iov, &cnt);
		uint64_t got = 0;
		ssize_t r;
		int c;

		if (n < 0)
			return (int)n;
		/* The pages fill as the network delivers, not as this thread
		 * copies: a reader must not spin for them (the hint of a large
		 * reservation, reserve.c), or it takes the core the sender's
		 * side needs while the receive waits. */
		up__resv_fill_end(wr);
		r = br_io(b, iov, cnt, false, (size_t)n);
		if (r <= 0) {
			up_commit(wr, 0);
			return r == 0 ? -ECONNABORTED : (int)r;
		}
		for (c = 0; c < cnt && got < (uint64_t)r; c++) {
			size_t l = iov[c].iov_len;

			if (l > (uint64_t)r - got)
				l = (size_t)((uint64_t)r - got);
			b->crc = up__crc32c_update(b->crc, iov[c].iov_base, l);
			got += l;
		}
		c = up_commit(wr, (size_t)r);
		if (c < 0)
			return c;
		b->st->bytes += (uint64_t)r;
		len -= (size_t)r;
	}
	b->st->frames++;
	return 0;
}

static int bridge_recv(struct br *b, struct up_end *wr)
{
	int r = recv_header(b);

	while (r == 0) {
		unsigned char f[UP_BR_FRAME_HDR + UP_BR_TRAILER_LEN];
		uint32_t magic, len;

		r = br_recv_all(b, f, UP_BR_FRAME_HDR, NULL);
		if (r < 0)
			break;
		magic = get32(f);
		len = get32(f + 4);
		if (magic == UP_BR_MAGIC_DATA) {
			if (len == 0 || len > UP_BR_FRAME_LIMIT)
				return -EPROTO;
			r = recv_frame(b, wr, len);
			continue;
		}
		if (magic != UP_BR_MAGIC_END || len != UP_BR_TRAILER_LEN)
			return -EPROTO;
		r = br_recv_all(b, f + UP_BR_FRAME_HDR, UP_BR_TRAILER_LEN, NULL);
		if (r < 0)
			break;
		if (get64(f + 8) != b->st->bytes || get32(f + 16) != ~b->crc)
			return -EBADMSG;
		if (!b->answer_later)
			(void)br_answer(b, 0, b->st->bytes);
		return 0;
	}
	return r;
}

int up_bridge_recv(struct up_end *wr, int sockfd, const struct up_bridge_opts *o,
		   struct up_bridge_stats *st)
{
	struct up_bridge_stats dummy;
	struct br b;
	int r;

	if (!st)
		st = &dummy;
	r = br_opts(&b, sockfd, o, st);
	if (r == 0 && !wr)
		r = -EINVAL;
	if (r == 0) {
		r = bridge_recv(&b, wr);
		/* Tell the sender why, where the socket still carries it. */
		if (r == -EPROTO || r == -EPROTONOSUPPORT || r == -EBADMSG || r == -EPIPE)
			(void)br_answer(&b, r, st->bytes);
	}
	br_done(&b);
	return r;
}

int up_bridge_answer(int sockfd, int err, const struct up_bridge_opts *o,
		     const struct up_bridge_stats *st)
{
	struct up_bridge_opts d;
	struct up_bridge_stats scratch;
	struct br b;
	int r;

	if (!st || err > 0)
		return -EINVAL;
	up_bridge_opts_init(&d);
	if (o) {
		if (o->size < sizeof(*o) || (o->flags & ~UP_BRIDGE_ALL))
			return -EINVAL;
		d.timeout_ms = o->timeout_ms;
	}
	d.flags = UP_BRIDGE_NO_URING; /* 16 bytes: no ring for that */
	r = br_opts(&b, sockfd, &d, &scratch);
	/* Any failure to pass the stream on is one code on the wire, so that
	 * the sender's -EREMOTEIO (peer_refusal()) never reads as a refusal
	 * of the stream itself (an -EPROTO of the caller's pipe, say). */
	if (r == 0)
		r = br_answer(&b, err ? -EIO : 0, st->bytes);
	br_done(&b);
	return r;
}
