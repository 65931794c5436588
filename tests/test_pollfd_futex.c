/* SPDX-License-Identifier: MIT */
/*
 * test_pollfd_futex.c - up_pollfd()/up_poll_arm() without io_uring: the
 * futex_waitv(2) helpers of core/pollfd_futex.c, with epoll(7) and poll(2);
 * peers killed while the other end waits in epoll; hundreds of armed ends;
 * arm/wake torture; fork; a seccomp profile that refuses io_uring (as
 * Docker's default does) or futex_waitv. Registered with UP_FORCE_FUTEX=1
 * and without; cases about the helpers themselves skip on io_uring.
 *
 * As in test_poll.c, every case arms first and only then lets the other side
 * act, so a readiness that never comes fails by a timeout instead of passing.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "pollfd_futex.h"
#include "ring.h"
#include "uringpipe.h"

#define POLL_MS 5000

#if defined(__SANITIZE_THREAD__)
/* A forked child here makes the poll helper thread of its own (futex
 * backend), which TSan refuses after a multi-threaded fork unless told:
 * the child's own threads are what it then checks. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

static bool on_futex(struct up_pipe *p)
{
	struct up_stats st;

	CHECK_OK(up_stats(p, &st));
	return strcmp(st.backend, "futex") == 0;
}

/* Cases about the helpers run only on the futex backend (main()). */
static void need_futex(struct up_pipe *p)
{
	CHECK(on_futex(p));
}

static int pollfd_or_skip(struct up_end *e)
{
	int fd = up_pollfd(e);

	if (fd == -EOPNOTSUPP)
		SKIP("up_pollfd: neither io_uring nor futex_waitv(2) here");
	CHECK_OK(fd);
	return fd;
}

static int wait_fd(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int r;

	do
		r = poll(&pfd, 1, ms);
	while (r < 0 && errno == EINTR);
	CHECK(r >= 0);
	return r > 0 && (pfd.revents & POLLIN);
}

/* epoll_wait for one event, retrying EINTR: its data, or -1 on timeout. */
static int64_t ep_wait(int ep, int ms)
{
	struct epoll_event ev;
	int r;

	do
		r = epoll_wait(ep, &ev, 1, ms);
	while (r < 0 && errno == EINTR);
	CHECK(r >= 0);
	return r == 0 ? -1 : (int64_t)ev.data.u64;
}

static void ep_add(int ep, int fd, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = data };

	CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
}

static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

struct streamer {
	struct up_end *w;
	int n;
	_Atomic int go;
	pthread_t t;
};

/* Writes n 8-byte records, each once the reader asked for it (go). */
static void *streamer_main(void *arg)
{
	struct streamer *s = arg;

	for (int i = 0; i < s->n; i++) {
		uint64_t v = (uint64_t)i;

		while (atomic_load(&s->go) <= i)
			sched_yield();
		CHECK_EQ(up_write(s->w, &v, sizeof(v)), (ssize_t)sizeof(v));
	}
	return NULL;
}

/* One epoll set, a reader of one pipe and a full writer of another: each
 * wakes through its pollfd, many times over (arming again after a wake).
 * The reader opts out of the early wake (UP_NO_EARLY): its messages come
 * at a steady pace, and the fd must turn readable only for them here. */
