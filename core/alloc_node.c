/* SPDX-License-Identifier: MIT */
/*
 * alloc_node.c - up_buf_alloc/up_buf_free: process-private buffers (the data
 * a writer copies from, the buffer a reader copies into) on a NUMA node.
 *
 * With jemalloc, each node that is asked for gets an arena of its own,
 * created the first time and kept for the life of the process. Its extent
 * hooks are jemalloc's defaults with the alloc hook wrapped: every range the
 * arena maps is bound to the node (mbind MPOL_BIND, MPOL_MF_MOVE) before
 * jemalloc or the caller touches it, so every page, arena metadata included,
 * is born on the node, and memory the arena recycles stays there. Buffers
 * are taken and given back without the thread cache (MALLOCX_TCACHE_NONE):
 * the tcache is per thread and per size class, not per arena, so it would
 * hand a node-1 buffer to a node-0 request and keep freed buffers away from
 * their arena. See docs/DESIGN-NOTES.md.
 *
 * Without jemalloc (UP_WITH_JEMALLOC=OFF, sanitizer builds), and whenever a
 * node's arena cannot be set up (or UP_BUF_FORCE_MMAP=1 is set), a buffer is
 * an anonymous mapping of its own, bound before the first touch and
 * unmapped on free.
 *
 * Node -1 binds nothing: the pages follow the caller's memory policy when
 * they are first touched, as a segment created with numa_node -1 does. On a
 * machine without NUMA (or a build without libnuma) node 0 is the only node
 * and nothing is bound either. up__numa_check() (numa.c) decides which
 * nodes exist, for the segment and the buffers alike.
 *
 * Global state: the jemalloc path keeps, per process, the arena index of
 * each node and the list of fallback mappings, under one mutex that is also
 * taken around fork() so that a child never inherits it locked.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "up_int.h"

#ifdef UP_HAVE_NUMA
#include <numaif.h>
#define UP_BUF_MBIND_FLAGS ((unsigned int)MPOL_MF_MOVE)
#else
#define UP_BUF_MBIND_FLAGS 0u
#endif

/* Buffers start on a page and are whole pages: at least this. */
#define UP_BUF_MIN_ALIGN 4096u

static size_t buf_align(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > (long)UP_BUF_MIN_ALIGN ? (size_t)ps : UP_BUF_MIN_ALIGN;
}

/* An anonymous mapping of @len bytes, bound to @node first if @bind. */
static int map_alloc(size_t len, int node, int bind, void **out)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int r;

	if (p == MAP_FAILED)
		return errno == EINVAL ? -ENOMEM : -errno;
	if (bind) {
		r = up__numa_mbind(p, len, node, UP_BUF_MBIND_FLAGS);
		if (r < 0) {
			munmap(p, len);
			return r;
		}
	}
	*out = p;
	return 0;
}

#ifdef UP_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>

/* Nodes that can have an arena: every node numa.c can bind (its mbind mask
 * holds 1024). The table is 4 KiB; arenas exist only for nodes used. */
#define UP_BUF_NODES 1024
#define UP_ARENA_UNSET 0u       /* not asked for yet (arena 0 is never ours) */
#define UP_ARENA_NONE UINT_MAX  /* no arena: use the mmap fallback */
/* MALLOCX_ARENA(ind) is (ind + 1) << 20 in an int: keep it positive. */
#define UP_ARENA_MAX 2046u

struct up_node_hooks {
	extent_hooks_t hooks;          /* first: jemalloc passes &hooks back */
	extent_alloc_t *dflt_alloc;
	extent_commit_t *dflt_commit;
	int node;
};

/* A mapping handed out by the fallback: up_buf_free must not pass it to
 * jemalloc. */
struct up_buf_map {
	void *addr;
	size_t len;
	struct up_buf_map *next;
};

static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned int buf_arena[UP_BUF_NODES]; /* index, UNSET or NONE */
static struct up_buf_map *buf_maps;                  /* under buf_lock */
/* Entries on buf_maps. Relaxed everywhere: a buffer reaches the thread
 * that frees it through the program's own synchronisation, which orders
 * this count's increment before the free; the list itself is read under
 * buf_lock. */
static atomic_size_t buf_nmaps;

static struct up_node_hooks *node_hooks(extent_hooks_t *h)
{
	return (struct up_node_hooks *)(void *)((char *)h - offsetof(struct up_node_hooks, hooks));
}

/*
 * The arena's alloc hook: jemalloc's own, then bind the fresh range to the
 * node before anything touches it. A range that cannot be bound is given
 * back and the allocation fails (jemalloc returns NULL: -ENOMEM), rather
 * than handing out memory that is not where the caller asked. The arena's
 * dss is "disabled", so the range is always an mmap of its own.
 */
