/* SPDX-License-Identifier: MIT */
/*
 * cat_report.c - the --report chart: throughput against write size, one
 * panel per writers x readers configuration, a line per transport.
 *
 * Hand-written SVG rather than a plotting library: the report must open
 * offline, carry no script and add no dependency. The HTML flavour is
 * well-formed XHTML (every element closed, text escaped) so a test can parse
 * it with any XML parser, and browsers render it as HTML5 all the same.
 *
 * X is log2 of the write size (sizes usually step x16 or x1024, a linear axis
 * would crowd the small ones into a corner); Y is linear from 0 so that a
 * ratio reads as a ratio of heights.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cat.h"

#define W        900
#define PANEL_H  420
#define ML       90 /* margins: room for the axis labels */
#define MR       190
#define MT       60
#define MB       60

static const char *const series_name[CAT_T_COUNT] = {"kernel pipe", "uringpipe (copy)",
						       "uringpipe (zero-copy)"};
static const char *const series_color[CAT_T_COUNT] = {"#c0392b", "#1f77b4", "#2ca02c"};

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			/* Control characters are not allowed in XML 1.0. */
			if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
				fputc(*s, f);
		}
	}
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about 5 ticks up to @max. */
static double nice_step(double max)
{
	double raw = max / 5.0, mag, f;

	if (!(raw > 0))
		return 1.0;
	mag = pow(10.0, floor(log10(raw)));
	f = raw / mag;
	return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

static void panel(FILE *f, const struct cat_report_series *s, int y0)
{
	const int pw = W - ML - MR, ph = PANEL_H - MT - MB;
	double ymax = 0, step, lo = 0, hi = 0;
	char lb[32];

	for (unsigned i = 0; i < s->npts; i++)
		for (int t = 0; t < CAT_T_COUNT; t++)
			if (s->pts[i].mbps[t] > ymax)
				ymax = s->pts[i].mbps[t];
	step = nice_step(ymax > 0 ? ymax : 1.0);
	ymax = ceil((ymax > 0 ? ymax : 1.0) * 1.05 / step) * step;
	if (s->npts > 0) {
		lo = hi = log2((double)s->pts[0].size);
		for (unsigned i = 1; i < s->npts; i++) {
			double l = log2((double)s->pts[i].size);
			lo = l < lo ? l : lo;
			hi = l > hi ? l : hi;
		}
	}
#define XPOS(sz) (hi > lo ? ML + (log2((double)(sz)) - lo) / (hi - lo) * pw : ML + pw / 2.0)
#define YPOS(v) (y0 + MT + ph - (v) / ymax * ph)

	fprintf(f, "<g>\n<text x=\"%d\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">%u writer%s"
		" x %u reader%s</text>\n", ML, y0 + MT - 20, s->writers, s->writers == 1 ? "" : "s",
		s->readers, s->readers == 1 ? "" : "s");
	/* Grid and Y ticks. */
	for (double v = 0; v <= ymax + step / 2; v += step) {
		double y = YPOS(v);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML,
			y, ML + pw, y);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%.0f</text>\n",
			ML - 8, y + 4, v);
	}
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#333\"/>\n", ML, y0 + MT, pw, ph);
	fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\" "
		"transform=\"rotate(-90 %d %d)\">throughput, MB/s (10^6 B/s)</text>\n",
		22, y0 + MT + ph / 2, 22, y0 + MT + ph / 2);
	for (unsigned i = 0; i < s->npts; i++) {
		double x = XPOS(s->pts[i].size);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s B"
			"</text>\n", x, y0 + MT + ph + 18,
			cat_size_label(s->pts[i].size, lb, sizeof(lb)));
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">write size "
		"(log scale)</text>\n", ML + pw / 2, y0 + MT + ph + 42);
	/* Series: a polyline, then a dot per point with its value as a
	 * tooltip (<title>: no script needed). */
	for (int t = 0; t < CAT_T_COUNT; t++) {
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" points=\"",
			series_color[t]);
		for (unsigned i = 0; i < s->npts; i++)
			fprintf(f, "%s%.1f,%.1f", i ? " " : "", XPOS(s->pts[i].size),
				YPOS(s->pts[i].mbps[t]));
		fputs("\"/>\n", f);
		for (unsigned i = 0; i < s->npts; i++)
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s, "
				"%s B writes: %.1f MB/s</title></circle>\n", XPOS(s->pts[i].size),
				YPOS(s->pts[i].mbps[t]), series_color[t], series_name[t],
				cat_size_label(s->pts[i].size, lb, sizeof(lb)), s->pts[i].mbps[t]);
	}
	/* Legend, with the ratio at the largest size to the kernel pipe. */
	for (int t = 0; t < CAT_T_COUNT; t++) {
		int ly = y0 + MT + 10 + t * 24;
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"4\" fill=\"%s\"/>\n",
			ML + pw + 14, ly, series_color[t]);
		fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", ML + pw + 38,
			ly + 6, series_name[t]);
	}
	fputs("</g>\n", f);
