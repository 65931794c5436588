/* SPDX-License-Identifier: MIT */
/*
 * pidwatch.h - the futex backend's pidfd watcher (pidwatch.c): the peers'
 * pidfds of an armed poll-mode end, watched by one thread of the process,
 * which makes the end's fd readable when one of those processes ends.
 */
#ifndef UP_CORE_PIDWATCH_H
#define UP_CORE_PIDWATCH_H

#include <stdbool.h>
#include <stdint.h>

#define UP_PW_PIDFDS 16 /* pidfds one end has watched at once */

/* One end's part. Every field is guarded by the watcher's lock while the
 * end is watched (npidfd > 0). */
struct up__pw_end {
	int efd;       /* written by the watcher when a watched peer dies */
	bool fired;    /* the watcher wrote efd since the watch began */
	uint32_t gen;  /* the watcher's generation when watched (fork) */
	int pidfd[UP_PW_PIDFDS];
	int npidfd;
	struct up__pw_end *next, *prev; /* the watched ends */
};

/* Watch the first @n (at most UP_PW_PIDFDS) of @pidfds for @we, with @efd
 * to write. Returns how many are watched: fewer than @n when the watcher or
 * an entry in its set could not be had here (the caller then ticks). */
int up__pw_watch(struct up__pw_end *we, int efd, const int *pidfds, int n, uint64_t *syscalls);
/* Stop watching. True when the watcher wrote efd meanwhile; it does not
 * write it once this returns. */
bool up__pw_unwatch(struct up__pw_end *we, uint64_t *syscalls);
/* After up__pw_unwatch(): whether a process of the pidfds watched has
 * ended by now (one that died after the watcher's last look, or before it
 * got to us); the pidfds are forgotten. */
bool up__pw_dead(struct up__pw_end *we, uint64_t *syscalls);

#endif /* UP_CORE_PIDWATCH_H */
