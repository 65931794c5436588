/* SPDX-License-Identifier: MIT */
/*
 * stream_harness.h - one producer/consumer skeleton for a single writer's
 * byte stream, instantiated per mode (struct stream_mode): where each side
 * runs, the pipe's shape, the stream's length and the sizes of the writes
 * and of the reads. test_rw (threads) and test_multiproc (processes)
 * instantiate it.
 *
 * The writer sends m->bytes bytes of the position-dependent pattern
 * harness_pat(m->seed, offset), every blocking write returning its full
 * count. The reader reads until end of stream; each read must return at
 * least one and at most the asked bytes, every byte must match the pattern
 * (loss, duplication and reordering all show), and the total must be
 * m->bytes: end of stream neither early nor late.
 *
 * Each side runs where its mode says (enum stream_at): on the calling
 * thread, on a thread of its own, or in a forked child that maps the memfd
 * afresh with up_pipe_attach(), as a real peer process would. Such a child
 * first closes its copies of the ends this process had open at the fork
 * (they are ends of the child's own, as pipe(2) fds are: a copy of a writer
 * left open would keep the reader from ever seeing end of stream), so it
 * uses nothing of the parent's but the memfd.
 *
 * Start-up ordering is explicit, never a sleep. The ends of the sides in
 * this process are opened before any fork; a child writer's role is held by
 * an anchor end here until every child has opened its own; so is a child
 * reader's when the writer is a child too; and the sides in this process
 * start only once every child has said "ready" through a kernel pipe. The
 * lifecycle (a reader before any writer waits, a writer before any reader
 * keeps its data) would cope with any order: the anchors keep every end
 * counted before data moves, so these tests are about the stream; the start
 * orders are test_lifecycle's, test_fork's and test_names'.
 */
#ifndef UP_TESTS_STREAM_HARNESS_H
#define UP_TESTS_STREAM_HARNESS_H

#include "harness.h"
#include "uringpipe.h"

enum stream_at { STREAM_HERE, STREAM_THREAD, STREAM_CHILD };

struct stream_side;

struct stream_mode {
	const char *name;          /* in failure messages */
	size_t capacity, page;     /* of the pipe; 0: the library's default */
	uint64_t seed;             /* of the pattern */
	size_t bytes;              /* the whole stream */
	enum stream_at writer_at, reader_at;
	size_t wbuf, rbuf;         /* the largest write, the largest read */
	uint64_t wrng, rrng;       /* seeds of each side's harness_rng */
	/* The next write's size: 1 .. min(@left, wbuf). */
	size_t (*write_size)(struct stream_side *s, size_t left);
	/* The next read's size: 1 .. rbuf. */
	size_t (*read_size)(struct stream_side *s);
};

/* One side of the stream, as the size callbacks see it. */
struct stream_side {
	const struct stream_mode *m;
	struct up_end *e;
	struct harness_rng rng;    /* seeded with m->wrng or m->rrng */
	size_t calls;              /* writes or reads made so far */
	size_t total;              /* a reader thread's result */
};

/* Stock sizes: uniform in 1 .. wbuf (at most what is left) / 1 .. rbuf. */
static HARNESS_UNUSED size_t stream_write_random(struct stream_side *s, size_t left)
{
	size_t n = (size_t)harness_rng_range(&s->rng, 1, s->m->wbuf);

	return n < left ? n : left;
}

static HARNESS_UNUSED size_t stream_read_random(struct stream_side *s)
{
	return (size_t)harness_rng_range(&s->rng, 1, s->m->rbuf);
}

/* Stock size: everything that is left, in one blocking call. */
static HARNESS_UNUSED size_t stream_write_rest(struct stream_side *s, size_t left)
{
	(void)s;
	return left;
}

static HARNESS_UNUSED void stream_side_init(struct stream_side *s, const struct stream_mode *m,
					    bool writer)
{
	memset(s, 0, sizeof(*s));
	s->m = m;
	harness_rng_seed(&s->rng, writer ? m->wrng : m->rrng);
}

static HARNESS_UNUSED struct up_end *stream_open(struct up_pipe *p, int flags)
{
	struct up_end *e = NULL;

	CHECK_OK(up_open(p, flags, &e));
	CHECK(e != NULL);
	return e;
}

static HARNESS_UNUSED void stream_write_side(struct stream_side *s)
{
	const struct stream_mode *m = s->m;
	uint8_t *buf = malloc(m->wbuf);
	size_t off = 0;

	CHECK(buf != NULL);
	while (off < m->bytes) {
		size_t n = m->write_size(s, m->bytes - off);

		CHECK(n >= 1 && n <= m->bytes - off && n <= m->wbuf);
		harness_fill(m->seed, off, buf, n);
		/* a blocking write returns the full count */
		CHECK_EQ(up_write(s->e, buf, n), (ssize_t)n);
		s->calls++;
		off += n;
	}
	free(buf);
}

