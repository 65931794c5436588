/* SPDX-License-Identifier: MIT */
/*
 * test_wake.c - the io_uring wakeup backend (uring/wake_uring.c), driven
 * directly through the core/wake.h ops table.
 *
 * Exit codes: 0 pass, 1 fail, 77 skip (io_uring or its futex opcodes are
 * refused here). Every case runs without SQPOLL and, when the host allows
 * it, again with SQPOLL.
 *
 * "The sleeper is asleep" is established by reading the sleeping thread's
 * state from /proc (S = interruptible sleep) after it announced itself, not
 * by sleep(): once it is in S with the word unchanged, only a real futex wake
 * can bring it back before its (long) timeout, so a lost wakeup shows up as
 * -ETIMEDOUT instead of passing by luck.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "wake.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void nap_us(long us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = us * 1000 };

	nanosleep(&ts, NULL);
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static struct up__waker *new_waker(int sqpoll)
{
	struct up__waker *w = up__waker_uring_new(sqpoll);

	CHECK(w != NULL);
	return w;
}

static int do_wait(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		   uint64_t timeout_ns, const int *pidfds, int npeer,
		   uint64_t *calls)
{
	return w->ops->wait(w, word, expect, timeout_ns, pidfds, npeer, calls);
}

static int do_wake(struct up__waker *w, _Atomic uint32_t *word, uint64_t *calls)
{
	return w->ops->wake(w, word, UP_WAKE_ALL, NULL, calls);
}

/*
 * Wait (bounded, 2 s) until the thread is asleep in the kernel. Returns 1 if
 * seen asleep; 0 otherwise (the test then still runs, it just proves less).
 */
static int wait_asleep(pid_t pid, pid_t tid)
{
	uint64_t end = now_ns() + 2 * SEC;

	while (now_ns() < end) {
		if (harness_tid_state(tid) == 'S')
			return 1;
		nap_us(50);
	}
	fprintf(stderr, "note: %d/%d never seen asleep\n", (int)pid, (int)tid);
	return 0;
}

static long sys_futex(_Atomic uint32_t *word, int op, uint32_t val,
		      const struct timespec *ts)
{
	return syscall(SYS_futex, (void *)word, op, val, ts, NULL, 0);
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_wake: watchdog expired (hang)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* ---- (0) io_uring refused: NULL, so the caller can fall back ----------- */

/* In a child: make io_uring_setup fail with @err (as seccomp profiles and
 * kernel.io_uring_disabled do) and check that the constructor says no. */
static void refused_case(int err, int sqpoll)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]),
				   .filter = f };
	int status;
	pid_t child;

	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(77);
		_exit(up__waker_uring_new(sqpoll) == NULL ? 0 : 1);
	}
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		fprintf(stderr, "note: seccomp unavailable; refusal not tested\n");
		return;
	}
	CHECK_EQ(WEXITSTATUS(status), 0);
}

static void test_refused(void)
{
	refused_case(EPERM, 0);
	refused_case(ENOSYS, 0);
	refused_case(EPERM, 1);
}

/* ---- (1) the word already differs -------------------------------------- */

static void test_immediate(int sqpoll)
{
	struct up__waker *w = new_waker(sqpoll);
	_Atomic uint32_t word = 5;
	uint64_t calls = 0;

	CHECK_EQ(do_wait(w, &word, 4, 0, NULL, 0, &calls), 0);
	/* The value check in user space spares the enter. */
	CHECK_EQ(calls, 0);
	CHECK_EQ(do_wait(w, &word, 4, 10 * MS, NULL, 0, &calls), 0);
	CHECK_EQ(calls, 0);
	w->ops->destroy(w);
}

/* ---- (2) thread wakes thread -------------------------------------------- */

struct sleeper {
	int sqpoll;
	_Atomic uint32_t *word;
	_Atomic int tid;  /* published before the wait */
	_Atomic int ready;
	int first_rc;     /* result of the first wait */
	int rc;           /* last result */
	int npeer;
	int pidfd;
	uint64_t calls;
	uint64_t returned_ns;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct up__waker *w = new_waker(s->sqpoll);
	int first = 1;

