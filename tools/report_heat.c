/* SPDX-License-Identifier: MIT */
/*
 * report_heat.c - a --sweep's ratios as one heat map: writers x readers
 * down, write size across, a block per uringpipe transport and reference
 * (at most five references), all on one colour scale so that a colour means
 * the same speed-up in every block. Each cell carries its ratio as text.
 */
#include <math.h>
#include <stdio.h>

#include "report.h"

#define CELL_W   74
#define CELL_H   30
#define ROWLAB_W 170

/* Heat map colour: white at 1, blue up to 32x, red down to 1/4. */
static void heat_color(double v, char *b, size_t bl, bool *dark)
{
	double l = v > 0 ? log2(v) : -2, a;
	int r, g, bl_;

	if (l >= 0) {
		a = l / 5 > 1 ? 1 : l / 5;
		r = (int)(255 - a * (255 - 24));
		g = (int)(255 - a * (255 - 78));
		bl_ = (int)(255 - a * (255 - 160));
	} else {
		a = -l / 2 > 1 ? 1 : -l / 2;
		r = (int)(255 - a * (255 - 192));
		g = (int)(255 - a * (255 - 57));
		bl_ = (int)(255 - a * (255 - 43));
	}
	*dark = a > 0.55;
	snprintf(b, bl, "#%02x%02x%02x", r, g, bl_);
}

static unsigned heat_per_row(const struct cat_report_series *s)
{
	unsigned bw = ROWLAB_W + s[0].npts * CELL_W + REP_GAP, n = REP_W / bw;

	return n ? n : 1;
}

double rep_heat_height(const struct rep_set *rs, const struct cat_report_series *s,
			  unsigned ns)
{
	unsigned nb = rs->nup * (rs->nref < 5 ? rs->nref : 5), per = heat_per_row(s);

	return ((nb + per - 1) / per) * (48.0 + ns * CELL_H + REP_GAP) + 80;
}

void rep_heat_map(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		     unsigned ns, double y0)
{
	static const double scale[] = {0.25, 0.5, 1, 2, 4, 8, 16, 32};
	unsigned per = heat_per_row(s), blk = 0, nref = rs->nref < 5 ? rs->nref : 5;
	double bh = 48.0 + ns * CELL_H + REP_GAP, y;
	char col[16], b[32], lb[32];
	bool dark;

	fprintf(f, "<text x=\"0\" y=\"%.1f\" font-size=\"16\" font-weight=\"bold\">Speed-up by "
		"writers x readers and write size</text>\n<text x=\"0\" y=\"%.1f\" font-size=\"12\" "
		"fill=\"#555\">higher is better: blue, uringpipe is faster; red, slower; white, "
		"equal. Medians of the runs.</text>\n", y0 + 16, y0 + 32);
	y0 += 44;
	for (unsigned u = 0; u < rs->nup; u++)
		for (unsigned k = 0; k < nref; k++, blk++) {
			int tu = rs->up[u], tr = rs->ref[k];
			double x0 = (blk % per) * (ROWLAB_W + s[0].npts * CELL_W + REP_GAP);

			y = y0 + (blk / per) * bh;
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">",
				x0, y + 12);
			rep_xml(f, rs->tr[tu]->name);
			fputs(" over ", f);
			rep_xml(f, rs->tr[tr]->name);
			fputs("</text>\n", f);
			for (unsigned j = 0; j < s[0].npts; j++)
				fprintf(f, "<text class=\"size\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
					"text-anchor=\"middle\">%s</text>\n",
					x0 + ROWLAB_W + (j + 0.5) * CELL_W, y + 40,
					cat_bytes_label(s[0].pts[j].size, lb, sizeof(lb)));
			for (unsigned i = 0; i < ns; i++) {
				double ry = y + 48 + i * CELL_H;

				fprintf(f, "<text class=\"cfg\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
					"text-anchor=\"end\">", x0 + ROWLAB_W - 8, ry + CELL_H / 2.0 + 4);
				rep_cfg_label(f, &s[i], false);
				fputs("</text>\n", f);
				for (unsigned j = 0; j < s[i].npts && j < s[0].npts; j++) {
					double v = rep_ratio(&s[i].pts[j], tu, tr), x;

					x = x0 + ROWLAB_W + j * CELL_W;
					if (!(v > 0)) {
						fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" "
							"height=\"%d\" fill=\"#eee\" stroke=\"#fff\"/>\n",
							x, ry, CELL_W, CELL_H);
						continue;
					}
					heat_color(v, col, sizeof(col), &dark);
					fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
						"fill=\"%s\" stroke=\"#fff\"/>\n<text x=\"%.1f\" "
						"y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
						"fill=\"%s\"", x, ry, CELL_W, CELL_H, col, x + CELL_W / 2.0,
						ry + CELL_H / 2.0 + 4, dark ? "#fff" : "#111");
					rep_data_attrs(f, "ratio", &s[i], s[i].pts[j].size, rs->tr[tu]->key,
						   rs->tr[tr]->key);
					fprintf(f, ">%s\u00d7</text>\n", rep_fmt_ratio(v, b, sizeof(b)));
				}
			}
		}
	y = y0 + ((blk + per - 1) / per) * bh;
	fprintf(f, "<text x=\"0\" y=\"%.1f\" font-size=\"12\">colour scale:</text>\n", y + 20);
	for (unsigned i = 0; i < sizeof(scale) / sizeof(scale[0]); i++) {
		heat_color(scale[i], col, sizeof(col), &dark);
		rep_tick_label(scale[i], b, sizeof(b));
		fprintf(f, "<rect x=\"%u\" y=\"%.1f\" width=\"56\" height=\"22\" fill=\"%s\" "
			"stroke=\"#ccc\"/>\n<text class=\"scale\" x=\"%u\" y=\"%.1f\" font-size=\"11\" "
			"text-anchor=\"middle\" fill=\"%s\">%s\u00d7</text>\n", 100 + i * 58, y + 5,
			col, 128 + i * 58, y + 20, dark ? "#fff" : "#111", b);
	}
}
