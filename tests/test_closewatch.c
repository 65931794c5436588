/* SPDX-License-Identifier: MIT */
/*
 * test_closewatch.c - the process's inotify instance and its serving thread
 * (core/closewatch.c) through their own calls: watches counted per inode,
 * the instance closed with its last watch, the thread closing it itself,
 * a release racing a new watch, and fork.
 *
 *   last_watch_closes_the_instance  two handles of one memfd share a watch;
 *       the instance goes with the last one, served by the thread or not.
 *   release_races_a_new_watch  one thread drops the last watch of pipe A
 *       while another watches pipe B, thousands of times with the thread
 *       serving: the drop must return (it waits for the thread to close
 *       the instance, or for the new watch to cancel that), no fd may be
 *       closed twice, and the end state must be no watch, no instance.
 *   fork_child_closes_its_copy  a child of fork() holds no copy of the
 *       parent's instance, makes and serves its own, and leaves none.
 *
 * A hang fails by the watchdog.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"

#if defined(__SANITIZE_THREAD__)
/* fork_child_closes_its_copy's child starts a serving thread of its own,
 * which TSan refuses after a multi-threaded fork unless told: the child's
 * own threads are what it then checks. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

/* Can this process have an instance and a watch at all? */
static bool inotify_ok(struct up_pipe *p)
{
	char path[40];
	int fd = inotify_init1(IN_CLOEXEC), wd;

	if (fd < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", up_pipe_fd(p));
	wd = inotify_add_watch(fd, path, IN_CLOSE_WRITE);
	close(fd);
	return wd >= 0;
}

static void last_watch_closes_the_instance(void)
{
	struct up_pipe *p, *q;
	uint64_t sc = 0;
	int serve, fd;

	for (serve = 0; serve < 2; serve++) {
		CHECK_OK(up_pipe_create(NULL, &p));
		CHECK_OK(up_pipe_attach(up_pipe_fd(p), &q)); /* same memfd */
		fd = up__closewatch_fd(p, &sc);
		CHECK(fd >= 0);
		CHECK_EQ(up__closewatch_fd(q, &sc), fd);
		if (serve) {
			up__closewatch_serve(fd);
			CHECK(up__closewatch_served());
		}
		CHECK_EQ(harness_inotify_watches(), 1); /* one inode, one watch */
		CHECK_EQ(harness_fds("inotify"), 1);
		up_pipe_release(p);
		CHECK_EQ(harness_inotify_watches(), 1);
		up_pipe_release(q);
		CHECK_EQ(harness_inotify_watches(), 0);
		CHECK_EQ(harness_fds("inotify"), 0);
		CHECK(!up__closewatch_served());
	}
}

#define RACE_ROUNDS 2000

/* Round k: main watches pipe A and drops it (the last watch: the drop asks
 * the thread to close the instance and waits); meanwhile the racer watches
 * pipe B, and keeps it until main's drop has returned. A drop that waited
 * on for a watch that cancelled its request would wait for B's release,
 * which waits for it: the racer's deadline fails the test. */
struct racer {
	_Atomic int start;    /* round main is dropping A in */
	_Atomic int released; /* round whose drop of A returned */
	_Atomic int b_done;   /* round whose B the racer released */
};

static void *watch_b(void *arg)
{
	struct racer *r = arg;
	uint64_t sc = 0;
	int k;

	for (k = 1; k <= RACE_ROUNDS; k++) {
		uint64_t deadline = harness_now_ns() + 5000000000ull;
		struct up_pipe *b;
		int fd;

		CHECK_OK(up_pipe_create(NULL, &b));
		while (atomic_load(&r->start) < k)
			CHECK(harness_now_ns() < deadline);
		fd = up__closewatch_fd(b, &sc);
		CHECK(fd >= 0);
		CHECK(fcntl(fd, F_GETFD) >= 0); /* the instance it names is open */
		up__closewatch_serve(fd);
		while (atomic_load(&r->released) < k) {
			if (harness_now_ns() >= deadline) {
				fprintf(stderr, "round %d: the drop of A still waits 5 s on\n", k);
				harness_fail();
			}
		}
		up_pipe_release(b);
		atomic_store(&r->b_done, k);
	}
	return NULL;
}

static void release_races_a_new_watch(void)
{
	struct racer r = { 0 };
	pthread_t t;
	uint64_t sc = 0;
	int k, canary = open("/dev/null", O_RDONLY | O_CLOEXEC);

	CHECK_SYS(canary);
	CHECK_EQ(pthread_create(&t, NULL, watch_b, &r), 0);
	for (k = 1; k <= RACE_ROUNDS; k++) {
		uint64_t deadline = harness_now_ns() + 5000000000ull;
		struct up_pipe *a;
		int fd;

		CHECK_OK(up_pipe_create(NULL, &a));
		fd = up__closewatch_fd(a, &sc);
		CHECK(fd >= 0);
		up__closewatch_serve(fd);
		atomic_store(&r.start, k);
		up_pipe_release(a);
		atomic_store(&r.released, k);
		/* An fd of ours the library must never close. */
		CHECK(fcntl(canary, F_GETFD) >= 0);
		while (atomic_load(&r.b_done) < k)
			CHECK(harness_now_ns() < deadline);
	}
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(harness_inotify_watches(), 0);
	CHECK_EQ(harness_fds("inotify"), 0);
	CHECK(!up__closewatch_served());
	CHECK(fcntl(canary, F_GETFD) >= 0);
	close(canary);
}

static void fork_child_closes_its_copy(void)
{
	struct up_pipe *p;
	uint64_t sc = 0;
	int fd, st;
	pid_t pid;

	CHECK_OK(up_pipe_create(NULL, &p));
	fd = up__closewatch_fd(p, &sc);
	CHECK(fd >= 0);
	up__closewatch_serve(fd);
	CHECK(up__closewatch_served());
	pid = fork();
	CHECK_SYS(pid);
	if (pid == 0) {
		struct up_pipe *c;
		int cfd;

		harness_watchdog(20);
		/* No copy of the parent's instance, no thread. */
		CHECK_EQ(harness_fds("inotify"), 0);
		CHECK(!up__closewatch_served());
		CHECK_OK(up_pipe_create(NULL, &c));
		cfd = up__closewatch_fd(c, &sc);
		CHECK(cfd >= 0);
		up__closewatch_serve(cfd);
		CHECK(up__closewatch_served());
		CHECK_EQ(harness_inotify_watches(), 1);
		up_pipe_release(c);
		/* The parent's handle: its watch is the parent's, not ours. */
		up_pipe_release(p);
		CHECK_EQ(harness_fds("inotify"), 0);
		_exit(0);
	}
	while (waitpid(pid, &st, 0) < 0)
		CHECK(errno == EINTR);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The parent's instance and thread are as they were. */
	CHECK(up__closewatch_served());
	CHECK_EQ(harness_inotify_watches(), 1);
	up_pipe_release(p);
	CHECK_EQ(harness_inotify_watches(), 0);
	CHECK_EQ(harness_fds("inotify"), 0);
}

int main(int argc, char **argv)
{
	struct up_pipe *p;

	harness_init(argc, argv);
	harness_watchdog(60);
	CHECK_OK(up_pipe_create(NULL, &p));
	if (!inotify_ok(p)) {
		printf("# skipped: no inotify instance or watch here\n");
		return 77;
	}
	up_pipe_release(p);
	RUN(last_watch_closes_the_instance);
	RUN(release_races_a_new_watch);
	RUN(fork_child_closes_its_copy);
	return 0;
}