	atomic_store_explicit(&s->tid, gettid_(), memory_order_relaxed);
	atomic_store_explicit(&s->ready, 1, memory_order_release);
	/* Loop until the value changes: a spurious early return is allowed by
	 * the interface; a lost wakeup shows as -ETIMEDOUT (5 s). */
	while (atomic_load_explicit(s->word, memory_order_acquire) == 0) {
		s->rc = do_wait(w, s->word, 0, 5 * SEC,
				s->npeer ? &s->pidfd : NULL, s->npeer,
				&s->calls);
		if (first)
			s->first_rc = s->rc;
		first = 0;
		if (s->rc == -ETIMEDOUT)
			break;
	}
	s->returned_ns = now_ns();
	w->ops->destroy(w);
	return NULL;
}

static void test_thread_wake(int sqpoll)
{
	struct up__waker *w = new_waker(sqpoll);
	_Atomic uint32_t word = 0;
	struct sleeper s = { .sqpoll = sqpoll, .word = &word };
	uint64_t calls = 0;
	pthread_t t;
	int asleep;

	CHECK_EQ(pthread_create(&t, NULL, sleeper_main, &s), 0);
	while (!atomic_load_explicit(&s.ready, memory_order_acquire))
		nap_us(10);
	asleep = wait_asleep(getpid(), atomic_load_explicit(&s.tid,
						     memory_order_relaxed));
	atomic_store_explicit(&word, 1, memory_order_seq_cst);
	CHECK_EQ(do_wake(w, &word, &calls), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(s.rc, 0);
	if (asleep) {
		CHECK_EQ(s.first_rc, 0);
		/* arm+sleep in one enter; the futex completes first, so
		 * nothing is left to cancel. */
		CHECK_EQ(s.calls, 1);
	}
	if (!sqpoll)
		CHECK_EQ(calls, 1); /* one enter per wake without SQPOLL */
	else
		CHECK(calls <= 1);
	w->ops->destroy(w);
}

/* ---- wake(1) wakes one sleeper, wake(ALL) every one -------------------- */

struct one_sleeper {
	int sqpoll;
	_Atomic uint32_t *word;
	_Atomic int *returned;
	_Atomic pid_t tid;
	int rc;
};

static void *one_sleeper_main(void *arg)
{
	struct one_sleeper *s = arg;
	struct up__waker *w = new_waker(s->sqpoll);
	uint64_t calls = 0;

	atomic_store_explicit(&s->tid, gettid_(), memory_order_release);
	/* One wait, the word never changes: only a wake (or the 5 s timeout,
	 * a failure below) ends it. */
	s->rc = do_wait(w, s->word, 0, 5 * SEC, NULL, 0, &calls);
	atomic_fetch_add_explicit(s->returned, 1, memory_order_acq_rel);
	w->ops->destroy(w);
	return NULL;
}

static int await_returned(_Atomic int *returned, int n, uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (atomic_load_explicit(returned, memory_order_acquire) < n && now_ns() < end)
		nap_us(50);
	return atomic_load_explicit(returned, memory_order_acquire);
}

static void test_wake_one(int sqpoll)
{
	struct up__waker *w = new_waker(sqpoll);
	_Atomic uint32_t word = 0;
	_Atomic int returned = 0;
	struct one_sleeper s[3];
	pthread_t t[3];
	uint64_t calls = 0;
	int i, asleep = 1;

	for (i = 0; i < 3; i++) {
		s[i] = (struct one_sleeper){ .sqpoll = sqpoll, .word = &word,
					     .returned = &returned };
		CHECK_EQ(pthread_create(&t[i], NULL, one_sleeper_main, &s[i]), 0);
	}
	for (i = 0; i < 3; i++) {
		pid_t tid;

		while ((tid = atomic_load_explicit(&s[i].tid, memory_order_acquire)) == 0)
			nap_us(10);
		asleep &= wait_asleep(getpid(), tid);
	}
	if (!asleep) {
		/* A sleeper not yet in the kernel would miss the wake (the word
		 * did not change): end them all and prove nothing. */
		CHECK_EQ(w->ops->wake(w, &word, UP_WAKE_ALL, NULL, &calls), 0);
		for (i = 0; i < 3; i++)
			CHECK_EQ(pthread_join(t[i], NULL), 0);
		w->ops->destroy(w);
		return;
	}
	CHECK_EQ(w->ops->wake(w, &word, 1, NULL, &calls), 0);
	CHECK_EQ(await_returned(&returned, 1, 2 * SEC), 1);
	/* Give a wrongly woken second sleeper time to show up. */
	CHECK_EQ(await_returned(&returned, 2, 200 * 1000000ull), 1);
	CHECK_EQ(w->ops->wake(w, &word, UP_WAKE_ALL, NULL, &calls), 0);
	CHECK_EQ(await_returned(&returned, 3, 2 * SEC), 3);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(pthread_join(t[i], NULL), 0);
		CHECK_EQ(s[i].rc, 0);
	}
	w->ops->destroy(w);
}

