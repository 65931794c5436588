/* SPDX-License-Identifier: MIT */
/*
 * test_bridge.c - up_bridge_send/up_bridge_recv over TCP on 127.0.0.1:
 * integrity of sizes 0, 1, 4095, 1 MiB + 1 and 64 MiB on every socket path
 * (io_uring, zero copy, send/recv, the table CRC), and a receiver and a
 * sender that meet a hand-made stream: wrong magic, wrong version, a frame
 * too long, truncation in a frame and before the trailer, a trailer whose
 * count or CRC32C is wrong, a receiver that closes without answering or
 * answers a refusal, a peer that goes mid-stream (no SIGPIPE), a silent
 * peer and the timeout.
 *
 * Under tests/noiouring (UP_NOIOURING set) every call must say it used
 * send/recv: the io_uring-refused path gives the same results.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "harness.h"
#include "crc32c.h"
#include "up_int.h"

static bool no_iouring;

/* ------------------------------------------------------------- helpers */

/* A connected TCP pair on 127.0.0.1: s[0] the client, s[1] accepted. */
static void tcp_pair(int s[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK_SYS(l);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_SYS(bind(l, (struct sockaddr *)&a, sizeof(a)));
	CHECK_SYS(listen(l, 1));
	CHECK_SYS(getsockname(l, (struct sockaddr *)&a, &al));
	s[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_SYS(s[0]);
	CHECK_SYS(connect(s[0], (struct sockaddr *)&a, sizeof(a)));
	s[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	CHECK_SYS(s[1]);
	close(l);
}

static unsigned char pat(uint64_t i)
{
	return (unsigned char)(harness_mix64(i / 8) >> (8 * (i % 8)));
}

static uint32_t crc32c_ref(uint32_t c, const unsigned char *p, size_t n)
{
	c = ~c;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void write_all(int fd, const void *b, size_t n)
{
	while (n) {
		ssize_t r = send(fd, b, n, MSG_NOSIGNAL);

		CHECK_SYS(r);
		b = (const char *)b + r;
		n -= (size_t)r;
	}
}

/* Wire pieces, as core/bridge.c's header comment lays them out. */
static void w_header(int fd, uint32_t magic, unsigned version)
{
	unsigned char h[16] = {0};

	put32(h, magic);
	h[4] = (unsigned char)version;
	h[5] = (unsigned char)(version >> 8);
	put32(h + 8, 1u << 20);
	write_all(fd, h, sizeof(h));
}

#define M_HDR 0x52425055u /* "UPBR" */
#define M_DT  0x54445055u /* "UPDT" */
#define M_EN  0x4e455055u /* "UPEN" */
#define M_AK  0x4b415055u /* "UPAK" */

static void w_frame(int fd, const unsigned char *b, uint32_t len, uint32_t claim)
{
	unsigned char f[8];

	put32(f, M_DT);
	put32(f + 4, claim);
	write_all(fd, f, sizeof(f));
	if (len)
		write_all(fd, b, len);
}

static void w_trailer(int fd, uint64_t count, uint32_t crc)
{
	unsigned char t[24] = {0};

	put32(t, M_EN);
	put32(t + 4, 16);
	put64(t + 8, count);
	put32(t + 16, crc);
	write_all(fd, t, sizeof(t));
}

/* ------------------------------------------------------- the threads */

struct job {
	struct up_end *e;
	int fd;
	uint64_t n;
	struct up_bridge_opts o;
	struct up_bridge_stats st;
	int res;
	bool close_fd; /* close the socket once done */
	bool may_fail; /* producer: stop at the first failed write */
	_Atomic pid_t tid; /* the thread's, once it runs */
};

static void *producer(void *arg)
{
	struct job *j = arg;
	unsigned char buf[65536];
	uint64_t i = 0;

	while (i < j->n) {
		size_t k = j->n - i < sizeof(buf) ? (size_t)(j->n - i) : sizeof(buf);

		for (size_t x = 0; x < k; x++)
			buf[x] = pat(i + x);
		ssize_t r = up_write(j->e, buf, k);

		if (r != (ssize_t)k && j->may_fail)
			break;
		CHECK_EQ(r, (ssize_t)k);
		i += k;
	}
	up_close(j->e);
	return NULL;
}

static void *sender(void *arg)
{
	struct job *j = arg;

	j->res = up_bridge_send(j->e, j->fd, &j->o, &j->st);
	if (j->close_fd)
		close(j->fd);
	return NULL;
}

static void *receiver(void *arg)
{
	struct job *j = arg;

	atomic_store(&j->tid, (pid_t)syscall(SYS_gettid));
	j->res = up_bridge_recv(j->e, j->fd, &j->o, &j->st);
	up_close(j->e); /* the far pipe's end of stream */
	if (j->close_fd)
		close(j->fd);
	return NULL;
}

/* Reads @rd to end of stream; checks it is the pattern; returns the count. */
static uint64_t drain_check(struct up_end *rd)
{
	unsigned char buf[65536];
	uint64_t i = 0;
	ssize_t r;

	while ((r = up_read(rd, buf, sizeof(buf))) > 0) {
		for (ssize_t x = 0; x < r; x++)
			if (buf[x] != pat(i + (uint64_t)x)) {
				fprintf(stderr, "byte %llu differs\n", (unsigned long long)(i + x));
				CHECK(0);
			}
		i += (uint64_t)r;
	}
	CHECK_EQ(r, 0);
	return i;
}

static void check_path(const struct up_bridge_stats *st, uint32_t flags)
{
	if (no_iouring || (flags & UP_BRIDGE_NO_URING))
		CHECK(strcmp(st->path, "send/recv") == 0);
}

/* The whole chain, its threads not started: producer -> pipe A ->
 * up_bridge_send -> TCP -> up_bridge_recv -> pipe B; both bridge jobs get
 * @o. */
struct chain {
	struct up_end *a[2], *b[2];
	struct job pj, sj, rj;
	int s[2];
};

static void chain_init(struct chain *c, uint64_t n, const struct up_bridge_opts *o)
{
	memset(c, 0, sizeof(*c));
	CHECK_OK(up_pipe2(c->a, NULL));
	CHECK_OK(up_pipe2(c->b, NULL));
	tcp_pair(c->s);
	c->pj.e = c->a[1];
	c->pj.n = n;
	c->sj.o = *o;
	c->rj.o = *o;
	c->sj.e = c->a[0];
	c->sj.fd = c->s[0];
	c->rj.e = c->b[1];
	c->rj.fd = c->s[1];
}

/* After the producer and the bridges are done (the receiver closed B's
 * writer). */
static void chain_close(struct chain *c)
{
	up_close(c->a[0]);
	up_close(c->b[0]);
	close(c->s[0]);
	close(c->s[1]);
}

/* One stream of @n bytes through the whole chain. */
static void stream(uint64_t n, uint32_t flags, size_t zc_min, size_t frame_max)
{
	struct up_bridge_opts o;
	struct chain ch;
	struct up_end **b = ch.b;
	struct job *pj = &ch.pj, *sj = &ch.sj, *rj = &ch.rj;
	pthread_t pt, stt, rt;

	up_bridge_opts_init(&o);
	o.flags = flags;
	o.zc_min = zc_min;
	o.frame_max = frame_max;
	chain_init(&ch, n, &o);
	CHECK_EQ(pthread_create(&pt, NULL, producer, pj), 0);
	CHECK_EQ(pthread_create(&stt, NULL, sender, sj), 0);
	CHECK_EQ(pthread_create(&rt, NULL, receiver, rj), 0);
	CHECK_EQ(drain_check(b[0]), n);
	pthread_join(pt, NULL);
	pthread_join(stt, NULL);
	pthread_join(rt, NULL);
	CHECK_EQ(sj->res, 0);
	CHECK_EQ(rj->res, 0);
	CHECK_EQ(sj->st.bytes, n);
	CHECK_EQ(rj->st.bytes, n);
	CHECK_EQ(sj->st.crc32c, rj->st.crc32c);
	check_path(&sj->st, flags);
	check_path(&rj->st, flags);
	if (zc_min == 1 && !no_iouring && !(flags & (UP_BRIDGE_NO_URING | UP_BRIDGE_NO_ZC)) &&
	    strcmp(sj->st.path, "io_uring") == 0 && n > 0)
		CHECK(sj->st.zc_sends > 0);
	chain_close(&ch);
}

static const uint64_t sizes[] = {0, 1, 4095, (1u << 20) + 1, 64u << 20};

static void test_sizes_default(void)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		stream(sizes[i], 0, 0, 0);
}

static void test_sizes_plain(void)
{
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		stream(sizes[i], UP_BRIDGE_NO_URING, 0, 0);
}

static void test_sizes_zerocopy(void)
{
	for (size_t i = 0; i < 4; i++)
		stream(sizes[i], 0, 1, 0);
	stream(8u << 20, 0, 1, 0);
}

/* Small frames: many frame headers, a frame boundary inside pages. */
static void test_small_frames(void)
{
	stream((1u << 20) + 1, 0, 0, 1000);
	stream((1u << 20) + 1, UP_BRIDGE_NO_URING, 0, 4097);
}

/* The CRC32C check value of "123456789" (RFC 3720, B.4), on both the
 * instruction and the table path. */
static void crc_of_digits(void)
{
	struct up_end *a[2], *b[2];
	struct job sj = {0}, rj = {0};
	pthread_t stt, rt;
	int s[2];

	CHECK_OK(up_pipe2(a, NULL));
	CHECK_OK(up_pipe2(b, NULL));
	tcp_pair(s);
	CHECK_EQ(up_write(a[1], "123456789", 9), 9);
	up_close(a[1]);
	up_bridge_opts_init(&sj.o);
	rj.o = sj.o;
	sj.e = a[0];
	sj.fd = s[0];
	rj.e = b[1];
	rj.fd = s[1];
	CHECK_EQ(pthread_create(&stt, NULL, sender, &sj), 0);
	CHECK_EQ(pthread_create(&rt, NULL, receiver, &rj), 0);
	pthread_join(stt, NULL);
	pthread_join(rt, NULL);
	CHECK_EQ(sj.res, 0);
	CHECK_EQ(rj.res, 0);
	CHECK_EQ(sj.st.crc32c, 0xe3069283u);
	CHECK_EQ(rj.st.crc32c, 0xe3069283u);
	up_close(a[0]);
	up_close(b[0]);
	close(s[0]);
	close(s[1]);
}

/* Run again with UP_BRIDGE_SOFT_CRC=1 (test_bridge_softcrc) for the table
 * path; test_bad_trailer checks the library against the bitwise reference
 * over 70000 bytes in frames that split 8-byte words. */
static void test_crc32c(void)
{
	CHECK_EQ(crc32c_ref(0, (const unsigned char *)"123456789", 9), 0xe3069283u);
	crc_of_digits();
}

/* The library's CRC against the bitwise reference at every length where
 * its three-lane runs (3 x 8192, 3 x 1024, 3 x 128 bytes) begin or end,
 * at every alignment, whole and split in two at an odd place. */
static void crc_lanes(void)
{
	static const size_t lens[] = {0,     1,     7,     8,     383,   384,   385,   1151,
				      3071,  3072,  3073,  3455,  3456,  3457,  4096,  24575,
				      24576, 24577, 27648, 28032, 28041, 49152, 52609, 65536};
	static unsigned char buf[65536 + 8];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pat(i);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
		for (size_t off = 0; off < 8; off++) {
			const unsigned char *p = buf + off;
			size_t n = lens[l], cut = n / 3 | 1;
			uint32_t want = crc32c_ref(0, p, n);

			CHECK_EQ(~up__crc32c_update(~0u, p, n), want);
			if (cut < n)
				CHECK_EQ(~up__crc32c_update(up__crc32c_update(~0u, p, cut), p + cut,
							    n - cut),
					 want);
		}
}

/* ------------------------------------------- a receiver meets a hand-made stream */

struct hand {
	struct up_end *b[2];
	int s[2];
	struct job rj;
	pthread_t rt;
};

static void hand_start(struct hand *h, int timeout_ms)
{
	memset(h, 0, sizeof(*h));
	CHECK_OK(up_pipe2(h->b, NULL));
	tcp_pair(h->s);
	up_bridge_opts_init(&h->rj.o);
	h->rj.o.timeout_ms = timeout_ms;
	h->rj.e = h->b[1];
	h->rj.fd = h->s[1];
	CHECK_EQ(pthread_create(&h->rt, NULL, receiver, &h->rj), 0);
}

/* Ends the hand-made stream (@shut: close our side), joins the receiver,
 * checks its result, and that pipe B holds exactly the first @prefix bytes
 * of the pattern. Returns the answer status the receiver sent (-1 none). */
static long hand_end(struct hand *h, bool shut, int want, uint64_t prefix)
{
	unsigned char a[16];
	long status = -1;
	ssize_t r;

	if (shut)
		CHECK_SYS(shutdown(h->s[0], SHUT_WR));
	pthread_join(h->rt, NULL);
	CHECK_EQ(h->rj.res, want);
	CHECK_EQ(drain_check(h->b[0]), prefix);
	r = recv(h->s[0], a, sizeof(a), MSG_DONTWAIT);
	if (r == (ssize_t)sizeof(a)) {
		CHECK_EQ(get32(a), M_AK);
		status = (long)get32(a + 4);
	}
	check_path(&h->rj.st, 0);
	up_close(h->b[0]);
	close(h->s[0]);
	close(h->s[1]);
	return status;
}

static void test_wrong_magic(void)
{
	struct hand h;

	hand_start(&h, -1);
	w_header(h.s[0], 0x52425056u, 1);
	CHECK_EQ(hand_end(&h, true, -EPROTO, 0), EPROTO);
	/* Not even a header: something else entirely talks to us. */
	hand_start(&h, -1);
	write_all(h.s[0], "GET / HTTP/1.1\r\n\r\n", 18);
	CHECK_EQ(hand_end(&h, true, -EPROTO, 0), EPROTO);
}

static void test_wrong_version(void)
{
	struct hand h;

	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 2);
	CHECK_EQ(hand_end(&h, true, -EPROTONOSUPPORT, 0), EPROTONOSUPPORT);
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 0);
	CHECK_EQ(hand_end(&h, true, -EPROTONOSUPPORT, 0), EPROTONOSUPPORT);
}

static void test_bad_frames(void)
{
	unsigned char d[16] = {0};
	struct hand h;

	/* A frame longer than any sender makes. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, 0, (16u << 20) + 1);
	CHECK_EQ(hand_end(&h, true, -EPROTO, 0), EPROTO);
	/* An empty frame. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, 0, 0);
	CHECK_EQ(hand_end(&h, true, -EPROTO, 0), EPROTO);
	/* A frame header of another kind. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	put32(d, 0x21212121u);
	put32(d + 4, 4);
	write_all(h.s[0], d, 8);
	CHECK_EQ(hand_end(&h, true, -EPROTO, 0), EPROTO);
}

static void pattern(unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(i);
}

/* Thread @tid of this process is asleep ('S' in its stat). */
static bool thread_asleep(pid_t tid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY);
	CHECK_SYS(fd);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0);
	buf[n] = 0;
	p = strrchr(buf, ')');
	CHECK(p && p[1] == ' ');
	return p[2] == 'S';
}

