/* SPDX-License-Identifier: MIT */
/*
 * cat_size.c - sizes for humans, in and out.
 *
 * Suffixes: K M G T (and KiB MiB GiB TiB) are binary, as in pv and dd;
 * KB MB GB TB are decimal, as in dd's "kB"/"MB". A bare "B" after the digits
 * is allowed ("100B"). Case is ignored for the letter (pv accepts "4k") but
 * "Kb"/"kb" is refused: a lower-case b means bits to many readers, and
 * guessing is worse than an error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"

/* strtoull() from a leading digit only: strtoull would take " 12", "+12"
 * and "-12" (wrapping the last). 0 with *v and *end, -EINVAL or -ERANGE. */
static int leading_uint(const char *s, int base, unsigned long long *v, char **end)
{
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, end, base);
	return errno == ERANGE ? -ERANGE : 0;
}

int cat_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t mul = 1;
	char *end;
	int r = leading_uint(s, 10, &v, &end);

	if (r < 0)
		return r;
	switch (*end) {
	case 'k': case 'K': mul = KiB; break;
	case 'm': case 'M': mul = MiB; break;
	case 'g': case 'G': mul = GiB; break;
	case 't': case 'T': mul = TiB; break;
	case 'B': end++; break;
	default: break;
	}
	if (mul > 1) {
		end++;
		if (end[0] == 'i' && end[1] == 'B')
			end += 2;
		else if (end[0] == 'B') {
			/* KB = 1000: the decimal family. */
			mul = mul == KiB ? 1000u : mul == MiB ? 1000000u :
			      mul == GiB ? 1000000000u : 1000000000000u;
			end++;
		}
	}
	if (*end != '\0')
		return -EINVAL;
	if ((uint64_t)v > UINT64_MAX / mul)
		return -ERANGE;
	*out = (uint64_t)v * mul;
	return 0;
}

int cat_parse_uint(const char *s, uint64_t *out, int base)
{
	unsigned long long v;
	char *end;
	int r = leading_uint(s, base, &v, &end);

	if (r < 0)
		return r;
	if (*end != '\0')
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

/* @v in the largest binary unit that divides it exactly, named by @unit
 * (B, KiB, MiB, GiB, TiB in some spelling), or in bytes. */
static const char *exact_label(uint64_t v, char *b, size_t bl, const char *const unit[5])
{
	for (unsigned u = 4; u > 0; u--) {
		uint64_t m = (uint64_t)1 << (10 * u);
		if (v >= m && v % m == 0) {
			snprintf(b, bl, "%" PRIu64 "%s", v / m, unit[u]);
			return b;
		}
	}
	snprintf(b, bl, "%" PRIu64 "%s", v, unit[0]);
	return b;
}

const char *cat_size_label(uint64_t v, char *b, size_t bl)
{
	static const char *const unit[5] = {"", "K", "M", "G", "T"};
	return exact_label(v, b, bl, unit);
}

const char *cat_bytes_label(uint64_t v, char *b, size_t bl)
{
	static const char *const unit[5] = {" B", " KiB", " MiB", " GiB", " TiB"};
	return exact_label(v, b, bl, unit);
}

const char *cat_human(double v, char *b, size_t bl)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	unsigned u = 0;

	while (v >= 1024.0 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(b, bl, "%.0f %s", v, unit[u]);
	else
		snprintf(b, bl, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
	return b;
}
