/* SPDX-License-Identifier: MIT */
/*
 * report_svg.c - the charts of the --report page, as one <svg> element.
 *
 * One configuration (no --sweep): throughput against write size on a log y
 * axis, the band and whiskers spanning the slowest to the fastest run, and
 * beside it the ratio to the kernel pipe (and to every other kernel
 * transport present); below, small panels of write latency (p50, p99) and
 * system calls per GiB. Several configurations (--sweep): one heat map of
 * the ratios, writers x readers down, write size across, a block per
 * uringpipe transport and reference, on one colour scale (report_heat.c).
 *
 * Both axes are logarithmic: sizes step x16 or more, and throughputs and
 * ratios span decades (a 100-byte result must not sit on the floor of a
 * chart scaled for 1 MiB writes). Every number drawn is also in the text,
 * with the data-* attributes report.h describes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

#define HDR_H    132  /* title and header, standalone only */
#define LEGEND_H 34
#define BIG_H    380
#define SMALL_H  250

/* A chart: its plot area in px and the log ranges it maps. */
struct chart {
	double x, y, w, h;
	double xlo, xhi; /* log2 of the write sizes */
	double ylo, yhi; /* log10 of the values */
};

static double cx(const struct chart *ch, uint64_t size)
{
	double l = log2((double)size);

	if (!(ch->xhi > ch->xlo))
		return ch->x + ch->w / 2;
	return ch->x + 24 + (l - ch->xlo) / (ch->xhi - ch->xlo) * (ch->w - 48);
}

/* Values at or below zero (no system call at all) sit on the bottom edge. */
static double cy(const struct chart *ch, double v)
{
	double l = v > 0 ? log10(v) : ch->ylo;

	l = l < ch->ylo ? ch->ylo : l > ch->yhi ? ch->yhi : l;
	return ch->y + ch->h - (l - ch->ylo) / (ch->yhi - ch->ylo) * ch->h;
}

/* The y range: the positive values seen, widened by a third either way. */
struct range {
	double lo, hi;
};

static void range_add(struct range *r, double v)
{
	if (!(v > 0))
		return;
	r->lo = r->lo > 0 && r->lo < v ? r->lo : v;
	r->hi = r->hi > v ? r->hi : v;
}

static void chart_init(struct chart *ch, double ox, double oy, double ow, double oh,
		       const struct cat_report_series *s, struct range r)
{
	ch->x = ox + 74;
	ch->y = oy + 40;
	ch->w = ow - 74 - 14;
	ch->h = oh - 40 - 46;
	ch->xlo = ch->xhi = s->npts ? log2((double)s->pts[0].size) : 0;
	for (unsigned i = 1; i < s->npts; i++) {
		double l = log2((double)s->pts[i].size);
		ch->xlo = l < ch->xlo ? l : ch->xlo;
		ch->xhi = l > ch->xhi ? l : ch->xhi;
	}
	if (!(r.lo > 0)) {
		r.lo = 1;
		r.hi = 10;
	}
	ch->ylo = log10(r.lo / 1.35);
	ch->yhi = log10(r.hi * 1.35);
	if (ch->yhi - ch->ylo < 1) { /* at least a decade: one tick or two */
		double m = (ch->yhi + ch->ylo) / 2;
		ch->ylo = m - 0.5;
		ch->yhi = m + 0.5;
	}
}

/* 0.5, 20, 5000, 20k, 1M: short enough for the margin. */
void rep_tick_label(double v, char *b, size_t bl)
{
	if (v >= 1e6)
		snprintf(b, bl, "%.0fM", v / 1e6);
	else if (v >= 1e4)
		snprintf(b, bl, "%.0fk", v / 1e3);
	else
		snprintf(b, bl, v >= 1 ? "%.0f" : "%g", v);
}

/* Frame, grid, ticks at 1, 2, 5 x 10^k (decades only over > 3 decades),
 * size labels, title and the note ("higher is better"). */
