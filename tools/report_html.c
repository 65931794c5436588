/* SPDX-License-Identifier: MIT */
/*
 * report_html.c - the --report page: the title once, the header (machine,
 * kernel, backend, pinning, date, command), the charts inline and every
 * number of them in a table, a row per configuration, size and transport.
 * XHTML, so that an XML parser reads it; no script, no style sheet fetched.
 */
#include <stdio.h>
#include <string.h>

#include "report.h"

static void dl_item(FILE *f, const char *key, const char *label, const char *v)
{
	if (!v || !v[0])
		return;
	fprintf(f, "<dt>%s</dt><dd data-k=\"%s\">", label, key);
	rep_xml(f, v);
	fputs("</dd>\n", f);
}

/* A table cell holding one number; data-* as in report.h. */
static void td_num(FILE *f, const char *q, const struct cat_report_series *s, uint64_t size,
		   const char *t, const char *ref, const char *v)
{
	fprintf(f, "<td data-q=\"%s\" data-cfg=\"%ux%u\" data-size=\"%llu\" data-t=\"%s\"", q,
		s->writers, s->readers, (unsigned long long)size, t);
	if (ref)
		fprintf(f, " data-ref=\"%s\"", ref);
	fprintf(f, ">%s</td>", v);
}

static void table(FILE *f, const struct rep_set *rs, const struct cat_report_series *s,
		  unsigned ns)
{
	char b[32], lb[32];

	fputs("<table>\n<thead><tr><th>writers x readers</th><th>write size</th>"
	      "<th class=\"l\">transport</th><th>MB/s, median</th><th>slowest run</th>"
	      "<th>fastest run</th><th>write p50, \u00b5s</th><th>write p99, \u00b5s</th>"
	      "<th>system calls per GiB</th>", f);
	for (unsigned k = 0; k < rs->nref; k++) {
		fputs("<th>speed-up over ", f);
		rep_xml(f, rs->tr[rs->ref[k]]->name);
		fputs("</th>", f);
	}
	fputs("</tr></thead>\n<tbody>\n", f);
	for (unsigned i = 0; i < ns; i++)
		for (unsigned j = 0; j < s[i].npts; j++) {
			const struct cat_report_point *p = &s[i].pts[j];
			bool first = true;

			for (unsigned k = 0; k < rs->n; k++) {
				int t = rs->t[k];
				const struct cat_report_cell *c = &p->c[t];
				const char *key = rs->tr[t]->key;
				double lo, hi;

				if (!c->measured)
					continue;
				fprintf(f, "<tr%s>", first ? " class=\"g\"" : "");
				if (first)
					fprintf(f, "<td>%u x %u</td><td>%s</td>", s[i].writers,
						s[i].readers, cat_bytes_label(p->size, lb, sizeof(lb)));
				else
					fputs("<td></td><td></td>", f);
				first = false;
				fprintf(f, "<td class=\"l\"><span class=\"sw\" style=\"background:%s\">"
					"</span>", rs->tr[t]->color);
				rep_xml(f, rs->tr[t]->name);
				fputs("</td>", f);
				rep_minmax(c, &lo, &hi);
				td_num(f, "mbps", &s[i], p->size, key, NULL,
				       rep_fmt_mbps(c->mbps_median, b, sizeof(b)));
				td_num(f, "min", &s[i], p->size, key, NULL, rep_fmt_mbps(lo, b, sizeof(b)));
				td_num(f, "max", &s[i], p->size, key, NULL, rep_fmt_mbps(hi, b, sizeof(b)));
				td_num(f, "p50", &s[i], p->size, key, NULL,
				       rep_fmt_us(c->p50_us, b, sizeof(b)));
				td_num(f, "p99", &s[i], p->size, key, NULL,
				       rep_fmt_us(c->p99_us, b, sizeof(b)));
				td_num(f, "sys", &s[i], p->size, key, NULL,
				       rep_fmt_count(c->sys_gib, b, sizeof(b)));
				for (unsigned r = 0; r < rs->nref; r++) {
					double v = rep_ratio(p, t, rs->ref[r]);

					if (!rs->tr[t]->up || !(v > 0)) {
						fputs("<td></td>", f);
						continue;
					}
					rep_fmt_ratio(v, b, sizeof(b));
					strcat(b, "\u00d7");
					td_num(f, "ratio", &s[i], p->size, key, rs->tr[rs->ref[r]]->key, b);
				}
				fputs("</tr>\n", f);
			}
		}
	fputs("</tbody>\n</table>\n", f);
}

void rep_html(FILE *f, const struct cat_report_info *in, const struct cat_report_series *s,
	      unsigned ns)
{
	struct rep_set rs;
	char cores[16];

	rep_set_init(&rs, in, s, ns);
	snprintf(cores, sizeof(cores), "%u", in->cores);
	fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n"
	      "<head>\n<meta charset=\"utf-8\"/>\n<title>", f);
	rep_xml(f, in->title);
	fputs("</title>\n<style>\n"
	      "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:16px 24px;"
	      "color:#222;max-width:1360px}\n"
	      "h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 6px}\n"
	      "dl{display:grid;grid-template-columns:max-content 1fr max-content 1fr;"
	      "gap:2px 12px;font-size:13px;margin:0 0 12px}\n"
	      "dt{font-weight:bold}dd{margin:0}dd[data-k=command],dd[data-k=setup]"
	      "{grid-column:2/5;font-family:monospace}\n"
	      "table{border-collapse:collapse;font-size:13px}"
	      "td,th{border-bottom:1px solid #e4e4e4;padding:3px 10px;text-align:right}"
	      "th{background:#f4f4f4;vertical-align:bottom}.l{text-align:left;white-space:nowrap}"
	      "tr.g td{border-top:1px solid #999}\n"
	      ".sw{display:inline-block;width:12px;height:12px;margin-right:6px;"
	      "vertical-align:-1px}\n</style>\n</head>\n<body>\n<h1>", f);
	rep_xml(f, in->title);
	fputs("</h1>\n<dl>\n", f);
	dl_item(f, "cpu", "CPU", in->cpu);
	dl_item(f, "cores", "cores online", cores);
	dl_item(f, "kernel", "kernel", in->kernel);
	dl_item(f, "backend", "wake backend", in->backend);
	dl_item(f, "pinning", "pinning", in->pinning);
	dl_item(f, "date", "date", in->date);
	dl_item(f, "command", "command", in->command);
	dl_item(f, "setup", "setup", in->setup);
	fputs("</dl>\n", f);
	rep_svg(f, in, s, ns, false);
	fputs("<h2>The numbers</h2>\n", f);
	table(f, &rs, s, ns);
	fputs("<p>MB = 10<sup>6</sup> bytes. Each figure is the median of the timed runs, which "
	      "alternate between the transports so that a slow phase of the machine hits them "
	      "all; slowest and fastest are the extremes of those runs. A speed-up is the "
	      "uringpipe median over the other transport's median, in the same run: higher is "
	      "better.</p>\n</body>\n</html>\n", f);
}
