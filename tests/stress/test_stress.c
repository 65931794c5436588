/* SPDX-License-Identifier: MIT */
/*
 * test_stress.c - many writers, many readers, random sizes, integrity checked.
 *
 * Usage: test_stress [--seed N] [--seconds S] [--writers W] [--readers R]
 *                    [--procs] [--capacity BYTES] [--page-size BYTES]
 * Prints "seed=N" first; the same seed replays the same record sizes, write
 * methods and read patterns (thread interleavings differ, of course).
 * Without --writers/--readers it runs a fixed list of variants (threads and
 * processes, several W x R shapes and page sizes), sharing --seconds.
 *
 * Records. Every record starts with a 32-byte header: magic, writer id,
 * per-writer sequence number, total length, a check word over those fields,
 * and a 64-bit FNV-1a over the payload (the payload is pseudo-random, seeded
 * by seed/writer/seq). A record is sent with ONE call: up_write, up_writev
 * (header and payload in separate iovecs), or up_reserve/up_commit: with a
 * single writer in as many reservations as it takes (a split is fine when
 * nobody else writes), with several in one reservation of at most a page,
 * which the library never splits (uringpipe.h), so the record stays whole.
 *
 * Why the framing is sound (what the library guarantees and what it doesn't):
 *  - W == 1, R == 1: a single writer's bytes arrive in order, so records of
 *    any size (32 B .. 1 MiB, skewed: mostly small, a few huge) can be
 *    parsed from the byte stream, whatever the read sizes; the reader uses
 *    random-sized up_read, up_readv and up_peek/up_consume.
 *  - W > 1, R == 1: only writes of at most UP_PIPE_BUF (4096) bytes are
 *    atomic (never interleaved); larger ones may interleave at page
 *    boundaries. So records are 32 .. 4096 bytes, and each one must arrive
 *    contiguous: the reader parses the stream exactly as above.
 *  - R > 1: a read returns an arbitrary prefix of what is there, so two
 *    readers using up_read would split records between them and nobody could
 *    reassemble them. Records are therefore exactly 4096 bytes and readers
 *    take whole records with up_peek/up_consume, relying on the documented
 *    guarantee that with several reader ends peek holds the readers' lock
 *    until the matching consume: a reader peeks; when at least 4096 bytes
 *    are visible it copies the first 4096 and consumes exactly 4096; when
 *    fewer are visible (a record published in parts) it consumes 0, which
 *    releases the lock, and retries. Because every write is a whole 4096-byte
 *    record and writes of that size are atomic, the stream is always a
 *    sequence of whole records, so whoever consumes at a record boundary
 *    leaves the next reader at a boundary too.
 *
 * Checks: header sanity, payload checksum, per reader the sequence numbers of
 * each writer strictly increase (R == 1: exactly +1, no gap), every
 * (writer, seq) is received exactly once across all readers (a shared bitmap;
 * a second arrival fails at once), and at the end every record each writer
 * reports sent was received. In thread mode the pipe's statistics must match
 * the bytes moved.
 *
 * Runtime: writers stop at the deadline (--seconds, split among variants),
 * close their ends; readers run to end of stream. A watchdog fails a hang.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "harness.h"
#include "uringpipe.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

#define MAXW 16
#define MAXR 16
#define MAXSEQ ((uint64_t)1 << 26) /* records per writer; writers stop there */
#define REC_MAGIC 0x54535055u      /* "UPST" */
#define HDR 32u
#define BIG_MAX (1u << 20)

enum shape { SHAPE_LARGE, SHAPE_SMALL, SHAPE_FIXED };

struct rec_hdr {
	uint32_t magic;
	uint32_t writer;
	uint64_t seq;
	uint32_t len;   /* whole record, header included */
	uint32_t check; /* over magic, writer, seq, len */
	uint64_t sum;   /* FNV-1a 64 over the payload */
};

/* Lives in MAP_SHARED memory so that forked processes share it. */
struct shared {
	_Atomic uint64_t sent[MAXW];
	_Atomic uint64_t sent_bytes[MAXW];
	_Atomic uint64_t recv[MAXR];
	_Atomic uint64_t recv_bytes[MAXR];
	_Atomic uint64_t partial_peeks;
};