static void chart_frame(FILE *f, const struct chart *ch, const struct cat_report_series *s,
			const char *title, const char *note, const char *yunit)
{
	static const double mult[] = {1, 2, 5};
	bool decades = ch->yhi - ch->ylo > 3;
	char b[32];

	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fcfcfc\" "
		"stroke=\"#444\"/>\n", ch->x, ch->y, ch->w, ch->h);
	for (int k = (int)floor(ch->ylo); k <= (int)ceil(ch->yhi); k++)
		for (int m = 0; m < (decades ? 1 : 3); m++) {
			double v = mult[m] * pow(10, k), y;

			if (log10(v) < ch->ylo || log10(v) > ch->yhi)
				continue;
			y = cy(ch, v);
			rep_tick_label(v, b, sizeof(b));
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				"stroke=\"%s\"/>\n<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" "
				"font-size=\"11\" text-anchor=\"end\">%s</text>\n", ch->x, y,
				ch->x + ch->w, y, m ? "#eee" : "#d4d4d4", ch->x - 6, y + 4, b);
		}
	for (unsigned i = 0; i < s->npts; i++)
		fprintf(f, "<text class=\"size\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
			"text-anchor=\"middle\">%s</text>\n", cx(ch, s->pts[i].size),
			ch->y + ch->h + 16, cat_bytes_label(s->pts[i].size, b, sizeof(b)));
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
		"fill=\"#444\">write size (log scale)</text>\n", ch->x + ch->w / 2,
		ch->y + ch->h + 34);
	fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"14\" "
		"font-weight=\"bold\">", ch->x, ch->y - 22);
	rep_xml(f, title);
	fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">", ch->x,
		ch->y - 7);
	rep_xml(f, note);
	fprintf(f, "</text>\n<text class=\"note\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
		"text-anchor=\"middle\" fill=\"#444\" transform=\"rotate(-90 %.1f %.1f)\">",
		ch->x - 56, ch->y + ch->h / 2, ch->x - 56, ch->y + ch->h / 2);
	rep_xml(f, yunit);
	fputs("</text>\n", f);
}

/* The data-* attributes of one number. */
void rep_data_attrs(FILE *f, const char *q, const struct cat_report_series *s, uint64_t size,
		       const char *t, const char *ref)
{
	fprintf(f, " data-q=\"%s\" data-cfg=\"%ux%u\" data-size=\"%llu\" data-t=\"", q, s->writers,
		s->readers, (unsigned long long)size);
	rep_xml(f, t);
	if (ref) {
		fputs("\" data-ref=\"", f);
		rep_xml(f, ref);
	}
	fputc('"', f);
}

static const char *const dashes[] = {"", "7 4", "2 3", "9 3 2 3", "1 2"};

static void polyline(FILE *f, const char *color, int dash, double width)
{
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s points=\"",
		color, width, dashes[dash][0] ? " stroke-dasharray=\"" : "", dashes[dash],
		dashes[dash][0] ? "\"" : "");
}

