/* SPDX-License-Identifier: MIT */
/*
 * live.c - is the process behind an endpoint still there?
 *
 * Every endpoint holds an OFD lock (F_OFD_SETLK) on a byte of the memfd
 * named by its entry's index, taken through an open file description of
 * the memfd that belongs to its process alone. The kernel drops the lock
 * when the last descriptor of that description goes: when the process
 * exits, is killed, or execs (the descriptor is close-on-exec). A peer
 * asks with F_OFD_GETLK: a lock on the byte held through another
 * description means the owner is there. No pid is involved, so the answer
 * is the same in every pid namespace, and a pid reused by another process
 * changes nothing. A hostile peer can hold the byte of a dead entry, and
 * so keep it alive, only for as long as it lives itself.
 *
 * The description must be private to the process. memfd_create() makes a
 * new one; a descriptor received over SCM_RIGHTS or inherited across
 * fork() is the sender's or the parent's. Attach therefore reopens
 * /proc/self/fd/N (a new description of the same file), and a forked
 * child reopens and dup3()s the result onto the same descriptor number
 * before it takes over its ends (fork.c), so the number the application
 * holds stays valid. Without /proc there is no second description: attach
 * fails rather than let two processes' endpoints pass for one.
 *
 * Two bytes per entry: 2i is the owner's; 2i + 1 is held by a process in
 * fork() for the entry it made for its child, until the child holds 2i
 * itself. A check looks at both.
 *
 * Order, so that no reaper ever sees a claimed entry without its lock: the
 * byte is locked before the entry is claimed, and unlocked after it is
 * freed (peer.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "up_int.h"

/* Bumped in every child of fork() (fork.c): a handle whose description
 * was made under an older generation shares it with the parent. */
static _Atomic uint32_t proc_gen = 1;
uint32_t up__live_gen(void)
{
	/* relaxed: written by this process's own fork child handler, before
	 * any other thread exists in the child. */
	return atomic_load_explicit(&proc_gen, memory_order_relaxed);
}

void up__live_forked(void)
{
	/* relaxed: the child has one thread now. */
	atomic_fetch_add_explicit(&proc_gen, 1, memory_order_relaxed);
}

int up__live_reopen(int fd)
{
	char path[40];
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_RDWR | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

/*
 * In a child of fork(): make the handle's descriptor, and the mapping, this
 * process's own. The mapping matters as much as the descriptor: a mapping
 * holds the description it was made from, so the one copied by fork() would
 * keep the parent's description, and the parent's locks, alive for as long
 * as the child lives. MAP_FIXED replaces it in place, so every pointer into
 * the segment stays valid (the pages are the same). 0, or -errno with the
 * handle as it was (-EFAULT: the segment is no longer mapped at all).
 */
int up__live_private(struct up_pipe *p, uint64_t *syscalls)
{
	int nfd = up__live_reopen(p->fd), r;
	void *m;

	*syscalls += 1;
	if (nfd < 0)
		return nfd;
	*syscalls += 3;
	m = mmap(p->base, p->g.off.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, nfd, 0);
	if (m == MAP_FAILED) {
		r = -errno;
		/* A failed MAP_FIXED may have unmapped the range: map it back. */
		m = mmap(p->base, p->g.off.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			 p->fd, 0);
		close(nfd);
		return m == MAP_FAILED ? -EFAULT : r;
	}
	if (dup3(nfd, p->fd, O_CLOEXEC) < 0) {
		r = -errno;
		close(nfd);
		return r;
	}
	close(nfd);
	p->live_gen = up__live_gen();
	/* relaxed: the entries this process holds through the handle; the
	 * caller is the only thread using it (a fork child, or up_open
	 * under p->mu with no end open in this process). */
	atomic_store_explicit(&p->own, 0, memory_order_relaxed);
	return 0;
}

static int lock_op(struct up_pipe *p, int cmd, short type, uint32_t byte, uint32_t len,
		   struct flock *fl)
{
	fl->l_type = type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t)byte;
	fl->l_len = (off_t)len;
	fl->l_pid = 0; /* must be 0 for OFD locks */
	return fcntl(p->fd, cmd, fl) < 0 ? -errno : 0;
}

int up__live_hold(struct up_pipe *p, uint32_t idx, uint32_t which)
{
	struct flock fl;

	return lock_op(p, F_OFD_SETLK, F_WRLCK, 2 * idx + which, 1, &fl);
}

/* Both bytes of entry @idx, as far as this description holds them: a lock
 * of another description is untouched. */
void up__live_drop(struct up_pipe *p, uint32_t idx)
{
	struct flock fl;

	(void)lock_op(p, F_OFD_SETLK, F_UNLCK, 2 * idx, 2, &fl);
}

int up__live_check(struct up_pipe *p, uint32_t idx, uint64_t *syscalls)
{
	struct flock fl;
	int r;

	*syscalls += 1;
	r = lock_op(p, F_OFD_GETLK, F_WRLCK, 2 * idx, 2, &fl);
	if (r < 0)
		return 1; /* cannot tell: never reap on doubt */
	return fl.l_type != F_UNLCK;
}

/* The inode of this process's pid namespace (0: unknown; then no peer
 * trusts our pid). Asked of the kernel each time: it is used only when an
 * entry is claimed. */
uint64_t up__live_pidns(void)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) < 0)
		return 0;
	return (uint64_t)st.st_ino;
}