/*
 * A receive waits on the network inside a reservation of up to a frame:
 * the pages are not being filled by a thread on a core, so the reservation
 * must not keep the hint that tells readers to spin for it (a streaming
 * receiver's reader then spun for every receive, taking the core that the
 * sending side needed).
 */
static void test_recv_leaves_no_fill_hint(void)
{
	unsigned char d[10], got[10];
	struct hand h;
	int i;

	pattern(d, sizeof(d));
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, sizeof(d), 1u << 20); /* 10 of 1 MiB come */
	CHECK_EQ(up_read(h.b[0], got, sizeof(got)), (ssize_t)sizeof(got));
	CHECK(memcmp(got, d, sizeof(d)) == 0);
	/* The receiver reserved the rest of the frame and sleeps in its
	 * receive; it cannot leave that sleep, nothing more is sent. */
	for (i = 0; i < 100000 && !(atomic_load(&h.rj.tid) && thread_asleep(h.rj.tid)); i++)
		sched_yield();
	CHECK(i < 100000);
	/* relaxed: the receiver is asleep; its store is long done. */
	CHECK_EQ(atomic_load_explicit(&h.b[0]->p->ln->prod.fill_until, memory_order_relaxed), 0);
	CHECK_EQ(hand_end(&h, true, -ECONNABORTED, 0), -1);
}

