/* SPDX-License-Identifier: MIT */
/*
 * thread.c - up__thread_start() (thread.h): the one way the library starts
 * a thread of its own.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "thread.h"

/* pthread_create() with @stack (0: the default size); its error. */
static int create(pthread_t *t, bool detached, size_t stack, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int r;

	pthread_attr_init(&attr);
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	r = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return r;
}

int up__thread_start(pthread_t *tid, size_t stack, void *(*fn)(void *), void *arg,
		     const char *name)
{
	sigset_t all, old;
	pthread_t t;
	int r;

	/* The new thread inherits the mask in force at its creation. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = create(&t, !tid, stack, fn, arg);
	/* glibc carves the host's static TLS out of a new thread's stack: a
	 * program with large _Thread_local data gets EINVAL for a small one.
	 * The default size is the host's own choice for its threads. */
	if (r == EINVAL && stack)
		r = create(&t, !tid, 0, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return -r;
	/* For ps and gdb (and the tests), named before we return. */
	(void)pthread_setname_np(t, name);
	if (tid)
		*tid = t;
	return 0;
}