static void epoll_reader_and_writer(void)
{
	struct up_config cfg;
	struct up_pipe *pa, *pb;
	struct up_end *ra, *wa, *rb, *wb;
	struct streamer s = { 0 };
	static char big[1 << 16];
	int ep, fa, fb, got = 0;
	bool wrote = false;
	ssize_t n;

	CHECK_OK(up_pipe_create(NULL, &pa));
	CHECK_OK(up_open(pa, UP_RD | UP_NONBLOCK | UP_NO_EARLY, &ra));
	CHECK_OK(up_open(pa, UP_WR, &wa));
	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &pb));
	CHECK_OK(up_open(pb, UP_RD, &rb));
	CHECK_OK(up_open(pb, UP_WR | UP_NONBLOCK, &wb));
	fa = pollfd_or_skip(ra);
	fb = pollfd_or_skip(wb);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_SYS(ep);
	ep_add(ep, fa, 1);
	ep_add(ep, fb, 2);
	while ((n = up_write(wb, big, sizeof(big))) > 0)
		;
	CHECK_EQ(n, -EAGAIN);
	CHECK_EQ(up_poll_arm(wb), 0);
	s.w = wa;
	s.n = 200;
	CHECK_EQ(pthread_create(&s.t, NULL, streamer_main, &s), 0);
	while (got < s.n) {
		uint64_t v;

		n = up_read(ra, &v, sizeof(v));
		if (n == (ssize_t)sizeof(v)) {
			CHECK_EQ(v, (uint64_t)got);
			got++;
			continue;
		}
		CHECK_EQ(n, -EAGAIN);
		CHECK_EQ(up_poll_arm(ra), 0);
		CHECK_EQ(wait_fd(fa, 0), 0); /* armed, nothing asked for yet */
		atomic_store(&s.go, got + 1);
		/* The writer's fd may come first once its room is made. */
		for (;;) {
			int64_t d = ep_wait(ep, POLL_MS);

			CHECK(d == 1 || d == 2);
			if (d == 1)
				break;
			CHECK(!wrote);
			/* A blind end's tick (its reader is a thread of ours) may
			 * come before the room: arm again then. */
			n = up_write(wb, "x", 1);
			if (n == -EAGAIN) {
				CHECK(up_poll_arm(wb) >= 0);
				continue;
			}
			CHECK_EQ(n, 1);
			wrote = true;
		}
		if (got == 10 && !wrote) {
			/* Make room for the armed writer: a wake on the other
			 * pipe's writers' line. */
			while (up_read(rb, big, sizeof(big)) == (ssize_t)sizeof(big) &&
			       up__pool_free(pb) < pb->g.page_count)
				;
		}
	}
	CHECK_EQ(pthread_join(s.t, NULL), 0);
	while (!wrote) {
		CHECK_EQ(ep_wait(ep, POLL_MS), 2);
		n = up_write(wb, "x", 1);
		if (n == -EAGAIN) {
			CHECK(up_poll_arm(wb) >= 0);
			continue;
		}
		CHECK_EQ(n, 1);
		wrote = true;
	}
	close(ep);
	up_close(wa);
	up_close(ra);
	up_close(wb);
	up_close(rb);
	up_pipe_release(pa);
	up_pipe_release(pb);
}

/* A child process that holds an end of @role on @p, says so on @rdy, and
 * waits to be killed. */
static pid_t peer_child(struct up_pipe *p, int role, struct up_end **inh, int ninh, int rdy)
{
	pid_t pid = harness_fork(30);

	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *e;

		harness_close_inherited(inh, ninh);
		q = harness_attach(p);
		CHECK_OK(up_open(q, role, &e));
		harness_signal_ready(rdy);
		for (;;)
			pause();
	}
	return pid;
}

/* A writer in another process, idle: a pidfd covers it, so a reader of
 * @p is not blind and its fd never ticks (tests that watch the helper
 * queued on a word need that). Start it before opening ends of @p. */
struct cover {
	pid_t pid;
	int rdy[2];
};

static void cover_start(struct cover *c, struct up_pipe *p)
{
	CHECK_SYS(pipe(c->rdy));
	c->pid = peer_child(p, UP_WR, NULL, 0, c->rdy[1]);
	harness_wait_ready(c->rdy[0]);
}

static void cover_stop(struct cover *c)
{
	CHECK_SYS(kill(c->pid, SIGKILL));
	CHECK_EQ(waitpid(c->pid, NULL, 0), c->pid);
	close(c->rdy[0]);
	close(c->rdy[1]);
}

/* SIGKILL a peer while the survivor waits in epoll: readable within 100 ms
 * and the call that follows returns 0 (a reader) or -EPIPE (a writer). */
static void killed_peer_in_epoll(int role)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *e;
	static char big[1 << 16];
	int ep, fd, rdy[2];
	uint64_t t0, t1;
	pid_t child;
	ssize_t n;

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_SYS(pipe(rdy));
	child = peer_child(p, role == UP_RD ? UP_WR : UP_RD, NULL, 0, rdy[1]);
	harness_wait_ready(rdy[0]);
	CHECK_OK(up_open(p, role | UP_NONBLOCK, &e));
	fd = pollfd_or_skip(e);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_SYS(ep);
	ep_add(ep, fd, 7);
	if (role == UP_WR) {
		while (up_write(e, big, sizeof(big)) > 0)
			;
		n = up_write(e, big, 1);
	} else {
		n = up_read(e, big, sizeof(big));
	}
	CHECK_EQ(n, -EAGAIN);
	CHECK_EQ(up_poll_arm(e), 0);
	CHECK_EQ(ep_wait(ep, 0), -1);
	t0 = harness_now_ns();
	CHECK_SYS(kill(child, SIGKILL));
	CHECK_EQ(ep_wait(ep, POLL_MS), 7);
	t1 = harness_now_ns();
	n = role == UP_WR ? up_write(e, big, 1) : up_read(e, big, sizeof(big));
	CHECK_EQ(n, role == UP_WR ? -EPIPE : 0);
	/* Disarmed: the dead peer's pidfd no longer makes the fd readable. */
	CHECK_EQ(ep_wait(ep, 0), -1);
	printf("# %s: readable %.1f ms after the SIGKILL of its peer (%s)\n",
	       role == UP_WR ? "writer" : "reader", (double)(t1 - t0) / 1e6,
	       on_futex(p) ? "futex" : "io_uring");
	CHECK(t1 - t0 < 100000000ull);
	CHECK_EQ(waitpid(child, NULL, 0), child);
	close(ep);
	close(rdy[0]);
	close(rdy[1]);
	up_close(e);
	up_pipe_release(p);
}

