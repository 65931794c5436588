/* SPDX-License-Identifier: MIT */
/*
 * test_wait_refused.c - a sleep that the kernel will not arm in full is
 * still a sleep: the caller never sees the ring's error.
 *
 * A reader watches its writers' processes while it sleeps, one pidfd poll
 * each, queued behind the FUTEX_WAIT in the sleeping thread's ring. With
 * more writers than the ring's submission queue holds, the wait must hand
 * the first SQEs to the kernel to make room; the kernel may refuse that
 * (short of memory: EAGAIN). The reader must then sleep watching fewer
 * peers (uring/wake_uring.c, ring_wait()), not return an error from
 * up_read(): before, it returned -EBUSY.
 *
 * The same holds for the enter that submits the wait and sleeps: refused
 * with a hard error (ENOMEM), the wait sleeps through futex(2) instead.
 *
 * syscall() is wrapped (-Wl,--wrap=syscall): the next io_uring_enter()
 * that submits without waiting fails with EAGAIN (no_room_for_every_peer:
 * the enter that makes room), or the next that submits and waits with
 * ENOMEM (wait_enter_refused). One refusal, as a
 * kernel short of memory for a moment gives: the enters after it work,
 * so the wait's own clean-up does not break the ring (a broken ring
 * falls back to futex(2), which would hide the error). Each refusal is
 * counted, so that a run in which the wait never needed room (or the
 * futex backend) cannot pass for one that was refused.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/io_uring.h>

#include "harness.h"
#include "up_int.h"

#define NWRITERS 10 /* pidfd polls: more than the 8 SQEs a ring holds */

/* Enters still to refuse: ones that make room (submit, no wait), and ones
 * that submit and wait (ENOMEM, a hard error); and how many were. */
static atomic_int refuse_room, refuse_wait, refused;

long __real_syscall(long nr, ...);
long __wrap_syscall(long nr, ...);

long __wrap_syscall(long nr, ...)
{
	long a[6] = { 0 };
	va_list ap;
	int n;

	/* Only the arguments passed: a sixth is on the caller's stack. The
	 * library's calls of syscall(), by number. */
	switch (nr) {
	case SYS_gettid:
		n = 0;
		break;
	case SYS_pidfd_open:
		n = 2;
		break;
	case SYS_futex_waitv:
		n = 5;
		break;
	default: /* SYS_futex, SYS_io_uring_enter */
		n = 6;
		break;
	}
	va_start(ap, nr);
	for (int i = 0; i < n; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	/* io_uring_enter(fd, to_submit, min_complete, flags, ...) */
	if (nr == SYS_io_uring_enter && a[1] > 0) {
		bool wait = ((unsigned long)a[3] & IORING_ENTER_GETEVENTS) != 0;
		atomic_int *left = wait ? &refuse_wait : &refuse_room;

		if (atomic_load(left) > 0) {
			atomic_fetch_sub(left, 1);
			atomic_fetch_add(&refused, 1);
			errno = wait ? ENOMEM : EAGAIN;
			return -1;
		}
	}
	return __real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

struct rd {
	struct up_end *e;
	ssize_t ret;
	_Atomic pid_t tid;
	atomic_int primed, armed, done;
	char buf[256];
};

static void *rd_main(void *arg)
{
	struct rd *r = arg;

	atomic_store(&r->tid, (pid_t)syscall(SYS_gettid));
	/* A first sleep makes this thread's ring, so that the refusals
	 * reach the wait under test, not the ring's making (a thread whose
	 * ring cannot be made sleeps through futex(2) for good). */
	CHECK_OK(up_set_timeout(r->e, 1));
	CHECK_EQ(up_read(r->e, r->buf, sizeof(r->buf)), -ETIMEDOUT);
	CHECK_OK(up_set_timeout(r->e, -1));
	atomic_store(&r->primed, 1);
	while (!atomic_load(&r->armed))
		sched_yield();
	r->ret = up_read(r->e, r->buf, sizeof(r->buf));
	atomic_store(&r->done, 1);
	return NULL;
}

static void refused_wait(int room, int wait)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct rd rd;
	pthread_t th;
	pid_t kids[NWRITERS];
	int ready[2], go[2];
	const char *name;
	uint64_t waits0;
	double until;

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	memset(&rd, 0, sizeof(rd));
	CHECK_OK(up_open(p, UP_RD, &rd.e));
	CHECK_EQ(pipe(ready), 0);
	CHECK_EQ(pipe(go), 0);
	for (int i = 0; i < NWRITERS; i++) {
		kids[i] = harness_fork(60);
		if (kids[i] == 0) {
			struct up_pipe *q;
			struct up_end *w;
			char c;

			harness_close_inherited(&rd.e, 1);
			q = harness_attach(p);
			CHECK_OK(up_open(q, UP_WR, &w));
			harness_signal_ready(ready[1]);
			CHECK_EQ(read(go[0], &c, 1), 1);
			if (i == 0)
				CHECK_EQ(up_write(w, "refused, and asleep all the same", 32), 32);
			CHECK_OK(up_close(w));
			up_pipe_release(q);
			_exit(0);
		}
	}
	for (int i = 0; i < NWRITERS; i++)
		harness_wait_ready(ready[0]);

	CHECK_EQ(pthread_create(&th, NULL, rd_main, &rd), 0);
	while (!atomic_load(&rd.primed))
		sched_yield();
	atomic_store(&refused, 0);
	atomic_store(&refuse_room, room);
	atomic_store(&refuse_wait, wait);
	waits0 = atomic_load(&rd.e->c.waits);
	atomic_store(&rd.armed, 1);
	/* The reader asleep in the library (its second sleep), or back with
	 * its answer. */
	until = harness_now() + 10.0;
	while (!atomic_load(&rd.done) &&
	       !(atomic_load(&rd.e->c.waits) > waits0 &&
		 harness_tid_state(atomic_load(&rd.tid)) == 'S') &&
	       harness_now() < until)
		harness_nap_ns(1000000);
	printf("# reader %s, %d enters refused\n", atomic_load(&rd.done) ? "returned" : "asleep",
	       atomic_load(&refused));
	name = rd.e->waker->ops->name ? rd.e->waker->ops->name : "unchosen";
	if (atomic_load(&refused) == 0 && strcmp(name, "io_uring") != 0)
		printf("# skip: the %s backend has no ring to refuse\n", name);
	else
		CHECK(atomic_load(&refused) > 0);
	CHECK_EQ(write(go[1], "gggggggggg", NWRITERS), NWRITERS);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(rd.ret, 32);
	CHECK(memcmp(rd.buf, "refused, and asleep all the same", 32) == 0);
	for (int i = 0; i < NWRITERS; i++)
		CHECK_EQ(waitpid(kids[i], NULL, 0), kids[i]);
	CHECK_OK(up_close(rd.e));
	up_pipe_release(p);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
}

/* The enter that makes room for the peers' polls refused. */
static void no_room_for_every_peer(void)
{
	refused_wait(1, 0);
}

/* The enter that submits the wait and sleeps refused (ENOMEM). */
static void wait_enter_refused(void)
{
	refused_wait(0, 1);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	RUN(no_room_for_every_peer);
	RUN(wait_enter_refused);
	return 0;
}
