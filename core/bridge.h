/* SPDX-License-Identifier: MIT */
/*
 * bridge.h - what core/bridge.c (the stream over a socket, up_bridge_send/
 * up_bridge_recv) asks of uring/bridge_uring.c: one private ring per call,
 * through which the socket's sends and receives go. core/bridge.c calls
 * these, never the reverse (.ci/check_calls.py).
 */
#ifndef UP_CORE_BRIDGE_H
#define UP_CORE_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct up__bru; /* a ring of uring/bridge_uring.c's */

/* A ring for one bridge call, or -errno when io_uring is refused (seccomp,
 * io_uring_disabled, an old kernel): the caller then uses send/recv. */
int up__bru_open(struct up__bru **out);
void up__bru_close(struct up__bru *u);
/* Whether the kernel takes IORING_OP_SENDMSG_ZC on this ring. */
bool up__bru_has_zc(const struct up__bru *u);

/*
 * One sendmsg/recvmsg through the ring, waited for. @zc: IORING_OP_SENDMSG_ZC,
 * returned only once the kernel's notification CQE says it is done with the
 * bytes (so the caller may free their pages); *copied (if not NULL) is set
 * when the kernel reported that it copied them after all. @timeout_ms > 0
 * bounds the wait: the request is cancelled and -ETIMEDOUT returned.
 * Returns the bytes moved (0 for a recv at end of stream) or -errno.
 * *syscalls counts the io_uring_enter calls made.
 */
ssize_t up__bru_sendmsg(struct up__bru *u, int fd, const struct msghdr *m, bool zc,
			int timeout_ms, uint64_t *syscalls, bool *copied);
ssize_t up__bru_recvmsg(struct up__bru *u, int fd, struct msghdr *m, int timeout_ms,
			uint64_t *syscalls);

#endif /* UP_CORE_BRIDGE_H */