static void killed_writer_in_epoll(void)
{
	killed_peer_in_epoll(UP_RD);
}

static void killed_reader_in_epoll(void)
{
	killed_peer_in_epoll(UP_WR);
}

/* A writer process that came after the reader armed (so no pidfd of the
 * arm covers it) and was killed: the blind end's ticks make the reader's fd
 * readable, and the read that follows finds end of stream. */
static void late_writer_killed(void)
{
	struct up_pipe *p;
	struct up_end *r;
	char buf[16];
	int fd, rdy[2];
	uint64_t t0, t1;
	pid_t child;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	fd = pollfd_or_skip(r);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_SYS(pipe(rdy));
	child = peer_child(p, UP_WR, &r, 1, rdy[1]);
	harness_wait_ready(rdy[0]);
	t0 = harness_now_ns();
	CHECK_SYS(kill(child, SIGKILL));
	CHECK_EQ(waitpid(child, NULL, 0), child);
	/* Ticks until the read sees the death: each one a disarm that looks
	 * for dead peers. */
	for (;;) {
		ssize_t n;

		CHECK_EQ(wait_fd(fd, POLL_MS), 1);
		n = up_read(r, buf, sizeof(buf));
		if (n == 0)
			break;
		CHECK(harness_now_ns() - t0 < 100000000ull);
		CHECK_EQ(n, -EAGAIN);
		CHECK_EQ(up_poll_arm(r), 0);
	}
	t1 = harness_now_ns();
	printf("# late writer: end of stream %.1f ms after its SIGKILL\n", (double)(t1 - t0) / 1e6);
	CHECK(t1 - t0 < 100000000ull);
	close(rdy[0]);
	close(rdy[1]);
	up_close(r);
	up_pipe_release(p);
}

struct blocked_reader {
	struct up_end *r;
	_Atomic pid_t tid;
	ssize_t res;
	char buf[16];
};

static void *blocked_read(void *arg)
{
	struct blocked_reader *b = arg;

	atomic_store(&b->tid, (pid_t)syscall(SYS_gettid));
	b->res = up_read(b->r, b->buf, sizeof(b->buf));
	return NULL;
}

/* Wait until the helpers of this process are queued on @n words. */
static void wait_watches(int n)
{
	struct up__pf_stats st;
	double until = harness_now() + 10;

	for (;;) {
		up__pf_stats(&st);
		if (st.watches == n)
			return;
		CHECK(harness_now() < until);
		sched_yield();
	}
}

/*
 * An end that was armed and disarmed (its read gave -EAGAIN and it did not
 * arm again) leaves no helper queued on the line: such a helper would be
 * first in the futex queue and take the wake for one meant for a reader
 * blocked in up_read, which then slept until its slice ended.
 */
static void disarmed_poller_keeps_no_wake(void)
{
	struct up_pipe *p;
	struct up_end *armed, *w;
	struct blocked_reader b = { 0 };
	struct up__pf_stats st;
	char buf[16];
	pthread_t t;
	uint64_t timeouts;
	struct cover cv;

	CHECK_OK(up_pipe_create(NULL, &p));
	need_futex(p);
	cover_start(&cv, p);
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &armed));
	CHECK_OK(up_open(p, UP_RD, &b.r));
	CHECK_OK(up_open(p, UP_WR, &w));
	(void)pollfd_or_skip(armed);
	CHECK_EQ(up_poll_arm(armed), 0);
	wait_watches(1); /* the helper is queued on the readers' line */
	CHECK_EQ(up_read(armed, buf, sizeof(buf)), -EAGAIN); /* disarms */
	up__pf_stats(&st);
	CHECK_EQ(st.watches, 0);
	CHECK_EQ(st.pending, 0);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.npoll), 0);
	CHECK_EQ(pthread_create(&t, NULL, blocked_read, &b), 0);
	harness_wait_asleep(&b.tid);
	timeouts = atomic_load(&b.r->c.timeouts);
	CHECK_EQ(up_write(w, "hello", 5), 5); /* a wake for one reader */
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(b.res, 5);
	CHECK_EQ(atomic_load(&b.r->c.timeouts), timeouts); /* woken, not timed out */
	up_close(w);
	up_close(b.r);
	up_close(armed);
	cover_stop(&cv);
	up_pipe_release(p);
}

