/* SPDX-License-Identifier: MIT */
/*
 * cat_bench.c - `uringpipe-cat --bench`: uringpipe against a kernel pipe of
 * the same capacity, in the same run, with the same threads and the same
 * buffers. (This was the separate uringpipe-bench program; it became a mode
 * of the CLI so that users have one tool, and its option parser and size
 * syntax are now the CLI's.)
 *
 * Three transports per size: "kernel" (write/read on a pipe2() pipe),
 * "uringpipe" (up_write/up_read: one copy in, one copy out, like the kernel)
 * and "uringpipe_zc" (up_reserve + memcpy from the same source buffer +
 * up_commit, then up_peek + up_consume: the consumer uses the bytes in
 * place, so the stream is copied once instead of twice).
 *
 * This is a benchmark, not a timed test: it never decides pass/fail on speed.
 * It fails (exit 1) only when a transport loses, adds or corrupts bytes, or
 * returns an error, or when a run hangs past --timeout.
 *
 * Per write size, in this order:
 *   1. a verification pass per transport (1 writer, 1 reader, 16 MiB): the
 *      writer fills every chunk with a pattern that is a function of the
 *      absolute stream offset, the reader checks every byte;
 *   2. unless --bytes is given, a calibration per transport: a run doubled
 *      until it lasts >= 0.1 s, then scaled so one timed run takes --time
 *      seconds (the two transports differ by 25x at 100 B: a shared byte
 *      count would make one of them either too short to measure or too long
 *      to wait for);
 *   3. --repeat timed runs, alternating kernel, uringpipe, kernel, ... so a
 *      slow phase of the (virtual) machine hits both; the median is reported.
 *
 * A run: W writer and R reader threads wait on one barrier. Each writer
 * writes its share (bytes/W) in size-byte chunks from a pre-filled buffer and
 * closes its end; each reader reads with a max(1 MiB, size) buffer until EOF.
 * The run's time is from the earliest barrier exit to the last reader's EOF,
 * on CLOCK_MONOTONIC. Bytes read must equal bytes written. The writers' and
 * readers' buffers come from up_buf_alloc() on the node the pipes live on
 * (up_stats().numa_node of the start-up probe), for every transport alike.
 *
 * Rejected alternatives:
 *  - timing every write: clock_gettime costs ~20 ns even through the vDSO,
 *    about a whole 100-byte uringpipe write, so it would halve the
 *    throughput being measured. Writes are sampled instead: every write when
 *    a write is >= 4 KiB, else one write per 4 KiB of stream, and never more
 *    than ~1M samples per run (--lat-every overrides).
 *  - a pattern of period 256 (byte = f(offset & 255)), which would let the
 *    pre-filled buffer double as the verification source: a ring that swapped
 *    or repeated whole 4 KiB pages would pass it. The verification pattern is
 *    a 64-bit hash of the offset, so it is generated per chunk, untimed.
 *  - verifying with several writers: their chunks interleave, so there is no
 *    single expected stream. The verification pass is always 1 x 1.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *const bench_tname[T_COUNT] = {"kernel", "uringpipe", "uringpipe_zc"};

/* --sweep: the kernel's pipe_bench grid. */
static const unsigned sweep_w[] = {1, 2, 5};
static const unsigned sweep_r[] = {1, 5, 10};

void bench_die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fputs(BENCH_PFX, stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void *bench_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		bench_die("out of memory (%zu bytes)", n);
	return p;
}

unsigned char *bench_xbuf_alloc(size_t n, int node)
{
	void *p = NULL;
	int r = up_buf_alloc(n ? n : 1, node, &p);
	if (r < 0)
		bench_die("up_buf_alloc(%zu bytes, node %d): %s", n, node, up_strerror(r));
	return p;
}

int cat_bench_main(int argc, char **argv)
{
	struct opts o;
	struct env env;
	struct config cf[9];
	unsigned ncf = 0;

	bench_parse_args(argc, argv, &o);
	/* A kernel pipe whose reader failed must give the writer EPIPE, not
	 * kill the benchmark before it can say what went wrong. */
	signal(SIGPIPE, SIG_IGN);

	bench_probe(o.capacity, &env);
	/* The table carries the note; a JSON consumer may not read notes. */
	if (env.kpipe_note[0] && o.json)
		fprintf(stderr, BENCH_PFX "%s\n", env.kpipe_note);
	if (o.pressure)
		bench_pressure_start();

	if (o.sweep) {
		for (unsigned i = 0; i < 3; i++)
			for (unsigned j = 0; j < 3; j++)
				cf[ncf++] = (struct config){sweep_w[i], sweep_r[j], NULL};
	} else {
		cf[ncf++] = (struct config){o.writers, o.readers, NULL};
	}
	if (!o.json)
		bench_print_header(&o, &env);
	for (unsigned c = 0; c < ncf; c++) {
		struct opts oc = o;

		oc.writers = cf[c].writers;
		oc.readers = cf[c].readers;
		cf[c].rows = calloc(o.nsizes, sizeof(*cf[c].rows));
		if (!cf[c].rows)
			bench_die("out of memory");
		bench_run_config(&oc, &env, cf[c].rows, c == 0);
		/* Print as we go: a sweep takes minutes. */
		if (!o.json) {
			bench_print_table(&oc, &env, &cf[c]);
			fflush(stdout);
		}
	}
	bench_pressure_stop();

	if (o.json)
		bench_print_json(&o, &env, cf, ncf);
	else
		bench_print_footer(&o);
	if (o.report)
		bench_write_report(&o, &env, cf, ncf);
	for (unsigned c = 0; c < ncf; c++)
		free(cf[c].rows);
	if (fflush(stdout) != 0 || ferror(stdout))
		bench_die("writing the report failed");
	return 0;
}
