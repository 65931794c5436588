/* SPDX-License-Identifier: MIT */
/*
 * test_zc_messages.c - the zero-copy calls for messages, one call each.
 *
 * up_commit_reserve(): the commit as up_commit() makes it, then the room
 * after it reserved while the last page has it, 0 where up_reserve() must
 * take over, and errors that are always the commit's. Also what its short
 * way must not skip: the wake of a reader that sleeps, and the lock handed
 * to a writer that joins while the stream goes on.
 *
 * up_consume_peek(): the consume, then the next peek; what it returns is
 * the peek's, after the consume, except the argument errors, which come
 * first and consume nothing.
 */
#include <sys/syscall.h>

#include "sem_common.h"
#include "lock.h"
#include "up_int.h"

/* Messages of @len bytes into a pipe of 4 KiB pages, one call each: every
 * reservation follows the last in its page until the page has no room, the
 * call then says 0 and up_reserve() takes a fresh page. */
static void messages_follow_each_other_in_the_page(void)
{
	static const size_t lens[] = { 16, 40, 100, 1000, 1024 };
	size_t li;

	for (li = 0; li < 5; li++) {
		const size_t len = lens[li];
		struct up_pipe *p = mk_pipe(16 * KiB, 4096);
		struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
		struct up_end *w = mk_end(p, UP_WR | UP_NONBLOCK);
		struct up_stats st;
		struct iovec iov[4];
		uint64_t off = 0, rd = 0;
		int cnt = 4, i, zeros = 0;
		ssize_t n;
		bool eof;

		CHECK_EQ(up_reserve(w, len, iov, &cnt), (ssize_t)len);
		for (i = 0; i < 400; i++) {
			uintptr_t at = (uintptr_t)iov[0].iov_base;

			CHECK_EQ(cnt, 1);
			CHECK_EQ(iov[0].iov_len, len);
			harness_fill(47, off, iov[0].iov_base, len);
			cnt = 4;
			n = up_commit_reserve(w, len, len, iov, &cnt);
			off += len;
			if (n > 0) {
				/* right after the message just published */
				CHECK_EQ(n, (ssize_t)len);
				CHECK_EQ((uintptr_t)iov[0].iov_base, at + len);
				continue;
			}
			CHECK_EQ(n, 0);
			/* only where the page had no room for the next */
			CHECK((at & 4095) + 2 * len > 4096);
			zeros++;
			rd += drain_pat(r, 47, rd, &eof);
			CHECK_EQ(rd, off);
			cnt = 4;
			CHECK_EQ(up_reserve(w, len, iov, &cnt), (ssize_t)len);
			CHECK_EQ((uintptr_t)iov[0].iov_base & 4095, 0);
		}
		CHECK(zeros >= 400 / (int)(4096 / len) - 1);
		/* the reservation left open is dropped by a commit of 0 */
		CHECK_OK(up_commit(w, 0));
		rd += drain_pat(r, 47, rd, &eof);
		CHECK_EQ(rd, off);
		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.bytes_written, off);
		CHECK_EQ(st.writes, 400);
		CHECK_OK(up_close(w));
		CHECK_EQ(drain_pat(r, 47, rd, &eof), 0);
		CHECK(eof);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

/* Every error is the commit's, with nothing new reserved; the arguments are
 * looked at before anything is committed. */
static void errors_are_the_commits(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec iov[4];
	uint64_t off = 0;
	int cnt = 4;
	bool eof;
	char c;

	/* nothing reserved: nothing to commit */
	CHECK_EQ(up_commit_reserve(w, 10, 10, iov, &cnt), -EINVAL);
	CHECK_EQ(up_commit_reserve(NULL, 0, 10, iov, &cnt), -EINVAL);
	CHECK_EQ(up_commit_reserve(r, 0, 10, iov, &cnt), -EBADF);

	CHECK_EQ(up_reserve(w, 50, iov, &cnt), 50);
	harness_fill(48, off, iov[0].iov_base, 50);
	/* more than reserved, or no room to say where: refused, and the
	 * reservation stays for a commit */
	CHECK_EQ(up_commit_reserve(w, 51, 10, iov, &cnt), -EINVAL);
	CHECK_EQ(up_commit_reserve(w, 50, 10, NULL, &cnt), -EINVAL);
	CHECK_EQ(up_commit_reserve(w, 50, 10, iov, NULL), -EINVAL);
	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	cnt = 4;
	CHECK_EQ(up_commit_reserve(w, 50, 30, iov, &cnt), 30);
	off += 50;
	CHECK_EQ(drain_pat(r, 48, 0, &eof), 50);
	/* 0 drops the reservation, as up_commit(0) does, and reserves anew */
	harness_fill(99, 0, iov[0].iov_base, 30);
	cnt = 4;
	CHECK_EQ(up_commit_reserve(w, 0, 30, iov, &cnt), 30);
	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	harness_fill(48, off, iov[0].iov_base, 30);
	/* a length of 0 reserves nothing: the commit is made, 0 said */
	cnt = 4;
	CHECK_EQ(up_commit_reserve(w, 30, 0, iov, &cnt), 0);
	off += 30;
	CHECK_EQ(drain_pat(r, 48, 50, &eof), 30);
	cnt = 4;
	CHECK_EQ(up_reserve(w, 0, iov, &cnt), -EINVAL);
	/* the reader gone: the commit says -EPIPE, nothing is reserved */
	cnt = 4;
	CHECK_EQ(up_reserve(w, 20, iov, &cnt), 20);
	CHECK_OK(up_close(r));
	cnt = 4;
	CHECK_EQ(up_commit_reserve(w, 20, 20, iov, &cnt), -EPIPE);
	CHECK_EQ(up_commit(w, 0), 0);
	CHECK_EQ(up_write(w, "x", 1), -EPIPE);
	CHECK_OK(up_close(w));
	up_pipe_release(p);
}

struct sleeper {
	struct up_end *r;
	_Atomic pid_t tid;
	char buf[64];
	ssize_t got;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;

	atomic_store(&s->tid, (pid_t)syscall(SYS_gettid));
	s->got = up_read(s->r, s->buf, sizeof(s->buf));
	return NULL;
}

/* A reader asleep for data is woken by the message the call publishes (a
 * wake issued, not the sleep's own slice running out), and the call still
 * reserves the next. */
static void a_sleeping_reader_wakes(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct sleeper s = { .r = mk_end(p, UP_RD) };
	struct up_end *w = mk_end(p, UP_WR);
	struct iovec iov[4];
	pthread_t th;
	int cnt = 4, round;

	CHECK_OK(up_set_timeout(s.r, 5000));
	CHECK_EQ(up_reserve(w, 20, iov, &cnt), 20);
	for (round = 0; round < 3; round++) {
		struct up_stats a, b;

		atomic_store(&s.tid, 0);
		CHECK_EQ(pthread_create(&th, NULL, sleeper_main, &s), 0);
		harness_wait_asleep(&s.tid);
		harness_fill(49, 20 * (uint64_t)round, iov[0].iov_base, 20);
		CHECK_OK(up_stats(p, &a));
		cnt = 4;
		CHECK_EQ(up_commit_reserve(w, 20, 20, iov, &cnt), 20);
		CHECK_OK(up_stats(p, &b));
		CHECK(b.wakes > a.wakes);
		CHECK_EQ(pthread_join(th, NULL), 0);
		CHECK_EQ(s.got, 20);
		CHECK_EQ(harness_verify(49, 20 * (uint64_t)round, s.buf, 20), (size_t)-1);
	}
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(s.r));
	up_pipe_release(p);
}

