/* SPDX-License-Identifier: MIT */
/*
 * bench_out.c - what `uringpipe-cat --bench` prints: the text table (header,
 * one table per configuration, footer), the --json object on stdout, and
 * the medians handed to the --report chart.
 *
 * A summary figure is the median over the --repeat runs, except the maximum
 * latency, which is the maximum over them; the JSON also lists every run.
 * Only the transports that ran (opts.on) appear, each with its ratio to the
 * kernel pipe, which always runs. The text stays within 100 columns: one
 * table of throughput (a column per transport), one of latency and calls
 * (a line per transport and size).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "bench.h"

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, unsigned n)
{
	double tmp[MAX_REPEAT];
	if (n == 0)
		return 0.0;
	memcpy(tmp, v, n * sizeof(*v));
	qsort(tmp, n, sizeof(*tmp), cmp_dbl);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2.0;
}

double bench_median(const double *v, unsigned n)
{
	return median(v, n);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_darr(const double *v, unsigned n, int prec)
{
	putchar('[');
	for (unsigned i = 0; i < n; i++)
		printf("%s%.*f", i ? "," : "", prec, v[i]);
	putchar(']');
}

/* "read_size_option", "transports", the socket buffers; shared with --sparse. */
void bench_json_transports(const struct opts *o, const struct env *env)
{
	bool first = true;

	if (o->read_size == READ_SIZE_MAX)
		printf("\"read_size_option\":\"max\"");
	else
		printf("\"read_size_option\":%" PRIu64, o->read_size);
	printf(",\"transports\":[");
	for (int t = 0; t < T_COUNT; t++)
		if (o->on[t]) {
			printf("%s\"%s\"", first ? "" : ",", bench_tname[t]);
			first = false;
		}
	printf("],\"unix_sndbuf\":%ld,\"unix_rcvbuf\":%ld,\"tcp_sndbuf\":%ld,\"tcp_rcvbuf\":%ld",
	       env->unix_buf[0], env->unix_buf[1], env->tcp_buf[0], env->tcp_buf[1]);
}

/* Zero copy over copy in each round: the two run back to back, so a turn of
 * the machine's phase between rounds moves both, and one inside a round
 * skews that round's ratio alone, which the median then leaves out. The
 * ratio of the two medians takes such a turn in full whenever it falls
 * between the middle round's copy and zero-copy runs. Returns the number
 * of rounds with both figures. */
static unsigned zc_pairs(const struct opts *o, const struct row *rw, double *v)
{
	unsigned n = 0;

	for (unsigned i = 0; i < o->repeat; i++)
		if (rw->mbps[T_URING][i] > 0)
			v[n++] = rw->mbps[T_URING_ZC][i] / rw->mbps[T_URING][i];
	return n;
}

