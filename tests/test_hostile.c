/* SPDX-License-Identifier: MIT */
/*
 * test_hostile.c - a hostile peer scribbling on the shared segment while an
 * honest writer and reader stream through it.
 *
 * Three processes per round:
 *   honest  - attaches, runs a writer thread and a reader thread on
 *             UP_NONBLOCK ends (so no call may legitimately block) until
 *             its deadline, then closes both ends and exits 0;
 *   hostile - attaches and, for the round's duration, writes random values
 *             into the words the protocol trusts least: head, the readers'
 *             position, slot page/len, pool entries and counters, lock
 *             words, reader/writer counts, wait lines, endpoint entries;
 *   parent  - waits for both with a deadline.
 * The honest process must exit normally (any mix of data, -EPROTO, -EPIPE,
 * -EAGAIN and end of stream is fine): dying by a signal is a crash, missing
 * the deadline is a hang (an endless loop or a call that never returns).
 *
 * Then the hostile process has exited, and nothing it stored may wedge the
 * pipe (man/uringpipe.7): once the parent has reaped it, the honest process
 * stops streaming and every end it has - the two non-blocking ones and a
 * blocking writer and reader that stayed idle through the attack - makes
 * one call that has something to do: drain, write, read. Each must return
 * within BOUND_MS (data, end of stream, -EPIPE, -EPROTO); a non-blocking
 * call still at -EAGAIN after BOUND_MS is a wedge, a blocking one that does
 * not return a hang. --no-counts leaves out the stores into the reader and
 * writer counts and the entries' state and pid (core/peer.c's part).
 * Under ASan (CI), a read or write outside the segment is reported too.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define BOUND_MS 2000u

static _Atomic bool stop_streaming;
static bool no_counts;

struct honest_arg {
	struct up_end *e;
	uint64_t deadline;
	uint64_t bytes;
	int last_err;
};

/* Messages of @len bytes in place, one call each (up_commit_reserve()),
 * every span handed out written over: one outside the segment would fault.
 * Returns the last call's result. */
static ssize_t zc_messages(struct up_end *w, size_t len)
{
	struct iovec iov[4];
	int cnt = 4, i, k;
	ssize_t n = up_reserve(w, len, iov, &cnt);

	for (k = 0; k < 8 && n > 0; k++) {
		for (i = 0; i < cnt; i++)
			memset(iov[i].iov_base, 0x6b, iov[i].iov_len);
		cnt = 4;
		n = up_commit_reserve(w, (size_t)n, len, iov, &cnt);
	}
	if (n > 0)
		n = up_commit(w, 0);
	return n;
}

static void *honest_writer(void *arg)
{
	struct honest_arg *a = arg;
	static char buf[8192];

	memset(buf, 0x5a, sizeof(buf));
	for (unsigned it = 0; now_ms() < a->deadline && !atomic_load(&stop_streaming); it++) {
		size_t len = 1 + (size_t)(now_ms() % sizeof(buf));
		ssize_t n;

		if (it % 2) {
			n = zc_messages(a->e, len % 512 + 1);
			if (n == -EPROTO || n == -EPIPE) {
				a->last_err = (int)n;
				break;
			}
			continue;
		}
		n = up_write(a->e, buf, len);

		if (n > 0)
			a->bytes += (uint64_t)n;
		else if (n != -EAGAIN)
			a->last_err = (int)n;
		if (n == -EPROTO || n == -EPIPE)
			break;
	}
	return NULL;
}

/* Up to 8 messages of up to 64 bytes read in place, one call each
 * (up_consume_peek()), every span shown touched: one outside the segment
 * would fault. Returns the bytes consumed, or the last call's error. */
static ssize_t zc_read_messages(struct up_end *r, struct iovec *iov, int *cnt)
{
	ssize_t n = up_peek(r, iov, cnt), got = 0;
	int k, i;

	for (k = 0; k < 8 && n > 0; k++) {
		volatile char sink = 0;
		size_t take = iov[0].iov_len < 64 ? iov[0].iov_len : 64;

		for (i = 0; i < *cnt; i++)
			sink ^= ((char *)iov[i].iov_base)[iov[i].iov_len - 1];
		(void)sink;
		got += (ssize_t)take;
		*cnt = 4;
		n = up_consume_peek(r, take, iov, cnt);
	}
	if (n > 0 && up_consume(r, 0) < 0)
		n = -EPROTO;
	return n < 0 && n != -EAGAIN ? n : got;
}

