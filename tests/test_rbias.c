/* SPDX-License-Identifier: MIT */
/*
 * test_rbias.c - the readers' lock biased to a lone reader (core/bias.h,
 * core/bias.c): a lone reader reads and peeks without the lock word; a
 * second reader takes the bias back and waits while the owner holds a peek;
 * an owner that died inside a peek is passed; a bias stored by a peer that
 * names an end of the wrong side is not waited for; a writer returning pages
 * under the readers' lock takes the bias back and sets none; two readers
 * sharing a stream of records through peek and consume each see whole
 * records, none twice and none lost. tests/test_bias.c checks the same
 * protocol on the writers' lock.
 *
 * Skips (77) where membarrier(2) is refused: the locks then never bias.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"

static uint32_t rbias_of(struct up_pipe *p)
{
	return atomic_load(&p->ln->rlock.bias);
}

static uint32_t busy_of(struct up_pipe *p, struct up_end *e)
{
	return atomic_load(&p->ends[e->idx].busy);
}

static void need_membarrier(void)
{
	uint64_t sc = 0;

	if (!up__membarrier_registered(getpid(), &sc))
		SKIP("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) refused here");
}

static void fill(char *b, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)('a' + (i * 7 + seed) % 26);
}

static void lone_reader_is_biased(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char exp[300], got[100];

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	fill(exp, sizeof(exp), 1);
	CHECK_EQ(up_write(w, exp, sizeof(exp)), (ssize_t)sizeof(exp));
	CHECK_EQ(rbias_of(p), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(up_read(r, got, sizeof(got)), (ssize_t)sizeof(got));
		CHECK(memcmp(got, exp + 100 * i, sizeof(got)) == 0);
		CHECK_EQ(rbias_of(p), r->lock_id);
		CHECK(r->biased);
		/* Entered through the bias, the word stays free. */
		CHECK_EQ(atomic_load(&p->ln->rlock.word), 0);
		CHECK_EQ(busy_of(p, r), UP_BUSY_OUT);
	}
	/* A peek holds the lock through the bias until its consume. */
	CHECK_EQ(up_write(w, exp, 10), 10);
	{
		struct iovec iov[2];
		int cnt = 2;

		CHECK_EQ(up_peek(r, iov, &cnt), 10);
		CHECK_EQ(busy_of(p, r), UP_BUSY_IN);
		CHECK_EQ(atomic_load(&p->ln->rlock.word), 0);
		CHECK_OK(up_consume(r, 10));
		CHECK_EQ(busy_of(p, r), UP_BUSY_OUT);
	}
	/* Closing gives the bias up: the next reader pays no barrier. */
	up_close(r);
	CHECK_EQ(rbias_of(p), 0);
	up_close(w);
	up_pipe_release(p);
}

struct rd_job {
	struct up_end *r;
	size_t want;
	char buf[64];
	ssize_t got;
	_Atomic pid_t tid;
	atomic_int done;
};

static void *rd_thread(void *arg)
{
	struct rd_job *j = arg;

	atomic_store(&j->tid, (pid_t)syscall(SYS_gettid));
	j->got = up_read(j->r, j->buf, j->want);
	atomic_store(&j->done, 1);
	return NULL;
}

/*
 * Reader A holds a peek through the bias; reader B's blocking read must
 * take the bias back and then wait for A's consume, not read beside it: B
 * gets the bytes after those A consumes. B is asleep (on A's busy word)
 * before A consumes, so the wake at A's drop is what lets it go.
 */
static void second_reader_waits_for_a_peek(void)
{
	struct up_pipe *p;
	struct up_end *ra, *rb, *w;
	struct rd_job j = { 0 };
	struct iovec iov[2];
	pthread_t t;
	char exp[40];
	int cnt = 2, i;

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &ra));
	CHECK_OK(up_open(p, UP_WR, &w));
	fill(exp, sizeof(exp), 2);
	CHECK_EQ(up_write(w, exp, 10), 10);
	CHECK_EQ(up_read(ra, j.buf, 10), 10); /* biases the lock to A */
	CHECK_EQ(rbias_of(p), ra->lock_id);
	CHECK_EQ(up_write(w, exp + 10, 30), 30);
	CHECK_EQ(up_peek(ra, iov, &cnt), 30);
	CHECK_EQ(busy_of(p, ra), UP_BUSY_IN);

	CHECK_OK(up_open(p, UP_RD, &rb));
	j.r = rb;
	j.want = 10;
	CHECK(pthread_create(&t, NULL, rd_thread, &j) == 0);
	for (i = 0; i < 200000 && !atomic_load(&j.done) &&
		    !(atomic_load(&j.tid) && harness_tid_state(j.tid) == 'S');
	     i++)
		sched_yield();
	CHECK_EQ(atomic_load(&j.done), 0); /* it read beside A's peek */
	CHECK(i < 200000);
	CHECK_EQ(rbias_of(p) & ~UP_BIAS_REVOKE, ra->lock_id); /* marked, still A's */
	CHECK_OK(up_consume(ra, 20));
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(j.got, 10);
	CHECK(memcmp(j.buf, exp + 30, 10) == 0);
	CHECK_EQ(rb->c.revokes, 1);
	CHECK_EQ(rbias_of(p), 0); /* two readers: nobody takes it */
	CHECK(!rb->biased);
	up_close(rb);
	up_close(ra);
	up_close(w);
	up_pipe_release(p);
}

