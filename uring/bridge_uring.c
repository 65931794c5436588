/* SPDX-License-Identifier: MIT */
/*
 * bridge_uring.c - the socket side of up_bridge_send/up_bridge_recv
 * (core/bridge.c) through a private io_uring: IORING_OP_SENDMSG,
 * IORING_OP_SENDMSG_ZC and IORING_OP_RECVMSG on iovecs that are pipe pages.
 *
 * One request is in flight at a time and each call waits for it: the pipe
 * pages a send names may be consumed (and reused by the writer) only once
 * the kernel is done with them, which for SENDMSG_ZC is the notification
 * CQE (IORING_CQE_F_NOTIF), not the request's own CQE. A call therefore
 * returns only after both, and a request it gave up on (timeout) is
 * cancelled and still reaped to the end before it returns.
 *
 * liburing 2.3 knows SENDMSG_ZC but not IORING_SEND_ZC_REPORT_USAGE
 * (v6.2): its bit and the notification's "copied" bit are the kernel's
 * uapi values, below. A kernel that refuses the flag gets the request again
 * without it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <liburing.h>

#include "../core/bridge.h"

#define UP__IORING_SEND_ZC_REPORT_USAGE (1u << 3)  /* sqe->ioprio, v6.2 */
#define UP__IORING_NOTIF_USAGE_ZC_COPIED (1u << 31) /* notif cqe->res */

#define BRU_OP     1u /* user_data of the request */
#define BRU_CANCEL 2u /* user_data of its cancel */

struct up__bru {
	struct io_uring ring;
	bool zc, report;
};

int up__bru_open(struct up__bru **out)
{
	struct up__bru *u = calloc(1, sizeof(*u));
	struct io_uring_probe *pr;
	int r;

	if (!u)
		return -ENOMEM;
	r = io_uring_queue_init(4, &u->ring, 0);
	if (r < 0) {
		free(u);
		return r;
	}
	pr = io_uring_get_probe_ring(&u->ring);
	if (!pr || !io_uring_opcode_supported(pr, IORING_OP_SENDMSG) ||
	    !io_uring_opcode_supported(pr, IORING_OP_RECVMSG)) {
		io_uring_free_probe(pr);
		io_uring_queue_exit(&u->ring);
		free(u);
		return -EOPNOTSUPP;
	}
	u->zc = io_uring_opcode_supported(pr, IORING_OP_SENDMSG_ZC);
	u->report = true;
	io_uring_free_probe(pr);
	*out = u;
	return 0;
}

void up__bru_close(struct up__bru *u)
{
	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	free(u);
}

bool up__bru_has_zc(const struct up__bru *u)
{
	return u && u->zc;
}

/*
 * Submits the prepared request and reaps until its result and, when the
 * result said one follows (IORING_CQE_F_MORE), its notification are in.
 * Returns the request's result; *notif_res gets the notification's res.
 */
static int bru_run(struct up__bru *u, int timeout_ms, uint64_t *syscalls, int *notif_res)
{
	bool have_res = false, want_notif = false, cancelled = false, timed_out = false;
	int res = 0;

	while (!have_res || want_notif) {
		struct __kernel_timespec ts, *tp = NULL;
		struct io_uring_cqe *cqe = NULL;
		int r;

		if (timeout_ms > 0 && !cancelled && !have_res) {
			ts.tv_sec = timeout_ms / 1000;
			ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
			tp = &ts;
		}
		(*syscalls)++;
		r = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, tp, NULL);
		if (r == -ETIME && tp) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

			/* Give up on it, but reap it: its pages are named. */
			cancelled = timed_out = true;
			if (sqe) {
				io_uring_prep_cancel64(sqe, BRU_OP, 0);
				io_uring_sqe_set_data64(sqe, BRU_CANCEL);
			}
			continue;
		}
		if (r == -EINTR || r == -ETIME)
			continue;
		if (r < 0)
			return r;
		/* liburing may return having submitted, with no CQE yet. */
		if (!cqe && io_uring_peek_cqe(&u->ring, &cqe) != 0)
			continue;
		{
			uint64_t ud = io_uring_cqe_get_data64(cqe);
			int cres = cqe->res;
			unsigned fl = cqe->flags;

			io_uring_cqe_seen(&u->ring, cqe);
			if (ud != BRU_OP)
				continue;
			if (fl & IORING_CQE_F_NOTIF) {
				*notif_res = cres;
				want_notif = false;
				continue;
			}
			have_res = true;
			res = cres;
			want_notif = (fl & IORING_CQE_F_MORE) != 0;
		}
	}
	return timed_out && (res == -ECANCELED || res == -EINTR) ? -ETIMEDOUT : res;
}

ssize_t up__bru_sendmsg(struct up__bru *u, int fd, const struct msghdr *m, bool zc,
			int timeout_ms, uint64_t *syscalls, bool *copied)
{
	for (;;) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
		bool report = zc && u->zc && u->report;
		int notif = 0, r;

		if (!sqe)
			return -EBUSY;
		if (zc && u->zc) {
			io_uring_prep_sendmsg_zc(sqe, fd, m, MSG_NOSIGNAL);
			if (report)
				sqe->ioprio |= UP__IORING_SEND_ZC_REPORT_USAGE;
		} else {
			io_uring_prep_sendmsg(sqe, fd, m, MSG_NOSIGNAL);
		}
		io_uring_sqe_set_data64(sqe, BRU_OP);
		r = bru_run(u, timeout_ms, syscalls, &notif);
		if (r == -EINVAL && report) {
			u->report = false; /* a kernel before v6.2 */
			continue;
		}
		if (copied)
			*copied = report && (notif & (int)UP__IORING_NOTIF_USAGE_ZC_COPIED);
		return r;
	}
}

ssize_t up__bru_recvmsg(struct up__bru *u, int fd, struct msghdr *m, int timeout_ms,
			uint64_t *syscalls)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	int notif = 0;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_recvmsg(sqe, fd, m, 0);
	io_uring_sqe_set_data64(sqe, BRU_OP);
	return bru_run(u, timeout_ms, syscalls, &notif);
}
