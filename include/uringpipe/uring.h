/* SPDX-License-Identifier: MIT */
/*
 * uringpipe/uring.h - for services that run their own io_uring loop.
 *
 * The only uringpipe header that includes liburing.h. It lets a pipe
 * endpoint wait in the caller's ring next to its sockets and timers: the
 * endpoint's sleep is an IORING_OP_FUTEX_WAIT on the pipe's shared wait
 * word, prepared on an SQE of the caller's ring.
 *
 *   for (;;) {
 *       ssize_t n = up_read(r, buf, sizeof(buf));      // r is UP_NONBLOCK
 *       if (n != -EAGAIN) { handle(n); continue; }
 *       struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
 *       if (up_uring_prep_poll(r, sqe) == 1) {        // ready already
 *           io_uring_prep_nop(sqe);                    // sqe must not dangle
 *       }
 *       io_uring_sqe_set_data64(sqe, TAG_PIPE);
 *       ... submit and wait as usual; on TAG_PIPE's CQE: retry up_read ...
 *   }
 *
 * Requires a kernel with IORING_OP_FUTEX_WAIT (6.7+). A peer process that
 * dies is not watched in this mode: poll its pidfd in the same ring if that
 * matters, or use up_pollfd(), which does.
 */
#ifndef URINGPIPE_URING_H
#define URINGPIPE_URING_H

#include <liburing.h>

#include "../uringpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * up_uring_prep_poll - prepare @sqe (every field is set; set user_data
 * afterwards) so that it completes when @e may be able to make progress.
 * Returns 0 when prepared (submit it; the endpoint stays announced as a
 * sleeper until the next call on it), 1 when progress is possible now (the
 * SQE is left untouched: fill it with something else or a NOP), -EINVAL,
 * -EPROTO. Any CQE result (0, -EAGAIN, -ECANCELED) just means "retry the
 * call". A writer held up by another writer's lock gets 1 here (up_poll_arm
 * waits for that lock; this mode does not), so a retry loop goes round
 * until that writer lets go. Exclusive on end; never enters the kernel.
 */
UP_API int up_uring_prep_poll(struct up_end *e, struct io_uring_sqe *sqe);

#ifdef __cplusplus
}
#endif
#endif /* URINGPIPE_URING_H */