/*
 * The bias owner is a reader in another process that dies holding a peek
 * (busy UP_BUSY_IN for good). A reader opened later takes the bias back
 * past the dead owner and reads what the dead one peeked but never consumed.
 */
static void owner_dead_inside_a_peek_is_passed(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	pid_t pid;
	int status;
	char exp[30], got[30];

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_WR, &w));
	fill(exp, sizeof(exp), 3);
	CHECK_EQ(up_write(w, exp, sizeof(exp)), (ssize_t)sizeof(exp));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *cr;
		struct iovec iov[2];
		char b[10];
		int cnt = 2;

		harness_close_inherited(&w, 1);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_RD, &cr) < 0)
			_exit(1);
		if (up_read(cr, b, 10) != 10 || rbias_of(q) != cr->lock_id)
			_exit(2);
		if (up_peek(cr, iov, &cnt) != 20 || busy_of(q, cr) != UP_BUSY_IN)
			_exit(3);
		_exit(0); /* inside, for good */
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_EQ(up_read(r, got, 20), 20);
	CHECK(memcmp(got, exp + 10, 20) == 0);
	up_close(r);
	up_close(w);
	up_pipe_release(p);
}

/*
 * A peer stores the lock id of the writer into the readers' bias while that
 * writer is inside its own lock (a reservation held open: its busy word is
 * UP_BUSY_IN). The bias names an end of the wrong side, which never took
 * it: a reader must not wait for that writer's commit.
 */
