/* SPDX-License-Identifier: MIT */
/*
 * fence.c - asymmetric fences with membarrier(2).
 *
 * A Dekker handshake needs a full fence on both sides: each stores its flag,
 * fences, then loads the other's. When one side runs millions of times a
 * second and the other almost never, membarrier(2) moves the whole cost to
 * the rare side: the frequent side keeps a compiler barrier only, and the
 * rare side asks the kernel to run a full barrier on every CPU that is
 * running a thread of the process it must reach (an IPI each;
 * docs/DESIGN-NOTES.md has what one costs). A thread that is not running
 * needs none: the context switch was one. Userspace RCU (liburcu's
 * "membarrier" flavour) and the JVM's biased locking rest on the same
 * argument.
 *
 * Which command reaches which threads (up__membarrier()):
 *   - UP_FENCE_OWN, the other side is a thread of this process:
 *     MEMBARRIER_CMD_PRIVATE_EXPEDITED, which picks the CPUs whose current
 *     task uses our address space. Exact.
 *   - UP_FENCE_ANY, the other side may be another process and exclusion
 *     rests on the barrier (a bias taken back): MEMBARRIER_CMD_GLOBAL, an
 *     RCU grace period, which every CPU passes with a barrier of its own.
 *     Exact, and microseconds to milliseconds.
 *   - UP_FENCE_ANY_FAST, the other side may be another process and a
 *     missed barrier costs a wake only (a reader about to sleep):
 *     MEMBARRIER_CMD_GLOBAL_EXPEDITED. It picks CPUs by a per-CPU copy of
 *     the running process's registration that the scheduler refreshes only
 *     when it switches between two address spaces; a CPU that ran the
 *     process before it registered and has switched only between its
 *     threads and the idle task since keeps the old copy, and is skipped
 *     while a registered thread runs there (seen here: 0 IPIs in 10,000
 *     calls to a CPU spinning in a registered thread; DESIGN-NOTES). So it
 *     is never what exclusion rests on.
 *
 * Only processes that registered are reached by the expedited commands, so
 * the frequent side may rely on the asymmetric handshake only once its own
 * process registered for both; it registers at its first open and falls
 * back to the symmetric path when the kernel or a seccomp filter refuses.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "up_int.h"

/* The process that registered, or minus the one refused. A forked child
 * asks again: whether the kernel carried the registration into its copy of
 * the address space is not assumed (asking when registered is cheap). */
static _Atomic pid_t registered;

static int sys_membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0u, 0);
}

bool up__membarrier_registered(pid_t self, uint64_t *syscalls)
{
	/* relaxed: registering twice is harmless, and the kernel call is what
	 * orders anything. */
	pid_t r = atomic_load_explicit(&registered, memory_order_relaxed);

	if (r == self)
		return true;
	if (r == -self)
		return false;
	*syscalls += 2;
	r = sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
			    sys_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0
		    ? self
		    : -self;
	/* relaxed: as the load above. */
	atomic_store_explicit(&registered, r, memory_order_relaxed);
	return r == self;
}

int up__membarrier(enum up_fence_reach reach, uint64_t *syscalls)
{
	(*syscalls)++;
	if (reach == UP_FENCE_OWN &&
	    sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		return 0;
	if (reach == UP_FENCE_ANY_FAST &&
	    sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0)
		return 0;
	/* Exact for every process; also where the commands above are
	 * refused (our process not registered, an older kernel). */
	if (reach != UP_FENCE_ANY)
		(*syscalls)++;
	if (sys_membarrier(MEMBARRIER_CMD_GLOBAL) == 0)
		return 0;
	return -errno;
}