static void *honest_reader(void *arg)
{
	struct honest_arg *a = arg;
	static char buf[16384];

	while (now_ms() < a->deadline && !atomic_load(&stop_streaming)) {
		struct iovec iov[4];
		int cnt = 4;
		ssize_t n;

		if (a->bytes % 3 == 0) {
			n = up_peek(a->e, iov, &cnt);
			if (n > 0) {
				/* Touch every span: a bad one would fault. */
				volatile char sink = 0;
				int i;

				for (i = 0; i < cnt; i++)
					sink ^= ((char *)iov[i].iov_base)[iov[i].iov_len - 1];
				(void)sink;
				n = up_consume(a->e, (size_t)n) == 0 ? n : -EPROTO;
			}
		} else if (a->bytes % 3 == 1) {
			n = zc_read_messages(a->e, iov, &cnt);
		} else {
			n = up_read(a->e, buf, sizeof(buf));
		}
		if (n > 0)
			a->bytes += (uint64_t)n;
		else if (n != -EAGAIN)
			a->last_err = (int)n;
		if (n == 0 || n == -EPROTO)
			break;
	}
	return NULL;
}

/* After the attack: one call of @e that must come back within BOUND_MS
 * (a non-blocking one is retried while it says -EAGAIN). @what names it in
 * the output, so a hang says where. Exits 20 on a wedge, 21 on a return
 * that is not allowed. */
static ssize_t after_call(const char *what, struct up_end *e, bool wr, char *buf, size_t n)
{
	uint64_t t0 = now_ms();
	ssize_t r;

	printf("#   after: %s\n", what);
	fflush(stdout);
	for (;;) {
		r = wr ? up_write(e, buf, n) : up_read(e, buf, n);
		if (r != -EAGAIN)
			break;
		if (now_ms() - t0 > BOUND_MS) {
			struct up_pipe *p = e->p;
			uint64_t pos = atomic_load(&p->ln->cons.pos);

			printf("#   WEDGE: %s still -EAGAIN after %u ms\n", what, BOUND_MS);
			/* What it saw, to tell which word did it. */
			printf("#   rlock %#x wlock %#x bias %#x head %u tail %u off %u readers %#x "
			       "writers %#x get %u put %u me %#x\n",
			       atomic_load(&p->ln->rlock.word), atomic_load(&p->ln->wlock.word),
			       atomic_load(&p->ln->wlock.bias), atomic_load(&p->ln->prod.head),
			       up__pos_tail(pos), up__pos_off(pos), atomic_load(&p->ln->state.readers),
			       atomic_load(&p->ln->state.writers), atomic_load(&p->ln->pget.get),
			       atomic_load(&p->ln->pput.put), e->lock_id);
			for (unsigned i = 0; i < 6; i++)
				printf("#   end %u: state %#x pid %d busy %u armed %u held %u\n", i,
				       atomic_load(&p->ends[i].state), atomic_load(&p->ends[i].pid),
				       atomic_load(&p->ends[i].busy), atomic_load(&p->ends[i].armed),
				       atomic_load(&p->ends[i].held));
			fflush(stdout);
			_exit(20);
		}
		sched_yield();
	}
	if (wr ? !(r > 0 || r == -EPIPE || r == -EPROTO) : !(r >= 0 || r == -EPROTO)) {
		printf("#   BAD: %s returned %zd\n", what, r);
		fflush(stdout);
		_exit(21);
	}
	return r;
}

