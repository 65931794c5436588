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