static void json_row(const struct opts *o, const struct row *rw)
{
	double mk = median(rw->mbps[T_KERNEL], o->repeat);
	double zp[MAX_REPEAT];
	unsigned nzp = zc_pairs(o, rw, zp);

	printf("{\"size\":%" PRIu64 ",\"line_rtt_ns\":", rw->size);
	json_darr(rw->rtt_ns, rw->nrtt, 1);
	for (int t = T_URING; t <= T_URING_ZC; t++) {
		printf(",\"%s\":", t == T_URING ? "ratio" : "ratio_zc");
		if (mk > 0)
			printf("%.4f", median(rw->mbps[t], o->repeat) / mk);
		else
			printf("null");
	}
	printf(",\"zc_over_copy_rounds\":");
	json_darr(zp, nzp, 4);
	if (nzp)
		printf(",\"zc_over_copy_median\":%.4f", median(zp, nzp));
	else
		printf(",\"zc_over_copy_median\":null");
	printf(",\"read_size\":%" PRIu64, bench_read_size(o, rw->size));
	for (int t = 0; t < T_COUNT; t++) {
		double mt = median(rw->mbps[t], o->repeat);
		double rgib[MAX_REPEAT];

		if (!o->on[t])
			continue;
		printf(",\"%s\":{\"bytes_per_run\":%" PRIu64 ",\"verified_bytes\":%" PRIu64
		       ",\"mbps_median\":%.3f,\"ratio\":",
		       bench_tname[t], rw->bytes[t], rw->verified[t], mt);
		if (mk > 0)
			printf("%.4f", mt / mk);
		else
			printf("null");
		printf(",\"read_calls\":[");
		for (unsigned i = 0; i < o->repeat; i++) {
			printf("%s%" PRIu64, i ? "," : "", rw->rcalls[t][i]);
			rgib[i] = (double)rw->rcalls[t][i] * (double)GiB / (double)rw->bytes[t];
		}
		printf("],\"read_calls_per_gib_median\":%.1f,\"write_calls\":[",
		       median(rgib, o->repeat));
		for (unsigned i = 0; i < o->repeat; i++)
			printf("%s%" PRIu64, i ? "," : "", rw->wcalls[t][i]);
		printf("],\"mbps\":");
		json_darr(rw->mbps[t], o->repeat, 3);
		printf(",\"secs\":");
		json_darr(rw->secs[t], o->repeat, 6);
		printf(",\"lat_us\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,"
		       "\"samples_per_run\":%zu,\"every\":%" PRIu64 "}",
		       median(rw->p50[t], o->repeat), median(rw->p99[t], o->repeat), rw->lmax[t],
		       rw->nlat[t], rw->every[t]);
		printf(",\"syscalls_per_gib_median\":%.1f,\"syscalls\":[",
		       median(rw->sys_gib[t], o->repeat));
		for (unsigned i = 0; i < o->repeat; i++)
			printf("%s%" PRIu64, i ? "," : "", rw->syscalls[t][i]);
		printf("]");
		if (t == T_URING) {
			printf(",\"stats\":[");
			for (unsigned i = 0; i < o->repeat; i++) {
				const struct up_stats *st = &rw->st[i];
				if (!rw->have_st[i]) {
					printf("%snull", i ? "," : "");
					continue;
				}
				printf("%s{\"bytes_written\":%" PRIu64 ",\"bytes_read\":%" PRIu64
				       ",\"writes\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"waits\":%" PRIu64
				       ",\"wakes\":%" PRIu64 ",\"syscalls\":%" PRIu64 "}",
				       i ? "," : "", st->bytes_written, st->bytes_read, st->writes,
				       st->reads, st->waits, st->wakes, st->syscalls);
			}
			printf("]");
		}
		printf("}");
	}
	printf("}");
}

/* ,"machine":{...}: what the report's header and the table's show. */
static void json_machine(const struct bench_machine *m)
{
	printf(",\"machine\":{\"cpu\":");
	json_str(m->cpu);
	printf(",\"cores\":%u,\"kernel\":", m->cores);
	json_str(m->kernel);
	printf(",\"backend\":");
	json_str(m->backend);
	printf(",\"pinning\":");
	json_str(m->pinning);
	printf(",\"date\":");
	json_str(m->date);
	printf(",\"command\":");
	json_str(m->command);
	printf(",\"trace_events\":");
	json_str(m->trace_events);
	printf("}");
}

void bench_print_json(const struct opts *o, const struct env *env, const struct config *cf,
		       unsigned ncf)
{
	printf("{\"tool\":\"uringpipe-cat --bench\",\"version\":\"%s\",", UP_VERSION_STRING);
	printf("\"capacity\":%" PRIu64 ",\"uringpipe_capacity\":%zu,\"page_size\":%zu,"
	       "\"kernel_pipe_size\":%ld,\"pipe_max_size\":%ld,\"kernel_pipe_note\":",
	       o->capacity, env->up_capacity, env->up_page, env->kpipe_size, env->kpipe_max);
	json_str(env->kpipe_note);
	printf(",\"backend\":");
	json_str(env->backend);
	json_machine(&env->mach);
	printf(",\"numa_node\":%d,\"repeat\":%u,\"memory_pressure\":%s,\"processes\":%s,"
	       "\"writer_cpu\":%d,"
	       "\"reader_cpu\":%d,\"seed\":%" PRIu64 ",\"bytes_option\":%" PRIu64
	       ",\"run_time\":%.3f,\"clock_gettime_ns\":%.1f,\"mb\":1000000,",
	       env->numa_node, o->repeat, o->pressure ? "true" : "false",
	       o->processes ? "true" : "false", env->cpu[0],
	       env->cpu[1], o->seed, o->bytes, o->run_time, env->clock_ns);
	bench_json_transports(o, env);
	printf(",\"configs\":[");
	for (unsigned c = 0; c < ncf; c++) {
		printf("%s{\"writers\":%u,\"readers\":%u,\"pinned\":%s,\"rows\":[", c ? "," : "",
		       cf[c].writers, cf[c].readers,
		       bench_pinned(env, cf[c].writers, cf[c].readers) ? "true" : "false");
		for (unsigned s = 0; s < o->nsizes; s++) {
			if (s)
				putchar(',');
			json_row(o, &cf[c].rows[s]);
		}
		printf("]}");
	}
	printf("]");
	/* Without --sweep there is one configuration: its rows are also at
	 * the top level, where single-configuration consumers read them. */
	if (ncf == 1) {
		printf(",\"writers\":%u,\"readers\":%u,\"rows\":[", cf[0].writers, cf[0].readers);
		for (unsigned s = 0; s < o->nsizes; s++) {
			if (s)
				putchar(',');
			json_row(o, &cf[0].rows[s]);
		}
		printf("]");
	}
	printf("}\n");
}

