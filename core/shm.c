/* SPDX-License-Identifier: MIT */
/*
 * shm.c - the shared segment: memfd, seals, mapping, header validation.
 *
 * A pipe is one memfd, sized once and sealed against shrinking and growing
 * (F_SEAL_SHRINK | F_SEAL_GROW), so no peer can truncate it under another
 * process's mapping and make it fault with SIGBUS. Hole punching stays
 * allowed: that is how idle pages go back to the kernel.
 *
 * Attach trusts nothing: it checks the seals, the file size, and every header
 * field against the layout that the header's own geometry implies, then
 * copies the geometry into private memory. Later reads of the segment are
 * range-checked where they are used (the data path, pagepool.c).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "up_int.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

static uint32_t ilog2_u32(uint32_t v)
{
	uint32_t s = 0;

	while ((1u << s) < v)
		s++;
	return s;
}

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static void geom_from_hdr(struct up__geom *g, const struct up_shm_hdr *h,
			  const struct up_shm_offsets *o)
{
	g->page_size = h->page_size;
	g->page_shift = ilog2_u32(h->page_size);
	g->page_count = h->page_count;
	g->slot_count = h->slot_count;
	g->slot_mask = h->slot_count - 1;
	g->max_ends = h->max_ends;
	g->flags = h->flags;
	g->keep_pages = h->keep_pages;
	g->spare_pages = h->spare_pages;
	g->sys_page = (uint32_t)sysconf(_SC_PAGESIZE);
	g->trim_ns = (uint64_t)h->trim_ms * 1000000u;
	g->off = *o;
}

static void set_pointers(struct up_pipe *p)
{
	p->hdr = (struct up_shm_hdr *)p->base;
	p->ln = (struct up_shm_lines *)(p->base + UP_SHM_LINES_OFF);
	p->ends = (struct up_shm_end *)(p->base + p->g.off.ends);
	p->under = (_Atomic uint32_t *)(p->base + p->g.off.under);
	p->slots = (struct up_shm_slot *)(p->base + p->g.off.slots);
	p->pool = (_Atomic uint32_t *)(p->base + p->g.off.pool);
	p->owner = (_Atomic uint32_t *)(p->base + p->g.off.owner);
	p->pages = p->base + p->g.off.pages;
}

static struct up_pipe *pipe_alloc(void)
{
	struct up_pipe *p = up__calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	if (pthread_mutex_init(&p->mu, NULL) != 0) {
		up__free(p);
		return NULL;
	}
	p->fd = -1;
	atomic_init(&p->share_fd, -1);
	p->cw_wd = -1;
	atomic_init(&p->refs, 1);
	return p;
}

static void pipe_free(struct up_pipe *p)
{
	pthread_mutex_destroy(&p->mu);
	up__free(p);
}

/*
 * Pool pages beyond the capacity. The pool is FIFO, so a page comes round
 * again only after the writers have gone through the whole pool; in a pool
 * about the size of a core's cache its lines are then still cached on the
 * reader's side, and each store of a small write waits for a line to come
 * back across cores. So the pool holds at least pool_min bytes (2 MiB by
 * default; docs/DESIGN-NOTES.md has the measurements), never more than
 * twice the capacity, and a pipe under a quarter of pool_min gets none: its
 * pages come round within the cache either way. Writers leave the spare
 * pages free, so the pipe still holds the capacity and no more; an idle
 * pipe gives them back with the rest of its free pages (trim).
 */
/*
 * The page of a pipe created with page_size 0. What a page costs is paid
 * per page, not per byte: the writer's publish of head and the next slot,
 * the reader's retire and the page's return to the pool, each a line the
 * other core then fetches. So a page as large as keeps the ring deep enough
 * to overlap the two sides (UP_DEFAULT_PAGE_RING pages) makes those costs
 * rarer for message-sized writes, while a small pipe keeps 4 KiB pages. An
 * idle pipe's memory does not grow with it: data pages are faulted in 4 KiB
 * at a time as they are written (the memfd is sparse).
 */
static size_t default_page_size(size_t cap)
{
	size_t ps = UP_DEFAULT_PAGE_SIZE;

	while (ps < UP_DEFAULT_PAGE_MAX && ps * 2 * UP_DEFAULT_PAGE_RING <= cap)
		ps *= 2;
	return ps;
}