struct joiner {
	struct up_pipe *p;
	struct up_end *w;
	_Atomic pid_t tid;
	ssize_t res;
};

/* Opens a writer end of its own and writes once. */
static void *joiner_main(void *arg)
{
	struct joiner *j = arg;

	atomic_store(&j->tid, (pid_t)syscall(SYS_gettid));
	j->w = mk_end(j->p, UP_WR);
	j->res = up_write(j->w, "JOINED", 6);
	return NULL;
}

/*
 * The stream's short way keeps the writers' lock from one call to the next
 * (a reservation holds it anyway). A second writer that opens and wants
 * the lock marks it and sleeps: the stream's next call must see the mark, publish,
 * and let the lock go (0: nothing reserved) instead of keeping it until its
 * last commit. Nothing is lost or reordered.
 */
static void a_joining_writer_gets_the_lock(void)
{
	static const char want[] = "msg-msg-msg-msg-msg-msg-msg-msg-msg-msg-msg-msg-"
				   "JOINEDmsg-msg-";
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct joiner j = { .p = p };
	char buf[sizeof(want)];
	struct iovec iov[4];
	size_t got = 0;
	pthread_t th;
	int cnt = 4, i;
	ssize_t n;

	CHECK_EQ(up_reserve(w, 8, iov, &cnt), 8);
	for (i = 0; i < 5; i++) {
		memcpy(iov[0].iov_base, "msg-msg-", 8);
		cnt = 4;
		CHECK_EQ(up_commit_reserve(w, 8, 8, iov, &cnt), 8);
	}
	memcpy(iov[0].iov_base, "msg-msg-", 8);
	CHECK_EQ(pthread_create(&th, NULL, joiner_main, &j), 0);
	harness_wait_asleep(&j.tid);
	cnt = 4;
	CHECK_EQ(up_commit_reserve(w, 8, 8, iov, &cnt), 0);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(j.res, 6);
	cnt = 4;
	CHECK_EQ(up_reserve(w, 8, iov, &cnt), 8);
	memcpy(iov[0].iov_base, "msg-msg-", 8);
	CHECK_OK(up_commit(w, 8));
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(j.w));
	while ((n = up_read(r, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	CHECK_EQ(n, 0);
	CHECK_EQ(got, sizeof(want) - 1);
	CHECK(memcmp(buf, want, got) == 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/* Messages written one by one, read in place one call each: each peek
 * shows the next message first, every byte arrives once and in order, and
 * the call after the last message consumes it and says end of stream. */
static void messages_read_one_call_each(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	const size_t len = 40;
	struct iovec iov[4];
	uint64_t off = 0, calls = 0;
	struct up_stats st;
	int cnt = 4, i;
	ssize_t n;

	for (i = 0; i < 300; i++)
		write_pat(w, 50, (uint64_t)i * len, len);
	CHECK_OK(up_close(w));
	n = up_peek(r, iov, &cnt);
	while (n > 0) {
		CHECK(n >= (ssize_t)len);
		CHECK(iov[0].iov_len >= len);
		CHECK_EQ(harness_verify(50, off, iov[0].iov_base, len), (size_t)-1);
		off += len;
		cnt = 4;
		n = up_consume_peek(r, len, iov, &cnt);
		calls++;
	}
	CHECK_EQ(n, 0);
	CHECK_EQ(off, 300 * len);
	CHECK_EQ(calls, 300);
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.bytes_read, off);
	/* nothing left after end of stream */
	cnt = 4;
	CHECK_EQ(up_peek(r, iov, &cnt), 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/* The argument errors come first and consume nothing; -EAGAIN and the rest
 * are the peek's, after the consume. */
static void consume_peek_errors(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec iov[4];
	int cnt = 4, zero = 0;
	bool eof;

	write_pat(w, 51, 0, 100);
	CHECK_EQ(up_consume_peek(w, 10, iov, &cnt), -EBADF);
	CHECK_EQ(up_peek(r, iov, &cnt), 100);
	CHECK_EQ(up_consume_peek(r, 10, NULL, &cnt), -EINVAL);
	CHECK_EQ(up_consume_peek(r, 10, iov, NULL), -EINVAL);
	CHECK_EQ(up_consume_peek(r, 10, iov, &zero), -EINVAL);
	cnt = 4;
	CHECK_EQ(up_consume_peek(r, 101, iov, &cnt), -EINVAL);
	/* none of those consumed a byte */
	cnt = 4;
	CHECK_EQ(up_peek(r, iov, &cnt), 100);
	CHECK_EQ(harness_verify(51, 0, iov[0].iov_base, 100), (size_t)-1);
	/* all of it consumed; nothing more yet */
	cnt = 4;
	CHECK_EQ(up_consume_peek(r, 100, iov, &cnt), -EAGAIN);
	write_pat(w, 51, 100, 30);
	CHECK_EQ(drain_pat(r, 51, 100, &eof), 30);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/* A writer asleep on a full pipe is woken by the pages the consume frees,
 * and the peek in the same call shows what is left. */
static void consume_wakes_a_full_writer(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
	struct harness_writer f = { .w = mk_end(p, UP_WR | UP_NONBLOCK), .buf = "more" };
	struct iovec iov[8];
	size_t in;
	pthread_t th;
	int cnt = 8;
	ssize_t n;

	in = fill_nb(f.w, 52, 0);
	CHECK(in > 0);
	CHECK_OK(up_close(f.w));
	f.w = mk_end(p, UP_WR);
	CHECK_OK(up_set_timeout(f.w, 5000));
	CHECK_EQ(pthread_create(&th, NULL, harness_writer_main, &f), 0);
	harness_wait_asleep(&f.tid);
	n = up_peek(r, iov, &cnt);
	CHECK(n >= 8 * (ssize_t)KiB);
	cnt = 8;
	n = up_consume_peek(r, 8 * KiB, iov, &cnt);
	CHECK_EQ(n, (ssize_t)(in - 8 * KiB));
	CHECK_EQ(harness_verify(52, 8 * KiB, iov[0].iov_base, iov[0].iov_len), (size_t)-1);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(f.res, 4);
	CHECK_OK(up_close(f.w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/*
 * up_consume_peek() stays inside the readers' lock from one message to the
 * next (its short way, short.h), so it must leave the way the consume and
 * the peek did apart wherever that matters: a reader asleep on the line is
 * woken for the data left behind, and another reader that wants the lock
 * gets it after the call in which the owner sees its mark, and a claim
 * stored into the owner's held word is rewritten by its next call. Data
 * shown stays right throughout.
 */
static void consume_peek_lets_go(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR), *r2;
	_Atomic uint32_t *nwait = &r->p->ln->rd_wait.nwait, *pending = &r->p->ln->rd_wait.pending;
	const size_t len = 40;
	unsigned char buf[40];
	struct iovec iov[4];
	uint64_t off = 0;
	int cnt = 4, i;
	ssize_t n;

	for (i = 0; i < 60; i++)
		write_pat(w, 53, (uint64_t)i * len, len);
	n = up_peek(r, iov, &cnt);
	for (i = 0; i < 3; i++) {
		CHECK(n >= (ssize_t)len);
		CHECK_EQ(harness_verify(53, off, iov[0].iov_base, len), (size_t)-1);
		off += len;
		cnt = 4;
		n = up_consume_peek(r, len, iov, &cnt);
	}
	CHECK(r->peek_locked);
	if (!r->biased)
		printf("# no bias here (membarrier refused?): the short way is not taken, "
		       "the old one is checked\n");
	/* A sleeper on the line, by hand (none really asleep): the consume
	 * wakes it for what is left. */
	atomic_store(nwait, 1);
	atomic_store(pending, 0);
	CHECK_EQ(harness_verify(53, off, iov[0].iov_base, len), (size_t)-1);
	off += len;
	cnt = 4;
	n = up_consume_peek(r, len, iov, &cnt);
	CHECK_EQ(atomic_load(pending), 1u);
	atomic_store(nwait, 0);
	atomic_store(pending, 0);
	CHECK(n >= (ssize_t)len);
	CHECK_EQ(harness_verify(53, off, iov[0].iov_base, len), (size_t)-1);
	/* A claim a peer stored into our held word lasts until our next call,
	 * whichever way it takes the lock (uringpipe(7)): the call rewrites it. */
	atomic_store(&r->p->ends[r->idx].held, UP_HELD_RLOCK | UP_HELD_CLAIM);
	off += len;
	cnt = 4;
	n = up_consume_peek(r, len, iov, &cnt);
	CHECK_EQ(atomic_load(&r->p->ends[r->idx].held), r->held);
	CHECK(n >= (ssize_t)len);
	CHECK_EQ(harness_verify(53, off, iov[0].iov_base, len), (size_t)-1);
	/* Another reader finds the lock held (between peek and consume) and
	 * leaves its mark; the owner's next call lets the bias go. */
	r2 = mk_end(p, UP_RD | UP_NONBLOCK);
	CHECK_EQ(up_read(r2, buf, len), -EAGAIN);
	off += len;
	cnt = 4;
	n = up_consume_peek(r, len, iov, &cnt);
	CHECK(!r->biased);
	CHECK(n >= (ssize_t)len);
	CHECK_EQ(harness_verify(53, off, iov[0].iov_base, len), (size_t)-1);
	/* Consumed without a peek: the lock is free, and the other reader
	 * reads on where this one stopped. */
	off += len;
	CHECK_OK(up_consume(r, len));
	CHECK_EQ(up_read(r2, buf, len), (ssize_t)len);
	CHECK_EQ(harness_verify(53, off, buf, len), (size_t)-1);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r2));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/* The peek after a consume shows all that is readable, not just what the
 * reader saw of its slot before: 100 bytes peeked and 10 consumed, 100
 * more written to the same page, 60 consumed; the 30 left of what was
 * seen are not the rest. */
static void consume_peek_shows_what_came(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec iov[4];
	int cnt = 4;
	ssize_t n;

	write_pat(w, 54, 0, 100);
	CHECK_EQ(up_peek(r, iov, &cnt), (ssize_t)100);
	cnt = 4;
	CHECK_EQ(up_consume_peek(r, 10, iov, &cnt), (ssize_t)90);
	write_pat(w, 54, 100, 100);
	cnt = 4;
	n = up_consume_peek(r, 60, iov, &cnt);
	CHECK_EQ(n, (ssize_t)130);
	CHECK_EQ(harness_verify(54, 70, iov[0].iov_base, iov[0].iov_len), (size_t)-1);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);
	RUN(messages_follow_each_other_in_the_page);
	RUN(errors_are_the_commits);
	RUN(a_sleeping_reader_wakes);
	RUN(a_joining_writer_gets_the_lock);
	RUN(messages_read_one_call_each);
	RUN(consume_peek_errors);
	RUN(consume_wakes_a_full_writer);
	RUN(consume_peek_lets_go);
	RUN(consume_peek_shows_what_came);
	return 0;
}