static void forged_bias_of_the_wrong_side_is_not_waited_for(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct iovec iov[2];
	int cnt = 2;
	char exp[10], got[10];

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	fill(exp, sizeof(exp), 4);
	CHECK_EQ(up_write(w, exp, sizeof(exp)), (ssize_t)sizeof(exp));
	CHECK_EQ(up_reserve(w, 20, iov, &cnt), 20); /* the writer inside */
	CHECK_EQ(busy_of(p, w), UP_BUSY_IN);
	r->bias_off = true; /* r takes the word, as any second reader would */
	r->flags |= UP_NONBLOCK;
	atomic_store(&p->ln->rlock.bias, w->lock_id); /* the peer's store */
	CHECK_EQ(up_read(r, got, sizeof(got)), (ssize_t)sizeof(got));
	CHECK(memcmp(got, exp, sizeof(got)) == 0);
	CHECK_EQ(rbias_of(p), 0);
	CHECK_OK(up_commit(w, 0));
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * A writer that closes with pages in its cache returns them to the pool
 * under the readers' lock. With the lock biased to the reader, the writer
 * takes the bias back (the reader may be inside, taking pages off the
 * ring) and, not being a reader, sets none; the reader biases it again on
 * its next read.
 */
static void writer_returning_pages_takes_the_bias_back(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char exp[100], got[100];

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	fill(exp, sizeof(exp), 5);
	CHECK_EQ(up_write(w, exp, 50), 50);
	CHECK_EQ(up_read(r, got, 50), 50);
	CHECK_EQ(rbias_of(p), r->lock_id);
	CHECK(w->ncache > 0);
	up_close(w);
	CHECK_EQ(rbias_of(p), 0);
	CHECK(r->biased); /* it learns on its next entry */
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(up_write(w, exp + 50, 50), 50);
	CHECK_EQ(up_read(r, got, 50), 50);
	CHECK(memcmp(got, exp + 50, 50) == 0);
	CHECK_EQ(rbias_of(p), r->lock_id);
	CHECK(r->biased);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * Reader A streams 64-byte records through peek and consume, one whole
 * record per peek, biased while it is alone; reader B opens an end, takes
 * one record the same way and closes, again and again, so the bias is taken
 * back and set again thousands of times while A reads. Every record must be
 * consumed by exactly one of them, whole (its checksum holds). Without the
 * revoker's wait or its barrier, both are inside at once and consume the
 * same record, or one skips a record.
 */
#define REC 64
#define NREC 300000u

struct rec {
	uint32_t seq, pad;
	uint64_t sum;
	unsigned char fill[REC - 16];
};

static uint64_t rec_sum(const struct rec *x)
{
	uint64_t s = x->seq * 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < sizeof(x->fill); i++)
		s = s * 31 + x->fill[i];
	return s;
}

struct share {
	struct up_pipe *p;
	_Atomic unsigned char *seen;
	atomic_uint bad, b_taken, opened;
};

/* One record off @r: 1, 0 at end of stream, -1 on an error. */
static int take_record(struct share *s, struct up_end *r)
{
	for (;;) {
		struct iovec iov[4];
		struct rec x;
		int cnt = 4;
		ssize_t n = up_peek(r, iov, &cnt);

		if (n == 0)
			return 0;
		if (n < 0)
			return -1;
		/* Records never span pages (64 of them fill one), so a peek
		 * shows whole ones; anything less is a torn record. */
		if ((size_t)n < REC || iov[0].iov_len < REC)
			return -1;
		memcpy(&x, iov[0].iov_base, REC);
		if (x.seq >= NREC || rec_sum(&x) != x.sum || atomic_fetch_add(&s->seen[x.seq], 1))
			atomic_fetch_add(&s->bad, 1);
		return up_consume(r, REC) < 0 ? -1 : 1;
	}
}

static void *reader_a(void *arg)
{
	struct share *s = arg;
	struct up_end *r;
	int k;

	if (up_open(s->p, UP_RD, &r) < 0) {
		atomic_fetch_add(&s->bad, 1);
		return NULL;
	}
	atomic_fetch_add(&s->opened, 1);
	for (uint32_t got = 0; (k = take_record(s, r)) > 0; got++) {
		/* A quarter in, A stands aside (holding no lock, its bias
		 * still set) until B has taken records: B's every take then
		 * has to take the bias back from A, whatever the scheduler
		 * does. Bounded: B that never gets a record fails the test. */
		if (got == NREC / 4) {
			double until = harness_now() + 20.0;

			while (atomic_load(&s->b_taken) < 10 && harness_now() < until)
				sched_yield();
		}
	}
	if (k < 0)
		atomic_fetch_add(&s->bad, 1);
	up_close(r);
	return NULL;
}

static void *reader_b(void *arg)
{
	struct share *s = arg;

	for (;;) {
		struct up_end *r;
		int k;

		if (up_open(s->p, UP_RD, &r) < 0) {
			atomic_fetch_add(&s->bad, 1);
			return NULL;
		}
		k = take_record(s, r);
		up_close(r);
		if (k < 0)
			atomic_fetch_add(&s->bad, 1);
		if (k <= 0)
			return NULL;
		atomic_fetch_add(&s->b_taken, 1);
	}
}

static void readers_share_records_while_the_bias_moves(void)
{
	struct share s = { 0 };
	struct up_end *w, *hold;
	pthread_t ta, tb;
	struct rec x;

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &s.p));
	s.seen = calloc(NREC, 1);
	CHECK(s.seen != NULL);
	CHECK_OK(up_open(s.p, UP_WR, &w));
	/* A reader from the start, until A is open: no write meets a pipe
	 * whose readers all left. */
	CHECK_OK(up_open(s.p, UP_RD, &hold));
	CHECK(pthread_create(&ta, NULL, reader_a, &s) == 0);
	while (atomic_load(&s.opened) == 0)
		sched_yield();
	up_close(hold);
	CHECK(pthread_create(&tb, NULL, reader_b, &s) == 0);
	for (uint32_t i = 0; i < NREC; i++) {
		x.seq = i;
		x.pad = 0;
		for (size_t k = 0; k < sizeof(x.fill); k++)
			x.fill[k] = (unsigned char)(i * 13 + k);
		x.sum = rec_sum(&x);
		CHECK_EQ(up_write(w, &x, REC), REC);
	}
	up_close(w);
	CHECK(pthread_join(ta, NULL) == 0);
	CHECK(pthread_join(tb, NULL) == 0);
	CHECK_EQ(atomic_load(&s.bad), 0);
	for (uint32_t i = 0; i < NREC; i++)
		CHECK_EQ(atomic_load(&s.seen[i]), 1);
	/* B took part, so the bias moved. */
	CHECK(atomic_load(&s.b_taken) >= 10);
	free((void *)s.seen);
	up_pipe_release(s.p);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(120);
	RUN(lone_reader_is_biased);
	RUN(second_reader_waits_for_a_peek);
	RUN(owner_dead_inside_a_peek_is_passed);
	RUN(forged_bias_of_the_wrong_side_is_not_waited_for);
	RUN(writer_returning_pages_takes_the_bias_back);
	RUN(readers_share_records_while_the_bias_moves);
	return 0;
}