static uint32_t pool_spare(const struct up_config *cfg, uint32_t pages, size_t ps)
{
	size_t min = cfg->pool_min ? cfg->pool_min : UP_DEFAULT_POOL_MIN;
	size_t want = min / ps;

	if (want > UP_MAX_CAPACITY / ps)
		want = UP_MAX_CAPACITY / ps;
	if (want <= pages || (size_t)pages * 4 < want)
		return 0;
	return want - pages < pages ? (uint32_t)(want - pages) : pages;
}

void up__mark_broken(struct up_pipe *p)
{
	/* relaxed: a flag others read as a hint, each then fails on its own
	 * validation. */
	atomic_store_explicit(&p->ln->state.broken, 1, memory_order_relaxed);
}

/* The empty ring. Slot head-1 looks full, so nothing merges into it
 * (writer.c, up__last_slot()). */
static void ring_init(struct up_pipe *p)
{
	/* relaxed: the segment is not shared yet. */
	atomic_store_explicit(&p->ln->prod.head, 0, memory_order_relaxed);
	atomic_store_explicit(&p->ln->cons.pos, 0, memory_order_relaxed);
	atomic_store_explicit(&p->slots[UINT32_MAX & p->g.slot_mask].len, p->g.page_size,
			      memory_order_relaxed);
}

int up__shm_create(const struct up_config *cfg, struct up_pipe **out)
{
	struct up_shm_offsets o;
	struct up_shm_hdr h;
	struct up_pipe *p;
	size_t cap, ps, keep;
	uint32_t pages, spare;
	int fd, r;

	cap = cfg->capacity ? cfg->capacity : UP_DEFAULT_CAPACITY;
	ps = cfg->page_size ? cfg->page_size : default_page_size(cap);
	if (ps < UP_MIN_PAGE_SIZE || ps > UP_MAX_PAGE_SIZE || (ps & (ps - 1)))
		return -EINVAL;
	if (cap > UP_MAX_CAPACITY)
		return -EINVAL;
	pages = (uint32_t)((cap + ps - 1) / ps);
	if (pages < UP_MIN_PAGES)
		pages = UP_MIN_PAGES;
	spare = pool_spare(cfg, pages, ps);
	if (up__shm_offsets((uint32_t)ps, pages + spare, roundup_pow2(pages + spare),
			    UP_SHM_MAX_ENDS, &o) < 0)
		return -EINVAL;
	if (cfg->numa_node < -1)
		return -EINVAL;
	keep = cfg->pool_keep ? cfg->pool_keep : cap / 8;
	if (!cfg->pool_keep && keep < UP_DEFAULT_MIN_KEEP)
		keep = UP_DEFAULT_MIN_KEEP;

	memset(&h, 0, sizeof(h));
	h.magic = UP_SHM_MAGIC;
	h.version = UP_SHM_VERSION;
	h.hdr_size = sizeof(h);
	h.seg_size = o.size;
	h.page_size = (uint32_t)ps;
	h.page_count = pages + spare;
	h.slot_count = roundup_pow2(pages + spare);
	h.spare_pages = spare;
	h.max_ends = UP_SHM_MAX_ENDS;
	h.flags = cfg->flags;
	h.numa_node = cfg->numa_node;
	/* pool_keep at or over the capacity: never trim, spare pages included. */
	if (cfg->pool_keep >= cap || keep / ps >= pages + spare)
		h.keep_pages = pages + spare;
	else
		h.keep_pages = (uint32_t)(keep / ps);
	h.trim_ms = cfg->trim_ms ? cfg->trim_ms : UP_DEFAULT_TRIM_MS;
	h.off_ends = o.ends;
	h.off_slots = o.slots;
	h.off_pool = o.pool;
	h.off_pages = o.pages;
	h.checksum = up__shm_hdr_sum(&h);

	p = pipe_alloc();
	if (!p)
		return -ENOMEM;

	fd = memfd_create("uringpipe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		r = -errno;
		goto err_free;
	}
	if (ftruncate(fd, (off_t)o.size) < 0) {
		r = -errno;
		goto err_close;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		r = -errno;
		goto err_close;
	}
	p->base = mmap(NULL, o.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p->base == MAP_FAILED) {
		r = -errno;
		p->base = NULL;
		goto err_close;
	}
	/* Bind before the first touch, so every page is born on the node. */
	r = up__numa_bind(p->base, o.size, cfg->numa_node);
	if (r < 0)
		goto err_unmap;

	/* Nothing is faulted in here: the binding above is the file's, so
	 * every page lands on the node at its first touch, by any process.
	 * The initialisation below touches the header, the lines and the pool
	 * array; a data page is faulted in by the first write into it and
	 * punched again when the traffic no longer needs it (reclaim.c), so a
	 * pipe holds what its stream uses, not its capacity. */
	p->fd = fd;
	p->live_gen = up__live_gen(); /* memfd_create() made a new description */
	geom_from_hdr(&p->g, &h, &o);
	set_pointers(p);
	memcpy(p->hdr, &h, sizeof(h));
	ring_init(p);
	up__pool_init(p);
	p->numa_node = up__numa_node_of(p->base);
	*out = p;
	return 0;

err_unmap:
	munmap(p->base, o.size);
err_close:
	close(fd);
err_free:
	pipe_free(p);
	return r;
}

