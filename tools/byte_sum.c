/* SPDX-License-Identifier: MIT */
/*
 * byte_sum.c - the sum of every byte a benchmark reader got: the use of the
 * data every reader of uringpipe-cat --bench and uringpipe-ceiling makes, so
 * that no transport is measured with a reader that never touched the bytes.
 */
#include <stdint.h>
#include <string.h>

#include "byte_sum.h"

uint64_t bench_byte_sum(const unsigned char *p, size_t n)
{
	const uint64_t m = 0x00ff00ff00ff00ffu;
	uint64_t s = 0;

	while (n > 0 && ((uintptr_t)p & 7)) {
		s += *p++;
		n--;
	}
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
	while (n-- > 0)
		s += *p++;
	return s;
}
