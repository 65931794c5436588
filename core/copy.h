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
#include <sys/uio.h>

#if defined(__x86_64__)
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
/* Copy @n bytes from @src out through the cursor. */
void up__cur_copy_out(struct up__cur *c, const unsigned char *src, size_t n);
/* As up__cur_copy_out(), with the loads running from the end of the range
 * down to its start (reader.c says why). */
void up__cur_copy_out_down(struct up__cur *c, const unsigned char *src, size_t n);

#endif /* UP_CORE_COPY_H */