/* Validate a private copy of a header against the file it came from. */
static int validate_hdr(const struct up_shm_hdr *h, uint64_t file_size,
			struct up_shm_offsets *o)
{
	if (h->magic != UP_SHM_MAGIC)
		return -EPROTO;
	if (h->version != UP_SHM_VERSION || h->hdr_size != sizeof(*h))
		return -EPROTO;
	if (h->checksum != up__shm_hdr_sum(h))
		return -EPROTO;
	if (up__shm_offsets(h->page_size, h->page_count, h->slot_count,
			    h->max_ends, o) < 0)
		return -EPROTO;
	if (h->seg_size != o->size || file_size != o->size)
		return -EPROTO;
	if (h->off_ends != o->ends || h->off_slots != o->slots ||
	    h->off_pool != o->pool || h->off_pages != o->pages)
		return -EPROTO;
	if ((h->flags & ~UP_CFG_ALL) != 0 || h->numa_node < -1)
		return -EPROTO;
	if (h->keep_pages > h->page_count || h->trim_ms == 0)
		return -EPROTO;
	if (h->spare_pages >= h->page_count ||
	    h->page_count - h->spare_pages < UP_MIN_PAGES || h->resv_ != 0)
		return -EPROTO;
	return 0;
}

int up__shm_attach(int fd, struct up_pipe **out)
{
	struct up_shm_offsets o;
	struct up_shm_hdr h;
	struct up_pipe *p;
	struct stat st;
	int seals, nfd, r;

	if (fd < 0)
		return -EBADF;
	/* Without both seals a peer could shrink the file under us. The size
	 * is read after them: one read before could be stale by the time the
	 * sender sealed, and the mapping would reach past the file's end. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return errno == EINVAL ? -EPROTO : -errno;
	if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EPROTO;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(h))
		return -EPROTO;
	/* pread, not the mapping: the private copy is what gets validated. */
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EPROTO;
	r = validate_hdr(&h, (uint64_t)st.st_size, &o);
	if (r < 0)
		return r;

	p = pipe_alloc();
	if (!p)
		return -ENOMEM;
	/* Our own open file description of the memfd, not the sender's: the
	 * liveness locks of this process's ends are taken through it (live.c). */
	nfd = up__live_reopen(fd);
	if (nfd < 0) {
		r = nfd;
		goto err_free;
	}
	p->base = mmap(NULL, o.size, PROT_READ | PROT_WRITE, MAP_SHARED, nfd, 0);
	if (p->base == MAP_FAILED) {
		r = -errno;
		goto err_close;
	}
	p->fd = nfd;
	p->live_gen = up__live_gen();
	geom_from_hdr(&p->g, &h, &o);
	set_pointers(p);
	p->numa_node = up__numa_node_of(p->base);
	*out = p;
	return 0;

err_close:
	close(nfd);
err_free:
	pipe_free(p);
	return r;
}

void up__shm_unmap(struct up_pipe *p)
{
	if (p->base)
		munmap(p->base, p->g.off.size);
	if (p->fd >= 0)
		close(p->fd);
	/* relaxed: the last user of the handle; nobody else is here. */
	if (atomic_load_explicit(&p->share_fd, memory_order_relaxed) >= 0)
		close(atomic_load_explicit(&p->share_fd, memory_order_relaxed));
	pipe_free(p);
}
