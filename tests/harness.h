/* SPDX-License-Identifier: MIT */
/*
 * harness.h - the tiny test harness shared by every uringpipe test program.
 *
 * Exit codes follow CTest/automake conventions: 0 pass, 1 fail, 77 skip
 * (registered with SKIP_RETURN_CODE 77 by up_add_test()).
 *
 * Failing checks terminate the whole process with status 1 through
 * harness_fail(): stdio is flushed and then _exit(1) is used instead of
 * exit(1) because checks also fire in worker threads and forked children,
 * where running atexit handlers and re-flushing inherited stdio buffers would
 * race with the other threads or duplicate the parent's output.
 *
 * Tests never use sleep() to order events: a hang is turned into a failure by
 * the watchdog (harness_watchdog), not papered over by a delay.
 */
#ifndef UP_TESTS_HARNESS_H
#define UP_TESTS_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

/* 1 in a ThreadSanitizer build: gcc says __SANITIZE_THREAD__, clang
 * __has_feature(thread_sanitizer). */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UP_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(UP_TEST_TSAN)
#define UP_TEST_TSAN 1
#endif
#ifndef UP_TEST_TSAN
#define UP_TEST_TSAN 0
#endif

#if defined(__GNUC__)
#define HARNESS_UNUSED __attribute__((unused))
#define HARNESS_NORETURN __attribute__((noreturn))
#else
#define HARNESS_UNUSED
#define HARNESS_NORETURN
#endif

static HARNESS_UNUSED HARNESS_NORETURN void harness_fail(void)
{
	fflush(stdout);
	fflush(stderr);
	_exit(1);
}

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__,  \
				__LINE__, #cond);                              \
			harness_fail();                                        \
		}                                                              \
	} while (0)

/* Both sides are evaluated exactly once and compared as long long. */
#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long ha_ = (long long)(a);                                \
		long long hb_ = (long long)(b);                                \
		if (ha_ != hb_) {                                              \
			fprintf(stderr,                                        \
				"%s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", \
				__FILE__, __LINE__, #a, #b, ha_, hb_);         \
			harness_fail();                                        \
		}                                                              \
	} while (0)

/* For calls returning 0/a count or a negative errno. */
#define CHECK_OK(expr)                                                         \
	do {                                                                   \
		long long hr_ = (long long)(expr);                             \
		if (hr_ < 0) {                                                 \
			fprintf(stderr, "%s:%d: %s failed: %lld (%s)\n",        \
				__FILE__, __LINE__, #expr, hr_,                \
				hr_ >= -4095 ? strerror((int)-hr_) : "?");     \
			harness_fail();                                        \
		}                                                              \
	} while (0)

/* For calls returning 0 or -errno from libc: CHECK_SYS(pipe(fds)). */
#define CHECK_SYS(expr)                                                        \
	do {                                                                   \
		if ((expr) < 0) {                                              \
			fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__,     \
				__LINE__, #expr, strerror(errno));             \
			harness_fail();                                        \
		}                                                              \
	} while (0)

#define SKIP(msg)                                                              \
	do {                                                                   \
		printf("SKIP: %s\n", (msg));                                   \
		fflush(stdout);                                                \
		_exit(77);                                                     \
	} while (0)

static HARNESS_UNUSED void harness_on_alarm(int sig)
{
	static const char msg[] = "watchdog: timed out\n";
	ssize_t r;

	(void)sig;
	r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)r;
	_exit(1);
}

/* Scheduler state letter ('S' asleep, 'R' running, ...) of thread @tid, any
 * process, from /proc/<tid>/stat; 0 if unreadable. Tests use it to know a
 * peer really sleeps in the kernel before acting, instead of sleeping. */
static HARNESS_UNUSED char harness_tid_state(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return (p && p[1] == ' ') ? p[2] : 0;
}

/* Wait (bounded: 10 s, then fail) until the thread whose id *@tid will hold
 * (0 until it starts) sleeps in the kernel. */
static HARNESS_UNUSED void harness_wait_asleep(_Atomic pid_t *tid)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (atomic_load(tid) == 0 || harness_tid_state(atomic_load(tid)) != 'S') {
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 10);
		sched_yield();
	}
}

/* A thread that makes one up_write() of the string @buf, having published
 * its thread id first, so that a test can see it asleep in the kernel
 * (harness_tid_state()) before it acts. */
struct harness_writer {
	struct up_end *w;
	const char *buf;
	_Atomic pid_t tid;
	ssize_t res;
};

static HARNESS_UNUSED void *harness_writer_main(void *arg)
{
	struct harness_writer *hw = arg;

	atomic_store(&hw->tid, (pid_t)syscall(SYS_gettid));
	hw->res = up_write(hw->w, hw->buf, strlen(hw->buf));
	return NULL;
}

/*
 * Arm (or re-arm) the watchdog: after @seconds the process prints
 * "watchdog: timed out" and exits 1. alarm() is per process and is not
 * inherited by fork(), so a forked child arms its own.
 */
