/* SPDX-License-Identifier: MIT */
/*
 * bench_sparse_out.c - what `uringpipe-cat --bench --sparse` prints for one
 * gap: the latency table, where an epoll reader's time goes, and the same
 * in JSON. The runs are bench_sparse.c's.
 *
 * Every figure is a median over the rounds of one cell, and every ratio is
 * to the kernel pipe's cell with the same reader, taken in the same rounds.
 */
#include <stdio.h>

#include "bench.h"

/* The table's order: the kernel transports first, as in the throughput's. */
const enum transport bench_sp_order[T_COUNT] = {T_KERNEL, T_PIPE_URING, T_VMSPLICE, T_UNIX,
						T_TCP,    T_URING,      T_URING_ZC};
const char *const bench_sp_rd_name[SP_RD_COUNT] = {"blocking", "epoll"};

static void sp_ratio(char *b, size_t bl, double v, double k)
{
	if (k > 0)
		snprintf(b, bl, "%.2f", v / k);
	else
		snprintf(b, bl, "-");
}

static double vmax(const double *v, unsigned n)
{
	double m = 0;
	for (unsigned i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

static double vmin(const double *v, unsigned n)
{
	double m = n ? v[0] : 0;
	for (unsigned i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

/* A cell of the tables: a transport that runs and a reader. */
struct sp_at {
	enum transport t;
	int rd;
};

/* The cells in the tables' order, into @at (room for every one); how many. */
static int sp_cells(const struct opts *o, struct sp_at *at)
{
	int n = 0;

	for (int i = 0; i < T_COUNT; i++) {
		if (!o->on[bench_sp_order[i]])
			continue;
		for (int rd = 0; rd < SP_RD_COUNT; rd++)
			at[n++] = (struct sp_at){ .t = bench_sp_order[i], .rd = rd };
	}
	return n;
}

/* One cell's medians over the rounds, and the kernel pipe's with the same
 * reader: what its ratios divide. */
struct sp_sum {
	double p50, p99, k50, k99;
};

static struct sp_sum sp_sum(const struct opts *o, struct sp_cell (*c)[SP_RD_COUNT],
			    enum transport t, int rd)
{
	struct sp_sum m = {
		.p50 = bench_median(c[t][rd].p50, o->repeat),
		.p99 = bench_median(c[t][rd].p99, o->repeat),
		.k50 = bench_median(c[T_KERNEL][rd].p50, o->repeat),
		.k99 = bench_median(c[T_KERNEL][rd].p99, o->repeat),
	};
	return m;
}

/* The median over the rounds that had a value (below 0: none, as for a
 * blocking reader, whose wait is inside its read), as a time ("%.2f") or,
 * with @share, a percentage; "-" for none. */
static void sp_med(char *b, size_t bl, const double *v, unsigned n, bool share)
{
	double had[MAX_REPEAT];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (v[i] >= 0)
			had[k++] = v[i];
	if (k == 0)
		snprintf(b, bl, "-");
	else if (share)
		snprintf(b, bl, "%.1f%%", 100.0 * bench_median(had, k));
	else
		snprintf(b, bl, "%.2f", bench_median(had, k));
}

/*
 * Where the time goes. The writer's call is its write (or reserve and
 * commit), wake included: a pipe's write(2) that wakes an idle CPU lasts
 * as long as the kernel takes to send that wake. For an epoll reader the
 * latency splits at the return of its epoll_wait(): before it, the write
 * and the wake; after it, what the reader's way to the data costs (a
 * read(2) for a kernel transport, up_read() or up_peek() for uringpipe).
 * Medians of each part on their own: they need not add up to the p50.
 * The pipe-uring reader's READ never returns -EAGAIN (io_uring waits for
 * the pipe itself), so it never reaches epoll_wait(): no split either.
 * woken is up_stats().wakes over the messages: the wakes issued, one
 * that reached a reader still awake included, and the two or three of
 * the ends' closes (the end of stream, the biases let go).
 */
static void sp_print_parts(const struct opts *o, struct sp_cell (*c)[SP_RD_COUNT])
{
	struct sp_at at[T_COUNT * SP_RD_COUNT];
	int n;

	printf("where the time goes, p50 us: w call = the writer's call, wake included;"
	       " epoll\n  readers: to wake = the write's start to epoll_wait()'s return,"
	       " to data =\n  that return to the whole message read; - where the reader"
	       " waits inside its\n  read (blocking readers; pipe-uring's READ waits in"
	       " io_uring, never in epoll);\n  woken: the wakes uringpipe's ends issued per"
	       " message, median, the\n  closes' included (a message that a spin or an"
	       " early wake reads takes none)\n");
	printf("%-12s %-8s %10s %10s %10s %8s\n", "transport", "reader", "w call", "to wake",
	       "to data", "woken");
	n = sp_cells(o, at);
	for (int k = 0; k < n; k++) {
		enum transport t = at[k].t;
		int rd = at[k].rd;
		char wc[16], wk[16], td[16], wn[24];

		sp_med(wc, sizeof(wc), c[t][rd].wcall, o->repeat, false);
		sp_med(wk, sizeof(wk), c[t][rd].wake, o->repeat, false);
		sp_med(td, sizeof(td), c[t][rd].take, o->repeat, false);
		sp_med(wn, sizeof(wn), c[t][rd].woken, o->repeat, true);
		printf("%-12s %-8s %10s %10s %10s %8s\n", bench_tlabel[t], bench_sp_rd_name[rd],
		       wc, wk, td, wn);
	}
}

void bench_sp_print_gap(const struct opts *o, unsigned gap, unsigned nmsg,
			struct sp_cell (*c)[SP_RD_COUNT])
{
	struct sp_at at[T_COUNT * SP_RD_COUNT];
	int n;

	printf("\ngap %u us, %u messages per run\n", gap, nmsg);
	printf("%-12s %-8s %10s %10s %10s %9s %9s %13s %7s\n", "transport", "reader", "p50 us",
	       "p99 us", "max us", "p50/pipe", "p99/pipe", "p99 rounds", "rd cpu");
	n = sp_cells(o, at);
	for (int k = 0; k < n; k++) {
		enum transport t = at[k].t;
		int rd = at[k].rd;
		struct sp_sum m = sp_sum(o, c, t, rd);
		char r50[16], r99[16], span[32];

		sp_ratio(r50, sizeof(r50), m.p50, m.k50);
		sp_ratio(r99, sizeof(r99), m.p99, m.k99);
		/* The spread of one cell's p99 over its rounds: a p99
		 * ratio inside the pipe's own spread says nothing. */
		snprintf(span, sizeof(span), "%.1f-%.1f", vmin(c[t][rd].p99, o->repeat),
			 vmax(c[t][rd].p99, o->repeat));
		printf("%-12s %-8s %10.1f %10.1f %10.1f %9s %9s %13s %6.1f%%\n",
		       bench_tlabel[t], bench_sp_rd_name[rd], m.p50, m.p99,
		       vmax(c[t][rd].max, o->repeat), r50, r99, span,
		       100.0 * bench_median(c[t][rd].cpu, o->repeat));
	}
	sp_print_parts(o, c);
	fflush(stdout);
}

/* Per round; a part no round had (below 0) is null. */
static void json_runs(const char *k, const double *v, unsigned n)
{
	printf(",\"%s\":[", k);
	for (unsigned i = 0; i < n; i++) {
		if (v[i] < 0)
			printf("%snull", i ? "," : "");
		else
			printf("%s%.3f", i ? "," : "", v[i]);
	}
	printf("]");
}

void bench_sp_json_gap(const struct opts *o, unsigned gap, unsigned nmsg,
		       struct sp_cell (*c)[SP_RD_COUNT], bool first)
{
	struct sp_at at[T_COUNT * SP_RD_COUNT];
	int n;

	printf("%s{\"gap_us\":%u,\"messages\":%u,\"results\":[", first ? "" : ",", gap, nmsg);
	n = sp_cells(o, at);
	for (int k = 0; k < n; k++) {
		enum transport t = at[k].t;
		int rd = at[k].rd;
		struct sp_sum m = sp_sum(o, c, t, rd);

		printf("%s{\"transport\":\"%s\",\"reader\":\"%s\",\"p50_us\":%.3f,"
		       "\"p99_us\":%.3f,\"max_us\":%.3f", k ? "," : "", bench_tname[t],
		       bench_sp_rd_name[rd], m.p50, m.p99, vmax(c[t][rd].max, o->repeat));
		if (m.k50 > 0 && m.k99 > 0)
			printf(",\"ratio_p50\":%.4f,\"ratio_p99\":%.4f", m.p50 / m.k50,
			       m.p99 / m.k99);
		else
			printf(",\"ratio_p50\":null,\"ratio_p99\":null");
		json_runs("p50_runs", c[t][rd].p50, o->repeat);
		json_runs("reader_cpu_runs", c[t][rd].cpu, o->repeat);
		json_runs("p99_runs", c[t][rd].p99, o->repeat);
		json_runs("max_runs", c[t][rd].max, o->repeat);
		json_runs("writer_call_p50_runs", c[t][rd].wcall, o->repeat);
		json_runs("to_wake_p50_runs", c[t][rd].wake, o->repeat);
		json_runs("to_data_p50_runs", c[t][rd].take, o->repeat);
		json_runs("wakes_per_message_runs", c[t][rd].woken, o->repeat);
		printf("}");
	}
	printf("]}");
}