struct run {
	uint64_t seed;
	int writers, readers;
	bool procs;
	size_t capacity, page_size;
	double seconds, deadline;
	enum shape shape;
	struct shared *sh;
	_Atomic uint64_t *bits; /* MAXW * MAXSEQ bits */
	struct up_pipe *p;
	int ready_fd;           /* procs: a child writes one byte once its end is open */
	struct up_end *anchor[2]; /* procs: this process's ends at each fork */
};

/* ------------------------------------------------------------ records */

static uint32_t hdr_check(const struct rec_hdr *h)
{
	return (uint32_t)harness_mix64(((uint64_t)h->magic << 32) ^ h->writer ^
				       (h->seq * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)h->len << 7));
}

static uint64_t fnv1a_words(const uint8_t *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, w;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		h ^= w;
		h *= 0x100000001b3ull;
	}
	for (; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static size_t pick_len(struct harness_rng *rng, enum shape s)
{
	uint64_t x = harness_rng_next(rng) % 100;

	switch (s) {
	case SHAPE_FIXED:
		return UP_PIPE_BUF;
	case SHAPE_SMALL:
		if (x < 60)
			return (size_t)harness_rng_range(rng, HDR, 256);
		if (x < 90)
			return (size_t)harness_rng_range(rng, 257, 2048);
		return (size_t)harness_rng_range(rng, 2049, UP_PIPE_BUF);
	case SHAPE_LARGE:
		break;
	}
	if (x < 70)
		return (size_t)harness_rng_range(rng, HDR, 512);
	if (x < 90)
		return (size_t)harness_rng_range(rng, 513, 4096);
	if (x < 98)
		return (size_t)harness_rng_range(rng, 4097, 65536);
	return (size_t)harness_rng_range(rng, 65537, BIG_MAX);
}

static size_t max_len(enum shape s)
{
	return s == SHAPE_LARGE ? BIG_MAX : UP_PIPE_BUF;
}

static void build(uint8_t *buf, const struct run *rn, uint32_t writer, uint64_t seq, size_t len)
{
	struct harness_rng prng;
	struct rec_hdr h;
	size_t i;

	harness_rng_seed(&prng, rn->seed ^ ((uint64_t)writer << 48) ^ seq);
	for (i = HDR; i + 8 <= len; i += 8) {
		uint64_t v = harness_rng_next(&prng);

		memcpy(buf + i, &v, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)harness_rng_next(&prng);
	h.magic = REC_MAGIC;
	h.writer = writer;
	h.seq = seq;
	h.len = (uint32_t)len;
	h.check = hdr_check(&h);
	h.sum = fnv1a_words(buf + HDR, len - HDR);
	memcpy(buf, &h, HDR);
}

/* ------------------------------------------------------------ writers */

static void send_record(struct up_end *w, struct harness_rng *rng, const struct run *rn,
			uint8_t *buf, size_t len)
{
	uint64_t how = harness_rng_next(rng) % 10;

	if (how < 6) {
		CHECK_EQ(up_write(w, buf, len), (ssize_t)len);
	} else if (how < 9 || (rn->writers > 1 && len > up_page_size(rn->p))) {
		struct iovec v[3];
		size_t mid = HDR + (len - HDR) / 2;

		v[0].iov_base = buf;
		v[0].iov_len = HDR;
		v[1].iov_base = buf + HDR;
		v[1].iov_len = mid - HDR;
		v[2].iov_base = buf + mid;
		v[2].iov_len = len - mid;
		CHECK_EQ(up_writev(w, v, 3), (ssize_t)len);
	} else if (rn->writers > 1) {
		/* one reservation of at most a page: whole, or the test fails */
		struct iovec v[4];
		int cnt = 4, i;
		size_t k = 0;

		CHECK_EQ(up_reserve(w, len, v, &cnt), (ssize_t)len);
		for (i = 0; i < cnt; i++) {
			memcpy(v[i].iov_base, buf + k, v[i].iov_len);
			k += v[i].iov_len;
		}
		CHECK_EQ(k, len);
		CHECK_OK(up_commit(w, len));
	} else {
		/* zero copy: reserve/fill/commit, possibly in several pieces */
		size_t off = 0;

		while (off < len) {
			struct iovec v[16];
			int cnt = 16, i;
			ssize_t n = up_reserve(w, len - off, v, &cnt);
			size_t k = 0;

			CHECK_OK(n);
			CHECK(n > 0 && (size_t)n <= len - off);
			for (i = 0; i < cnt; i++) {
				memcpy(v[i].iov_base, buf + off + k, v[i].iov_len);
				k += v[i].iov_len;
			}
			CHECK_EQ(k, (size_t)n);
			CHECK_OK(up_commit(w, (size_t)n));
			off += (size_t)n;
		}
	}
}

static void writer_run(struct run *rn, struct up_end *w, uint32_t id)
{
	struct harness_rng rng;
	uint8_t *buf = malloc(max_len(rn->shape));
	uint64_t seq = 0, bytes = 0;

	CHECK(buf != NULL);
	harness_rng_seed(&rng, rn->seed * 31 + id + 1);
	while (seq < MAXSEQ && harness_now() < rn->deadline) {
		size_t len = pick_len(&rng, rn->shape);

		build(buf, rn, id, seq, len);
		send_record(w, &rng, rn, buf, len);
		seq++;
		bytes += len;
		/* published for the final count only; relaxed is enough because
		 * the reader side of the check runs after join/wait */
		atomic_store_explicit(&rn->sh->sent[id], seq, memory_order_relaxed);
		atomic_store_explicit(&rn->sh->sent_bytes[id], bytes, memory_order_relaxed);
	}
	CHECK_OK(up_close(w));
	free(buf);
}

/* ------------------------------------------------------------ readers */

struct reader {
	struct run *rn;
	struct up_end *r;
	uint32_t id;
	struct harness_rng rng;
	uint64_t next[MAXW];  /* lowest acceptable next seq per writer */
	uint64_t records, bytes;
};

static void check_header(const struct reader *rd, const struct rec_hdr *h, size_t avail)
{
	const struct run *rn = rd->rn;

	if (h->magic != REC_MAGIC || h->check != hdr_check(h) ||
	    h->writer >= (uint32_t)rn->writers || h->len < HDR || h->len > max_len(rn->shape) ||
	    h->len > avail || (rn->shape == SHAPE_FIXED && h->len != UP_PIPE_BUF)) {
		fprintf(stderr,
			"reader %u: bad record header after %llu records: magic=%08x writer=%u seq=%llu len=%u\n",
			rd->id, (unsigned long long)rd->records, h->magic, h->writer,
			(unsigned long long)h->seq, h->len);
		harness_fail();
	}
}

static void accept_record(struct reader *rd, const uint8_t *rec, size_t avail)
{
	struct run *rn = rd->rn;
	struct rec_hdr h;
	uint64_t bit, old;

	CHECK(avail >= HDR);
	memcpy(&h, rec, HDR);
	check_header(rd, &h, avail);
	if (fnv1a_words(rec + HDR, h.len - HDR) != h.sum) {
		fprintf(stderr, "reader %u: record writer=%u seq=%llu len=%u: payload corrupt\n",
			rd->id, h.writer, (unsigned long long)h.seq, h.len);
		harness_fail();
	}
	if (h.seq < rd->next[h.writer] || (rn->readers == 1 && h.seq != rd->next[h.writer])) {
		fprintf(stderr, "reader %u: writer %u seq %llu arrived, expected %s%llu\n", rd->id,
			h.writer, (unsigned long long)h.seq, rn->readers == 1 ? "" : ">= ",
			(unsigned long long)rd->next[h.writer]);
		harness_fail();
	}
	rd->next[h.writer] = h.seq + 1;
	CHECK(h.seq < MAXSEQ);
	bit = (uint64_t)h.writer * MAXSEQ + h.seq;
	old = atomic_fetch_or_explicit(&rn->bits[bit / 64], 1ull << (bit % 64),
				       memory_order_relaxed);
	if (old & (1ull << (bit % 64))) {
		fprintf(stderr, "reader %u: writer %u seq %llu received twice\n", rd->id, h.writer,
			(unsigned long long)h.seq);
		harness_fail();
	}
	rd->records++;
	rd->bytes += h.len;
}

/* Copies @n bytes from the front of the peeked spans. */
static void copy_spans(uint8_t *dst, const struct iovec *v, int cnt, size_t n)
{
	int i;

	for (i = 0; i < cnt && n > 0; i++) {
		size_t k = v[i].iov_len < n ? v[i].iov_len : n;

		memcpy(dst, v[i].iov_base, k);
		dst += k;
		n -= k;
	}
	CHECK_EQ(n, 0);
}

/*
 * Stream reader (R == 1): exactly @n bytes into @dst, by random methods and
 * sizes. Returns false on end of stream before the first byte (a clean end
 * between records); end of stream later is a truncated record: failure.
 */
static bool stream_get(struct reader *rd, uint8_t *dst, size_t n)
{
	size_t got = 0;

	while (got < n) {
		size_t left = n - got;
		size_t ask = harness_rng_next(&rd->rng) % 2 ? left :
			(size_t)harness_rng_range(&rd->rng, 1, left < 65536 ? left : 65536);
		uint64_t how = harness_rng_next(&rd->rng) % 10;
		ssize_t r;

		if (how < 6) {
			r = up_read(rd->r, dst + got, ask);
		} else if (how < 8) {
			struct iovec v[2];

			v[0].iov_base = dst + got;
			v[0].iov_len = ask / 2;
			v[1].iov_base = dst + got + ask / 2;
			v[1].iov_len = ask - ask / 2;
			r = up_readv(rd->r, v, 2);
		} else {
			struct iovec v[8];
			int cnt = 8;

			r = up_peek(rd->r, v, &cnt);
			if (r > 0) {
				size_t vis = 0;
				int i;

				for (i = 0; i < cnt; i++)
					vis += v[i].iov_len;
				CHECK_EQ(vis, (size_t)r);
				if ((size_t)r > ask)
					r = (ssize_t)ask;
				copy_spans(dst + got, v, cnt, (size_t)r);
				CHECK_OK(up_consume(rd->r, (size_t)r));
			}
		}
		CHECK_OK(r);
		if (r == 0) {
			if (got == 0)
				return false;
			fprintf(stderr, "reader %u: end of stream inside a record (%zu of %zu bytes)\n",
				rd->id, got, n);
			harness_fail();
		}
		CHECK((size_t)r <= ask);
		got += (size_t)r;
	}
	return true;
}

static void reader_stream(struct reader *rd)
{
	size_t max = max_len(rd->rn->shape);
	uint8_t *buf = malloc(max);
	struct rec_hdr h;

	CHECK(buf != NULL);
	for (;;) {
		if (!stream_get(rd, buf, HDR))
			break; /* clean end between records */
		memcpy(&h, buf, HDR);
		check_header(rd, &h, max); /* before trusting len */
		if (h.len > HDR && !stream_get(rd, buf + HDR, h.len - HDR)) {
			fprintf(stderr, "reader %u: end of stream after a header\n", rd->id);
			harness_fail();
		}
		accept_record(rd, buf, h.len);
	}
	free(buf);
}

/* Several readers: whole 4096-byte records through peek/consume. */
static void reader_records(struct reader *rd)
{
	uint8_t rec[UP_PIPE_BUF];

	for (;;) {
		struct iovec v[16];
		int cnt = 16, i;
		size_t vis = 0;
		ssize_t r = up_peek(rd->r, v, &cnt);

		CHECK_OK(r);
		if (r == 0)
			break;
		for (i = 0; i < cnt; i++)
			vis += v[i].iov_len;
		CHECK_EQ(vis, (size_t)r);
		if ((size_t)r >= UP_PIPE_BUF) {
			copy_spans(rec, v, cnt, UP_PIPE_BUF);
			CHECK_OK(up_consume(rd->r, UP_PIPE_BUF));
			accept_record(rd, rec, UP_PIPE_BUF);
			continue;
		}
		/* part of a record is visible: release the lock and retry */
		CHECK_OK(up_consume(rd->r, 0));
		atomic_fetch_add_explicit(&rd->rn->sh->partial_peeks, 1, memory_order_relaxed);
		{
			struct up_stats st;

			CHECK_OK(up_stats(rd->rn->p, &st));
			if (st.writers == 0) {
				/* no writer left: the rest must show up complete now */
				cnt = 16;
				r = up_peek(rd->r, v, &cnt);
				CHECK_OK(r);
				if (r > 0 && r < (ssize_t)UP_PIPE_BUF) {
					fprintf(stderr,
						"reader %u: stream ends with a partial record (%zd bytes)\n",
						rd->id, r);
					harness_fail();
				}
				if (r > 0)
					CHECK_OK(up_consume(rd->r, 0));
				continue;
			}
		}
		sched_yield();
	}
}

static void reader_run(struct reader *rd)
{
	if (rd->rn->readers == 1)
		reader_stream(rd);
	else
		reader_records(rd);
	atomic_store_explicit(&rd->rn->sh->recv[rd->id], rd->records, memory_order_relaxed);
	atomic_store_explicit(&rd->rn->sh->recv_bytes[rd->id], rd->bytes, memory_order_relaxed);
	CHECK_OK(up_close(rd->r));
}

static void reader_init(struct reader *rd, struct run *rn, struct up_end *r, uint32_t id)
{
	memset(rd, 0, sizeof(*rd));
	rd->rn = rn;
	rd->r = r;
	rd->id = id;
	harness_rng_seed(&rd->rng, rn->seed * 77 + id + 1000);
}

/* ------------------------------------------------------------ threads */

struct targ {
	struct run *rn;
	struct up_end *e;
	uint32_t id;
	bool is_writer;
	struct reader rd;
};

static void *thread_main(void *arg)
{
	struct targ *t = arg;

	if (t->is_writer) {
		writer_run(t->rn, t->e, t->id);
	} else {
		reader_init(&t->rd, t->rn, t->e, t->id);
		reader_run(&t->rd);
	}
	return NULL;
}

static void run_threads(struct run *rn)
{
	struct targ t[MAXW + MAXR];
	pthread_t th[MAXW + MAXR];
	int i, n = rn->writers + rn->readers;

	/* every end exists before anything moves: no early EOF or EPIPE */
	for (i = 0; i < n; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].rn = rn;
		t[i].is_writer = i < rn->writers;
		t[i].id = (uint32_t)(t[i].is_writer ? i : i - rn->writers);
		CHECK_OK(up_open(rn->p, t[i].is_writer ? UP_WR : UP_RD, &t[i].e));
	}
	for (i = 0; i < n; i++)
		CHECK(pthread_create(&th[i], NULL, thread_main, &t[i]) == 0);
	for (i = 0; i < n; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
}

/* ------------------------------------------------------------ processes */

static pid_t spawn(struct run *rn, bool is_writer, uint32_t id)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q = NULL;
		struct up_end *e = NULL;

		harness_watchdog((unsigned)rn->seconds + 90);
		/* a real peer: close the anchors' copies (ends of our own since
		 * the fork: a writer's would keep the readers from ever seeing
		 * end of stream), map the inherited memfd afresh, never reuse
		 * the parent's handles */
		harness_close_inherited(rn->anchor, 2);
		CHECK_OK(up_pipe_attach(up_pipe_fd(rn->p), &q));
		rn->p = q;
		CHECK_OK(up_open(q, is_writer ? UP_WR : UP_RD, &e));
		CHECK_EQ(write(rn->ready_fd, "R", 1), 1);
		if (is_writer) {
			writer_run(rn, e, id);
		} else {
			struct reader rd;

			reader_init(&rd, rn, e, id);
			reader_run(&rd);
		}
		up_pipe_release(q);
		_exit(0);
	}
	return pid;
}

