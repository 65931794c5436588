/* SPDX-License-Identifier: MIT */
/*
 * byte_sum.c - the sum of every byte a benchmark reader got: the use of the
 * data every reader of uringpipe-cat --bench and uringpipe-ceiling makes, so
 * that no transport is measured with a reader that never touched the bytes.
 */
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "byte_sum.h"

uint64_t bench_byte_sum(const unsigned char *p, size_t n)
{
	uint64_t s = 0;
#ifdef __SSE2__
	/* psadbw against zero: the sum of each 8-byte half as a 64-bit lane,
	 * so the accumulators cannot overflow. */
	const __m128i z = _mm_setzero_si128();
	__m128i a0 = z, a1 = z;

	for (; n >= 32; p += 32, n -= 32) {
		a0 = _mm_add_epi64(a0, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(const void *)p), z));
		a1 = _mm_add_epi64(a1, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)), z));
	}
	if (n >= 16) {
		a0 = _mm_add_epi64(a0, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(const void *)p), z));
		p += 16;
		n -= 16;
	}
	a0 = _mm_add_epi64(a0, a1);
	s = (uint64_t)_mm_cvtsi128_si64(a0) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(a0, a0));
	if (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		s += (uint64_t)_mm_cvtsi128_si64(_mm_sad_epu8(_mm_cvtsi64_si128((long long)v), z));
		p += 8;
		n -= 8;
	}
#else
	const uint64_t m = 0x00ff00ff00ff00ffu;

	while (n >= 8) {
		/* Four 16-bit lanes, each adding at most 2 x 255 per word:
		 * 128 words stay below 65536. */
		size_t k = n / 8 > 128 ? 128 : n / 8;
		uint64_t acc = 0;
		for (size_t i = 0; i < k; i++) {
			uint64_t v;
			memcpy(&v, p + 8 * i, 8);
			acc += (v & m) + ((v >> 8) & m);
		}
		s += (acc & 0xffff) + ((acc >> 16) & 0xffff) + ((acc >> 32) & 0xffff) + (acc >> 48);
		p += 8 * k;
		n -= 8 * k;
	}
#endif
	while (n-- > 0)
		s += *p++;
	return s;
}