/* Closing an armed end takes it off its helper and closes its fds. */
static void close_while_armed_is_clean(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct up__pf_stats st;
	int before, fd;
	struct cover cv;

	CHECK_OK(up_pipe_create(NULL, &p));
	need_futex(p);
	cover_start(&cv, p);
	CHECK_OK(up_open(p, UP_WR, &w));
	before = open_fds();
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	fd = pollfd_or_skip(r);
	CHECK_EQ(up_poll_arm(r), 0);
	wait_watches(1);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.npoll), 1);
	CHECK_OK(up_close(r));
	up__pf_stats(&st);
	CHECK_EQ(st.watches, 0);
	CHECK_EQ(st.pending, 0);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.npoll), 0);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nwait), 0);
	CHECK_EQ(open_fds(), before);
	CHECK(fcntl(fd, F_GETFD) < 0);
	/* The helper still works for the next end. */
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	fd = pollfd_or_skip(r);
	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_EQ(up_write(w, "z", 1), 1);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	up_close(r);
	up_close(w);
	cover_stop(&cv);
	up_pipe_release(p);
}

/*
 * Hundreds of armed ends in one process: NPIPES pipes with an armed reader
 * each (distinct words: more than one helper's 127) and NSHARE armed readers
 * of one more pipe (one word, one shared entry). Each pipe gets a byte in
 * turn; exactly its readers' fds turn readable.
 */
#define NPIPES 300
#define NSHARE 60

static void hundreds_of_armed_ends(void)
{
	static struct up_pipe *p[NPIPES + 1];
	static struct up_end *r[NPIPES + NSHARE], *w[NPIPES + 1];
	struct up__pf_stats st;
	uint64_t t0, dt;
	struct rlimit rl;
	int ep, i;
	char c;

	CHECK_SYS(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_cur < 4096 && rl.rlim_max >= 4096) {
		rl.rlim_cur = 4096;
		CHECK_SYS(setrlimit(RLIMIT_NOFILE, &rl));
	}
	if (rl.rlim_cur < 4096)
		SKIP("RLIMIT_NOFILE below 4096");
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_SYS(ep);
	for (i = 0; i <= NPIPES; i++) {
		struct up_config cfg;

		up_config_init(&cfg);
		cfg.capacity = 16 * 1024;
		cfg.page_size = 4096;
		CHECK_OK(up_pipe_create(&cfg, &p[i]));
		CHECK_OK(up_open(p[i], UP_WR, &w[i]));
	}
	for (i = 0; i < NPIPES + NSHARE; i++) {
		struct up_pipe *q = p[i < NPIPES ? i : NPIPES];

		CHECK_OK(up_open(q, UP_RD | UP_NONBLOCK, &r[i]));
		ep_add(ep, pollfd_or_skip(r[i]), (uint64_t)i);
	}
	t0 = harness_now_ns();
	for (i = 0; i < NPIPES + NSHARE; i++)
		CHECK_EQ(up_poll_arm(r[i]), 0);
	if (on_futex(p[0])) {
		up__pf_stats(&st);
		dt = harness_now_ns() - t0;
		/* 301 words need three helpers of 127 while every end is
		 * pending. A blind end's first tick is due half a slice after
		 * its arm at the earliest; it gives its word back, and a later
		 * arm may take the slot. So the count proves something only
		 * when the arms and the count took less than that (a loaded
		 * machine or a sanitizer can take longer). */
		if (dt < UP_WAIT_SLICE_NS / 2)
			CHECK(st.helpers >= 3);
		else
			printf("# arms took %.1f ms: ticks came first, helper count not checked\n",
			       (double)dt / 1e6);
		printf("# %d armed ends on %d words: %d helper threads\n", NPIPES + NSHARE,
		       NPIPES + 1, st.helpers);
	}
	/* Every 7th pipe, from the shared one down. A blind end (its writer
	 * is a thread of ours: no pidfd) also turns readable with a tick now
	 * and then: its read finds nothing and it arms again. */
	for (i = NPIPES; i >= 0; i -= 7) {
		CHECK_EQ(up_write(w[i], "k", 1), 1);
		for (;;) {
			int64_t d = ep_wait(ep, POLL_MS);
			ssize_t n;

			CHECK(d >= 0);
			n = up_read(r[d], &c, 1);
			if (n == -EAGAIN) {
				CHECK_EQ(up_poll_arm(r[d]), 0);
				continue;
			}
			CHECK_EQ(n, 1);
			CHECK(i == NPIPES ? d >= NPIPES : d == i);
			CHECK_EQ(up_poll_arm(r[d]), 0);
			break;
		}
	}
	close(ep);
	for (i = 0; i < NPIPES + NSHARE; i++)
		up_close(r[i]);
	if (on_futex(p[0])) {
		up__pf_stats(&st);
		CHECK_EQ(st.watches, 0);
		CHECK_EQ(st.pending, 0);
	}
	for (i = 0; i <= NPIPES; i++) {
		up_close(w[i]);
		up_pipe_release(p[i]);
	}
}

