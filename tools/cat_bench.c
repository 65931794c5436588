/* SPDX-License-Identifier: MIT */
/*
 * cat_bench.c - `uringpipe-cat --bench`: uringpipe against a kernel pipe of
 * the same capacity, in the same run, with the same threads and the same
 * buffers.
 *
 * Three transports per size, and the kernel transports --vs adds
 * (bench_kernel.c): "kernel" (write/read on a pipe2() pipe),
 * "uringpipe" (up_write/up_read: one copy in, one copy out, like the kernel)
 * and "uringpipe_zc" (up_reserve + memcpy from the same source buffer +
 * up_commit, then up_peek + up_consume: the consumer uses the bytes in
 * place, so the stream is copied once instead of twice).
 *
 * This is a benchmark, not a timed test: it never decides pass/fail on speed.
 * It fails (exit 1) only when a transport loses, adds or corrupts bytes, or
 * returns an error, or when a run hangs past --timeout.
 *
 * Per write size, in this order (bench_run.c):
 *   1. a verification pass per transport (1 writer, 1 reader, 16 MiB) in
 *      which the reader checks every byte (bench_workers.c);
 *   2. unless --bytes is given, a calibration per transport: a run doubled
 *      until it lasts >= 0.1 s, then scaled so one timed run takes --time
 *      seconds. The transports differ too much in speed at small sizes for
 *      one byte count to suit them all;
 *   3. --repeat timed runs, alternating kernel, uringpipe, kernel, ... so a
 *      slow phase of the (virtual) machine hits both; the median is reported.
 *
 * --sparse measures message latency instead (bench_sparse.c).
 *
 * With --processes every writer and reader is a process of its own and the
 * pipes are met by name, as unrelated programs would (bench_proc.c).
 *
 * This file is the mode's entry: it probes, runs every configuration and
 * prints as it goes; bench.h lists the other parts.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

const char *const bench_tname[T_COUNT] = {"kernel", "uringpipe", "uringpipe_zc", "pipe_uring",
					  "vmsplice", "unix", "tcp"};
const char *const bench_tlabel[T_COUNT] = {"pipe", "uringpipe", "uringpipe-zc", "pipe-uring",
					   "vmsplice", "unix", "tcp"};

/* --sweep: the kernel's pipe_bench grid. */
static const unsigned sweep_w[] = {1, 2, 5};
static const unsigned sweep_r[] = {1, 5, 10};

bool bench_in_child;

void bench_die(const char *fmt, ...)
{
	va_list ap;
	if (!bench_in_child)
		fflush(stdout); /* a child's copy of the buffer is the parent's to print */
	fputs(BENCH_PFX, stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (bench_in_child) {
		fflush(stderr);
		_exit(1); /* not the parent's atexit(): stress-ng, the FIFO directory */
	}
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
	struct bench_machine mach;
	unsigned ncf = 0;

	bench_machine_probe(&mach, argc, argv); /* before getopt reorders argv */
	bench_parse_args(argc, argv, &o);
	bench_report_check(o.report);
	/* A kernel pipe whose reader failed must give the writer EPIPE, not
	 * kill the benchmark before it can say what went wrong. */
	signal(SIGPIPE, SIG_IGN);

	bench_probe(o.capacity, &env);
	bench_kernel_probe(&o, &env);
	bench_machine_env(&env, &mach);
	/* The table carries the note; a JSON consumer may not read notes. */
	if (env.kpipe_note[0] && o.json)
		fprintf(stderr, BENCH_PFX "%s\n", env.kpipe_note);
	if (o.pressure)
		bench_pressure_start();
	if (o.sparse) {
		bench_sparse(&o, &env);
		bench_pressure_stop();
		if (fflush(stdout) != 0 || ferror(stdout))
			bench_die("writing the report failed");
		return 0;
	}

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