static HARNESS_UNUSED void harness_watchdog(unsigned seconds)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = harness_on_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	alarm(seconds);
}

static HARNESS_UNUSED void harness_on_sigpipe(int sig)
{
	static const char msg[] = "FAIL: SIGPIPE raised (the library must return -EPIPE)\n";
	ssize_t r;

	(void)sig;
	r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)r;
	_exit(1);
}

/* Any SIGPIPE reaching this process fails the test. */
static HARNESS_UNUSED void harness_fail_on_sigpipe(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = harness_on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
}

/* Optional case filter: "prog NAME" runs only the case called NAME. */
static HARNESS_UNUSED const char *harness_filter;

static HARNESS_UNUSED void harness_init(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && argv[1][0] != '-')
		harness_filter = argv[1];
}

#define RUN(fn)                                                                \
	do {                                                                   \
		if (harness_filter == NULL || strcmp(harness_filter, #fn) == 0) { \
			fn();                                                  \
			printf("ok %s\n", #fn);                                \
			fflush(stdout);                                        \
		}                                                              \
	} while (0)

/* ---- small helpers shared by the tests ---- */

static HARNESS_UNUSED uint64_t harness_mix64(uint64_t x)
{
	/* splitmix64 finaliser */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* A position-dependent byte pattern: reordering, duplication or loss of any
 * run of bytes longer than a few bytes shows up as a mismatch. */
static HARNESS_UNUSED uint8_t harness_pat(uint64_t seed, uint64_t off)
{
	return (uint8_t)(harness_mix64(seed ^ (off >> 3)) >> ((off & 7) * 8));
}

static HARNESS_UNUSED void harness_fill(uint64_t seed, uint64_t off, void *buf, size_t n)
{
	uint8_t *b = (uint8_t *)buf;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = harness_pat(seed, off + i);
}

/* Returns the index of the first mismatch, or (size_t)-1 if all match. */
static HARNESS_UNUSED size_t harness_verify(uint64_t seed, uint64_t off, const void *buf, size_t n)
{
	const uint8_t *b = (const uint8_t *)buf;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != harness_pat(seed, off + i))
			return i;
	return (size_t)-1;
}

/* Open fds of this process whose /proc/self/fd link contains @what ("io_uring",
 * "/memfd:"); NULL counts them all. The directory's own fd is not counted.
 * The first @max of their numbers go to @fds (may be NULL with @max 0). */
static HARNESS_UNUSED int harness_fd_list(const char *what, int *fds, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		char link[256];
		ssize_t k;

		if (de->d_name[0] == '.' || atoi(de->d_name) == dirfd(d))
			continue;
		if (what) {
			k = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
			if (k <= 0)
				continue;
			link[k] = '\0';
			if (!strstr(link, what))
				continue;
		}
		if (n < max)
			fds[n] = atoi(de->d_name);
		n++;
	}
	closedir(d);
	return n;
}

static HARNESS_UNUSED int harness_fds(const char *what)
{
	return harness_fd_list(what, NULL, 0);
}

/* Watches held by this process's inotify instances (their fdinfo). */
static HARNESS_UNUSED int harness_inotify_watches(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		char path[300], link[256], line[512];
		ssize_t k;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		k = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		if (!strstr(link, "inotify"))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%s", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* closed meanwhile (a serving thread's) */
		while (fgets(line, sizeof(line), f))
			n += strncmp(line, "inotify wd:", 11) == 0;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Bytes of [addr, addr + len) that hold memory (mincore(); for a shared
 * mapping of a memfd, the file's pages, whoever faulted them). */
static HARNESS_UNUSED size_t harness_resident(const void *addr, size_t len)
{
	size_t sys = (size_t)sysconf(_SC_PAGESIZE);
	size_t n = (len + sys - 1) / sys, i, res = 0;
	unsigned char *vec = (unsigned char *)malloc(n);

	CHECK(vec != NULL);
	CHECK(mincore((void *)(uintptr_t)addr, len, vec) == 0);
	for (i = 0; i < n; i++)
		res += vec[i] & 1;
	free(vec);
	return res * sys;
}

/* xorshift64* PRNG; never seed with 0 (harness_rng_seed handles it). */
struct harness_rng {
	uint64_t s;
};

static HARNESS_UNUSED void harness_rng_seed(struct harness_rng *r, uint64_t seed)
{
	r->s = harness_mix64(seed) | 1;
}

static HARNESS_UNUSED uint64_t harness_rng_next(struct harness_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi]. */
static HARNESS_UNUSED uint64_t harness_rng_range(struct harness_rng *r, uint64_t lo, uint64_t hi)
{
	return lo + harness_rng_next(r) % (hi - lo + 1);
}

static HARNESS_UNUSED double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static HARNESS_UNUSED uint64_t harness_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Whether *@flag turned nonzero within @timeout_s, yielding meanwhile. The
 * timeout is a deadline for a hang (the caller CHECKs the result), never a
 * way to order events: the flag is the handshake.
 */
static HARNESS_UNUSED bool harness_wait_flag(atomic_int *flag, double timeout_s)
{
	double until = harness_now() + timeout_s;

	while (!atomic_load_explicit(flag, memory_order_acquire) && harness_now() < until)
		sched_yield();
	return atomic_load_explicit(flag, memory_order_acquire) != 0;
}

/* As harness_wait_flag(), for a 32-bit word another process stores into
 * (shared memory): the value once nonzero, 0 after @timeout_s. */
static HARNESS_UNUSED uint32_t harness_wait_word(_Atomic uint32_t *word, double timeout_s)
{
	double until = harness_now() + timeout_s;
	uint32_t v;

	while ((v = atomic_load_explicit(word, memory_order_acquire)) == 0 &&
	       harness_now() < until)
		sched_yield();
	return v;
}

/* Sleep @ns, resumed across signals. For pacing a load (idle gaps, bursts),
 * never to order events: use harness_tid_state() or a handshake for that. */
static HARNESS_UNUSED void harness_nap_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static HARNESS_UNUSED void harness_block_sigchld(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/*
 * Waiting for a child with a deadline, without sleeping: SIGCHLD is blocked
 * (call harness_block_sigchld() before the fork) and sigtimedwait() returns
 * as soon as a child changes state. On timeout the child is killed with
 * SIGKILL and reaped, and -ETIMEDOUT is returned; otherwise 0 and *status.
 */
static HARNESS_UNUSED int harness_wait_child(pid_t pid, double timeout_s, int *status)
{
	double deadline = harness_now() + timeout_s;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		double left;
		struct timespec ts;

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		left = deadline - harness_now();
		if (left <= 0) {
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			return -ETIMEDOUT;
		}
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		(void)sigtimedwait(&set, NULL, &ts);
	}
}

/* Fails unless the child exited normally with status 0. */
static HARNESS_UNUSED void harness_reap_ok(pid_t pid, double timeout_s, const char *what)
{
	int status = 0;
	int r = harness_wait_child(pid, timeout_s, &status);

	if (r == -ETIMEDOUT) {
		fprintf(stderr, "%s: child %d timed out after %.0f s (killed)\n", what,
			(int)pid, timeout_s);
		harness_fail();
	}
	if (r < 0) {
		fprintf(stderr, "%s: waitpid: %s\n", what, strerror(-r));
		harness_fail();
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "%s: child %d killed by signal %d (%s)\n", what, (int)pid,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
		harness_fail();
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: child %d exited with status %d\n", what, (int)pid,
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		harness_fail();
	}
}

/*
 * fork() for a test's child process: stdio is flushed first (or the child
 * would print the parent's buffered output again), and the child arms a
 * watchdog of its own (@watchdog_s), alarm() not being inherited. The child
 * holds a copy of every end open in this process at the fork: it closes
 * those it does not use (harness_close_inherited()).
 */
static HARNESS_UNUSED pid_t harness_fork(unsigned watchdog_s)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		harness_watchdog(watchdog_s);
	return pid;
}

/*
 * In a forked child, right after fork(): close the child's copies of the
 * ends it inherited and does not use, as a careful pipe(2) user closes the
 * fds it does not need. Each copy is an end of the child's own, counted in
 * the pipe's reader or writer count from the fork until it is closed or the
 * child dies: a copy of a writer left open keeps a reader from ever seeing
 * end of stream, and one of a reader keeps -EPIPE away (an exec() drops
 * them: the memfd is close-on-exec, and with it the child's liveness
 * locks). Closing them never touches the parent's ends.
 * NULL entries are skipped; each closed entry is set to NULL.
 */
static HARNESS_UNUSED void harness_close_inherited(struct up_end **ends, int n)
{
	for (int i = 0; i < n; i++) {
		if (ends[i] == NULL)
			continue;
		CHECK_OK(up_close(ends[i]));
		ends[i] = NULL;
	}
}

/* In a forked child: map the inherited memfd afresh, as a real peer process
 * would, instead of using the parent's handles (close the inherited ends
 * too: harness_close_inherited()). */
static HARNESS_UNUSED struct up_pipe *harness_attach(struct up_pipe *inherited)
{
	struct up_pipe *q = NULL;
	int fd = up_pipe_fd(inherited);

	CHECK(fd >= 0);
	CHECK_OK(up_pipe_attach(fd, &q));
	CHECK(q != NULL);
	return q;
}

/* Start-up ordering between processes through a kernel pipe(2): a child
 * says "ready" (its end is open) with one byte, the parent waits for it. */
static HARNESS_UNUSED void harness_signal_ready(int fd)
{
	CHECK_EQ(write(fd, "R", 1), 1);
}

static HARNESS_UNUSED void harness_wait_ready(int fd)
{
	char c = 0;
	ssize_t r;

	do
		r = read(fd, &c, 1);
	while (r < 0 && errno == EINTR);
	CHECK_EQ(r, 1);
	CHECK_EQ(c, 'R');
}

#endif /* UP_TESTS_HARNESS_H */