/*
 * Arm/wake torture: TW writer threads each stream records into their own
 * pipe at a random pace (bursts, spins, yields), TR poll-mode readers per
 * pipe (sharing the line's word) drain it from one epoll loop, arming after
 * every -EAGAIN. A lost wake leaves a reader armed with data waiting: the
 * loop's epoll_wait then reaches its 5 s deadline and the case fails.
 */
#define TW 3
#define TR 2
#define TRECS 20000

struct tw {
	struct up_end *w;
	uint64_t seed;
	pthread_t t;
};

static void *tw_main(void *arg)
{
	struct tw *t = arg;
	struct harness_rng rng;

	harness_rng_seed(&rng, t->seed);
	for (uint32_t i = 0; i < TRECS; i++) {
		uint64_t k = harness_rng_range(&rng, 0, 99);

		CHECK_EQ(up_write(t->w, &i, sizeof(i)), (ssize_t)sizeof(i));
		if (k < 10)
			sched_yield();
		else if (k < 30)
			for (volatile int j = 0; j < (int)(k * 50); j++)
				;
	}
	return NULL;
}

static void arm_wake_torture(void)
{
	struct up_pipe *p[TW];
	struct up_end *r[TW][TR];
	struct tw t[TW];
	uint32_t next[TW] = { 0 };
	int ep, armed = 0, done = 0;

	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK_SYS(ep);
	for (int i = 0; i < TW; i++) {
		struct up_config cfg;

		up_config_init(&cfg);
		cfg.capacity = 16 * 1024;
		cfg.page_size = 4096;
		CHECK_OK(up_pipe_create(&cfg, &p[i]));
		CHECK_OK(up_open(p[i], UP_WR, &t[i].w));
		for (int j = 0; j < TR; j++) {
			CHECK_OK(up_open(p[i], UP_RD | UP_NONBLOCK, &r[i][j]));
			ep_add(ep, pollfd_or_skip(r[i][j]), (uint64_t)(i * TR + j));
			CHECK_EQ(up_poll_arm(r[i][j]), 0);
		}
		t[i].seed = harness_mix64((uint64_t)i + 1);
	}
	for (int i = 0; i < TW; i++)
		CHECK_EQ(pthread_create(&t[i].t, NULL, tw_main, &t[i]), 0);
	while (done < TW) {
		int64_t d = ep_wait(ep, POLL_MS);
		int i, j;

		CHECK(d >= 0); /* -1: 5 s without readiness, a lost wake */
		i = (int)d / TR;
		j = (int)d % TR;
		for (;;) {
			uint32_t v[64];
			ssize_t n = up_read(r[i][j], v, sizeof(v));

			if (n == 0) {
				done++; /* end of stream: this reader stays disarmed */
				CHECK_EQ(next[i], TRECS);
				up_close(r[i][0]);
				up_close(r[i][1]);
				break;
			}
			if (n == -EAGAIN) {
				int a = up_poll_arm(r[i][j]);

				CHECK(a == 0 || a == 1);
				if (a == 1)
					continue;
				armed++;
				break;
			}
			CHECK(n > 0 && n % 4 == 0);
			for (ssize_t k = 0; k < n / 4; k++)
				CHECK_EQ(v[k], next[i]++);
			if (next[i] == TRECS && t[i].w) {
				CHECK_EQ(pthread_join(t[i].t, NULL), 0);
				up_close(t[i].w);
				t[i].w = NULL;
			}
		}
	}
	printf("# %d records from each of %d writers, %d poll readers each: armed %d times\n",
	       TRECS, TW, TR, armed);
	close(ep);
	for (int i = 0; i < TW; i++)
		up_pipe_release(p[i]);
}

/*
 * The disarm's own look at the pidfds (pidwatch.c, up__pw_dead()): a peer
 * that died after the watcher's last look, or before the watcher got to
 * it, still makes the next call look for dead peers. A dead process's pidfd
 * polls readable whether or not the watcher has run; a live one's does not.
 */