/* ---- (3) across processes, mixed with plain futex(2) ------------------- */

enum { SIDE_URING, SIDE_FUTEX };

struct xshared {
	_Atomic uint32_t word;
	_Atomic uint32_t ready;
};

/* Sleep on sh->word (expect 0) with the given mechanism; 0 if woken. */
static int xsleep(int how, int sqpoll, struct xshared *sh)
{
	if (how == SIDE_URING) {
		/* Created before announcing, so the waker's "asleep" check
		 * cannot mistake ring setup for the sleep. */
		struct up__waker *w = up__waker_uring_new(sqpoll);
		uint64_t calls = 0;
		int rc = 0;

		if (!w)
			return 3;
		atomic_store_explicit(&sh->ready, 1, memory_order_seq_cst);
		while (atomic_load_explicit(&sh->word, memory_order_acquire) ==
		       0) {
			rc = do_wait(w, &sh->word, 0, 5 * SEC, NULL, 0, &calls);
			if (rc)
				break;
		}
		w->ops->destroy(w);
		return rc == 0 ? 0 : 2;
	}
	atomic_store_explicit(&sh->ready, 1, memory_order_seq_cst);
	while (atomic_load_explicit(&sh->word, memory_order_acquire) == 0) {
		struct timespec ts = { .tv_sec = 5, .tv_nsec = 0 };

		/* Shared (not FUTEX_PRIVATE) on purpose: cross-process. */
		if (sys_futex(&sh->word, FUTEX_WAIT, 0, &ts) < 0 &&
		    errno == ETIMEDOUT)
			return 2;
	}
	return 0;
}

/* Wake sh->word once @tid of @pid is asleep; 0 on success. */
static int xwake(int how, int sqpoll, struct xshared *sh, pid_t pid, pid_t tid)
{
	while (!atomic_load_explicit(&sh->ready, memory_order_seq_cst))
		nap_us(10);
	wait_asleep(pid, tid);
	atomic_store_explicit(&sh->word, 1, memory_order_seq_cst);
	if (how == SIDE_URING) {
		struct up__waker *w = up__waker_uring_new(sqpoll);
		uint64_t calls = 0;
		int rc;

		if (!w)
			return 3;
		rc = do_wake(w, &sh->word, &calls);
		w->ops->destroy(w);
		return rc ? 4 : 0;
	}
	return sys_futex(&sh->word, FUTEX_WAKE, INT32_MAX, NULL) < 0 ? 4 : 0;
}