static void *node_extent_alloc(extent_hooks_t *h, void *new_addr, size_t size,
			       size_t alignment, bool *zero, bool *commit,
			       unsigned int arena_ind)
{
	struct up_node_hooks *nh = node_hooks(h);
	void *p = nh->dflt_alloc(h, new_addr, size, alignment, zero, commit, arena_ind);

	if (p && up__numa_mbind(p, size, nh->node, UP_BUF_MBIND_FLAGS) < 0) {
		munmap(p, size);
		return NULL;
	}
	return p;
}

/*
 * Where the kernel does not overcommit (vm.overcommit_memory=2) jemalloc
 * commits by mapping over the range with MAP_FIXED, which drops the range's
 * policy: bind it again. Elsewhere the default commit is a no-op that
 * reports failure (true), and that answer is passed on untouched.
 */
static bool node_extent_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset,
			       size_t length, unsigned int arena_ind)
{
	struct up_node_hooks *nh = node_hooks(h);

	if (nh->dflt_commit(h, addr, size, offset, length, arena_ind))
		return true;
	return up__numa_mbind((char *)addr + offset, length, nh->node, UP_BUF_MBIND_FLAGS) < 0;
}

/* UP_BUF_FORCE_MMAP=1: no arenas, every bound buffer takes the fallback
 * (as UP_FORCE_FUTEX forces the other fallback; the tests use both). */
static bool force_mmap(void)
{
	const char *v = getenv("UP_BUF_FORCE_MMAP");

	return v && *v && strcmp(v, "0") != 0;
}

/* Create @node's arena. Returns its index, or UP_ARENA_NONE. Under buf_lock. */
static unsigned int arena_create(int node)
{
	extent_hooks_t *dflt = NULL, *hp;
	struct up_node_hooks *nh;
	const char *dss = "disabled";
	unsigned int ind = 0;
	/* Every value exchanged below but the index is a pointer. */
	const size_t psz = sizeof(void *);
	size_t sz = psz;
	char name[64];

	if (force_mmap())
		return UP_ARENA_NONE;
	if (mallctl("arena.0.extent_hooks", (void *)&dflt, &sz, NULL, 0) != 0 || !dflt ||
	    !dflt->alloc)
		return UP_ARENA_NONE;
	nh = up__calloc(1, sizeof(*nh));
	if (!nh)
		return UP_ARENA_NONE;
	nh->hooks = *dflt;
	nh->dflt_alloc = dflt->alloc;
	nh->dflt_commit = dflt->commit;
	nh->node = node;
	nh->hooks.alloc = node_extent_alloc;
	if (dflt->commit)
		nh->hooks.commit = node_extent_commit;
	hp = &nh->hooks;
	sz = sizeof(ind);
	/* From here on nh is never freed: the arena keeps using it, and
	 * after a failed create jemalloc may still have called it once. */
	if (mallctl("arenas.create", (void *)&ind, &sz, (void *)&hp, psz) != 0)
		return UP_ARENA_NONE;
	if (ind == UP_ARENA_UNSET || ind > UP_ARENA_MAX)
		return UP_ARENA_NONE; /* created, never used */
	/* mmap only (no sbrk), so a range the alloc hook refuses can be
	 * unmapped. Set before the index is published: nothing has
	 * allocated from the arena yet but its own metadata, which jemalloc
	 * maps without dss while it creates an arena. */
	snprintf(name, sizeof(name), "arena.%u.dss", ind);
	if (mallctl(name, NULL, NULL, (void *)&dss, psz) != 0)
		return UP_ARENA_NONE;
	return ind;
}

static void buf_prefork(void)
{
	pthread_mutex_lock(&buf_lock);
}

static void buf_postfork(void)
{
	pthread_mutex_unlock(&buf_lock);
}

static void buf_init_once(void)
{
	const char *v;
	size_t sz = sizeof(v);

	/*
	 * Fork handlers: buf_lock is held around mallctl(), so a fork while
	 * another thread creates an arena would leave it locked in the child.
	 * Prepare handlers run in reverse order of registration; jemalloc,
	 * initialised first (this mallctl makes sure of it), has registered
	 * its own already, so ours takes buf_lock before jemalloc takes its
	 * locks, and the arena being created can still finish.
	 */
	(void)mallctl("version", (void *)&v, &sz, NULL, 0);
	(void)pthread_atfork(buf_prefork, buf_postfork, buf_postfork);
}

