/* SPDX-License-Identifier: MIT */
/*
 * test_fds.c - what a pipe costs in file descriptors: one (its memfd), plus
 * a constant per thread (the thread's io_uring rings), plus one per end put
 * in poll mode (up_pollfd()).
 *
 * With RLIMIT_NOFILE's soft limit at 1024, 600 default pipes with both ends
 * open in one process must fit: every reader blocks on its empty pipe (the
 * writer thread writes only once the reader is seen asleep in the kernel),
 * so every end has slept or woken, which is where an end would have made a
 * ring of its own. The open fds (/proc/self/fd) must then be at most 600
 * plus a small constant over the count before, and back to it once every
 * pipe is closed and the writer thread has exited (its ring goes with it).
 * Then 100 readers are put in poll mode: exactly one more fd each, none for
 * a second up_pollfd() or for arming, and all of them gone at close.
 *
 * A thread's ring serves one call at a time: a signal handler that calls in
 * while its thread sleeps must not use the ring the sleep is in
 * (handler_reenters). The handler wakes the sleeper's own pipe, so that
 * the sleep's completion is due, then blocks on a second pipe; on the
 * shared ring its wait would take that completion for a stale one and the
 * sleep, once resumed, would wait seconds for it.
 *
 * A forked child's ends of an SQPOLL pipe must not touch the forking
 * thread's rings, which did not come along (sqpoll_end_forked), and the
 * child keeps no copy of any thread's ring fd (fork_keeps_no_ring).
 *
 * A thread whose ring breaks gets another (broken_ring_replaced).
 *
 * Registered twice: on the backend the host gives and on futex(2)
 * (UP_FORCE_FUTEX=1), where poll mode has its own fd per end too.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "uringpipe.h"

#define NPIPES 600
#define NPOLL 100
/* Beyond the memfds: the rings of the two threads (one each here; SQPOLL is
 * not asked for), and room for what the C library may open on its own. */
#define SLACK 8

struct pair {
	struct up_end *ends[2]; /* [0] reads, [1] writes */
};

static struct pair pipes[NPIPES];
static _Atomic int turn = -1;       /* the pipe the main thread reads now */
static _Atomic pid_t reader_tid;

static void limit_fds(void)
{
	struct rlimit rl;

	CHECK_SYS(getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 1024)
		SKIP("RLIMIT_NOFILE hard limit below 1024");
	rl.rlim_cur = 1024;
	CHECK_SYS(setrlimit(RLIMIT_NOFILE, &rl));
}

/* Writes one byte to each pipe in turn, once its reader sleeps in it. */
static void *writer_main(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < NPIPES; i++) {
		char c = (char)(i & 0x7f);

		while (atomic_load(&turn) != i)
			sched_yield();
		harness_wait_asleep(&reader_tid);
		CHECK_EQ(up_write(pipes[i].ends[1], &c, 1), 1);
	}
	return NULL;
}

/* One pipe made, used and closed first, so that the main thread's own
 * rings (made once per thread) are in the count taken before. */
static void warm_up(void)
{
	struct up_end *e[2];
	char c = 'w';

	CHECK_OK(up_pipe2(e, NULL));
	CHECK_EQ(up_write(e[1], &c, 1), 1);
	CHECK_EQ(up_read(e[0], &c, 1), 1);
	CHECK_OK(up_close(e[0]));
	CHECK_OK(up_close(e[1]));
}