static void run_procs(struct run *rn)
{
	pid_t pids[MAXW + MAXR];
	struct up_end *ar = NULL, *aw = NULL;
	int rdy[2], i, n = rn->writers + rn->readers, left;
	double limit = harness_now() + rn->seconds + 60;
	sigset_t set;

	/* anchors keep the pipe "open at both ends" until every child's end
	 * exists: a writer that finished before another opened would end the
	 * stream for the readers early (a writer came and none is left); the
	 * reader anchor does the same for -EPIPE */
	CHECK_OK(up_open(rn->p, UP_RD, &ar));
	CHECK_OK(up_open(rn->p, UP_WR, &aw));
	rn->anchor[0] = ar;
	rn->anchor[1] = aw;
	CHECK_SYS(pipe(rdy));
	rn->ready_fd = rdy[1];
	for (i = 0; i < n; i++)
		pids[i] = spawn(rn, i < rn->writers,
				(uint32_t)(i < rn->writers ? i : i - rn->writers));
	for (i = 0; i < n; i++) {
		char c;

		CHECK_EQ(read(rdy[0], &c, 1), 1);
	}
	CHECK_OK(up_close(ar));
	CHECK_OK(up_close(aw));
	close(rdy[0]);
	close(rdy[1]);

	/* reap in any order; the first failure kills the rest */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (left = n; left > 0;) {
		int status = 0, j;
		pid_t r = waitpid(-1, &status, WNOHANG);

		if (r == 0) {
			double rest = limit - harness_now();
			struct timespec ts;

			if (rest <= 0) {
				fprintf(stderr, "processes still running %.0f s after the deadline\n",
					rn->seconds + 60);
				for (j = 0; j < n; j++)
					if (pids[j] > 0)
						kill(pids[j], SIGKILL);
				harness_fail();
			}
			ts.tv_sec = (time_t)rest;
			ts.tv_nsec = (long)((rest - (double)ts.tv_sec) * 1e9);
			(void)sigtimedwait(&set, NULL, &ts);
			continue;
		}
		CHECK(r > 0);
		for (j = 0; j < n; j++)
			if (pids[j] == r)
				pids[j] = 0;
		left--;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			if (WIFSIGNALED(status))
				fprintf(stderr, "child %d killed by signal %d (%s)\n", (int)r,
					WTERMSIG(status), strsignal(WTERMSIG(status)));
			else
				fprintf(stderr, "child %d exited with %d\n", (int)r,
					WEXITSTATUS(status));
			for (j = 0; j < n; j++)
				if (pids[j] > 0)
					kill(pids[j], SIGKILL);
			harness_fail();
		}
	}
}

