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
	size_t bytes;

	if (sz && n > SIZE_MAX / sz)
		return NULL;
	bytes = n * sz;
	return mallocx(bytes != 0 ? bytes : 1, MALLOCX_ZERO | MALLOCX_ALIGN(64));
}

void up__free(void *ptr)
{
	if (ptr)
		dallocx(ptr, 0);
}
#else
void *up__calloc(size_t n, size_t sz)
{
	size_t bytes;
	void *ptr;

	if (sz && n > SIZE_MAX / sz)
		return NULL;
	bytes = n * sz;
	/* Cache-line aligned: endpoints hold counters written on hot paths. */
	if (posix_memalign(&ptr, 64, bytes != 0 ? bytes : 1) != 0)
		return NULL;
	memset(ptr, 0, bytes);
	return ptr;
}

void up__free(void *ptr)
{
	free(ptr);
}
#endif
