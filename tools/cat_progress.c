/* SPDX-License-Identifier: MIT */
/*
 * cat_progress.c - the pv-like progress line on stderr.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cat.h"

static const char *hms(double s, char *b, size_t bl)
{
	uint64_t t = s > 0 ? (uint64_t)(s + 0.5) : 0;
	snprintf(b, bl, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, t / 3600, t / 60 % 60, t % 60);
	return b;
}

/* pv's layout: bytes, elapsed, [rate], and with a known size a bar, % and
 * ETA. \r on a terminal so the line updates in place; \n otherwise, so a
 * log file gets one readable line per update. */
void cat_progress_line(uint64_t bytes, double el, double rate, bool known, uint64_t total,
		       bool tty, bool final)
{
	char b[32], r[32], e[32], eta[48], line[256];
	int n;

	n = snprintf(line, sizeof(line), "%10s %s [%10s/s]", cat_human((double)bytes, b, sizeof(b)),
		     hms(el, e, sizeof(e)), cat_human(rate, r, sizeof(r)));
	if (known && total > 0 && n > 0 && (size_t)n < sizeof(line)) {
		double f = (double)bytes / (double)total;
		char bar[24];
		int fill;

		if (f > 1.0)
			f = 1.0;
		fill = (int)(f * 20.0);
		for (int i = 0; i < 20; i++)
			bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
		bar[20] = '\0';
		if (final)
			snprintf(eta, sizeof(eta), "   ");
		else if (rate > 0)
			snprintf(eta, sizeof(eta), "ETA %s",
				 hms((double)(total - (bytes < total ? bytes : total)) / rate, e,
				     sizeof(e)));
		else
			snprintf(eta, sizeof(eta), "ETA ?");
		snprintf(line + n, sizeof(line) - (size_t)n, " [%s] %3.0f%% %s", bar, f * 100.0, eta);
	} else if (known && n > 0 && (size_t)n < sizeof(line)) {
		snprintf(line + n, sizeof(line) - (size_t)n, " 100%%");
	}
	fprintf(stderr, "%s%s", tty ? "\r" : "", line);
	if (final || !tty)
		fputc('\n', stderr);
	fflush(stderr);
}
