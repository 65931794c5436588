/* SPDX-License-Identifier: MIT */
/*
 * copy.h - the iovec cursor and the copies between caller memory and pages.
 *
 * A cursor walks a caller's iovec array; every copy advances it. Whole pages
 * are written with streaming (non-temporal) stores where the CPU has them:
 * the page a writer fills was last read by a reader on another core, and a
 * plain store would first fetch each line from that core only to overwrite
 * all of it. Streaming stores are weakly ordered, so up__nt_fence() must run
 * between the last of them and the store that publishes the page.
 */
#ifndef UP_CORE_COPY_H
#define UP_CORE_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#if defined(__x86_64__) && !defined(UP_NO_NT_STORES)
#include <emmintrin.h>
#define UP_HAVE_NT_STORES 1
#endif

struct up__cur {
	const struct iovec *iov;
	int cnt;
	int i;
	size_t off;
};

static inline void up__cur_init(struct up__cur *c, const struct iovec *iov, int cnt)
{
	c->iov = iov;
	c->cnt = cnt;
	c->i = 0;
	c->off = 0;
	/* Skip leading empty entries so copies always find room. */
	while (c->i + 1 < c->cnt && c->iov[c->i].iov_len == 0)
		c->i++;
}

/* Order the streaming stores before the store that publishes their page. */
static inline void up__nt_fence(void)
{
#ifdef UP_HAVE_NT_STORES
	_mm_sfence();
#endif
}

/* Copy @n bytes from the cursor to @dst, with streaming stores if @nt. */
void up__cur_copy_in(struct up__cur *c, unsigned char *dst, size_t n, bool nt);

/*
 * A writer's choice of stores for whole pages, made by measurement (copy.c).
 * Which wins depends on where the reader finds the data and on how dear a
 * line taken from the other core is, and both change with the machine and
 * its phase; so each writer end times its whole-page bytes in windows, keeps
 * a smoothed rate per kind of store, uses the faster, and gives the other a
 * window now and then so a change is seen.
 */
#define UP_STORES_WINDOW  (4u << 20)   /* whole-page bytes per timed window */
#define UP_STORES_EXPLORE 16u          /* one window in this many: the other kind */
#define UP_STORES_IDLE_NS 20000000ull  /* a slower window says nothing of stores */

struct up__stores {
	uint64_t t0;       /* the window's start; 0 before its first page */
	uint64_t bytes;    /* whole-page bytes in the window */
	uint32_t rate[2];  /* MB/s smoothed, [0] plain, [1] streaming; 0: none yet */
	uint32_t windows;  /* windows measured */
	bool nt;           /* the kind in use: streaming stores */
	bool exploring;    /* ... and it is the slower one, tried again */
};

/* A window is full: fold its rate, measured up to @now, in and pick the kind
 * of store for the next one. */
void up__stores_turn(struct up__stores *s, uint64_t now);

/* Whole pages are streaming stores now (true) or plain ones. */
static inline bool up__stores_nt(const struct up__stores *s)
{
#ifdef UP_HAVE_NT_STORES
	return s->nt;
#else
	(void)s;
	return false;
#endif
}

/* The cursor's current entry has @k more bytes behind it; step past a full
 * entry (never past the last one, so a copy always finds its place). */
static inline void up__cur_advance(struct up__cur *c, size_t k)
{
	c->off += k;
	if (c->off == c->iov[c->i].iov_len && c->i + 1 < c->cnt) {
		c->i++;
		c->off = 0;
	}
}

/* Copy @n bytes from @src out through the cursor. Inline: the reader's
 * copy of every slot. */
static inline void up__cur_copy_out(struct up__cur *c, const unsigned char *src, size_t n)
{
	while (n) {
		size_t avail = c->iov[c->i].iov_len - c->off;
		size_t k = n < avail ? n : avail;

		memcpy((unsigned char *)c->iov[c->i].iov_base + c->off, src, k);
		src += k;
		n -= k;
		up__cur_advance(c, k);
	}
}

/* As up__cur_copy_out(), with the loads running from the end of the range
 * down to its start, in 64-byte blocks (reader.c says why). A range that
 * does not fit the caller's current iovec entry is copied upwards. */
static inline void up__cur_copy_out_down(struct up__cur *c, const unsigned char *src, size_t n)
{
	unsigned char *d;
	size_t i = n;

	if (n > c->iov[c->i].iov_len - c->off) {
		up__cur_copy_out(c, src, n);
		return;
	}
	d = (unsigned char *)c->iov[c->i].iov_base + c->off;
	while (i >= 64) {
		i -= 64;
		/* Opaque to the optimiser, which would otherwise fold the loop
		 * back into one upward memcpy(). */
		__asm__("" : "+r"(i));
		memcpy(d + i, src + i, 64);
	}
	memcpy(d, src, i);
	up__cur_advance(c, n);
}

#endif /* UP_CORE_COPY_H */
