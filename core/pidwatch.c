/* SPDX-License-Identifier: MIT */
/*
 * pidwatch.c - the futex backend's pidfd watcher: the peers' pidfds of the
 * armed poll-mode ends of this process sit in one epoll set, as
 * EPOLLONESHOT entries keyed by fd number, and one thread waits on it. A
 * peer's death wakes that thread through the kernel, and it writes the
 * eventfd of the end whose pidfd it is. The set and its thread are made at
 * the first watch, never when nobody polls, and then stay; nothing runs
 * while idle. (The io_uring backend polls the pidfds in the end's own ring,
 * uring/poll_ring.c; the futex words are pollfd_futex.c's.)
 *
 * What must stay true:
 *  - The eventfd is written under the watcher's lock, and an end stops
 *    being watched under it before its fds close, so the watcher never
 *    writes a closed or reused fd.
 *  - An entry is deleted by the end that added it, and only while no other
 *    watched end has a pidfd of that number: a number closed since (the
 *    end's peer list was rebuilt) and reused by another end's watch is that
 *    end's now. A closed pidfd leaves the set by itself.
 *  - A forked child has no watcher thread: its copy of the state is emptied
 *    by the child's atfork handler, and its copy of the set closed (the
 *    parent's stays); its first watch makes its own.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "pidwatch.h"
#include "thread.h"

#define PW_EVENTS     16
#define PW_BACKOFF_NS 1000000L

static struct {
	pthread_mutex_t mu;
	uint32_t gen;              /* bumped in a forked child */
	int ep;                    /* the set; -1 until needed */
	bool failed;               /* making it (or its thread) failed here */
	struct up__pw_end *ends;   /* the watched ends */
} pw = { .mu = PTHREAD_MUTEX_INITIALIZER, .gen = 1, .ep = -1 };

static pthread_once_t pw_once = PTHREAD_ONCE_INIT;

static void pw_prepare(void)
{
	pthread_mutex_lock(&pw.mu);
}

static void pw_parent(void)
{
	pthread_mutex_unlock(&pw.mu);
}

static void pw_child(void)
{
	if (pw.ep >= 0)
		close(pw.ep);
	pw.ep = -1;
	pw.failed = false;
	pw.ends = NULL;
	pw.gen++;
	pthread_mutex_unlock(&pw.mu);
}

static void pw_install(void)
{
	pthread_atfork(pw_prepare, pw_parent, pw_child);
}

/* Under the lock: the watched end with the pidfd @fd. */
static struct up__pw_end *owner(int fd)
{
	struct up__pw_end *we;
	int i;

	for (we = pw.ends; we; we = we->next)
		for (i = 0; i < we->npidfd; i++)
			if (we->pidfd[i] == fd)
				return we;
	return NULL;
}

/*
 * A watched peer died: make its end's fd readable. The end stays watched
 * until it says otherwise. An event for a number no end has now (its end
 * stopped meanwhile, or a copy inherited over fork outlived it) is dropped:
 * oneshot, it does not come back.
 */
static void *watcher_main(void *arg)
{
	struct epoll_event ev[PW_EVENTS];
	int ep = (int)(intptr_t)arg, i, n;
	uint64_t one = 1;

	for (;;) {
		n = epoll_wait(ep, ev, PW_EVENTS, -1);
		if (n < 0) {
			struct timespec b = { 0, PW_BACKOFF_NS };

			if (errno != EINTR)
				nanosleep(&b, NULL); /* not ours to fix; do not spin */
			continue;
		}
		pthread_mutex_lock(&pw.mu);
		if (pw.ep != ep) {
			/* Never: the set lives as long as the process. */
			pthread_mutex_unlock(&pw.mu);
			return NULL;
		}
		for (i = 0; i < n; i++) {
			struct up__pw_end *we = owner(ev[i].data.fd);

			if (we) {
				we->fired = true;
				(void)!write(we->efd, &one, sizeof(one));
			}
		}
		pthread_mutex_unlock(&pw.mu);
	}
	return NULL;
}

/* Under the lock: the set, made with its thread the first time; -1 if
 * they cannot be made here. */
static int set_get(uint64_t *syscalls)
{
	int ep;

	if (pw.ep >= 0 || pw.failed)
		return pw.ep;
	pthread_once(&pw_once, pw_install);
	*syscalls += 1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep >= 0 && up__thread_start(NULL, UP_THREAD_SMALL_STACK, watcher_main,
					(void *)(intptr_t)ep, "uringpipe-pidfd") != 0) {
		close(ep);
		ep = -1;
	}
	if (ep < 0)
		pw.failed = true;
	pw.ep = ep;
	return ep;
}

int up__pw_watch(struct up__pw_end *we, int efd, const int *pidfds, int n, uint64_t *syscalls)
{
	int i;

	if (n > UP_PW_PIDFDS)
		n = UP_PW_PIDFDS;
	pthread_mutex_lock(&pw.mu);
	we->efd = efd;
	we->fired = false;
	we->gen = pw.gen;
	we->npidfd = 0;
	if (set_get(syscalls) >= 0) {
		for (i = 0; i < n; i++) {
			struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
						  .data.fd = pidfds[i] };

			*syscalls += 1;
			if (epoll_ctl(pw.ep, EPOLL_CTL_ADD, pidfds[i], &ev) == 0)
				we->pidfd[we->npidfd++] = pidfds[i];
		}
	}
	if (we->npidfd) {
		we->prev = NULL;
		we->next = pw.ends;
		if (we->next)
			we->next->prev = we;
		pw.ends = we;
	}
	pthread_mutex_unlock(&pw.mu);
	return we->npidfd;
}

bool up__pw_unwatch(struct up__pw_end *we, uint64_t *syscalls)
{
	bool fired;
	int i;

	pthread_mutex_lock(&pw.mu);
	if (we->npidfd && we->gen == pw.gen) {
		if (we->prev)
			we->prev->next = we->next;
		else if (pw.ends == we)
			pw.ends = we->next;
		if (we->next)
			we->next->prev = we->prev;
		for (i = 0; i < we->npidfd; i++) {
			/* Closed since: left the set by itself (ENOENT or
			 * EBADF). Reused by another watched end: its entry. */
			if (owner(we->pidfd[i]))
				continue;
			*syscalls += 1;
			epoll_ctl(pw.ep, EPOLL_CTL_DEL, we->pidfd[i], NULL);
		}
	}
	/* Watched in the parent before a fork: nothing of it is in this
	 * process's set. */
	we->next = we->prev = NULL;
	fired = we->fired;
	we->fired = false;
	pthread_mutex_unlock(&pw.mu);
	return fired;
}

bool up__pw_dead(struct up__pw_end *we, uint64_t *syscalls)
{
	struct pollfd pfd[UP_PW_PIDFDS];
	bool dead = false;
	int i, n;

	if (!we->npidfd)
		return false;
	for (i = 0; i < we->npidfd; i++)
		pfd[i] = (struct pollfd){ .fd = we->pidfd[i], .events = POLLIN };
	*syscalls += 1;
	n = poll(pfd, (nfds_t)we->npidfd, 0);
	for (i = 0; n > 0 && i < we->npidfd; i++)
		if (pfd[i].revents & POLLIN)
			dead = true;
	we->npidfd = 0;
	return dead;
}
