/* SPDX-License-Identifier: MIT */
/*
 * fence.c - asymmetric fences with membarrier(2).
 *
 * A Dekker handshake needs a full fence on both sides: each stores its flag,
 * fences, then loads the other's. When one side runs millions of times a
 * second and the other almost never, membarrier(2) moves the whole cost to
 * the rare side: the frequent side keeps a compiler barrier only, and the
 * rare side asks the kernel to run a full barrier on every CPU that is
 * running a thread of a registered process (MEMBARRIER_CMD_GLOBAL_EXPEDITED,
 * an IPI each; docs/DESIGN-NOTES.md has what one costs). A thread that is
 * not running needs none: the context switch was one. Userspace RCU
 * (liburcu's "membarrier" flavour) and the JVM's biased locking rest on the
 * same argument.
 *
 * Only processes that registered are reached, so the frequent side may rely
 * on the asymmetric handshake only once its own process registered; it
 * registers on first use and falls back to the symmetric path when the
 * kernel or a seccomp filter refuses.
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
	(*syscalls)++;
	r = sys_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 ? self : -self;
	/* relaxed: as the load above. */
	atomic_store_explicit(&registered, r, memory_order_relaxed);
	return r == self;
}

int up__membarrier(uint64_t *syscalls)
{
	(*syscalls)++;
	if (sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0)
		return 0;
	/* Older kernels without the expedited command: the slow global one
	 * (an RCU grace period, milliseconds) still orders every CPU. */
	(*syscalls)++;
	if (sys_membarrier(MEMBARRIER_CMD_GLOBAL) == 0)
		return 0;
	return -errno;
}