static void six_hundred_pipes(void)
{
	struct up_stats st;
	pthread_t t;
	int before, during, i;

	warm_up();
	before = harness_fds(NULL);
	for (i = 0; i < NPIPES; i++)
		CHECK_OK(up_pipe2(pipes[i].ends, NULL));
	atomic_store(&reader_tid, (pid_t)syscall(SYS_gettid));
	CHECK_EQ(pthread_create(&t, NULL, writer_main, NULL), 0);
	for (i = 0; i < NPIPES; i++) {
		char c = 0;

		atomic_store(&turn, i);
		CHECK_EQ(up_read(pipes[i].ends[0], &c, 1), 1);
		CHECK_EQ(c, (char)(i & 0x7f));
		/* It slept (the writer waited for that). */
		CHECK_OK(up_stats(up_end_pipe(pipes[i].ends[0]), &st));
		CHECK(st.waits >= 1);
	}
	during = harness_fds(NULL);
	CHECK_EQ(up_stats(up_end_pipe(pipes[0].ends[0]), &st), 0);
	printf("# %d pipes, both ends open, backend %s: %d fds before, %d with them open "
	       "(%.2f per pipe)\n",
	       NPIPES, st.backend, before, during, (double)(during - before) / NPIPES);
	CHECK(during >= before + NPIPES);
	CHECK(during <= before + NPIPES + SLACK);
	CHECK_EQ(pthread_join(t, NULL), 0);
	/* And every writer woke its reader (counted after the wake's system
	 * call, so looked at once the writer thread is done). */
	for (i = 0; i < NPIPES; i++) {
		CHECK_OK(up_stats(up_end_pipe(pipes[i].ends[0]), &st));
		CHECK(st.wakes >= 1);
	}

	for (i = 0; i < NPIPES; i++) {
		CHECK_OK(up_close(pipes[i].ends[0]));
		CHECK_OK(up_close(pipes[i].ends[1]));
	}
	/* The writer thread has exited: its ring went with it. */
	CHECK_EQ(harness_fds(NULL), before);
}

/* Poll mode: one fd per end, made at its first up_pollfd(), none beyond. */
static void poll_mode_fd_per_end(void)
{
	int before, made, fd[NPOLL], i;

	for (i = 0; i < NPOLL; i++) {
		struct up_pipe *p;

		CHECK_OK(up_pipe_create(NULL, &p));
		CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &pipes[i].ends[0]));
		CHECK_OK(up_open(p, UP_WR, &pipes[i].ends[1]));
		up_pipe_release(p); /* the ends keep it */
	}
	before = harness_fds(NULL);
	for (i = 0; i < NPOLL; i++) {
		fd[i] = up_pollfd(pipes[i].ends[0]);
		if (fd[i] == -EOPNOTSUPP)
			SKIP("no poll mode here (futex_waitv refused)");
		CHECK(fd[i] >= 0);
	}
	made = harness_fds(NULL);
	printf("# %d ends in poll mode: %d fds more\n", NPOLL, made - before);
	CHECK_EQ(made, before + NPOLL);
	for (i = 0; i < NPOLL; i++) {
		struct pollfd pfd = { .fd = fd[i], .events = POLLIN };
		char c = 'p';

		CHECK_EQ(up_pollfd(pipes[i].ends[0]), fd[i]);
		CHECK_EQ(up_read(pipes[i].ends[0], &c, 1), -EAGAIN);
		CHECK_EQ(up_poll_arm(pipes[i].ends[0]), 0);
		CHECK_EQ(up_write(pipes[i].ends[1], &c, 1), 1);
		CHECK_EQ(poll(&pfd, 1, 10000), 1);
		CHECK_EQ(up_read(pipes[i].ends[0], &c, 1), 1);
		CHECK_EQ(c, 'p');
	}
	/* Arming made no fd; a helper thread of the futex backend is none. */
	CHECK_EQ(harness_fds(NULL), made);
	for (i = 0; i < NPOLL; i++) {
		CHECK_OK(up_close(pipes[i].ends[0]));
		CHECK_OK(up_close(pipes[i].ends[1]));
	}
	CHECK_EQ(harness_fds(NULL), before - NPOLL);
}

static struct up_end *hr_ends[2][2]; /* [pipe][0 reads, 1 writes] */
static _Atomic int hr_stage;
static _Atomic pid_t hr_tid;
static ssize_t hr_got;

/* SIGUSR1 on the thread asleep in up_read() of pipe 0. */
static void hr_handler(int sig)
{
	char c = 'x';

	(void)sig;
	/* The sleep's completion becomes due: pipe 0 gets its byte. */
	if (up_write(hr_ends[0][1], &c, 1) != 1)
		_exit(3);
	atomic_store(&hr_stage, 1);
	/* And this handler sleeps in its turn, until pipe 1 gets one. */
	hr_got = up_read(hr_ends[1][0], &c, 1);
	atomic_store(&hr_stage, 2);
}

static void *hr_sleeper(void *arg)
{
	char c = 0;
	ssize_t *res = arg;

	atomic_store(&hr_tid, (pid_t)syscall(SYS_gettid));
	*res = up_read(hr_ends[0][0], &c, 1);
	return NULL;
}