static void disarm_looks_at_the_pidfds(void)
{
	struct up__pw_end we;
	uint64_t sc = 0;
	int gate[2], fds[2], efd, st;
	pid_t dead, live;

	CHECK_SYS(pipe(gate));
	dead = fork();
	CHECK_SYS(dead);
	if (dead == 0)
		_exit(0);
	live = fork();
	CHECK_SYS(live);
	if (live == 0) {
		char c;

		close(gate[1]);
		_exit(read(gate[0], &c, 1) == 0 ? 0 : 1); /* until the pipe closes */
	}
	close(gate[0]);
	/* Opened before the reap (a reaped pid has no pidfd to open). */
	fds[0] = (int)syscall(SYS_pidfd_open, dead, 0);
	fds[1] = (int)syscall(SYS_pidfd_open, live, 0);
	CHECK_EQ(waitpid(dead, &st, 0), dead);
	CHECK_SYS(fds[0]);
	CHECK_SYS(fds[1]);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK_SYS(efd);

	memset(&we, 0, sizeof(we));
	if (up__pw_watch(&we, efd, fds, 2, &sc) < 2)
		SKIP("no pidfd watcher here");
	(void)up__pw_unwatch(&we, &sc);
	CHECK(up__pw_dead(&we, &sc));
	CHECK_EQ(we.npidfd, 0);

	CHECK_EQ(up__pw_watch(&we, efd, &fds[1], 1, &sc), 1);
	CHECK(!up__pw_unwatch(&we, &sc));
	CHECK(!up__pw_dead(&we, &sc));

	close(gate[1]);
	CHECK_EQ(waitpid(live, &st, 0), live);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fds[0]);
	close(fds[1]);
	close(efd);
}

/*
 * The helpers' semantics, through a futex waker's ops on a word of our own:
 * an arm with a stale value fires at once; a wake fires even when the word
 * is back at its value (a lock word may be); a blind arm (no pidfd, one
 * that epoll cannot watch, or more than it watches) ticks, also when it joins
 * a word the helper already waits on, and its disarm says "look for dead
 * peers"; a covered arm on the same word does not tick.
 */
static _Atomic uint32_t word_of_ours;

static void helper_semantics(void)
{
	struct up__waker *w1 = up__waker_futex_new(), *w2 = up__waker_futex_new();
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0), many[UP_PF_PIDFDS + 1];
	int plain = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	uint64_t sc = 0, t0;
	struct up__pf_stats st;
	int f1, f2;

	CHECK(w1 && w2);
	CHECK_SYS(self);
	CHECK_SYS(plain);
	f1 = w1->ops->pollfd(w1, &sc);
	f2 = w2->ops->pollfd(w2, &sc);
	if (f1 == -EOPNOTSUPP)
		SKIP("no futex_waitv(2) here");
	CHECK_OK(f1);
	CHECK_OK(f2);
	atomic_store(&word_of_ours, 5);

	/* A stale value: fired by the helper's first look. */
	CHECK_OK(w1->ops->arm(w1, &word_of_ours, 4, &self, 1, &sc));
	CHECK_EQ(wait_fd(f1, POLL_MS), 1);
	CHECK_EQ(w1->ops->disarm(w1, &sc), 0);
	CHECK_EQ(wait_fd(f1, 0), 0);

	/* A wake with the word unchanged. The helper counts the word as
	 * watched just before it enters futex_waitv(), and a wake before that
	 * finds nobody (the value did not change, so the wait then sleeps):
	 * wake again each millisecond. A helper that went back to sleep on an
	 * unchanged word would never fire. */
	CHECK_OK(w1->ops->arm(w1, &word_of_ours, 5, &self, 1, &sc));
	wait_watches(1);
	CHECK_EQ(wait_fd(f1, 0), 0);
	t0 = harness_now_ns();
	do {
		CHECK(harness_now_ns() - t0 < (uint64_t)POLL_MS * 1000000ull);
		CHECK_OK(up__futex_wake(&word_of_ours, UP_WAKE_ALL, &sc));
	} while (!wait_fd(f1, 1));
	CHECK_EQ(w1->ops->disarm(w1, &sc), 0);

	/* A blind end joins the word a covered one waits on: one entry for
	 * both in the helper's vector. */
	CHECK_OK(w1->ops->arm(w1, &word_of_ours, 5, &self, 1, &sc));
	wait_watches(1);
	up__pf_stats(&st);
	t0 = harness_now_ns();
	CHECK_OK(w2->ops->arm(w2, &word_of_ours, 5, NULL, 0, &sc));
	/* Its kick taken: both ends on the word. Not "a round went by": the
	 * rounds are summed over every helper, and another test's helper may
	 * run one meanwhile. */
	do {
		CHECK(harness_now_ns() - t0 < (uint64_t)POLL_MS * 1000000ull);
		up__pf_stats(&st);
	} while (st.pending != 2);
	CHECK_EQ(st.watches, 1);
	CHECK_EQ(wait_fd(f2, 100), 1);
	CHECK(harness_now_ns() - t0 <= UP_WAIT_SLICE_NS + 20000000ull);
	CHECK_EQ(w2->ops->disarm(w2, &sc), 1);
	CHECK_EQ(wait_fd(f1, 0), 0);

	/* A pidfd epoll refuses (a plain file), or more than it takes. */
	CHECK_OK(w2->ops->arm(w2, &word_of_ours, 5, &plain, 1, &sc));
	CHECK_EQ(wait_fd(f2, 100), 1);
	CHECK_EQ(w2->ops->disarm(w2, &sc), 1);
	for (int i = 0; i <= UP_PF_PIDFDS; i++)
		CHECK_SYS(many[i] = dup(self));
	CHECK_OK(w2->ops->arm(w2, &word_of_ours, 5, many, UP_PF_PIDFDS + 1, &sc));
	CHECK_EQ(wait_fd(f2, 100), 1);
	CHECK_EQ(w2->ops->disarm(w2, &sc), 1);
	for (int i = 0; i <= UP_PF_PIDFDS; i++)
		close(many[i]);

	/* The covered one never ticked. */
	CHECK_EQ(wait_fd(f1, 0), 0);
	CHECK_EQ(w1->ops->disarm(w1, &sc), 0);
	w1->ops->destroy(w1);
	w2->ops->destroy(w2);
	close(self);
	close(plain);
}