/* Latencies span 0.02 µs to seconds: keep three significant-ish digits. */
static const char *fmt_us(double v, char *b, size_t bl)
{
	if (v < 10)
		snprintf(b, bl, "%.2f", v);
	else if (v < 1000)
		snprintf(b, bl, "%.1f", v);
	else
		snprintf(b, bl, "%.0f", v);
	return b;
}

/* @text after @lead, broken at spaces into lines of at most 100 columns,
 * the later ones indented by four (a word longer than that stays whole). */
static void print_wrapped(const char *lead, const char *text)
{
	size_t col = strlen(lead);
	const char *p = text;

	fputs(lead, stdout);
	while (*p) {
		const char *sp = strchr(p, ' ');
		size_t w = sp ? (size_t)(sp - p) : strlen(p);

		if (col + w > 100 && col > 4) {
			fputs("\n    ", stdout);
			col = 4;
		}
		fwrite(p, 1, w, stdout);
		col += w;
		p += w;
		if (*p == ' ') {
			p++;
			if (*p && col + 1 < 100) {
				putchar(' ');
				col++;
			}
		}
	}
	putchar('\n');
}

void bench_print_header(const struct opts *o, const struct env *env)
{
	char cb[32];

	printf("uringpipe-cat --bench: capacity %s (kernel pipe %ld B), backend %s, %u repeat%s,"
	       " median%s\n", cat_bytes_label(o->capacity, cb, sizeof(cb)), env->kpipe_size,
	       env->backend, o->repeat, o->repeat == 1 ? "" : "s",
	       o->pressure ? ", under stress-ng --vm memory pressure" : "");
	printf("  machine: %s, %u cores online; backend %s; %s\n"
	       "  kernel: %s\n  pinning: %s\n", env->mach.cpu, env->mach.cores,
	       env->mach.backend, env->mach.date, env->mach.kernel, env->mach.pinning);
	print_wrapped("  command: ", env->mach.command);
	if (env->mach.trace_events[0])
		print_wrapped("  warning: trace events enabled (every system call or switch pays"
			      " for them, the kernel transports most): ",
			      env->mach.trace_events);
	if (o->processes)
		printf("  processes: every writer and reader is a process of its own, forked before"
		       " the run's pipe exists; uringpipe met by name (up_listen/up_connect),"
		       " kernel pipe as a FIFO (mkfifo)\n");
	if (env->kpipe_note[0])
		printf("  note: %s\n", env->kpipe_note);
	printf("  uringpipe %s, page %zu B, numa node %d; seed %" PRIu64 "; clock_gettime %.0f ns\n"
	       "  MB = 10^6 B; zc = reserve, fill, commit_reserve + peek, sum, consume_peek\n",
	       UP_VERSION_STRING, env->up_page, env->numa_node, o->seed, env->clock_ns);
	bench_print_vs_note(o, env);
}

/* What the --vs transports got of the capacity they asked for. */
void bench_print_vs_note(const struct opts *o, const struct env *env)
{
	if (o->on[T_UNIX])
		printf("  unix: SO_SNDBUF %ld B, SO_RCVBUF %ld B (asked %" PRIu64 ")\n",
		       env->unix_buf[0], env->unix_buf[1], o->capacity);
	if (o->on[T_TCP])
		printf("  tcp: SO_SNDBUF %ld B, SO_RCVBUF %ld B (asked %" PRIu64 "), TCP_NODELAY\n",
		       env->tcp_buf[0], env->tcp_buf[1], o->capacity);
}

/* The line round trips measured around a config's rounds, a line a size
 * (none when nothing was measured: fewer than two CPUs). */
