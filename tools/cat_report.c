/* SPDX-License-Identifier: MIT */
/*
 * cat_report.c - the --report page: what is common to its SVG and HTML
 * forms (transports, number formats, escaping) and the file itself.
 *
 * Hand-written SVG rather than a plotting library: the report must open
 * offline, carry no script and add no dependency. The HTML flavour is
 * well-formed XHTML (every element closed, text escaped) so a test can parse
 * it with any XML parser, and browsers render it as HTML5 all the same.
 * The charts are report_svg.c, the page and its table report_html.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

/*
 * Every transport the bench has or is getting (--vs), by --json key. Both
 * spellings of a key that has a dash on the command line are here. An
 * unknown key still gets a row: its key as name, grey.
 */
static const struct rep_transport transports[] = {
	{"kernel", "kernel pipe", "#c0392b", false},
	{"uringpipe", "uringpipe (copy)", "#1f77b4", true},
	{"uringpipe_zc", "uringpipe (zero-copy)", "#2ca02c", true},
	{"pipe_uring", "kernel pipe via io_uring", "#e67e22", false},
	{"pipe-uring", "kernel pipe via io_uring", "#e67e22", false},
	{"vmsplice", "kernel pipe, writer vmsplice", "#8e44ad", false},
	{"unix", "AF_UNIX socketpair", "#795548", false},
	{"tcp", "TCP over loopback", "#546e7a", false},
};

const struct rep_transport *rep_transport(const char *key)
{
	static struct rep_transport other[CAT_T_COUNT];
	static unsigned nother;

	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (key && strcmp(transports[i].key, key) == 0)
			return &transports[i];
	for (unsigned i = 0; i < nother; i++)
		if (key && strcmp(other[i].key, key) == 0)
			return &other[i];
	if (nother == CAT_T_COUNT)
		return &transports[0];
	other[nother] = (struct rep_transport){key ? key : "?", key ? key : "?", "#999999",
					       key && strncmp(key, "uringpipe", 9) == 0};
	return &other[nother++];
}

void rep_set_init(struct rep_set *rs, const struct cat_report_info *in,
		  const struct cat_report_series *s, unsigned ns)
{
	memset(rs, 0, sizeof(*rs));
	for (int t = 0; t < CAT_T_COUNT; t++) {
		bool m = false;

		for (unsigned i = 0; i < ns && !m; i++)
			for (unsigned j = 0; j < s[i].npts && !m; j++)
				m = s[i].pts[j].c[t].measured;
		rs->tr[t] = rep_transport(in->key[t]);
		if (!m)
			continue;
		rs->t[rs->n++] = t;
		if (rs->tr[t]->up)
			rs->up[rs->nup++] = t;
		else
			rs->ref[rs->nref++] = t; /* CAT_T_KERNEL is 0: first */
	}
}

/* Three significant digits or more: what a person compares. */
const char *rep_fmt_mbps(double v, char *b, size_t bl)
{
	snprintf(b, bl, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
	return b;
}

const char *rep_fmt_ratio(double v, char *b, size_t bl)
{
	snprintf(b, bl, v >= 10 ? "%.1f" : "%.2f", v);
	return b;
}

/* Latencies span 0.02 µs to seconds, as the text table shows them. */
const char *rep_fmt_us(double v, char *b, size_t bl)
{
	snprintf(b, bl, v < 10 ? "%.2f" : v < 1000 ? "%.1f" : "%.0f", v);
	return b;
}

const char *rep_fmt_count(double v, char *b, size_t bl)
{
	snprintf(b, bl, "%.0f", v);
	return b;
}

void rep_minmax(const struct cat_report_cell *c, double *lo, double *hi)
{
	*lo = *hi = c->mbps_median;
	for (unsigned i = 0; i < c->nruns; i++) {
		*lo = c->mbps[i] < *lo ? c->mbps[i] : *lo;
		*hi = c->mbps[i] > *hi ? c->mbps[i] : *hi;
	}
}

double rep_ratio(const struct cat_report_point *p, int up, int ref)
{
	const struct cat_report_cell *u = &p->c[up], *r = &p->c[ref];

	if (!u->measured || !r->measured || !(r->mbps_median > 0))
		return 0.0;
	return u->mbps_median / r->mbps_median;
}

void rep_xml(FILE *f, const char *s)
{
	for (; s && *s; s++) {
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

static bool is_svg_name(const char *path)
{
	size_t n = strlen(path);

	return n >= 4 && strcasecmp(path + n - 4, ".svg") == 0;
}

int cat_report_check(const char *path)
{
	struct stat st;
	int fd;

	if (!path[0])
		return -ENOENT;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		/* Open as the write will, but without O_TRUNC: an earlier
		 * report stays until there is a new one. */
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	}
	if (errno != ENOENT)
		return -errno;
	/* O_EXCL: a file that appears meanwhile is not ours to remove. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	close(fd);
	unlink(path);
	return 0;
}

int cat_write_report(const char *path, const struct cat_report_info *in,
		     const struct cat_report_series *s, unsigned ns)
{
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (is_svg_name(path)) {
		fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
		rep_svg(f, in, s, ns, true);
	} else {
		rep_html(f, in, s, ns);
	}
	if (fflush(f) != 0 || ferror(f))
		r = -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}