static void throughput(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		       double ox, double oy)
{
	struct range r = {0, 0};
	struct chart ch;
	char b[3][32], lb[32];

	for (unsigned i = 0; i < s->npts; i++)
		for (unsigned k = 0; k < rs->n; k++) {
			double lo, hi;
			if (!s->pts[i].c[rs->t[k]].measured)
				continue;
			rep_minmax(&s->pts[i].c[rs->t[k]], &lo, &hi);
			range_add(&r, lo);
			range_add(&r, hi);
		}
	chart_init(&ch, ox, oy, REP_W / 2.0 - REP_GAP / 2.0, BIG_H, s, r);
	chart_frame(f, &ch, s, "Throughput", "higher is better; band: slowest to fastest run",
		    "MB/s (MB = 10\u2076 B), log scale");
	for (unsigned k = 0; k < rs->n; k++) {
		int t = rs->t[k];
		const char *col = rs->tr[t]->color;
		double lo, hi;

		/* The band: fastest runs left to right, slowest back. */
		fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.16\" stroke=\"none\" points=\"",
			col);
		for (unsigned i = 0; i < s->npts; i++)
			if (s->pts[i].c[t].measured) {
				rep_minmax(&s->pts[i].c[t], &lo, &hi);
				fprintf(f, "%.1f,%.1f ", cx(&ch, s->pts[i].size), cy(&ch, hi));
			}
		for (unsigned i = s->npts; i-- > 0;)
			if (s->pts[i].c[t].measured) {
				rep_minmax(&s->pts[i].c[t], &lo, &hi);
				fprintf(f, "%.1f,%.1f ", cx(&ch, s->pts[i].size), cy(&ch, lo));
			}
		fputs("\"/>\n", f);
		polyline(f, col, 0, 2.5);
		for (unsigned i = 0; i < s->npts; i++)
			if (s->pts[i].c[t].measured)
				fprintf(f, "%.1f,%.1f ", cx(&ch, s->pts[i].size),
					cy(&ch, s->pts[i].c[t].mbps_median));
		fputs("\"/>\n", f);
		for (unsigned i = 0; i < s->npts; i++) {
			const struct cat_report_cell *c = &s->pts[i].c[t];
			double x = cx(&ch, s->pts[i].size);

			if (!c->measured)
				continue;
			rep_minmax(c, &lo, &hi);
			fprintf(f, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fh8M%.1f %.1fh8\" stroke=\"%s\" "
				"stroke-width=\"1.2\"/>\n", x, cy(&ch, lo), cy(&ch, hi), x - 4,
				cy(&ch, lo), x - 4, cy(&ch, hi), col);
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title", x,
				cy(&ch, c->mbps_median), col);
			rep_data_attrs(f, "mbps min max", s, s->pts[i].size, rs->tr[t]->key, NULL);
			fputc('>', f);
			rep_xml(f, rs->tr[t]->name);
			fprintf(f, ", %s writes: median %s MB/s, runs %s to %s MB/s</title></circle>\n",
				cat_bytes_label(s->pts[i].size, lb, sizeof(lb)),
				rep_fmt_mbps(c->mbps_median, b[0], sizeof(b[0])),
				rep_fmt_mbps(lo, b[1], sizeof(b[1])), rep_fmt_mbps(hi, b[2], sizeof(b[2])));
		}
	}
}

/* Is @tu the fastest uringpipe transport at @p, over @tr? */
static bool highest(const struct rep_set *rs, const struct cat_report_point *p, int tu, int tr)
{
	double v = rep_ratio(p, tu, tr);

	for (unsigned u = 0; u < rs->nup; u++)
		if (rs->up[u] != tu && rep_ratio(p, rs->up[u], tr) > v)
			return false;
	return true;
}

static void ratios(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		   double ox, double oy)
{
	struct range r = {1, 1};
	struct chart ch;
	char b[32], lb[32];

	for (unsigned i = 0; i < s->npts; i++)
		for (unsigned u = 0; u < rs->nup; u++)
			for (unsigned k = 0; k < rs->nref; k++)
				range_add(&r, rep_ratio(&s->pts[i], rs->up[u], rs->ref[k]));
	chart_init(&ch, ox, oy, REP_W / 2.0 - REP_GAP / 2.0, BIG_H, s, r);
	chart_frame(f, &ch, s, rs->nref > 1 ? "Speed-up over each kernel transport" :
		    "Speed-up over the kernel pipe", "higher is better; above the grey line: "
		    "uringpipe is faster", "uringpipe MB/s \u00f7 kernel MB/s, log scale");
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#777\" "
		"stroke-width=\"2\"/>\n", ch.x, cy(&ch, 1), ch.x + ch.w, cy(&ch, 1));
	for (unsigned k = 1; k < rs->nref && k < 5; k++) { /* which dash is which */
		double y = ch.y + 14 + (k - 1) * 16;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
			"stroke-width=\"2\" stroke-dasharray=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
			"font-size=\"11\">over ", ch.x + 8, y, ch.x + 34, y, dashes[k], ch.x + 40,
			y + 4);
		rep_xml(f, rs->tr[rs->ref[k]]->name);
		fputs("</text>\n", f);
	}
	for (unsigned u = 0; u < rs->nup; u++)
		for (unsigned k = 0; k < rs->nref && k < 5; k++) {
			int tu = rs->up[u], tr = rs->ref[k];
			const char *col = rs->tr[tu]->color;

			polyline(f, col, (int)k, k ? 1.8 : 2.5);
			for (unsigned i = 0; i < s->npts; i++) {
				double v = rep_ratio(&s->pts[i], tu, tr);
				if (v > 0)
					fprintf(f, "%.1f,%.1f ", cx(&ch, s->pts[i].size), cy(&ch, v));
			}
			fputs("\"/>\n", f);
			for (unsigned i = 0; i < s->npts; i++) {
				double v = rep_ratio(&s->pts[i], tu, tr), x, y;

				if (!(v > 0))
					continue;
				x = cx(&ch, s->pts[i].size);
				y = cy(&ch, v);
				fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title",
					x, y, k ? "3" : "4", col);
				rep_data_attrs(f, "ratio", s, s->pts[i].size, rs->tr[tu]->key,
					   rs->tr[tr]->key);
				fputc('>', f);
				rep_xml(f, rs->tr[tu]->name);
				fputs(" over ", f);
				rep_xml(f, rs->tr[tr]->name);
				fprintf(f, ", %s writes: %s\u00d7</title></circle>\n",
					cat_bytes_label(s->pts[i].size, lb, sizeof(lb)),
					rep_fmt_ratio(v, b, sizeof(b)));
				if (k)
					continue;
				/* The figure itself over the kernel pipe: the highest
				 * uringpipe transport at this size above its dot, the
				 * others below, so that two close lines keep apart. */
				fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
					"font-weight=\"bold\" text-anchor=\"middle\" fill=\"%s\"", x,
					highest(rs, &s->pts[i], tu, tr) ? y - 9 : y + 18, col);
				rep_data_attrs(f, "ratio", s, s->pts[i].size, rs->tr[tu]->key,
					   rs->tr[tr]->key);
				fprintf(f, ">%s\u00d7</text>\n", b);
			}
		}
}