static void test_truncated(void)
{
	static unsigned char d[200000];
	struct hand h;

	pattern(d, sizeof(d));
	/* Inside a frame: the bytes that came are in the pipe, no more. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, 150000, sizeof(d));
	CHECK_EQ(hand_end(&h, true, -ECONNABORTED, 150000), -1);
	/* Whole frames, no trailer. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, 4095, 4095);
	w_frame(h.s[0], d + 4095, 4096, 4096);
	CHECK_EQ(hand_end(&h, true, -ECONNABORTED, 8191), -1);
	/* Inside the header. */
	hand_start(&h, -1);
	write_all(h.s[0], "UPB", 3);
	CHECK_EQ(hand_end(&h, true, -ECONNABORTED, 0), -1);
	/* Inside the trailer. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, 10, 10);
	put32(d + 100000, M_EN);
	put32(d + 100004, 16);
	write_all(h.s[0], d + 100000, 12);
	CHECK_EQ(hand_end(&h, true, -ECONNABORTED, 10), -1);
}

static void test_bad_trailer(void)
{
	static unsigned char d[70000];
	uint32_t crc;
	struct hand h;

	pattern(d, sizeof(d));
	crc = crc32c_ref(0, d, sizeof(d));
	/* Right: accepted, and the answer is 0. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, 30000, 30000);
	w_frame(h.s[0], d + 30000, 40000, 40000);
	w_trailer(h.s[0], sizeof(d), crc);
	CHECK_EQ(hand_end(&h, false, 0, sizeof(d)), 0);
	/* A count that is not what came. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, sizeof(d), sizeof(d));
	w_trailer(h.s[0], sizeof(d) + 1, crc);
	CHECK_EQ(hand_end(&h, true, -EBADMSG, sizeof(d)), EBADMSG);
	/* One bit of the CRC. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	w_frame(h.s[0], d, sizeof(d), sizeof(d));
	w_trailer(h.s[0], sizeof(d), crc ^ 0x100u);
	CHECK_EQ(hand_end(&h, true, -EBADMSG, sizeof(d)), EBADMSG);
	/* A trailer of the wrong length. */
	hand_start(&h, -1);
	w_header(h.s[0], M_HDR, 1);
	put32(d, M_EN);
	put32(d + 4, 15);
	write_all(h.s[0], d, 8);
	CHECK_EQ(hand_end(&h, true, -EPROTO, 0), EPROTO);
}