/* Reads to end of stream, checking the pattern; returns the bytes read. */
static HARNESS_UNUSED size_t stream_read_side(struct stream_side *s)
{
	const struct stream_mode *m = s->m;
	uint8_t *buf = malloc(m->rbuf);
	uint64_t off = 0;

	CHECK(buf != NULL);
	for (;;) {
		size_t ask = m->read_size(s), bad;
		ssize_t got;

		CHECK(ask >= 1 && ask <= m->rbuf);
		got = up_read(s->e, buf, ask);
		s->calls++;
		CHECK_OK(got);
		if (got == 0)
			break;
		CHECK((size_t)got <= ask);
		bad = harness_verify(m->seed, off, buf, (size_t)got);
		if (bad != (size_t)-1) {
			fprintf(stderr, "%s: pattern mismatch at stream offset %llu\n", m->name,
				(unsigned long long)(off + bad));
			CHECK(0);
		}
		off += (uint64_t)got;
	}
	free(buf);
	return (size_t)off;
}

static HARNESS_UNUSED void *stream_writer_thread(void *arg)
{
	struct stream_side *s = arg;

	stream_write_side(s);
	CHECK_OK(up_close(s->e));
	return NULL;
}

static HARNESS_UNUSED void *stream_reader_thread(void *arg)
{
	struct stream_side *s = arg;

	s->total = stream_read_side(s);
	return NULL;
}

/* A child process's side: the inherited ends closed (@inh, @ninh), its own
 * mapping, its own end, then "ready". */
static HARNESS_UNUSED HARNESS_NORETURN void stream_child(const struct stream_mode *m,
							  struct up_pipe *inherited,
							  struct up_end **inh, int ninh,
							  bool writer, int ready_fd)
{
	struct up_pipe *q;
	struct stream_side s;

	harness_close_inherited(inh, ninh);
	q = harness_attach(inherited);
	stream_side_init(&s, m, writer);
	s.e = stream_open(q, writer ? UP_WR : UP_RD);
	harness_signal_ready(ready_fd);
	if (writer)
		stream_write_side(&s);
	else
		CHECK_EQ(stream_read_side(&s), m->bytes);
	CHECK_OK(up_close(s.e));
	up_pipe_release(q);
	_exit(0);
}

/* Runs one stream as @m says. Children are reaped with a 30 s deadline
 * (harness_reap_ok: call harness_block_sigchld() first). */
static HARNESS_UNUSED void stream_run(const struct stream_mode *m)
{
	struct stream_side w, r;
	struct up_end *anchor_w = NULL, *anchor_r = NULL, *inh[4];
	struct up_config cfg;
	struct up_pipe *p = NULL;
	pthread_t tw, tr;
	pid_t pw = 0, pr = 0;
	int rdy[2] = { -1, -1 }, children = 0, i;
	char what[128];

	/* One thread cannot be both: its writes would fill the pipe. */
	CHECK(m->writer_at != STREAM_HERE || m->reader_at != STREAM_HERE);
	up_config_init(&cfg);
	cfg.capacity = m->capacity;
	cfg.page_size = m->page;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK(p != NULL);
	stream_side_init(&w, m, true);
	stream_side_init(&r, m, false);
	if (m->reader_at != STREAM_CHILD)
		r.e = stream_open(p, UP_RD);
	else if (m->writer_at == STREAM_CHILD)
		anchor_r = stream_open(p, UP_RD);
	if (m->writer_at != STREAM_CHILD)
		w.e = stream_open(p, UP_WR);
	else
		anchor_w = stream_open(p, UP_WR);

	/* Every end of this process, open at each fork below. */
	inh[0] = r.e;
	inh[1] = w.e;
	inh[2] = anchor_r;
	inh[3] = anchor_w;

	children = (m->reader_at == STREAM_CHILD) + (m->writer_at == STREAM_CHILD);
	if (children)
		CHECK_SYS(pipe(rdy));
	if (m->reader_at == STREAM_CHILD && (pr = harness_fork(60)) == 0)
		stream_child(m, p, inh, 4, false, rdy[1]);
	if (m->writer_at == STREAM_CHILD && (pw = harness_fork(60)) == 0)
		stream_child(m, p, inh, 4, true, rdy[1]);
	for (i = 0; i < children; i++)
		harness_wait_ready(rdy[0]);
	if (anchor_r)
		CHECK_OK(up_close(anchor_r));
	if (anchor_w)
		CHECK_OK(up_close(anchor_w));

	if (m->writer_at == STREAM_THREAD)
		CHECK(pthread_create(&tw, NULL, stream_writer_thread, &w) == 0);
	if (m->reader_at == STREAM_THREAD)
		CHECK(pthread_create(&tr, NULL, stream_reader_thread, &r) == 0);
	if (m->writer_at == STREAM_HERE) {
		stream_write_side(&w);
		CHECK_OK(up_close(w.e));
	}
	if (m->reader_at == STREAM_HERE)
		r.total = stream_read_side(&r);
	if (m->writer_at == STREAM_THREAD)
		CHECK(pthread_join(tw, NULL) == 0);
	if (m->reader_at == STREAM_THREAD)
		CHECK(pthread_join(tr, NULL) == 0);
	if (m->reader_at != STREAM_CHILD) {
		CHECK_EQ(r.total, m->bytes);
		CHECK_OK(up_close(r.e));
	}
	if (pw) {
		snprintf(what, sizeof(what), "%s writer", m->name);
		harness_reap_ok(pw, 30, what);
	}
	if (pr) {
		snprintf(what, sizeof(what), "%s reader", m->name);
		harness_reap_ok(pr, 30, what);
	}
	if (children) {
		close(rdy[0]);
		close(rdy[1]);
	}
	up_pipe_release(p);
}

#endif /* UP_TESTS_STREAM_HARNESS_H */