/* One cross-process case: @child_sleeps decides who sleeps. */
static void xproc_case(int sleeper_how, int waker_how, int child_sleeps,
		       int sqpoll)
{
	struct xshared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t parent = getpid(), child;
	int status, rc;

	CHECK(sh != MAP_FAILED);
	atomic_store_explicit(&sh->word, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->ready, 0, memory_order_relaxed);
	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		alarm(20);
		if (child_sleeps)
			_exit(xsleep(sleeper_how, sqpoll, sh));
		_exit(xwake(waker_how, sqpoll, sh, parent, parent));
	}
	if (child_sleeps)
		rc = xwake(waker_how, sqpoll, sh, child, child);
	else
		rc = xsleep(sleeper_how, sqpoll, sh);
	CHECK(waitpid(child, &status, 0) == child);
	if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr,
			"xproc sleeper=%s waker=%s child_sleeps=%d sqpoll=%d: "
			"parent rc=%d child status=0x%x\n",
			sleeper_how == SIDE_URING ? "uring" : "futex",
			waker_how == SIDE_URING ? "uring" : "futex",
			child_sleeps, sqpoll, rc, status);
		exit(1);
	}
	munmap(sh, sizeof(*sh));
}

static void test_cross_process(int sqpoll)
{
	/* io_uring sleeper, futex(2) waker, and the other way round. */
	xproc_case(SIDE_URING, SIDE_FUTEX, 1, sqpoll);
	xproc_case(SIDE_URING, SIDE_FUTEX, 0, sqpoll);
	xproc_case(SIDE_FUTEX, SIDE_URING, 1, sqpoll);
	xproc_case(SIDE_FUTEX, SIDE_URING, 0, sqpoll);
	/* And io_uring on both sides. */
	xproc_case(SIDE_URING, SIDE_URING, 1, sqpoll);
}

/* A forked child may destroy a waker it inherited (that is all it may do
 * with it) without disturbing the parent's ring. */
static void test_fork_destroy(int sqpoll)
{
	struct up__waker *w = new_waker(sqpoll);
	_Atomic uint32_t word = 0;
	uint64_t calls = 0;
	int status;
	pid_t child;

	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		w->ops->destroy(w);
		_exit(0);
	}
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(do_wait(w, &word, 0, 10 * MS, NULL, 0, &calls), -ETIMEDOUT);
	atomic_store_explicit(&word, 1, memory_order_seq_cst);
	CHECK_EQ(do_wake(w, &word, &calls), 0);
	w->ops->destroy(w);
}

/* ---- SQPOLL: one SQ thread per process ---------------------------------- */

/* Threads of this process that are io_uring SQ threads ("iou-sqp-<pid>"). */
static int sq_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		char path[300], comm[64] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* a thread that just left */
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "iou-sqp", 7) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Several SQPOLL wakers share one SQ thread, in a forked child too (which
 * cannot use its parent's), and each of them still sleeps and wakes. */
static int shared_sq_case(void)
{
	struct up__waker *w[6];
	/* a word each: a wake goes out after its call returns (SQPOLL) */
	_Atomic uint32_t word[6] = { 0 };
	uint64_t calls = 0;
	int i, n;

	for (i = 0; i < 6; i++)
		w[i] = new_waker(1);
	n = sq_threads();
	for (i = 0; i < 6; i++) {
		CHECK_EQ(do_wait(w[i], &word[i], 0, 5 * MS, NULL, 0, &calls), -ETIMEDOUT);
		CHECK_EQ(do_wake(w[i], &word[i], &calls), 0);
	}
	for (i = 0; i < 6; i++)
		w[i]->ops->destroy(w[i]);
	return n;
}

static void test_shared_sq_thread(void)
{
	struct up__waker *w;
	int status, before;
	pid_t child;

	CHECK_EQ(shared_sq_case(), 1);
	/* A forked child gets the anchor's fd closed for it at once (by a
	 * fork handler, before the number could name a file of its own), and
	 * so are the forking thread's two rings (plain and SQPOLL, both made
	 * by now: rings are per thread, never used across fork); it makes its
	 * own anchor. */
	w = new_waker(1);
	before = harness_fds("io_uring");
	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0)
		_exit(harness_fds("io_uring") == before - 3 && shared_sq_case() == 1 ? 0 : 1);
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	w->ops->destroy(w);
}

