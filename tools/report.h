/* SPDX-License-Identifier: MIT */
/*
 * report.h - private interfaces of the --report writer, shared by
 * cat_report.c (transports, number formats, the file), report_svg.c (the
 * charts), report_heat.c (a sweep's heat map) and report_html.c (the page
 * and its table).
 *
 * Every measured number the page shows is formatted by one of the rep_fmt_*
 * functions below and carries data-* attributes saying what it is (data-q:
 * the quantity, data-cfg, data-size, data-t, data-ref), so a test can hold
 * each one against the --json output of the same run. Text that holds other
 * digits says what it is by its class: "tick" (1, 2, 5 x 10^k), "scale" (the
 * heat map's, 2^k), "size" (a write size), "cfg" (writers x readers),
 * "hdr" (the header), "note" (units), "label" (a chart's title).
 */
#ifndef UP_TOOLS_REPORT_H
#define UP_TOOLS_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "cat.h"

/* A transport's name, colour and side, by its --json key. */
struct rep_transport {
	const char *key;
	const char *name;
	const char *color;
	bool up; /* a uringpipe transport: compared with every other one */
};
const struct rep_transport *rep_transport(const char *key);

/* The transports present: measured in at least one cell of @s. */
struct rep_set {
	unsigned n, nup, nref;
	int t[CAT_T_COUNT];    /* indices into cat_report_point.c[] */
	int up[CAT_T_COUNT];   /* the uringpipe ones */
	int ref[CAT_T_COUNT];  /* the others (kernel pipe first): ratio denominators */
	const struct rep_transport *tr[CAT_T_COUNT]; /* by index into c[] */
};
void rep_set_init(struct rep_set *rs, const struct cat_report_info *in,
		  const struct cat_report_series *s, unsigned ns);

/* Number formats: the precision the page shows, the same everywhere. */
const char *rep_fmt_mbps(double v, char *b, size_t bl);
const char *rep_fmt_ratio(double v, char *b, size_t bl);
const char *rep_fmt_us(double v, char *b, size_t bl);
const char *rep_fmt_count(double v, char *b, size_t bl);

/* The minimum and maximum of a cell's runs. */
void rep_minmax(const struct cat_report_cell *c, double *lo, double *hi);
/* median(up) / median(ref), or 0 when either is missing. */
double rep_ratio(const struct cat_report_point *p, int up, int ref);

/* XML text and attribute values, escaped; control characters dropped. */
void rep_xml(FILE *f, const char *s);

/* report_svg.c: the <svg> element. @standalone: it also draws the title and
 * the header (the HTML page has its own). */
void rep_svg(FILE *f, const struct cat_report_info *in, const struct cat_report_series *s,
	     unsigned ns, bool standalone);

/* The layout both report_svg.c and report_heat.c draw in. */
#define REP_W   1320 /* the page is read at 1400 px */
#define REP_GAP 18
/* Tick labels: 0.5, 20, 5000, 20k, 1M. */
void rep_tick_label(double v, char *b, size_t bl);
/* The data-* attributes of one number (see above). */
void rep_data_attrs(FILE *f, const char *q, const struct cat_report_series *s, uint64_t size,
		    const char *t, const char *ref);
/* "2 writers x 5 readers", and with @pin how the run was pinned. */
void rep_cfg_label(FILE *f, const struct cat_report_series *s, bool pin);

/* report_heat.c: the sweep's heat map at @y0, and its height. */
double rep_heat_height(const struct rep_set *rs, const struct cat_report_series *s,
		       unsigned ns);
void rep_heat_map(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		  unsigned ns, double y0);

/* report_html.c: the page, with rep_svg() inline. */
void rep_html(FILE *f, const struct cat_report_info *in, const struct cat_report_series *s,
	      unsigned ns);

#endif /* UP_TOOLS_REPORT_H */
