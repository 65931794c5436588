/* SPDX-License-Identifier: MIT */
#ifndef UP_TOOLS_BYTE_SUM_H
#define UP_TOOLS_BYTE_SUM_H

#include <stddef.h>
#include <stdint.h>

/* The sum of the @n bytes at @p (SSE2 psadbw where the target has it, else
 * 16-bit lanes of 64-bit words): every byte read once, in order. */
uint64_t bench_byte_sum(const unsigned char *p, size_t n);

#endif