/* ---- (4) timeout -------------------------------------------------------- */

static void test_timeout(int sqpoll)
{
	struct up__waker *w = new_waker(sqpoll);
	_Atomic uint32_t word = 7;
	uint64_t calls = 0, t0, dt;
	int i;

	for (i = 0; i < 3; i++) {
		t0 = now_ns();
		CHECK_EQ(do_wait(w, &word, 7, 20 * MS, NULL, 0, &calls),
			 -ETIMEDOUT);
		dt = now_ns() - t0;
		CHECK(dt >= 19 * MS);
		CHECK(dt < 2 * SEC);
	}
	if (!sqpoll)
		CHECK_EQ(calls, 3 * 2); /* sleep, then cancel+reap */
	/* The ring is clean: an unchanged value still times out, a changed
	 * one returns at once. */
	CHECK_EQ(do_wait(w, &word, 8, 20 * MS, NULL, 0, &calls), 0);
	w->ops->destroy(w);
}

/* ---- (5) peer death through a pidfd ------------------------------------ */

struct killer {
	pid_t victim;
	pid_t main_tid;
	uint64_t killed_ns;
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;

	wait_asleep(getpid(), k->main_tid);
	k->killed_ns = now_ns();
	kill(k->victim, SIGKILL);
	return NULL;
}

static pid_t spawn_blocked_child(int *pipe_w)
{
	int fds[2];
	pid_t pid;

	CHECK(pipe2(fds, O_CLOEXEC) == 0);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char c;

		close(fds[1]);
		alarm(30);
		_exit(read(fds[0], &c, 1) == 1 ? 0 : 1);
	}
	close(fds[0]);
	*pipe_w = fds[1];
	return pid;
}

static int test_pidfd(int sqpoll)
{
	struct up__waker *w = new_waker(sqpoll);
	_Atomic uint32_t word = 0;
	struct killer k;
	uint64_t calls = 0, returned;
	pthread_t t;
	int pipe_w, pidfd, rc, status;
	pid_t child;

	/* (5a) a live peer: the futex wins, the poll is cancelled. */
	child = spawn_blocked_child(&pipe_w);
	pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	if (pidfd < 0) {
		fprintf(stderr, "note: pidfd_open: %s; pidfd case skipped\n",
			strerror(errno));
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
		close(pipe_w);
		w->ops->destroy(w);
		return 0;
	}
	{
		struct sleeper s = { .sqpoll = sqpoll, .word = &word,
				     .npeer = 1, .pidfd = pidfd };
		pthread_t st;
		int asleep;

		CHECK_EQ(pthread_create(&st, NULL, sleeper_main, &s), 0);
		while (!atomic_load_explicit(&s.ready, memory_order_acquire))
			nap_us(10);
		asleep = wait_asleep(getpid(),
				     atomic_load_explicit(&s.tid,
							  memory_order_relaxed));
		atomic_store_explicit(&word, 1, memory_order_seq_cst);
		CHECK_EQ(do_wake(w, &word, &calls), 0);
		CHECK_EQ(pthread_join(st, NULL), 0);
		CHECK_EQ(s.rc, 0);
		if (asleep) {
			CHECK_EQ(s.first_rc, 0);
			if (!sqpoll) /* arm+sleep, then cancel+reap the poll */
				CHECK_EQ(s.calls, 2);
		}
	}
	atomic_store_explicit(&word, 0, memory_order_seq_cst);

	/* (5b) the peer dies while we sleep. */
	k.victim = child;
	k.main_tid = gettid_();
	k.killed_ns = 0;
	CHECK_EQ(pthread_create(&t, NULL, killer_main, &k), 0);
	rc = do_wait(w, &word, 0, 10 * SEC, &pidfd, 1, &calls);
	returned = now_ns();
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(rc, 1); /* 1: a peer pidfd fired (wake.h) */
	CHECK(k.killed_ns != 0);
	if (returned - k.killed_ns >= 100 * MS) {
		fprintf(stderr, "pidfd wake took %" PRIu64 " us after kill\n",
			(returned - k.killed_ns) / 1000);
		exit(1);
	}
	fprintf(stderr, "  pidfd: woke %" PRIu64 " us after SIGKILL\n",
		(returned - k.killed_ns) / 1000);
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	/* The ring is clean: no stale poll completion wakes a later wait. */
	CHECK_EQ(do_wait(w, &word, 0, 20 * MS, NULL, 0, &calls), -ETIMEDOUT);
	/* A dead peer's pidfd stays readable: returns at once. */
	CHECK_EQ(do_wait(w, &word, 0, 10 * SEC, &pidfd, 1, &calls), 1);
	CHECK_EQ(do_wait(w, &word, 0, 20 * MS, NULL, 0, &calls), -ETIMEDOUT);
	close(pidfd);
	close(pipe_w);
	w->ops->destroy(w);
	return 0;
}