static int honest_main(int fd, int go, unsigned ms)
{
	struct honest_arg w = { 0 }, r = { 0 };
	struct up_end *wb, *rb;
	struct up_pipe *p;
	pthread_t tw, tr;
	static char buf[16384];
	bool more = false;
	ssize_t n;
	char c;
	int rc;

	rc = up_pipe_attach(fd, &p);
	if (rc < 0)
		return rc == -EPROTO ? 0 : 10;
	if (up_open(p, UP_WR | UP_NONBLOCK, &w.e) < 0 ||
	    up_open(p, UP_RD | UP_NONBLOCK, &r.e) < 0 || up_open(p, UP_WR, &wb) < 0 ||
	    up_open(p, UP_RD, &rb) < 0)
		return 0; /* the table may already be garbage: fine */
	w.deadline = r.deadline = now_ms() + ms;
	pthread_create(&tw, NULL, honest_writer, &w);
	pthread_create(&tr, NULL, honest_reader, &r);
	/* The parent says the hostile process is gone. */
	if (read(go, &c, 1) != 1)
		return 11;
	atomic_store(&stop_streaming, true);
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	/* Drain what the stream left (a non-blocking reader stops at
	 * -EAGAIN: then the pipe is empty and a write has room). */
	do
		n = up_read(r.e, buf, sizeof(buf));
	while (n > 0 && now_ms() < w.deadline + 10000);
	memset(buf, 'h', 100);
	if (after_call("non-blocking write", w.e, true, buf, 100) > 0)
		more = true;
	if (after_call("blocking write", wb, true, buf, 100) > 0)
		more = true;
	/* Reads only with something to return: data, or -EPROTO. */
	if (more || atomic_load(&p->ln->state.broken)) {
		(void)after_call("non-blocking read", r.e, false, buf, 10);
		(void)after_call("blocking read", rb, false, buf, sizeof(buf));
	}
	printf("#   after: close\n");
	fflush(stdout);
	up_close(wb);
	up_close(rb);
	up_close(w.e);
	up_close(r.e);
	up_pipe_release(p);
	printf("#   honest: wrote %llu read %llu (last errors %d/%d)\n",
	       (unsigned long long)w.bytes, (unsigned long long)r.bytes, w.last_err,
	       r.last_err);
	return 0;
}

static int hostile_main(int fd, unsigned ms, uint64_t seed)
{
	struct up_pipe *p;
	uint64_t end = now_ms() + ms, s = seed | 1;
	unsigned long scribbles = 0;

	if (up_pipe_attach(fd, &p) < 0)
		return 0;
	while (now_ms() < end) {
		uint64_t x = rng_next(&s);
		uint32_t v;

		/* Mostly small numbers near the truth, sometimes anything. */
		switch (x % 4) {
		case 0: v = (uint32_t)(x >> 32); break;
		case 1: v = (uint32_t)((x >> 32) % (2 * p->g.slot_count)); break;
		case 2: v = (uint32_t)((x >> 32) % 8); break;
		default: v = 0; break;
		}
		/* --no-counts: not the counts, states and pids (peer.c's). */
		switch (no_counts && ((x >> 8) % 14 == 8 || (x >> 8) % 14 == 10 ||
				      (x >> 8) % 14 == 11) ? 7 : (x >> 8) % 14) {
		case 0: atomic_store(&p->ln->prod.head, atomic_load(&p->ln->prod.head) + (v % 3)); break;
		case 1: atomic_store(&p->ln->cons.pos, up__pos(v, (uint32_t)(x >> 16) % 9000)); break;
		case 2: atomic_store(&p->slots[(x >> 20) & p->g.slot_mask].page, v); break;
		case 3: atomic_store(&p->slots[(x >> 20) & p->g.slot_mask].len, v); break;
		case 4: atomic_store(&p->pool[(x >> 20) & p->g.slot_mask], v); break;
		case 5: atomic_store(&p->ln->pget.get, atomic_load(&p->ln->pget.get) + v % 5); break;
		case 6: atomic_store(&p->ln->pput.put, v); break;
		case 7: atomic_store((x & 1) ? &p->ln->wlock.word : &p->ln->rlock.word, v); break;
		case 8: atomic_store((x & 1) ? &p->ln->state.readers : &p->ln->state.writers, v % 4); break;
		case 9:
			atomic_store((x & 2) ? &p->ln->rd_wait.npoll : &p->ln->rd_wait.nwait, v);
			atomic_fetch_add(&p->ln->rd_wait.seq, 1);
			break;
		case 10: atomic_store(&p->ends[(x >> 20) % p->g.max_ends].state, v); break;
		/* The writers' bias: a forged owner, or a revocation mark. */
		case 12:
			atomic_store(&p->ln->wlock.bias, (x & 1) ? v : v | UP_BIAS_REVOKE);
			if (x & 2)
				atomic_store(&p->ln->wlock.fenced, v);
			if (x & 4)
				atomic_store(&p->ln->wlock.marked_ns, x);
			break;
		case 13:
			atomic_store((x & 1) ? &p->ends[(x >> 20) % p->g.max_ends].busy
					     : &p->ends[(x >> 20) % p->g.max_ends].armed,
				     v % 4);
			break;
		default: atomic_store(&p->ends[(x >> 20) % p->g.max_ends].pid, (int32_t)v); break;
		}
		scribbles++;
		/* Pace the attack (load shaping, not synchronisation): a
		 * scribble every few tens of microseconds lets the honest pair
		 * stream between corruptions instead of breaking at once. */
		{
			struct timespec d = { 0, (long)(10000 + (x >> 40) % 90000) };

			nanosleep(&d, NULL);
		}
	}
	printf("#   hostile: %lu scribbles\n", scribbles);
	up_pipe_release(p);
	return 0;
}

