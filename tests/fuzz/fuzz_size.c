/* SPDX-License-Identifier: MIT */
/*
 * fuzz_size.c - uringpipe-cat's size parsing (tools/cat_size.c).
 *
 * The input, cut at its first NUL, goes to cat_parse_size() and to
 * cat_parse_uint() in bases 0, 10 and 16. Besides crashes and sanitizer
 * reports, the target checks properties that the parser documents in
 * tools/cat.h, and abort()s when one fails:
 *   - the results are 0, -EINVAL or -ERANGE, and *out is written only on 0;
 *   - a value parsed by cat_parse_size() prints with cat_size_label() as a
 *     string that parses back to the same value (the table labels of --bench
 *     are valid --size arguments);
 *   - plain decimal digits parse to the same value with both functions;
 *   - an upper-case and a lower-case suffix letter give the same result.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MAX 256

static void check_rc(int rc)
{
	if (rc != 0 && rc != -EINVAL && rc != -ERANGE) {
		fprintf(stderr, "fuzz_size: unexpected return %d\n", rc);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t poison = 0xdeadbeefcafef00dull;
	char s[FZ_MAX + 1], t[FZ_MAX + 1], label[64];
	uint64_t v = poison, v2, u;
	size_t n = size < FZ_MAX ? size : FZ_MAX;
	size_t i;
	int rc, rc2, base;
	bool digits = n > 0;

	memcpy(s, data, n);
	s[n] = '\0';
	n = strlen(s);

	rc = cat_parse_size(s, &v);
	check_rc(rc);
	if (rc != 0 && v != poison)
		abort(); /* *out written on failure */
	if (rc == 0) {
		cat_size_label(v, label, sizeof(label));
		v2 = poison;
		if (cat_parse_size(label, &v2) != 0 || v2 != v) {
			fprintf(stderr, "fuzz_size: \"%s\" -> %llu -> \"%s\" does not round-trip\n",
				s, (unsigned long long)v, label);
			abort();
		}
		cat_bytes_label(v, label, sizeof(label));
		cat_human((double)v, label, sizeof(label));
	}

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			digits = false;
	for (base = 0; base <= 16; base += base == 0 ? 10 : 6) {
		u = poison;
		rc2 = cat_parse_uint(s, &u, base);
		check_rc(rc2);
		if (rc2 != 0 && u != poison)
			abort();
		if (base == 10 && digits && (rc2 != rc || (rc == 0 && u != v))) {
			fprintf(stderr, "fuzz_size: \"%s\": parse_size %d/%llu, parse_uint %d/%llu\n",
				s, rc, (unsigned long long)v, rc2, (unsigned long long)u);
			abort();
		}
	}

	/* Case of the suffix letter (not of "iB"/"B") does not matter. */
	memcpy(t, s, n + 1);
	for (i = 0; i < n && t[i] >= '0' && t[i] <= '9'; i++)
		;
	if (i < n && strchr("kmgtKMGT", t[i])) {
		t[i] = (char)(t[i] ^ 0x20);
		v2 = poison;
		rc2 = cat_parse_size(t, &v2);
		if (rc2 != rc || (rc == 0 && v2 != v)) {
			fprintf(stderr, "fuzz_size: \"%s\" and \"%s\" differ\n", s, t);
			abort();
		}
	}
	return 0;
}
