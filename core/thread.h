/* SPDX-License-Identifier: MIT */
/*
 * thread.h - the library's own threads (the poll helpers and the pidfd
 * watcher of the futex backend, the close watcher, a listener): started
 * one way, with every signal blocked.
 */
#ifndef UP_CORE_THREAD_H
#define UP_CORE_THREAD_H

#include <pthread.h>
#include <stddef.h>

/* The stack of a helper that only waits and writes an fd (the poll helpers,
 * the pidfd watcher): far below the default, which a process with many of
 * them would otherwise reserve for each. */
#define UP_THREAD_SMALL_STACK ((size_t)256 * 1024)

/*
 * Start fn(arg) on a thread named @name whose signal mask blocks every
 * signal, so that none of the host's signals is delivered to it. @tid NULL:
 * detached; else joinable, its id stored there. @stack 0: the default
 * size; else that size, or the default where the host's static TLS does
 * not fit in it. 0 or -errno.
 */
int up__thread_start(pthread_t *tid, size_t stack, void *(*fn)(void *), void *arg,
		     const char *name);

#endif /* UP_CORE_THREAD_H */