/* ---- (6) ping-pong ------------------------------------------------------ */

enum { ROUNDS = 10000 };

struct pp {
	int sqpoll;
	_Atomic uint32_t a, b; /* ping bumps a, pong bumps b */
	int timeouts[2];
	uint64_t calls[2];
};

/* Wait until *word == target, sleeping through the backend. */
static void pp_await(struct up__waker *w, _Atomic uint32_t *word,
		     uint32_t target, int *timeouts, uint64_t *calls)
{
	uint32_t v;

	while ((v = atomic_load_explicit(word, memory_order_acquire)) != target) {
		int rc = do_wait(w, word, v, 1 * SEC, NULL, 0, calls);

		CHECK(rc == 0 || rc == -ETIMEDOUT);
		if (rc == -ETIMEDOUT)
			(*timeouts)++;
	}
}

static void *pong_main(void *arg)
{
	struct pp *p = arg;
	struct up__waker *w = new_waker(p->sqpoll);
	uint32_t i;

	for (i = 1; i <= ROUNDS; i++) {
		pp_await(w, &p->a, i, &p->timeouts[1], &p->calls[1]);
		atomic_store_explicit(&p->b, i, memory_order_seq_cst);
		CHECK_EQ(do_wake(w, &p->b, &p->calls[1]), 0);
	}
	w->ops->destroy(w);
	return NULL;
}

static void test_pingpong(int sqpoll)
{
	struct pp *p = calloc(1, sizeof(*p));
	struct up__waker *w;
	pthread_t t;
	uint64_t t0, dt;
	uint32_t i;

	CHECK(p != NULL);
	p->sqpoll = sqpoll;
	w = new_waker(sqpoll);
	CHECK_EQ(pthread_create(&t, NULL, pong_main, p), 0);
	t0 = now_ns();
	for (i = 1; i <= ROUNDS; i++) {
		atomic_store_explicit(&p->a, i, memory_order_seq_cst);
		CHECK_EQ(do_wake(w, &p->a, &p->calls[0]), 0);
		pp_await(w, &p->b, i, &p->timeouts[0], &p->calls[0]);
	}
	CHECK_EQ(pthread_join(t, NULL), 0);
	dt = now_ns() - t0;
	fprintf(stderr,
		"  ping-pong sqpoll=%d: %d rounds in %" PRIu64 " ms, "
		"%.2f enters/round\n",
		sqpoll, ROUNDS, dt / MS,
		(double)(p->calls[0] + p->calls[1]) / ROUNDS);
	/* Every wake follows its store at once, so a 1 s timeout means a
	 * wakeup was lost. */
	CHECK_EQ(p->timeouts[0] + p->timeouts[1], 0);
	w->ops->destroy(w);
	free(p);
}

/* ---- (7) a signal interrupts the sleep ---------------------------------- */

static void on_usr1(int sig)
{
	(void)sig;
}

struct intr {
	int sqpoll;
	_Atomic int tid;
	_Atomic int ready;
	int rc1, rc2;
};