/* A forked child has no helper thread: its first arm makes one, and its
 * fd turns readable on data as the parent's does. */
static void child_arms_its_own(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct up__pf_stats st;
	int fd, status;
	pid_t pid;
	char c;
	struct cover cv;

	CHECK_OK(up_pipe_create(NULL, &p));
	need_futex(p);
	cover_start(&cv, p);
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	fd = pollfd_or_skip(r);
	CHECK_EQ(up_poll_arm(r), 0); /* the parent has a helper, armed */
	wait_watches(1);
	pid = harness_fork(30);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *cr, *cw;
		int cfd;

		up__pf_stats(&st);
		CHECK_EQ(st.helpers, 0);
		CHECK_EQ(st.pending, 0);
		harness_close_inherited((struct up_end *[]){ r, w }, 2);
		CHECK_OK(up_pipe_create(NULL, &q));
		CHECK_OK(up_open(q, UP_RD | UP_NONBLOCK, &cr));
		CHECK_OK(up_open(q, UP_WR, &cw));
		cfd = pollfd_or_skip(cr);
		CHECK_EQ(up_poll_arm(cr), 0);
		up__pf_stats(&st);
		CHECK_EQ(st.helpers, 1);
		CHECK_EQ(up_write(cw, "c", 1), 1);
		CHECK_EQ(wait_fd(cfd, POLL_MS), 1);
		up_close(cr);
		up_close(cw);
		up_pipe_release(q);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The child's close of its copy of w woke the parent's reader (a
	 * writer left); it arms again and its helper still serves it. */
	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_EQ(wait_fd(fd, 0), 0);
	CHECK_EQ(up_write(w, "p", 1), 1);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	up_close(r);
	up_close(w);
	cover_stop(&cv);
	up_pipe_release(p);
}

/* In this (child) process, refuse io_uring_setup with EPERM, as Docker's
 * default seccomp profile does, and futex_waitv with ENOSYS when asked. */
static void seccomp_refuse(bool waitv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 449, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, waitv ? SECCOMP_RET_ERRNO | ENOSYS : SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	CHECK_SYS(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	CHECK_SYS(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog));
}

/* Under a profile that refuses io_uring (UP_FORCE_FUTEX unset), the ends
 * fall back to futex(2), and poll mode works there; with futex_waitv refused
 * too, up_pollfd and up_poll_arm say -EOPNOTSUPP, as they did before. */