/* A receiver that hears nothing gives up after its timeout. */
static void test_timeout(void)
{
	struct hand h;
	struct timespec t0, t1;
	double el;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	hand_start(&h, 300);
	w_header(h.s[0], M_HDR, 1);
	pthread_join(h.rt, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK_EQ(h.rj.res, -ETIMEDOUT);
	CHECK(el >= 0.29);
	up_close(h.b[0]);
	close(h.s[0]);
	close(h.s[1]);
}

/* ------------------------------------------- a sender meets a hand-made receiver */

struct shand {
	struct up_end *a[2];
	int s[2];
	struct job sj;
	pthread_t st;
};

static void shand_start(struct shand *h, const void *data, size_t n, uint32_t flags,
			int timeout_ms)
{
	memset(h, 0, sizeof(*h));
	CHECK_OK(up_pipe2(h->a, NULL));
	tcp_pair(h->s);
	if (n)
		CHECK_EQ(up_write(h->a[1], data, n), (ssize_t)n);
	up_close(h->a[1]);
	up_bridge_opts_init(&h->sj.o);
	h->sj.o.flags = flags;
	h->sj.o.timeout_ms = timeout_ms;
	h->sj.e = h->a[0];
	h->sj.fd = h->s[0];
	CHECK_EQ(pthread_create(&h->st, NULL, sender, &h->sj), 0);
}

/* Reads the sender's whole stream (it waits for the answer meanwhile). */
static void shand_read_stream(struct shand *h, size_t n)
{
	unsigned char buf[4096];
	size_t want = 16 + (n ? 8 + n : 0) + 24, got = 0;

	while (got < want) {
		ssize_t r = recv(h->s[1], buf, sizeof(buf) < want - got ? sizeof(buf) : want - got, 0);

		CHECK(r > 0);
		got += (size_t)r;
	}
}

static void shand_end(struct shand *h, int want)
{
	pthread_join(h->st, NULL);
	CHECK_EQ(h->sj.res, want);
	check_path(&h->sj.st, h->sj.o.flags);
	up_close(h->a[0]);
	close(h->s[0]);
	if (h->s[1] >= 0)
		close(h->s[1]);
}

static void answer(int fd, uint32_t magic, uint32_t status, uint64_t count)
{
	unsigned char a[16];

	put32(a, magic);
	put32(a + 4, status);
	put64(a + 8, count);
	write_all(fd, a, sizeof(a));
}

static void sender_answers(uint32_t flags)
{
	struct shand h;

	/* The right answer. */
	shand_start(&h, "hello", 5, flags, -1);
	shand_read_stream(&h, 5);
	answer(h.s[1], M_AK, 0, 5);
	shand_end(&h, 0);
	/* Closed without an answer: not confirmed. */
	shand_start(&h, "hello", 5, flags, -1);
	shand_read_stream(&h, 5);
	close(h.s[1]);
	h.s[1] = -1;
	shand_end(&h, -ECONNABORTED);
	/* Another count. */
	shand_start(&h, "hello", 5, flags, -1);
	shand_read_stream(&h, 5);
	answer(h.s[1], M_AK, 0, 4);
	shand_end(&h, -EBADMSG);
	/* A refusal. */
	shand_start(&h, "hello", 5, flags, -1);
	shand_read_stream(&h, 5);
	answer(h.s[1], M_AK, EBADMSG, 5);
	shand_end(&h, -EBADMSG);
	shand_start(&h, "", 0, flags, -1);
	shand_read_stream(&h, 0);
	answer(h.s[1], M_AK, EPROTONOSUPPORT, 0);
	shand_end(&h, -EPROTO);
	/* Not an answer. */
	shand_start(&h, "hello", 5, flags, -1);
	shand_read_stream(&h, 5);
	answer(h.s[1], M_AK + 1, 0, 5);
	shand_end(&h, -EPROTO);
	/* No answer at all: the timeout. */
	shand_start(&h, "hello", 5, flags, 300);
	shand_read_stream(&h, 5);
	shand_end(&h, -ETIMEDOUT);
}

static void test_sender_answers(void)
{
	sender_answers(0);
	sender_answers(UP_BRIDGE_NO_URING);
}

/* The receiver's side goes mid-stream: the sender fails with the socket's
 * error (a reset or a broken pipe), never SIGPIPE. */
static void receiver_gone(uint32_t flags)
{
	struct up_end *a[2];
	struct job pj = {0}, sj = {0};
	pthread_t pt, stt;
	unsigned char buf[65536];
	size_t got = 0;
	int s[2];

	CHECK_OK(up_pipe2(a, NULL));
	tcp_pair(s);
	pj.e = a[1];
	pj.n = 256u << 20;
	pj.may_fail = true;
	up_bridge_opts_init(&sj.o);
	sj.o.flags = flags;
	sj.e = a[0];
	sj.fd = s[0];
	CHECK_EQ(pthread_create(&stt, NULL, sender, &sj), 0);
	CHECK_EQ(pthread_create(&pt, NULL, producer, &pj), 0);
	while (got < (4u << 20)) {
		ssize_t r = recv(s[1], buf, sizeof(buf), 0);

		CHECK(r > 0);
		got += (size_t)r;
	}
	close(s[1]); /* unread data: the kernel resets the connection */
	pthread_join(stt, NULL);
	CHECK(sj.res == -ECONNRESET || sj.res == -EPIPE);
	CHECK(sj.st.bytes < pj.n);
	/* The producer is stuck on a full pipe until its reader goes. */
	up_close(a[0]);
	pthread_join(pt, NULL);
	close(s[0]);
}

static void test_receiver_gone(void)
{
	receiver_gone(0);
	receiver_gone(UP_BRIDGE_NO_URING);
}

/* A socket that can no longer send (shut down for writing, as after the
 * peer's reset): -EPIPE, and no SIGPIPE (the harness fails on one). */
static void no_sigpipe(uint32_t flags)
{
	struct shand h;

	memset(&h, 0, sizeof(h));
	CHECK_OK(up_pipe2(h.a, NULL));
	tcp_pair(h.s);
	CHECK_EQ(up_write(h.a[1], "hello", 5), 5);
	up_close(h.a[1]);
	CHECK_SYS(shutdown(h.s[0], SHUT_WR));
	up_bridge_opts_init(&h.sj.o);
	h.sj.o.flags = flags;
	CHECK_EQ(up_bridge_send(h.a[0], h.s[0], &h.sj.o, &h.sj.st), -EPIPE);
	check_path(&h.sj.st, flags);
	up_close(h.a[0]);
	close(h.s[0]);
	close(h.s[1]);
}

static void test_no_sigpipe(void)
{
	no_sigpipe(0);
	no_sigpipe(UP_BRIDGE_NO_URING);
}

static void test_bad_args(void)
{
	struct up_bridge_opts o;
	struct up_end *a[2];

	CHECK_OK(up_pipe2(a, NULL));
	up_bridge_opts_init(&o);
	o.flags = 0x100;
	CHECK_EQ(up_bridge_send(a[0], 0, &o, NULL), -EINVAL);
	up_bridge_opts_init(&o);
	o.frame_max = (16u << 20) + 1;
	CHECK_EQ(up_bridge_recv(a[1], 0, &o, NULL), -EINVAL);
	up_bridge_opts_init(&o);
	o.size = 4;
	CHECK_EQ(up_bridge_recv(a[1], 0, &o, NULL), -EINVAL);
	CHECK_EQ(up_bridge_send(NULL, 0, NULL, NULL), -EINVAL);
	CHECK_EQ(up_bridge_recv(a[1], -1, NULL, NULL), -EINVAL);
	up_close(a[0]);
	up_close(a[1]);
}

/*
 * UP_BRIDGE_ANSWER_LATER: the receive returns with every byte in the pipe
 * and the sender still waiting; up_bridge_answer() then decides what the
 * sender returns: 0 for a stream passed on, -EREMOTEIO for one that was not.
 */
static void answer_later(int err, int want)
{
	struct up_bridge_opts o;
	struct chain ch;
	pthread_t pt, stt;
	const uint64_t n = 100000;
	unsigned char x;

	up_bridge_opts_init(&o);
	chain_init(&ch, n, &o);
	ch.rj.o.flags = UP_BRIDGE_ANSWER_LATER;
	CHECK_EQ(pthread_create(&pt, NULL, producer, &ch.pj), 0);
	CHECK_EQ(pthread_create(&stt, NULL, sender, &ch.sj), 0);
	/* The receive, here: the pipe is big enough for the whole stream. */
	CHECK_EQ(up_bridge_recv(ch.b[1], ch.s[1], &ch.rj.o, &ch.rj.st), 0);
	CHECK_EQ(ch.rj.st.bytes, n);
	up_close(ch.b[1]);
	CHECK_EQ(drain_check(ch.b[0]), n);
	/* No answer yet: the sender cannot have returned. */
	CHECK_EQ(recv(ch.s[0], &x, 1, MSG_PEEK | MSG_DONTWAIT), -1);
	CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
	CHECK_EQ(up_bridge_answer(ch.s[1], err, &ch.rj.o, &ch.rj.st), 0);
	pthread_join(stt, NULL);
	pthread_join(pt, NULL);
	CHECK_EQ(ch.sj.res, want);
	chain_close(&ch);
}

static void test_answer_later(void)
{
	struct up_bridge_stats st = {0};

	answer_later(0, 0);
	answer_later(-EIO, -EREMOTEIO);
	answer_later(-ENOSPC, -EREMOTEIO);
	CHECK_EQ(up_bridge_answer(-1, 0, NULL, &st), -EINVAL);
	CHECK_EQ(up_bridge_answer(0, 0, NULL, NULL), -EINVAL);
	CHECK_EQ(up_bridge_answer(0, EIO, NULL, &st), -EINVAL);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(100);
	harness_fail_on_sigpipe();
	no_iouring = getenv("UP_NOIOURING") != NULL;
	RUN(test_bad_args);
	RUN(test_crc32c);
	RUN(crc_lanes);
	RUN(test_recv_leaves_no_fill_hint);
	RUN(test_sizes_default);
	RUN(test_sizes_plain);
	RUN(test_sizes_zerocopy);
	RUN(test_small_frames);
	RUN(test_wrong_magic);
	RUN(test_wrong_version);
	RUN(test_bad_frames);
	RUN(test_truncated);
	RUN(test_bad_trailer);
	RUN(test_timeout);
	RUN(test_sender_answers);
	RUN(test_answer_later);
	RUN(test_receiver_gone);
	RUN(test_no_sigpipe);
	return 0;
}