static void print_rtt(const struct opts *o, const struct row *rows)
{
	bool any = false;

	for (unsigned s = 0; s < o->nsizes; s++)
		for (unsigned i = 0; i < rows[s].nrtt; i++)
			any |= rows[s].rtt_ns[i] > 0;
	if (!any)
		return;
	printf("line rtt: a cache line's round trip between the pinned CPUs, before each round"
	       " and after\nthe last\n");
	for (unsigned s = 0; s < o->nsizes; s++) {
		char sb[32];

		printf("line rtt ns at %s:", cat_size_label(rows[s].size, sb, sizeof(sb)));
		for (unsigned i = 0; i < rows[s].nrtt; i++)
			printf(i && i % 12 == 0 ? "\n  %.0f" : " %.0f", rows[s].rtt_ns[i]);
		putchar('\n');
	}
}

static void print_zc_pairs(const struct opts *o, const struct row *rows)
{
	printf("zc/copy: each round's pair, run back to back, and their median\n");
	for (unsigned s = 0; s < o->nsizes; s++) {
		double zp[MAX_REPEAT];
		unsigned n = zc_pairs(o, &rows[s], zp);
		char sb[32];

		printf("zc/copy at %s:", cat_size_label(rows[s].size, sb, sizeof(sb)));
		for (unsigned i = 0; i < n; i++)
			printf(i && i % 10 == 0 ? "\n  %.3f" : " %.3f", zp[i]);
		if (n)
			printf(", median %.3f", median(zp, n));
		putchar('\n');
	}
}

/* The table's column order: the kernel transports, then uringpipe's. */
static const enum transport col_t[T_COUNT] = {T_KERNEL, T_PIPE_URING, T_VMSPLICE, T_UNIX, T_TCP,
					      T_URING, T_URING_ZC};

void bench_print_table(const struct opts *o, const struct env *env, const struct config *cf)
{
	const struct row *rows = cf->rows;
	const char *procs = o->processes ? " (processes)" : "";
	char rb[32];

	if (bench_pinned(env, cf->writers, cf->readers))
		printf("\n%u writer, %u reader%s, pinned writer->cpu%d reader->cpu%d\n", cf->writers,
		       cf->readers, procs, env->cpu[0], env->cpu[1]);
	else
		printf("\n%u writer%s, %u reader%s%s, not pinned\n", cf->writers,
		       cf->writers == 1 ? "" : "s", cf->readers, cf->readers == 1 ? "" : "s", procs);
	if (o->read_size == READ_SIZE_MAX)
		printf("MB/s and ratio to the kernel pipe; reads of up to %s per call\n",
		       cat_size_label(o->capacity, rb, sizeof(rb)));
	else if (o->read_size)
		printf("MB/s and ratio to the kernel pipe; reads of %s per call\n",
		       cat_size_label(o->read_size, rb, sizeof(rb)));
	else
		printf("MB/s and ratio to the kernel pipe; reads of the write size per call\n");
	printf("%-5s", "size");
	for (int c = 0; c < T_COUNT; c++)
		if (o->on[col_t[c]])
			printf(" %12s", bench_tlabel[col_t[c]]);
	putchar('\n');
	for (unsigned s = 0; s < o->nsizes; s++) {
		const struct row *rw = &rows[s];
		double mk = median(rw->mbps[T_KERNEL], o->repeat);
		char sb[32];

		printf("%-5s", cat_size_label(rw->size, sb, sizeof(sb)));
		for (int c = 0; c < T_COUNT; c++) {
			enum transport t = col_t[c];
			double m = median(rw->mbps[t], o->repeat);
			if (!o->on[t])
				continue;
			if (mk > 0)
				printf(" %6.0f %5.2f", m, m / mk);
			else
				printf(" %6.0f %5s", m, "-");
		}
		putchar('\n');
	}
	print_zc_pairs(o, rows);
	print_rtt(o, rows);
	printf("\n%-12s %-5s %9s %9s %9s %12s %12s %12s\n", "transport", "size", "w p50 us",
	       "w p99 us", "w max us", "syscalls/GiB", "reads/GiB", "writes/GiB");
	for (unsigned s = 0; s < o->nsizes; s++) {
		const struct row *rw = &rows[s];
		char sb[32];

		for (int c = 0; c < T_COUNT; c++) {
			enum transport t = col_t[c];
			double rg[MAX_REPEAT], wg[MAX_REPEAT];
			char a[16], b[16], d[16];

			if (!o->on[t])
				continue;
			for (unsigned i = 0; i < o->repeat; i++) {
				rg[i] = (double)rw->rcalls[t][i] * (double)GiB / (double)rw->bytes[t];
				wg[i] = (double)rw->wcalls[t][i] * (double)GiB / (double)rw->bytes[t];
			}
			printf("%-12s %-5s %9s %9s %9s %12.0f %12.0f %12.0f\n", bench_tlabel[t],
			       cat_size_label(rw->size, sb, sizeof(sb)),
			       fmt_us(median(rw->p50[t], o->repeat), a, sizeof(a)),
			       fmt_us(median(rw->p99[t], o->repeat), b, sizeof(b)),
			       fmt_us(rw->lmax[t], d, sizeof(d)), median(rw->sys_gib[t], o->repeat),
			       median(rg, o->repeat), median(wg, o->repeat));
		}
	}
}

