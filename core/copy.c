/* SPDX-License-Identifier: MIT */
/*
 * copy.c - copies through an iovec cursor (copy.h).
 *
 * Partial pages (small writes merged into the last page, which the reader
 * will want from the cache soon) are copied with memcpy(); only whole pages
 * take the streaming stores.
 */
#include <stdint.h>
#include <string.h>

#include "copy.h"

#ifdef UP_HAVE_NT_STORES
static void copy_nt(unsigned char *dst, const unsigned char *src, size_t n)
{
	size_t head = (16u - ((uintptr_t)dst & 15u)) & 15u;

	if (head > n)
		head = n;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	for (; n >= 64; n -= 64, dst += 64, src += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));

		_mm_stream_si128((__m128i *)(void *)dst, a);
		_mm_stream_si128((__m128i *)(void *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(void *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(void *)(dst + 48), d);
	}
	for (; n >= 16; n -= 16, dst += 16, src += 16)
		_mm_stream_si128((__m128i *)(void *)dst,
				 _mm_loadu_si128((const __m128i *)(const void *)src));
	memcpy(dst, src, n);
}
#else
static void copy_nt(unsigned char *dst, const unsigned char *src, size_t n)
{
	memcpy(dst, src, n);
}
#endif

void up__cur_copy_in(struct up__cur *c, unsigned char *dst, size_t n, bool nt)
{
	while (n) {
		size_t avail = c->iov[c->i].iov_len - c->off;
		size_t k = n < avail ? n : avail;
		const unsigned char *src = (const unsigned char *)c->iov[c->i].iov_base + c->off;

		if (nt)
			copy_nt(dst, src, k);
		else
			memcpy(dst, src, k);
		dst += k;
		n -= k;
		up__cur_advance(c, k);
	}
}