/* A small panel: one figure per transport and size, lower is better. */
enum small_q { Q_P50, Q_P99, Q_SYS };

static double small_val(const struct cat_report_cell *c, enum small_q q)
{
	return q == Q_P50 ? c->p50_us : q == Q_P99 ? c->p99_us : c->sys_gib;
}

static void small(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		  double ox, double oy, double ow, enum small_q q)
{
	static const char *const title[] = {"Write latency, median (p50)",
					    "Write latency, 99th percentile (p99)",
					    "System calls per GiB moved"};
	static const char *const qn[] = {"p50", "p99", "sys"};
	struct range r = {0, 0};
	struct chart ch;
	char b[32], lb[32];

	for (unsigned i = 0; i < s->npts; i++)
		for (unsigned k = 0; k < rs->n; k++)
			if (s->pts[i].c[rs->t[k]].measured)
				range_add(&r, small_val(&s->pts[i].c[rs->t[k]], q));
	chart_init(&ch, ox, oy, ow, SMALL_H, s, r);
	chart_frame(f, &ch, s, title[q], q == Q_SYS ? "lower is better; none: on the floor" :
		    "lower is better", q == Q_SYS ? "calls per GiB, log scale" : "\u00b5s, log scale");
	for (unsigned k = 0; k < rs->n; k++) {
		int t = rs->t[k];
		const char *col = rs->tr[t]->color;

		polyline(f, col, 0, 1.8);
		for (unsigned i = 0; i < s->npts; i++)
			if (s->pts[i].c[t].measured)
				fprintf(f, "%.1f,%.1f ", cx(&ch, s->pts[i].size),
					cy(&ch, small_val(&s->pts[i].c[t], q)));
		fputs("\"/>\n", f);
		for (unsigned i = 0; i < s->npts; i++) {
			const struct cat_report_cell *c = &s->pts[i].c[t];
			double v = small_val(c, q);

			if (!c->measured)
				continue;
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title",
				cx(&ch, s->pts[i].size), cy(&ch, v), col);
			rep_data_attrs(f, qn[q], s, s->pts[i].size, rs->tr[t]->key, NULL);
			fputc('>', f);
			rep_xml(f, rs->tr[t]->name);
			fprintf(f, ", %s writes: %s %s</title></circle>\n",
				cat_bytes_label(s->pts[i].size, lb, sizeof(lb)),
				q == Q_SYS ? rep_fmt_count(v, b, sizeof(b)) : rep_fmt_us(v, b, sizeof(b)),
				q == Q_SYS ? "system calls per GiB" : "\u00b5s");
		}
	}
}

