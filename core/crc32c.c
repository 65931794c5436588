/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - CRC32C (the Castagnoli polynomial, reflected, as iSCSI and
 * ext4 use it) for the TCP stream's trailer (bridge.c): the SSE4.2 crc32
 * instruction where the CPU has it, chosen at run time, else slicing-by-8
 * tables made once. Both give the same value for every input
 * (tests/test_bridge.c runs the table path too, UP_BRIDGE_SOFT_CRC=1).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

/* Slicing-by-8 tables for the reflected Castagnoli polynomial, made once. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
	/* UP_BRIDGE_SOFT_CRC=1: the table path, so that tests cover it on
	 * hosts that have the instruction. */
	const char *e = getenv("UP_BRIDGE_SOFT_CRC");

	crc_hw = __builtin_cpu_supports("sse4.2") && !(e && e[0] == '1');
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= c;
		c = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		    crc_tab[5][(w >> 16) & 0xff] ^ crc_tab[4][(w >> 24) & 0xff] ^
		    crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
		    crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The SSE4.2 crc32 instruction, chosen at run time (crc_init()): one
 * dependent chain of 8-byte steps, several GB/s, ahead of what a TCP stream
 * of one core carries. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t c, const unsigned char *p,
							      size_t n)
{
	uint64_t x = c;

	while (n && ((uintptr_t)p & 7)) {
		x = __builtin_ia32_crc32qi((uint32_t)x, *p++);
		n--;
	}
	while (n >= 32) {
		uint64_t a, b, d, e;

		memcpy(&a, p, 8);
		memcpy(&b, p + 8, 8);
		memcpy(&d, p + 16, 8);
		memcpy(&e, p + 24, 8);
		x = __builtin_ia32_crc32di(x, a);
		x = __builtin_ia32_crc32di(x, b);
		x = __builtin_ia32_crc32di(x, d);
		x = __builtin_ia32_crc32di(x, e);
		p += 32;
		n -= 32;
	}
	while (n >= 8) {
		uint64_t a;

		memcpy(&a, p, 8);
		x = __builtin_ia32_crc32di(x, a);
		p += 8;
		n -= 8;
	}
	while (n--)
		x = __builtin_ia32_crc32qi((uint32_t)x, *p++);
	return (uint32_t)x;
}
#endif

uint32_t up__crc32c_update(uint32_t c, const void *p, size_t n)
{
	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__) && defined(__GNUC__)
	if (crc_hw)
		return crc_hw_run(c, p, n);
#endif
	return crc_sw(c, p, n);
}