static void *intr_main(void *arg)
{
	struct intr *s = arg;
	struct up__waker *w = new_waker(s->sqpoll);
	_Atomic uint32_t word = 0;
	uint64_t calls = 0;

	atomic_store_explicit(&s->tid, gettid_(), memory_order_relaxed);
	atomic_store_explicit(&s->ready, 1, memory_order_release);
	s->rc1 = do_wait(w, &word, 0, 5 * SEC, NULL, 0, &calls);
	/* Clean afterwards: a new wait times out normally. */
	s->rc2 = do_wait(w, &word, 0, 20 * MS, NULL, 0, &calls);
	w->ops->destroy(w);
	return NULL;
}

static void test_eintr(int sqpoll)
{
	struct intr s = { .sqpoll = sqpoll };
	struct sigaction sa;
	pthread_t t;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK_EQ(pthread_create(&t, NULL, intr_main, &s), 0);
	while (!atomic_load_explicit(&s.ready, memory_order_acquire))
		nap_us(10);
	if (!wait_asleep(getpid(),
			 atomic_load_explicit(&s.tid, memory_order_relaxed))) {
		/* Cannot prove anything; let it time out. */
		CHECK_EQ(pthread_join(t, NULL), 0);
		return;
	}
	CHECK_EQ(pthread_kill(t, SIGUSR1), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(s.rc1, -EINTR);
	CHECK_EQ(s.rc2, -ETIMEDOUT);
}

static void run_all(int sqpoll)
{
	fprintf(stderr, "backend %s\n", sqpoll ? "io_uring-sqpoll" : "io_uring");
	test_immediate(sqpoll);
	fprintf(stderr, "  immediate: ok\n");
	test_thread_wake(sqpoll);
	fprintf(stderr, "  thread wake: ok\n");
	/* Only without SQPOLL: there a sleeper seen asleep in the kernel has
	 * armed its FUTEX_WAIT (submitted inline by its own enter); with
	 * SQPOLL the SQ thread arms it later, so a wake that leaves the word
	 * unchanged could come first and find nobody (CI caught exactly that
	 * under ASan). Both backends issue the same FUTEX_WAKE with nr. */
	if (!sqpoll) {
		test_wake_one(sqpoll);
		fprintf(stderr, "  wake one / wake all: ok\n");
	}
	test_cross_process(sqpoll);
	fprintf(stderr, "  cross-process (uring<->futex(2)): ok\n");
	test_fork_destroy(sqpoll);
	fprintf(stderr, "  destroy in forked child: ok\n");
	test_timeout(sqpoll);
	fprintf(stderr, "  timeout: ok\n");
	test_pidfd(sqpoll);
	fprintf(stderr, "  pidfd: ok\n");
	test_pingpong(sqpoll);
	fprintf(stderr, "  ping-pong: ok\n");
	test_eintr(sqpoll);
	fprintf(stderr, "  eintr: ok\n");
}

int main(void)
{
	struct up__waker *w;

	signal(SIGALRM, on_alarm);
	alarm(50); /* watchdog, inside CTest's 60 s TIMEOUT, so a hang names itself */

	w = up__waker_uring_new(0);
	if (!w) {
		fprintf(stderr, "skip: io_uring futex wakeups unavailable\n");
		return 77;
	}
	CHECK(strcmp(w->ops->name, "io_uring") == 0);
	w->ops->destroy(w);
	test_refused();
	fprintf(stderr, "refused io_uring (seccomp EPERM/ENOSYS) -> NULL: ok\n");
	run_all(0);

	w = up__waker_uring_new(1);
	if (!w) {
		fprintf(stderr, "note: SQPOLL refused; sqpoll cases skipped\n");
	} else {
		CHECK(strcmp(w->ops->name, "io_uring-sqpoll") == 0);
		w->ops->destroy(w);
		run_all(1);
		test_shared_sq_thread();
		fprintf(stderr, "  one SQ thread per process: ok\n");
	}
	fprintf(stderr, "PASS\n");
	return 0;
}
