/* SPDX-License-Identifier: MIT */
/*
 * wake_futex.c - the futex(2) wakeup backend: the fallback where io_uring or
 * its futex opcodes are refused, and the reference the io_uring backend must
 * match. Shared (not private) futexes: the sleeper and the waker may be
 * different processes mapping the same memfd page.
 *
 * Peer death: futex(2) cannot watch pidfds, so the caller bounds every wait
 * with a timeout and checks its peers when it expires.
 *
 * Poll mode (up_pollfd/up_poll_arm) is core/pollfd_futex.c: helper threads
 * wait on the armed words with futex_waitv(2) (Linux 5.16+).
 */
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "up_int.h"
#include "pollfd_futex.h"

struct futex_waker {
	struct up__waker base; /* first: core/ only sees this */
	struct up__pf_end pf;
};

int up__futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t timeout_ns,
		   uint64_t *syscalls)
{
	struct timespec ts, *tsp = NULL;
	long r;

	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tsp = &ts;
	}
	*syscalls += 1;
	r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expect, tsp, NULL, 0);
	if (r < 0)
		return errno == EAGAIN ? 0 : -errno;
	return 0;
}

int up__futex_wake(_Atomic uint32_t *word, uint32_t nr, uint64_t *syscalls)
{
	*syscalls += 1;
	if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, (int)nr, NULL, NULL, 0) < 0)
		return -errno;
	return 0;
}

int up__futex_wake_bits(_Atomic uint32_t *word, uint32_t nr, uint32_t bits,
			uint64_t *syscalls)
{
	if (bits == UP_FUTEX_BITS_ANY)
		return up__futex_wake(word, nr, syscalls);
	*syscalls += 1;
	if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_BITSET, (int)nr, NULL, NULL,
		    bits) < 0)
		return -errno;
	return 0;
}

uint64_t up__timer_slack_ns(void)
{
	static __thread uint64_t slack; /* 0: not asked yet */
	int r;

	if (slack == 0) {
		r = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
		slack = r > 0 ? (uint64_t)r : 50000; /* the kernel's default */
	}
	return slack;
}

static int futex_wait_op(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
			 uint64_t timeout_ns, const int *peer_pidfds, int npeer,
			 uint64_t *syscalls)
{
	(void)w;
	/* The pidfds cannot be polled from a futex wait. The process's
	 * inotify instance, last when present, has a thread to do it. */
	if (npeer > 0)
		up__closewatch_serve(peer_pidfds[npeer - 1]);
	return up__futex_wait(word, expect, timeout_ns, syscalls);
}

static int futex_wake_op(struct up__waker *w, _Atomic uint32_t *word, uint32_t nr,
			 const struct up_shm_wait *line, uint64_t *syscalls)
{
	uint32_t bits;

	(void)w;
	if (!line)
		return up__futex_wake(word, nr, syscalls);
	bits = up__wake_bits(line, 0);
	return up__futex_wake_bits(word, up__wake_nr(nr, bits), bits, syscalls);
}

static void futex_destroy(struct up__waker *w)
{
	up__pf_fini(&((struct futex_waker *)(void *)w)->pf);
	up__free(w);
}

static int futex_pollfd(struct up__waker *w, uint64_t *syscalls)
{
	return up__pf_pollfd(&((struct futex_waker *)(void *)w)->pf, syscalls);
}

static int futex_arm(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		     const int *peer_pidfds, int npeer, uint64_t *syscalls)
{
	struct futex_waker *fw = (struct futex_waker *)(void *)w;

	return up__pf_arm(&fw->pf, word, expect, peer_pidfds, npeer, fw->base.blind || npeer == 0,
			  fw->base.early_ns, syscalls);
}

static int futex_arm_now(struct up__waker *w, uint64_t *syscalls)
{
	return up__pf_arm_now(&((struct futex_waker *)(void *)w)->pf, syscalls);
}

static int futex_disarm(struct up__waker *w, uint64_t *syscalls)
{
	return up__pf_disarm(&((struct futex_waker *)(void *)w)->pf, syscalls);
}

static const struct up__wake_ops futex_ops = {
	.name = "futex",
	.slack = true,
	.wait = futex_wait_op,
	.wake = futex_wake_op,
	.destroy = futex_destroy,
	.pollfd = futex_pollfd,
	.arm = futex_arm,
	.disarm = futex_disarm,
	.arm_now = futex_arm_now,
};

struct up__waker *up__waker_futex_new(void)
{
	struct futex_waker *fw = up__calloc(1, sizeof(*fw));

	if (!fw)
		return NULL;
	fw->base.ops = &futex_ops;
	up__pf_init(&fw->pf);
	return &fw->base;
}
