/* SPDX-License-Identifier: MIT */
/*
 * copy.c - copies through an iovec cursor (copy.h).
 *
 * Partial pages (small writes merged into the last page, which the reader
 * will want from the cache soon) are copied with memcpy(); only whole pages
 * may take the streaming stores, when the writer's measurement says they
 * pay (copy.h, struct up__stores).
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

void up__stores_turn(struct up__stores *s, uint64_t now)
{
	uint64_t ns = now - s->t0;
	bool best;

	if (ns > 0 && ns < UP_STORES_IDLE_NS) {
		/* Bytes per ns * 1000 = MB/s; a window is at most 20 ms and a
		 * few MiB, so neither the product nor the rate overflows. */
		uint32_t rate = (uint32_t)(s->bytes * 1000u / ns);
		uint32_t *r = &s->rate[s->nt];

		/* The kind in use is smoothed; a window of the other one
		 * replaces its rate. That rate was last measured long ago,
		 * perhaps in the first windows of the pipe, while its pages
		 * were being faulted in: smoothed, one slow start kept the
		 * writer on the wrong kind for a hundred windows. */
		*r = *r == 0 || s->exploring ? rate : (uint32_t)(((uint64_t)*r * 3u + rate) / 4u);
		s->windows++;
	}
	s->t0 = 0;
	s->bytes = 0;
	/* Each kind measured once first, then the faster, and the slower one
	 * window in UP_STORES_EXPLORE. */
	if (s->rate[0] == 0 || s->rate[1] == 0) {
		s->nt = s->rate[0] != 0;
		s->exploring = false;
		return;
	}
	best = s->rate[1] > s->rate[0];
	s->exploring = s->windows % UP_STORES_EXPLORE == 0;
	s->nt = s->exploring ? !best : best;
}

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