#undef XPOS
#undef YPOS
}

static void svg(FILE *f, const char *title, const char *subtitle,
		const struct cat_report_series *s, unsigned ns)
{
	int h = 50 + (int)ns * PANEL_H;

	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n", W, h, W, h);
	fputs("<title>", f);
	xml_text(f, title);
	fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n", f);
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"18\" font-weight=\"bold\">", ML);
	xml_text(f, title);
	fprintf(f, "</text>\n<text x=\"%d\" y=\"44\" font-size=\"12\" fill=\"#555\">", ML);
	xml_text(f, subtitle);
	fputs("</text>\n", f);
	for (unsigned i = 0; i < ns; i++)
		panel(f, &s[i], 50 + (int)i * PANEL_H - 10);
	fputs("</svg>\n", f);
}

static void html(FILE *f, const char *title, const char *subtitle,
		 const struct cat_report_series *s, unsigned ns)
{
	char lb[32];

	fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n"
	      "<head>\n<meta charset=\"utf-8\"/>\n<title>", f);
	xml_text(f, title);
	fputs("</title>\n<style>body{font-family:sans-serif;margin:2em;color:#222}"
	      "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
	      "padding:4px 10px;text-align:right}th{background:#f4f4f4}</style>\n</head>\n"
	      "<body>\n<h1>", f);
	xml_text(f, title);
	fputs("</h1>\n<p>", f);
	xml_text(f, subtitle);
	fputs("</p>\n", f);
	svg(f, title, subtitle, s, ns);
	fputs("<table>\n<tr><th>writers x readers</th><th>write size</th><th>kernel MB/s</th>"
	      "<th>uringpipe MB/s</th><th>ratio</th><th>zero-copy MB/s</th><th>ratio</th></tr>\n",
	      f);
	for (unsigned i = 0; i < ns; i++)
		for (unsigned j = 0; j < s[i].npts; j++) {
			const struct cat_report_point *p = &s[i].pts[j];
			double k = p->mbps[CAT_T_KERNEL];
			fprintf(f, "<tr><td>%u x %u</td><td>%s B</td><td>%.1f</td><td>%.1f</td>"
				"<td>%.2f</td><td>%.1f</td><td>%.2f</td></tr>\n", s[i].writers,
				s[i].readers, cat_size_label(p->size, lb, sizeof(lb)), k,
				p->mbps[CAT_T_URING], k > 0 ? p->mbps[CAT_T_URING] / k : 0.0,
				p->mbps[CAT_T_URING_ZC], k > 0 ? p->mbps[CAT_T_URING_ZC] / k : 0.0);
		}
	fputs("</table>\n<p>Generated by uringpipe-cat --bench. MB = 10<sup>6</sup> bytes. "
	      "Ratios are uringpipe over the kernel pipe of the same capacity, medians of "
	      "alternating runs.</p>\n</body>\n</html>\n", f);
}

int cat_write_report(const char *path, const char *title, const char *subtitle,
		     const struct cat_report_series *s, unsigned ns)
{
	size_t n = strlen(path);
	bool is_svg = n >= 4 && strcasecmp(path + n - 4, ".svg") == 0;
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (is_svg) {
		fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
		svg(f, title, subtitle, s, ns);
	} else {
		html(f, title, subtitle, s, ns);
	}
	if (fflush(f) != 0 || ferror(f))
		r = -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}
