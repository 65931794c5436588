/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - CRC32C (the Castagnoli polynomial, reflected, as iSCSI and
 * ext4 use it) for the TCP stream's trailer (bridge.c): the SSE4.2 crc32
 * instruction where the CPU has it, chosen at run time, else slicing-by-8
 * tables made once. Both give the same value for every input
 * (tests/test_bridge.c runs the table path too, UP_BRIDGE_SOFT_CRC=1).
 *
 * The instruction's result is ready three cycles after it issues, and one
 * can issue every cycle: one chain runs at a third of what the core can do.
 * So a long run is cut into three lanes of L bytes, each its own chain from
 * state 0 but the first, joined with the state update over L zero bytes
 * (crc_shift()). That update is linear in the state, so it is four table
 * lookups, one per byte of the state, from tables made once per L.
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

/* The lane lengths, longest first (each a multiple of 8), and for each,
 * crc_zeros[t][k][v]: the state that v << 8k becomes over crc_lane[t] zero
 * bytes. */
#define CRC_LANES 3
static const size_t crc_lane[CRC_LANES] = {8192, 1024, 128};
static uint32_t crc_zeros[CRC_LANES][4][256];

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n);

/* The state after @len zero bytes from state @c, by the tables: for the
 * bases of crc_zeros only, so at most 8192 bytes of zeros a call. */
static uint32_t crc_zero_run(uint32_t c, size_t len)
{
	static const unsigned char z[1024];

	while (len) {
		size_t k = len < sizeof(z) ? len : sizeof(z);

		c = crc_sw(c, z, k);
		len -= k;
	}
	return c;
}

static void crc_init_zeros(void)
{
	for (int t = 0; t < CRC_LANES; t++) {
		uint32_t base[32];

		for (int b = 0; b < 32; b++)
			base[b] = crc_zero_run(1u << b, crc_lane[t]);
		for (int k = 0; k < 4; k++)
			for (uint32_t v = 0; v < 256; v++) {
				uint32_t x = 0;

				for (int b = 0; b < 8; b++)
					if (v & (1u << b))
						x ^= base[8 * k + b];
				crc_zeros[t][k][v] = x;
			}
	}
}

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
	if (crc_hw)
		crc_init_zeros(); /* after crc_tab: it runs crc_sw() */
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
/* The state @c becomes over crc_lane[@t] zero bytes. */
static inline uint32_t crc_shift(int t, uint32_t c)
{
	return crc_zeros[t][0][c & 0xff] ^ crc_zeros[t][1][(c >> 8) & 0xff] ^
	       crc_zeros[t][2][(c >> 16) & 0xff] ^ crc_zeros[t][3][c >> 24];
}

/* The SSE4.2 crc32 instruction, chosen at run time (crc_init()): three
 * independent chains of 8-byte steps over runs of 3 * crc_lane[t] bytes
 * (as the head of this file says), then one chain for what is left. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t c, const unsigned char *p,
							      size_t n)
{
	uint64_t x = c;

	while (n && ((uintptr_t)p & 7)) {
		x = __builtin_ia32_crc32qi((uint32_t)x, *p++);
		n--;
	}
	for (int t = 0; t < CRC_LANES; t++) {
		const size_t l = crc_lane[t];

		while (n >= 3 * l) {
			uint64_t a = x, b = 0, d = 0;

			for (size_t i = 0; i < l; i += 8) {
				uint64_t u, v, w;

				memcpy(&u, p + i, 8);
				memcpy(&v, p + l + i, 8);
				memcpy(&w, p + 2 * l + i, 8);
				a = __builtin_ia32_crc32di(a, u);
				b = __builtin_ia32_crc32di(b, v);
				d = __builtin_ia32_crc32di(d, w);
			}
			x = crc_shift(t, crc_shift(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
			p += 3 * l;
			n -= 3 * l;
		}
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