static void handler_reenters(void)
{
	struct sigaction sa;
	ssize_t res = 0;
	pthread_t t;
	uint64_t t0;
	char c = 'y';

	CHECK_OK(up_pipe2(hr_ends[0], NULL));
	CHECK_OK(up_pipe2(hr_ends[1], NULL));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hr_handler;
	sigemptyset(&sa.sa_mask);
	CHECK_SYS(sigaction(SIGUSR1, &sa, NULL));
	CHECK_EQ(pthread_create(&t, NULL, hr_sleeper, &res), 0);
	harness_wait_asleep(&hr_tid);
	CHECK_EQ(pthread_kill(t, SIGUSR1), 0);
	while (atomic_load(&hr_stage) != 1)
		sched_yield();
	harness_wait_asleep(&hr_tid); /* the handler, in its up_read() */
	t0 = harness_now_ns();
	CHECK_EQ(up_write(hr_ends[1][1], &c, 1), 1);
	CHECK_EQ(pthread_join(t, NULL), 0);
	printf("# handler's read and the interrupted read done %.1f ms after the last write\n",
	       (double)(harness_now_ns() - t0) / 1e6);
	CHECK_EQ(atomic_load(&hr_stage), 2);
	CHECK_EQ(hr_got, 1);
	CHECK_EQ(res, 1);
	/* A stale completion costs the interrupted sleep a cancel that gives
	 * up after 5 s; a second is far beyond a wake. */
	CHECK(harness_now_ns() - t0 < 1000000000ull);
	signal(SIGUSR1, SIG_DFL);
	CHECK_OK(up_close(hr_ends[0][0]));
	CHECK_OK(up_close(hr_ends[0][1]));
	CHECK_OK(up_close(hr_ends[1][0]));
	CHECK_OK(up_close(hr_ends[1][1]));
}

/* An SQPOLL pipe used here, then by a forked child through its copies. */
static void sqpoll_end_forked(void)
{
	struct up_config cfg;
	struct up_end *e[2];
	int status;
	pid_t child;
	char c = 's';

	up_config_init(&cfg);
	cfg.flags |= UP_CFG_SQPOLL;
	CHECK_OK(up_pipe2(e, &cfg));
	CHECK_EQ(up_write(e[1], &c, 1), 1);
	CHECK_EQ(up_read(e[0], &c, 1), 1);
	fflush(NULL);
	child = fork();
	CHECK_SYS(child);
	if (child == 0) {
		/* The child's copies: used, then closed, each with the
		 * child's own ring. */
		if (up_write(e[1], &c, 1) != 1 || up_read(e[0], &c, 1) != 1)
			_exit(2);
		up_close(e[0]);
		up_close(e[1]);
		_exit(0);
	}
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(up_write(e[1], &c, 1), 1);
	CHECK_EQ(up_read(e[0], &c, 1), 1);
	CHECK_OK(up_close(e[0]));
	CHECK_OK(up_close(e[1]));
}

static int fk_go[2];
static _Atomic int fk_ready;

/* A thread with a ring of its own, alive across the fork. */
static void *fk_thread(void *arg)
{
	struct up_end *e[2];
	char c = 't';

	(void)arg;
	CHECK_OK(up_pipe2(e, NULL));
	CHECK_EQ(up_write(e[1], &c, 1), 1);
	CHECK_EQ(up_read(e[0], &c, 1), 1);
	CHECK_OK(up_close(e[0]));
	CHECK_OK(up_close(e[1]));
	atomic_store(&fk_ready, 1);
	CHECK_EQ(read(fk_go[0], &c, 1), 1);
	return NULL;
}

static void fork_keeps_no_ring(void)
{
	pthread_t t;
	int status, before;
	pid_t child;
	char c = 'g';

	CHECK_SYS(pipe(fk_go));
	CHECK_EQ(pthread_create(&t, NULL, fk_thread, NULL), 0);
	while (!atomic_load(&fk_ready))
		sched_yield();
	before = harness_fds("io_uring");
	fflush(NULL);
	child = fork();
	CHECK_SYS(child);
	if (child == 0)
		_exit(harness_fds("io_uring") == 0 ? 0 : 1);
	CHECK_EQ(waitpid(child, &status, 0), child);
	printf("# io_uring fds: %d in the parent, none in the child\n", before);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(write(fk_go[1], &c, 1), 1);
	CHECK_EQ(pthread_join(t, NULL), 0);
	close(fk_go[0]);
	close(fk_go[1]);
}

