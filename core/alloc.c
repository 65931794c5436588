/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - process-private memory: the only caller of the allocator.
 *
 * With jemalloc we use its non-standard entry points (mallocx/dallocx) so the
 * library never depends on which malloc the host program uses, and so the
 * allocation flags (arena, alignment) can be set in one place.
 */
#include <stdlib.h>
#include <string.h>

#include "up_int.h"

#ifdef UP_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>

void *up__calloc(size_t n, size_t sz)
{
	if (sz && n > SIZE_MAX / sz)
		return NULL;
	if (n * sz == 0)
		return mallocx(1, MALLOCX_ZERO);
	return mallocx(n * sz, MALLOCX_ZERO | MALLOCX_ALIGN(64));
}

void up__free(void *ptr)
{
	if (ptr)
		dallocx(ptr, 0);
}
#else
void *up__calloc(size_t n, size_t sz)
{
	void *ptr;

	if (sz && n > SIZE_MAX / sz)
		return NULL;
	/* Cache-line aligned: endpoints hold counters written on hot paths. */
	if (posix_memalign(&ptr, 64, n * sz ? n * sz : 1) != 0)
		return NULL;
	memset(ptr, 0, n * sz);
	return ptr;
}

void up__free(void *ptr)
{
	free(ptr);
}
#endif
