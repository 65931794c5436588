/* SPDX-License-Identifier: MIT */
/*
 * uring_api.c - include/uringpipe/uring.h: waiting for an endpoint on the
 * caller's own io_uring.
 */
#include "up_int.h"
#include "uringpipe/uring.h"
#include "uring_int.h"

int up_uring_prep_poll(struct up_end *e, struct io_uring_sqe *sqe)
{
	_Atomic uint32_t *word;
	uint32_t expect;
	int r;

	if (!e || !sqe)
		return -EINVAL;
	/* Not on the writers' lock (locks false): its disarm could not know
	 * when this ring's wait is gone, and nothing here watches a holder's
	 * process. A writer held up by another's lock gets 1 (try again). */
	r = up__ring_arm(e, false, &word, &expect);
	if (r != 0)
		return r;
	/* The endpoint is announced (wake.h): a waker that makes progress
	 * after this point bumps *word, which completes the FUTEX_WAIT or
	 * makes it fail at once with -EAGAIN. */
	up__prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, word, expect);
	return 0;
}
