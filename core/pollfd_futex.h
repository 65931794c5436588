/* SPDX-License-Identifier: MIT */
/*
 * pollfd_futex.h - poll mode (up_pollfd/up_poll_arm) on the futex(2) backend:
 * the per-end state that core/wake_futex.c embeds in its waker, and the calls
 * behind its pollfd, arm and disarm ops. core/pollfd_futex.c says how.
 */
#ifndef UP_CORE_POLLFD_FUTEX_H
#define UP_CORE_POLLFD_FUTEX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pidwatch.h"

#define UP_PF_PIDFDS UP_PW_PIDFDS /* pidfds of one armed end watched */

struct up__pf_helper;

/* One end's poll-mode state. Every field past efd/pid up to pw is guarded
 * by the process's registry lock (pollfd_futex.c) while the end is
 * registered; pw by the pidfd watcher's (pidwatch.c). */
struct up__pf_end {
	int efd;          /* what up_pollfd() returns; written when the armed
			   * wait would end (a helper) or a peer died (the
			   * process's pidfd watcher) */
	pid_t pid;        /* process that made it (a forked copy only closes) */
	bool armed;       /* between arm and disarm; the end's own thread only */
	int state;        /* PF_IDLE, PF_PENDING (on a watch), PF_FIRED */
	int why;          /* what fired it (PF_WHY_*) */
	uint32_t gen;     /* the registry's generation when registered */
	struct up__pf_helper *h;
	int wi;           /* its watch in h */
	struct up__pf_end *next, *prev; /* the watch's pending ends */
	uint32_t expect;
	bool tick;        /* blind: readable every UP_WAIT_SLICE_NS while armed */
	uint64_t tick_at;
	uint64_t early_at; /* readable then, a planned early wake (early.c); 0: none */
	struct up__pw_end pw; /* the peers' pidfds, while armed */
};

/* -1 in the fd, nothing registered. */
void up__pf_init(struct up__pf_end *pe);
/* The fd (made once), -EOPNOTSUPP without futex_waitv(2), or -errno. */
int up__pf_pollfd(struct up__pf_end *pe, uint64_t *syscalls);
/* Register a wait for *word != expect (or a wake on it), with the peers'
 * pidfds; @tick: no pidfd covers every peer; @early_ns: the wait also ends
 * that long from now (0: no such end). 0 or -errno. */
int up__pf_arm(struct up__pf_end *pe, _Atomic uint32_t *word, uint32_t expect,
	       const int *pidfds, int npeer, bool tick, uint64_t early_ns, uint64_t *syscalls);
/* Make the fd readable now, nothing registered (a reader's early window,
 * poll.c); the disarm resets it. 0 or -errno. */
int up__pf_arm_now(struct up__pf_end *pe, uint64_t *syscalls);
/* Unregister; no helper waits on the word for this end once it returns. 1
 * when a pidfd or a tick fired (look for dead peers), else 0. */
int up__pf_disarm(struct up__pf_end *pe, uint64_t *syscalls);
/* Disarm and close the fd. */
void up__pf_fini(struct up__pf_end *pe);

/* For tests: helper threads made, words watched, ends pending, and the
 * helpers' returns from futex_waitv(2), all helpers of this process. */
struct up__pf_stats {
	int helpers;
	int watches;
	int pending;
	uint64_t rounds;
};
void up__pf_stats(struct up__pf_stats *st);

#endif /* UP_CORE_POLLFD_FUTEX_H */
