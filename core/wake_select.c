/* SPDX-License-Identifier: MIT */
/*
 * wake_select.c - choose a wakeup backend at run time.
 *
 * io_uring may be refused on the host (kernel.io_uring_disabled, a seccomp
 * profile, an old kernel without IORING_OP_FUTEX_WAIT); the backend is
 * probed per endpoint, and UP_FORCE_FUTEX=1 in the environment forces the
 * futex(2) fallback so tests can cover both paths.
 */
#include <stdlib.h>
#include <string.h>

#include "up_int.h"

static int force_futex(void)
{
	const char *v = getenv("UP_FORCE_FUTEX");

	return v && *v && strcmp(v, "0") != 0;
}

#ifndef UP_HAVE_URING
struct up__waker *up__waker_uring_new(int sqpoll)
{
	(void)sqpoll;
	return NULL;
}
#endif

struct up__waker *up__waker_new(int sqpoll)
{
	struct up__waker *w = NULL;

	if (!force_futex()) {
		if (sqpoll)
			w = up__waker_uring_new(1);
		if (!w)
			w = up__waker_uring_new(0);
	}
	return w ? w : up__waker_futex_new();
}

struct lazy_waker {
	struct up__waker base;
	struct up__waker **slot;
	int sqpoll;
};

/* The real waker, now in *slot; the lazy one is freed. NULL on ENOMEM (the
 * lazy one stays, and the call falls back to futex(2)). */
static struct up__waker *lazy_real(struct up__waker *w)
{
	struct lazy_waker *lw = (struct lazy_waker *)(void *)w;
	struct up__waker *real = up__waker_new(lw->sqpoll);

	if (!real)
		return NULL;
	*lw->slot = real;
	up__free(lw);
	return real;
}

static int lazy_wait(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		     uint64_t timeout_ns, const int *peer_pidfds, int npeer, uint64_t *syscalls)
{
	struct up__waker *real = lazy_real(w);

	if (!real)
		return up__futex_wait(word, expect, timeout_ns, syscalls);
	return real->ops->wait(real, word, expect, timeout_ns, peer_pidfds, npeer, syscalls);
}

static int lazy_wake(struct up__waker *w, _Atomic uint32_t *word, uint32_t nr,
		     const struct up_shm_wait *line, uint64_t *syscalls)
{
	struct up__waker *real = lazy_real(w);

	if (!real) {
		uint32_t bits = line ? up__wake_bits(line, 0) : UP_FUTEX_BITS_ANY;

		return up__futex_wake_bits(word, line ? up__wake_nr(nr, bits) : nr, bits, syscalls);
	}
	return real->ops->wake(real, word, nr, line, syscalls);
}

static void lazy_destroy(struct up__waker *w)
{
	up__free(w);
}

static int lazy_pollfd(struct up__waker *w, uint64_t *syscalls)
{
	struct up__waker *real = lazy_real(w);

	if (!real)
		return -ENOMEM;
	return real->ops->pollfd ? real->ops->pollfd(real, syscalls) : -EOPNOTSUPP;
}

static int lazy_arm(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		    const int *peer_pidfds, int npeer, uint64_t *syscalls)
{
	struct up__waker *real = lazy_real(w);

	if (!real)
		return -ENOMEM;
	real->blind = w->blind;
	return real->ops->arm ? real->ops->arm(real, word, expect, peer_pidfds, npeer, syscalls)
			      : -EOPNOTSUPP;
}

static int lazy_disarm(struct up__waker *w, uint64_t *syscalls)
{
	(void)w;
	(void)syscalls;
	return 0; /* a lazy waker was never armed */
}

static const struct up__wake_ops lazy_ops = {
	.name = NULL,
	.wait = lazy_wait,
	.wake = lazy_wake,
	.destroy = lazy_destroy,
	.pollfd = lazy_pollfd,
	.arm = lazy_arm,
	.disarm = lazy_disarm,
};

struct up__waker *up__waker_lazy(struct up__waker **slot, int sqpoll)
{
	struct lazy_waker *lw = up__calloc(1, sizeof(*lw));

	if (!lw)
		return NULL;
	lw->base.ops = &lazy_ops;
	lw->slot = slot;
	lw->sqpoll = sqpoll;
	return &lw->base;
}

const char *up__waker_probe_name(int sqpoll)
{
	struct up__waker *w = up__waker_new(sqpoll);
	const char *name;

	if (!w)
		return "futex";
	name = w->ops->name;
	w->ops->destroy(w);
	return name;
}