/* The arena of @node (bindable), created on first use, or UP_ARENA_NONE. */
static unsigned int node_arena(int node)
{
	unsigned int ind;

	if (node < 0 || node >= UP_BUF_NODES)
		return UP_ARENA_NONE;
	/* [buf-arena] acq: the arena behind the index is set up; pairs with
	 * [buf-arena] rel in node_arena(), below, under buf_lock. */
	ind = atomic_load_explicit(&buf_arena[node], memory_order_acquire);
	if (up__likely(ind != UP_ARENA_UNSET))
		return ind;
	pthread_once(&buf_once, buf_init_once);
	pthread_mutex_lock(&buf_lock);
	/* relaxed: stored only under buf_lock, which we hold. */
	ind = atomic_load_explicit(&buf_arena[node], memory_order_relaxed);
	if (ind == UP_ARENA_UNSET) {
		ind = arena_create(node);
		/* [buf-arena] rel: arena_create()'s set-up before the index;
		 * pairs with [buf-arena] acq in node_arena(), above, without
		 * the lock. */
		atomic_store_explicit(&buf_arena[node], ind, memory_order_release);
	}
	pthread_mutex_unlock(&buf_lock);
	return ind;
}

static int map_remember(void *addr, size_t len)
{
	struct up_buf_map *m = up__calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->addr = addr;
	m->len = len;
	pthread_once(&buf_once, buf_init_once); /* done by node_arena() already */
	pthread_mutex_lock(&buf_lock);
	m->next = buf_maps;
	buf_maps = m;
	/* relaxed: see buf_nmaps. */
	atomic_fetch_add_explicit(&buf_nmaps, 1, memory_order_relaxed);
	pthread_mutex_unlock(&buf_lock);
	return 0;
}

/* If @addr is a fallback mapping, forget it and return its length; else 0. */
static size_t map_forget(void *addr)
{
	struct up_buf_map **pp, *m = NULL;
	size_t len = 0;

	/* relaxed: see buf_nmaps; a buffer of ours keeps the count above 0. */
	if (atomic_load_explicit(&buf_nmaps, memory_order_relaxed) == 0)
		return 0;
	pthread_mutex_lock(&buf_lock);
	for (pp = &buf_maps; *pp; pp = &(*pp)->next) {
		if ((*pp)->addr == addr) {
			m = *pp;
			*pp = m->next;
			len = m->len;
			/* relaxed: see buf_nmaps. */
			atomic_fetch_sub_explicit(&buf_nmaps, 1, memory_order_relaxed);
			break;
		}
	}
	pthread_mutex_unlock(&buf_lock);
	up__free(m);
	return len;
}

static int buf_alloc(size_t len, size_t align, int node, int bind, void **out)
{
	int flags = MALLOCX_ALIGN(align) | MALLOCX_TCACHE_NONE;
	void *p = NULL;
	int r;

	if (bind) {
		unsigned int ind = node_arena(node);

		if (ind == UP_ARENA_NONE) {
			r = map_alloc(len, node, bind, &p);
			if (r < 0)
				return r;
			if (map_remember(p, len) < 0) {
				munmap(p, len);
				return -ENOMEM;
			}
			*out = p;
			return 0;
		}
		flags |= MALLOCX_ARENA(ind);
	}
	p = mallocx(len, flags);
	if (!p)
		return -ENOMEM;
	*out = p;
	return 0;
}

static void buf_free(void *buf, size_t size)
{
	size_t maplen = map_forget(buf);

	/* Not needed: jemalloc and the list know the lengths. dallocx, not
	 * sdallocx, so that a wrong @size cannot corrupt jemalloc's heap. */
	(void)size;
	if (maplen)
		munmap(buf, maplen);
	else
		dallocx(buf, MALLOCX_TCACHE_NONE);
}
#else
static int buf_alloc(size_t len, size_t align, int node, int bind, void **out)
{
	(void)align; /* mmap returns whole pages */
	return map_alloc(len, node, bind, out);
}

static void buf_free(void *buf, size_t size)
{
	size_t align = buf_align();

	if (size == 0 || size > (size_t)PTRDIFF_MAX - align)
		return; /* up_buf_alloc made no buffer of that size */
	munmap(buf, (size + align - 1) & ~(align - 1));
}
#endif

int up_buf_alloc(size_t size, int node, void **out)
{
	size_t align = buf_align();
	int bind;

	if (!out || size == 0)
		return -EINVAL;
	bind = up__numa_check(node);
	if (bind < 0)
		return bind;
	if (size > (size_t)PTRDIFF_MAX - align)
		return -ENOMEM;
	/* Whole pages: no other allocation shares a page with the buffer,
	 * so nothing else can decide where its pages are. */
	return buf_alloc((size + align - 1) & ~(align - 1), align, node, bind, out);
}

void up_buf_free(void *buf, size_t size)
{
	if (buf)
		buf_free(buf, size);
}