/*
 * A thread ring found broken is retired and, a little later, made again
 * (uring/tring.c, tring_retire()). A fresh thread's first sleep makes its
 * ring; that ring's fd is then put over with /dev/null, as a process
 * closing fds it does not know of and opening others would, so its next
 * sleep's enter fails and the ring is broken. Timed sleeps go on (through
 * futex(2) meanwhile) until the thread has an io_uring fd again, for 5 s
 * at most: a thread left on futex(2) for good never gets one. Then data
 * still flows, the old ring's mappings are gone, and the number that was
 * the ring's still holds /dev/null: the library does not close a number an
 * enter found no longer its ring's.
 */
static struct up_end *br_ends[2];

/* This process's io_uring fds, their numbers in @fds. */
static int br_ring_fds(int *fds, int max)
{
	return harness_fd_list("io_uring", fds, max);
}

/* Mappings of io_uring rings in this process: a ring retired without its
 * unmap would stay here. */
static int br_ring_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "io_uring"))
			n++;
	fclose(f);
	return n;
}

static void *br_thread(void *arg)
{
	int before[64], after[64], nb, na, ring = -1, devnull, i, j, sleeps = 0, maps;
	uint64_t until;
	char c = 'b';

	(void)arg;
	nb = br_ring_fds(before, 64);
	CHECK_EQ(up_read(br_ends[0], &c, 1), -ETIMEDOUT); /* makes our ring */
	na = br_ring_fds(after, 64);
	CHECK_EQ(na, nb + 1);
	for (i = 0; i < na && ring < 0; i++) {
		for (j = 0; j < nb && before[j] != after[i]; j++)
			;
		if (j == nb)
			ring = after[i];
	}
	CHECK(ring >= 0);
	maps = br_ring_maps();
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK_SYS(devnull);
	CHECK_SYS(dup2(devnull, ring));
	close(devnull);
	CHECK_EQ(br_ring_fds(after, 64), nb);
	until = harness_now_ns() + 5000000000ull;
	do {
		CHECK_EQ(up_read(br_ends[0], &c, 1), -ETIMEDOUT);
		sleeps++;
	} while (br_ring_fds(after, 64) == nb && harness_now_ns() < until);
	printf("# io_uring fds after the break and %d timed sleeps: %d (%d before it)\n",
	       sleeps, br_ring_fds(after, 64), nb + 1);
	CHECK_EQ(br_ring_fds(after, 64), nb + 1);
	CHECK_EQ(br_ring_maps(), maps); /* the old ring's went, the new one's came */
	CHECK_EQ(up_write(br_ends[1], &c, 1), 1);
	c = 0;
	CHECK_EQ(up_read(br_ends[0], &c, 1), 1);
	CHECK_EQ(c, 'b');
	{
		char path[32], link[64];
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", ring);
		k = readlink(path, link, sizeof(link) - 1);
		CHECK(k > 0);
		link[k > 0 ? k : 0] = '\0';
		CHECK(strcmp(link, "/dev/null") == 0);
		close(ring);
	}
	return NULL;
}

static void broken_ring_replaced(void)
{
	struct up_stats st;
	pthread_t t;

	CHECK_OK(up_pipe2(br_ends, NULL));
	CHECK_OK(up_stats(up_end_pipe(br_ends[0]), &st));
	if (strcmp(st.backend, "io_uring") != 0) {
		printf("# backend %s: no thread rings to break\n", st.backend);
	} else {
		CHECK_OK(up_set_timeout(br_ends[0], 2));
		CHECK_EQ(pthread_create(&t, NULL, br_thread, NULL), 0);
		CHECK_EQ(pthread_join(t, NULL), 0);
	}
	CHECK_OK(up_close(br_ends[0]));
	CHECK_OK(up_close(br_ends[1]));
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(100);
	harness_fail_on_sigpipe();
	limit_fds();
	RUN(six_hundred_pipes);
	RUN(poll_mode_fd_per_end);
	RUN(handler_reenters);
	RUN(sqpoll_end_forked);
	RUN(fork_keeps_no_ring);
	RUN(broken_ring_replaced);
	return 0;
}