/* Wait for @pid until @deadline_ms; returns its status or -1 on timeout. */
static int wait_deadline(pid_t pid, uint64_t deadline_ms)
{
	int status;

	while (now_ms() < deadline_ms) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		CHECK(r == 0);
		usleep(2000); /* polling a child with a deadline */
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static int round_once(uint64_t seed, unsigned ms)
{
	struct up_config cfg;
	struct up_pipe *p;
	pid_t honest, hostile;
	int st_h, st_x, go[2];

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK(pipe(go) == 0);
	fflush(stdout);
	/* No end of ours is open at either fork: the children inherit none. */
	honest = fork();
	CHECK(honest >= 0);
	if (honest == 0) {
		int rc_;

		close(go[1]);
		rc_ = honest_main(up_pipe_fd(p), go[0], ms);
		fflush(stdout);
		_exit(rc_);
	}
	close(go[0]);
	hostile = fork();
	CHECK(hostile >= 0);
	if (hostile == 0)
		{ int rc_ = hostile_main(up_pipe_fd(p), ms, seed); fflush(stdout); _exit(rc_); }
	st_x = wait_deadline(hostile, now_ms() + ms + 10000);
	/* Gone: from now on the honest ends must all come back (or the
	 * honest process already gave up on a broken table). */
	CHECK(write(go[1], "g", 1) == 1 || errno == EPIPE);
	close(go[1]);
	/* Its five calls and the close, BOUND_MS each, on a loaded machine. */
	st_h = wait_deadline(honest, now_ms() + 6 * BOUND_MS + 3000);
	up_pipe_release(p);
	if (st_x == -1 || !WIFEXITED(st_x)) {
		fprintf(stderr, "hostile process did not finish cleanly (seed %llu)\n",
			(unsigned long long)seed);
		return 1;
	}
	if (st_h == -1) {
		fprintf(stderr, "HANG: honest process missed its deadline (seed %llu)\n",
			(unsigned long long)seed);
		return 1;
	}
	if (WIFSIGNALED(st_h)) {
		fprintf(stderr, "CRASH: honest process died of signal %d (seed %llu)\n",
			WTERMSIG(st_h), (unsigned long long)seed);
		return 1;
	}
	if (WEXITSTATUS(st_h) == 20 || WEXITSTATUS(st_h) == 21) {
		fprintf(stderr, "%s after the hostile process exited (seed %llu)\n",
			WEXITSTATUS(st_h) == 20 ? "WEDGE" : "BAD RETURN", (unsigned long long)seed);
		return 1;
	}
	if (WEXITSTATUS(st_h) != 0) {
		fprintf(stderr, "honest process exited %d (seed %llu)\n", WEXITSTATUS(st_h),
			(unsigned long long)seed);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL);
	unsigned rounds = 20, ms = 150, i;
	int fails = 0;

	for (i = 1; (int)i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && (int)i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--rounds") && (int)i + 1 < argc)
			rounds = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ms") && (int)i + 1 < argc)
			ms = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-counts"))
			no_counts = true;
	}
	printf("seed=%llu\n", (unsigned long long)seed);
	signal(SIGPIPE, SIG_IGN); /* the go byte to an honest process that gave up */
	harness_watchdog(rounds * (ms / 1000 + 25) + 30);
	for (i = 0; i < rounds; i++) {
		printf("# round %u seed %llu\n", i, (unsigned long long)(seed + i));
		fails += round_once(seed + i, ms);
	}
	if (fails) {
		fprintf(stderr, "%d of %u rounds failed; replay one: --seed S --rounds 1\n",
			fails, rounds);
		return 1;
	}
	printf("ok hostile_peer (%u rounds)\n", rounds);
	return 0;
}