void rep_cfg_label(FILE *f, const struct cat_report_series *s, bool pin)
{
	fprintf(f, "%u writer%s x %u reader%s", s->writers, s->writers == 1 ? "" : "s", s->readers,
		s->readers == 1 ? "" : "s");
	if (pin && s->pinned)
		fprintf(f, ", pinned: writer on cpu%d, reader on cpu%d", s->wcpu, s->rcpu);
	else if (pin)
		fputs(", not pinned", f);
}

static void one_config(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		       double y)
{
	double sw = (REP_W - 2.0 * REP_GAP) / 3;

	fprintf(f, "<text class=\"cfg\" x=\"0\" y=\"%.1f\" font-size=\"16\" font-weight=\"bold\">",
		y + 18);
	rep_cfg_label(f, s, true);
	fputs("</text>\n", f);
	throughput(f, rs, s, 0, y + 26);
	ratios(f, rs, s, REP_W / 2.0 + REP_GAP / 2.0, y + 26);
	for (int q = Q_P50; q <= Q_SYS; q++)
		small(f, rs, s, q * (sw + REP_GAP), y + 26 + BIG_H + REP_GAP, sw, (enum small_q)q);
}

static void legend(FILE *f, const struct rep_set *rs, double y)
{
	double x = 0;

	for (unsigned k = 0; k < rs->n; k++) {
		const struct rep_transport *t = rs->tr[rs->t[k]];

		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"5\" fill=\"%s\"/>\n"
			"<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">", x, y + 7, t->color, x + 28,
			y + 13);
		rep_xml(f, t->name);
		fputs("</text>\n", f);
		x += 48 + 7.5 * (double)strlen(t->name);
	}
}

static void header(FILE *f, const struct cat_report_info *in)
{
	static const double col_x[2] = {0, REP_W / 2.0};
	const char *lab[] = {"CPU", "cores online", "kernel", "wake backend", "pinning", "date",
			     "command", "setup"};
	const char *key[] = {"cpu", "cores", "kernel", "backend", "pinning", "date", "command",
			     "setup"};
	const char *val[8] = {in->cpu, NULL, in->kernel, in->backend, in->pinning, in->date,
			      in->command, in->setup};
	char cores[16];

	snprintf(cores, sizeof(cores), "%u", in->cores);
	val[1] = cores;
	fprintf(f, "<text x=\"0\" y=\"26\" font-size=\"20\" font-weight=\"bold\">");
	rep_xml(f, in->title);
	fputs("</text>\n", f);
	for (int i = 0; i < 8; i++) {
		/* Two columns, the command and the set-up a line each. */
		int row = i < 6 ? i / 2 : i - 3;
		double x = i < 6 ? col_x[i % 2] : 0;

		if (!val[i] || !val[i][0])
			continue;
		fprintf(f, "<text class=\"hdr\" data-k=\"%s\" x=\"%.1f\" y=\"%d\" font-size=\"12\">"
			"<tspan font-weight=\"bold\">%s: </tspan>", key[i], x, 50 + row * 17, lab[i]);
		rep_xml(f, val[i]);
		fputs("</text>\n", f);
	}
}

void rep_svg(FILE *f, const struct cat_report_info *in, const struct cat_report_series *s,
	     unsigned ns, bool standalone)
{
	struct rep_set rs;
	double y = standalone ? HDR_H : 4, h;

	rep_set_init(&rs, in, s, ns);
	h = y + LEGEND_H + 20;
	h += ns == 1 ? 26 + BIG_H + REP_GAP + SMALL_H : ns ? rep_heat_height(&rs, s, ns) : 0;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
		"viewBox=\"-10 -4 %d %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, "
		"sans-serif\">\n<title>", REP_W + 20, h, REP_W + 20, h);
	rep_xml(f, in->title);
	fputs("</title>\n<rect x=\"-10\" y=\"-4\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n",
	      f);
	if (standalone)
		header(f, in);
	/* The heat map names its transports in each block; its colours are
	 * the scale's, not the lines'. */
	if (ns == 1) {
		legend(f, &rs, y);
		y += LEGEND_H;
	}
	if (ns == 1)
		one_config(f, &rs, s, y);
	else if (ns > 1)
		rep_heat_map(f, &rs, s, ns, y);
	fputs("</svg>\n", f);
}