void bench_print_footer(const struct opts *o)
{
	printf("  %s;\n  w = one write's latency (us): median over runs of p50/p99, max over"
	       " runs;\n  syscalls: kernel transports = the read/write/vmsplice/io_uring_enter"
	       " calls made,\n  uringpipe = up_stats().syscalls; every reader sums every byte"
	       " it reads;\n  line rtt: the machine's phase; message-sized figures move with"
	       " it\n",
	       o->bytes ? "bytes per run from --bytes" : "bytes per run calibrated per transport");
}

/* One transport at one size, for the report: the figures json_row() prints. */
static void report_cell(const struct opts *o, const struct row *rw, int t,
			struct cat_report_cell *c)
{
	c->mbps_median = median(rw->mbps[t], o->repeat);
	/* A transport left out of the run (not in --vs) has no bytes. */
	c->measured = rw->bytes[t] > 0 && c->mbps_median > 0;
	c->nruns = o->repeat;
	c->mbps = rw->mbps[t];
	c->p50_us = median(rw->p50[t], o->repeat);
	c->p99_us = median(rw->p99[t], o->repeat);
	c->sys_gib = median(rw->sys_gib[t], o->repeat);
}

void bench_write_report(const struct opts *o, const struct env *env, const struct config *cf,
			 unsigned ncf)
{
	struct cat_report_series *ser = calloc(ncf, sizeof(*ser));
	struct cat_report_point *pts = calloc((size_t)ncf * o->nsizes, sizeof(*pts));
	struct cat_report_info in = {0};
	char setup[256], cb[32], *abs;
	int r;

	if (!ser || !pts)
		bench_die("out of memory");
	for (unsigned c = 0; c < ncf; c++) {
		ser[c].writers = cf[c].writers;
		ser[c].readers = cf[c].readers;
		ser[c].pinned = bench_pinned(env, cf[c].writers, cf[c].readers);
		ser[c].wcpu = env->cpu[0];
		ser[c].rcpu = env->cpu[1];
		ser[c].pts = pts + (size_t)c * o->nsizes;
		ser[c].npts = o->nsizes;
		for (unsigned s = 0; s < o->nsizes; s++) {
			struct cat_report_point *p = &pts[(size_t)c * o->nsizes + s];
			p->size = cf[c].rows[s].size;
			for (int t = 0; t < T_COUNT; t++)
				report_cell(o, &cf[c].rows[s], t, &p->c[t]);
		}
	}
	snprintf(setup, sizeof(setup), "capacity %s, uringpipe %s, median of %u run%s per point%s%s",
		 cat_bytes_label(o->capacity, cb, sizeof(cb)), UP_VERSION_STRING, o->repeat,
		 o->repeat == 1 ? "" : "s",
		 o->pressure ? ", under memory pressure (stress-ng --vm)" : "",
		 o->processes ? ", writers and readers in processes of their own" : "");
	in.title = "uringpipe against kernel transports: throughput by write size";
	for (int t = 0; t < T_COUNT; t++)
		in.key[t] = bench_tname[t];
	in.cpu = env->mach.cpu;
	in.cores = env->mach.cores;
	in.kernel = env->mach.kernel;
	in.backend = env->mach.backend;
	in.pinning = env->mach.pinning;
	in.date = env->mach.date;
	in.command = env->mach.command;
	in.setup = setup;
	in.repeat = o->repeat;
	r = cat_write_report(o->report, &in, ser, ncf);
	if (r < 0)
		bench_die("--report %s: %s", o->report, strerror(-r));
	abs = realpath(o->report, NULL);
	fflush(stdout); /* the table or JSON first, then where the report went */
	fprintf(stderr, BENCH_PFX "report written to %s\n", abs ? abs : o->report);
	free(abs);
	free(pts);
	free(ser);
}

void bench_report_check(const char *path)
{
	int r;

	if (!path)
		return;
	r = cat_report_check(path);
	if (r < 0) {
		fprintf(stderr, BENCH_PFX "--report %s: cannot write there: %s; nothing was run\n",
			path, strerror(-r));
		exit(CAT_EXIT_USAGE);
	}
}
