/* SPDX-License-Identifier: MIT */
/*
 * test_byte_sum.c - the benchmarks' byte sum (tools/byte_sum.c) is the sum
 * of every byte it is given: every length from 0 to 600 at every alignment
 * of a 64-byte line, and a large buffer of 0xff bytes (the lanes' largest
 * values), against a plain loop. A sum that skipped a tail or a head, or
 * whose lanes overflowed, would let a benchmark reader pass for one that
 * touched bytes it never read.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "byte_sum.h"
#include "harness.h"

static uint64_t plain(const unsigned char *p, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	return s;
}

static void every_length_and_alignment(void)
{
	static unsigned char buf[64 + 600 + 64];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	for (size_t a = 0; a < 64; a++)
		for (size_t n = 0; n <= 600; n++)
			CHECK_EQ(bench_byte_sum(buf + a, n), plain(buf + a, n));
}

static void large_buffer_of_top_bytes(void)
{
	const size_t n = (size_t)9 << 20; /* past any lane's 16-bit range */
	unsigned char *b = malloc(n + 1);

	CHECK(b != NULL);
	memset(b, 0xff, n + 1);
	CHECK_EQ(bench_byte_sum(b + 1, n), (uint64_t)n * 0xff);
	CHECK_EQ(bench_byte_sum(b, n + 1), (uint64_t)(n + 1) * 0xff);
	free(b);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(every_length_and_alignment);
	RUN(large_buffer_of_top_bytes);
	return 0;
}