static void seccomp_profiles(void)
{
	for (int waitv = 0; waitv < 2; waitv++) {
		int status;
		pid_t pid = harness_fork(30);

		if (pid == 0) {
			struct up_pipe *p;
			struct up_end *r, *w;
			int fd;

			unsetenv("UP_FORCE_FUTEX");
			seccomp_refuse(waitv);
			CHECK_OK(up_pipe_create(NULL, &p));
			CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
			CHECK_OK(up_open(p, UP_WR, &w));
			CHECK(on_futex(p));
			fd = up_pollfd(r);
			if (waitv) {
				CHECK_EQ(fd, -EOPNOTSUPP);
				CHECK_EQ(up_poll_arm(r), -EOPNOTSUPP);
				CHECK_EQ(atomic_load(&p->ln->rd_wait.nwait), 0);
			} else {
				CHECK_OK(fd);
				CHECK_EQ(up_poll_arm(r), 0);
				CHECK_EQ(up_write(w, "d", 1), 1);
				CHECK_EQ(wait_fd(fd, POLL_MS), 1);
			}
			up_close(r);
			up_close(w);
			up_pipe_release(p);
			_exit(0);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/*
 * What an armed idle end costs: over IDLE_S seconds, readiness of its fd
 * (each a wakeup of the caller's loop) and the helpers' returns from
 * futex_waitv, for a reader whose writer is another process (a pidfd covers
 * it: no tick) and for one whose writer is a thread of ours (no pidfd: a
 * tick each UP_WAIT_SLICE_NS, so that a peer process that joins later and
 * dies is noticed).
 */
#define IDLE_S 1.0

static void idle_cost_case(bool covered)
{
	struct up_pipe *p;
	struct up_end *r, *w = NULL;
	struct up__pf_stats s0, s1;
	char buf[8];
	int fd, rdy[2], ready = 0;
	pid_t child = -1;
	double t0;

	CHECK_OK(up_pipe_create(NULL, &p));
	need_futex(p);
	CHECK_SYS(pipe(rdy));
	if (covered) {
		child = peer_child(p, UP_WR, NULL, 0, rdy[1]);
		harness_wait_ready(rdy[0]);
	} else {
		CHECK_OK(up_open(p, UP_WR, &w));
	}
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	fd = pollfd_or_skip(r);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_EQ(r->npeer, covered ? 1 : 0);
	if (covered)
		wait_watches(1); /* the arm's kick has been taken */
	up__pf_stats(&s0);
	t0 = harness_now();
	while (harness_now() - t0 < IDLE_S) {
		int ms = (int)((IDLE_S - (harness_now() - t0)) * 1000) + 1;

		if (!wait_fd(fd, ms))
			continue;
		ready++;
		CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
		CHECK_EQ(up_poll_arm(r), 0);
	}
	up__pf_stats(&s1);
	printf("# idle armed reader, writer %s: %.1f loop wakeups/s, %.1f helper wakeups/s\n",
	       covered ? "in another process (pidfd)" : "a thread of ours (ticks)",
	       ready / IDLE_S, (double)(s1.rounds - s0.rounds) / IDLE_S);
	if (covered) {
		CHECK_EQ(ready, 0);
		CHECK_EQ(s1.rounds, s0.rounds);
	} else {
		/* At least one tick a slice, none much more often. */
		CHECK(ready >= (int)(IDLE_S * 1e9 / UP_WAIT_SLICE_NS) - 2);
		CHECK(ready <= (int)(IDLE_S * 1e9 / UP_WAIT_SLICE_NS) + 2);
	}
	up_close(r);
	if (w)
		up_close(w);
	if (child > 0) {
		CHECK_SYS(kill(child, SIGKILL));
		CHECK_EQ(waitpid(child, NULL, 0), child);
	}
	close(rdy[0]);
	close(rdy[1]);
	up_pipe_release(p);
}

static void idle_cost(void)
{
	idle_cost_case(true);
	idle_cost_case(false);
}

int main(int argc, char **argv)
{
	struct up_pipe *p;
	bool futex;

	harness_init(argc, argv);
	harness_watchdog(100);
	harness_fail_on_sigpipe();
	CHECK_OK(up_pipe_create(NULL, &p));
	futex = on_futex(p);
	up_pipe_release(p);
	RUN(epoll_reader_and_writer);
	RUN(killed_writer_in_epoll);
	RUN(killed_reader_in_epoll);
	RUN(hundreds_of_armed_ends);
	RUN(arm_wake_torture);
	RUN(seccomp_profiles);
	/* Both backends tick for a peer no pidfd covers. */
	RUN(late_writer_killed);
	if (!futex) {
		printf("# io_uring backend: the helpers' own cases do not apply\n");
		return 0;
	}
	RUN(helper_semantics);
	RUN(disarm_looks_at_the_pidfds);
	RUN(disarmed_poller_keeps_no_wake);
	RUN(close_while_armed_is_clean);
	RUN(child_arms_its_own);
	RUN(idle_cost);
	return 0;
}