/* ------------------------------------------------------------ one run */

static void run_one(uint64_t seed, int writers, int readers, bool procs, size_t capacity,
		    size_t page, double seconds)
{
	struct run rn;
	struct up_config cfg;
	uint64_t sent = 0, sent_bytes = 0, recv = 0, recv_bytes = 0;
	size_t bits_bytes = (size_t)MAXW * MAXSEQ / 8;
	double t0;
	int i;

	CHECK(writers >= 1 && writers <= MAXW && readers >= 1 && readers <= MAXR);
	memset(&rn, 0, sizeof(rn));
	rn.seed = seed;
	rn.writers = writers;
	rn.readers = readers;
	rn.procs = procs;
	rn.seconds = seconds;
	rn.shape = readers > 1 ? SHAPE_FIXED : writers > 1 ? SHAPE_SMALL : SHAPE_LARGE;
	rn.sh = mmap(NULL, sizeof(*rn.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(rn.sh != MAP_FAILED);
	rn.bits = mmap(NULL, bits_bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(rn.bits != MAP_FAILED);

	up_config_init(&cfg);
	cfg.capacity = capacity;
	cfg.page_size = page;
	CHECK_OK(up_pipe_create(&cfg, &rn.p));

	t0 = harness_now();
	rn.deadline = t0 + seconds;
	if (procs)
		run_procs(&rn);
	else
		run_threads(&rn);

	for (i = 0; i < writers; i++) {
		uint64_t n = atomic_load_explicit(&rn.sh->sent[i], memory_order_relaxed);
		uint64_t s, cnt = 0;
		bool reported = false;

		for (s = 0; s < n; s++) {
			uint64_t bit = (uint64_t)i * MAXSEQ + s;

			if (atomic_load_explicit(&rn.bits[bit / 64], memory_order_relaxed) &
			    (1ull << (bit % 64)))
				cnt++;
			else if (!reported) { /* the first hole only */
				fprintf(stderr, "writer %d seq %llu was never received\n", i,
					(unsigned long long)s);
				reported = true;
			}
		}
		if (cnt != n) {
			fprintf(stderr, "writer %d: %llu of %llu records received\n", i,
				(unsigned long long)cnt, (unsigned long long)n);
			harness_fail();
		}
		CHECK(n > 0); /* every writer got something through */
		sent += n;
		sent_bytes += atomic_load_explicit(&rn.sh->sent_bytes[i], memory_order_relaxed);
	}
	for (i = 0; i < readers; i++) {
		recv += atomic_load_explicit(&rn.sh->recv[i], memory_order_relaxed);
		recv_bytes += atomic_load_explicit(&rn.sh->recv_bytes[i], memory_order_relaxed);
	}
	CHECK_EQ(recv, sent); /* nothing extra arrived either */
	CHECK_EQ(recv_bytes, sent_bytes);
	if (!procs) {
		struct up_stats st;

		CHECK_OK(up_stats(rn.p, &st));
		CHECK_EQ(st.bytes_written, sent_bytes);
		CHECK_EQ(st.bytes_read, sent_bytes);
		CHECK_EQ(st.readers, 0);
		CHECK_EQ(st.writers, 0);
	}
	printf("# %dx%d %s page=%zu cap=%zu: %llu records, %.1f MiB in %.2f s (%.0f MiB/s)\n",
	       writers, readers, procs ? "procs" : "threads", up_page_size(rn.p), up_capacity(rn.p),
	       (unsigned long long)sent, (double)sent_bytes / (double)MiB, harness_now() - t0,
	       (double)sent_bytes / (double)MiB / (harness_now() - t0));
	if (readers > 1)
		printf("#   partial peeks retried: %llu\n",
		       (unsigned long long)atomic_load(&rn.sh->partial_peeks));
	up_pipe_release(rn.p);
	munmap(rn.bits, bits_bytes);
	munmap(rn.sh, sizeof(*rn.sh));
}

/* ------------------------------------------------------------ main */

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--seed N] [--seconds S] [--writers W] [--readers R] [--procs]\n"
		"          [--capacity BYTES] [--page-size BYTES]\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	double seconds = 3;
	int writers = 0, readers = 0, i;
	bool procs = false;
	size_t capacity = 0, page = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--procs") == 0)
			procs = true;
		else if (i + 1 >= argc)
			usage(argv[0]);
		else if (strcmp(a, "--seed") == 0)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--seconds") == 0)
			seconds = atof(argv[++i]);
		else if (strcmp(a, "--writers") == 0)
			writers = atoi(argv[++i]);
		else if (strcmp(a, "--readers") == 0)
			readers = atoi(argv[++i]);
		else if (strcmp(a, "--capacity") == 0)
			capacity = (size_t)strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--page-size") == 0)
			page = (size_t)strtoull(argv[++i], NULL, 0);
		else
			usage(argv[0]);
	}
	printf("seed=%llu\n", (unsigned long long)seed);
	fflush(stdout);
	if (seconds <= 0 || writers < 0 || writers > MAXW || readers < 0 || readers > MAXR)
		usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	harness_watchdog((unsigned)seconds + 120);
	harness_fail_on_sigpipe();
	harness_block_sigchld();

	if (writers || readers) {
		run_one(seed, writers ? writers : 1, readers ? readers : 1, procs,
			capacity ? capacity : 256 * KiB, page, seconds);
	} else {
		static const struct {
			int w, r;
			bool procs;
			size_t cap, page;
		} v[] = {
			{ 1, 1, false, 256 * KiB, 4096 },
			{ 4, 1, false, 256 * KiB, 4096 },
			{ 4, 1, false, 512 * KiB, 64 * KiB },
			{ 1, 4, false, 256 * KiB, 4096 },
			{ 4, 4, false, 512 * KiB, 64 * KiB },
			{ 2, 2, true, 256 * KiB, 4096 },
			{ 1, 1, true, 1 * MiB, 4096 },
		};
		int nv = (int)(sizeof(v) / sizeof(v[0]));

		for (i = 0; i < nv; i++)
			run_one(harness_mix64(seed + (uint64_t)i), v[i].w, v[i].r, v[i].procs,
				capacity ? capacity : v[i].cap, page ? page : v[i].page,
				seconds / nv);
	}
	printf("ok stress\n");
	return 0;
}
