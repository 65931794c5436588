/* SPDX-License-Identifier: MIT */
/*
 * bench_opts.c - the options of `uringpipe-cat --bench` and its --help.
 *
 * Sizes use the CLI's syntax (cat_size.c). A bad option prints one line,
 * the message and where the usage is, and exits 2.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_THREADS    64
#define MAX_WRITE_SIZE GiB
#define MAX_BYTES      (1024 * GiB)

static int parse_secs(const char *s, double *out)
{
	char *end;
	double v;
	if ((*s < '0' || *s > '9') && *s != '.')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end != '\0' || !(v >= 0.0) || v > 86400.0)
		return -1;
	*out = v;
	return 0;
}

static void usage(FILE *f)
{
	fputs(
"usage: uringpipe-cat --bench [options]\n"
"  Compare uringpipe with a kernel pipe of the same capacity: throughput,\n"
"  per-write latency and system calls per GiB, medians of alternating runs.\n"
"\n"
"  --sizes LIST     write sizes, comma separated (default 100,4K,64K,1M)\n"
"  --read-size N    bytes a reader asks for per call, every transport (the\n"
"                   zero-copy reader: uses and consumes per peek); default\n"
"                   the write size; 'max': up to the capacity\n"
"  --vs LIST        kernel transports beside uringpipe, comma separated, in\n"
"                   the same alternating rounds: pipe (always: the ratios'\n"
"                   reference), pipe-uring (the pipe through io_uring READ/\n"
"                   WRITE), vmsplice (the writer vmsplice()s), unix (AF_UNIX\n"
"                   socketpair), tcp (127.0.0.1); buffers set to --capacity\n"
"  --sparse         message latency instead of throughput: 64-byte messages\n"
"                   every --gap us, CLOCK_MONOTONIC from the write to the read,\n"
"                   a blocking and an epoll reader; p50, p99, max\n"
"  --gap LIST       --sparse gaps in us, comma separated (default 50,200,1000)\n"
"  --no-early       --sparse: uringpipe's readers, blocking and epoll, open\n"
"                   with UP_NO_EARLY: they sleep until woken, as a pipe's do,\n"
"                   instead of reading ahead of regular data (the default)\n"
"  --early-poll     --sparse: the default (accepted for scripts)\n"
"  --capacity N     pipe capacity for both transports (default 1M);\n"
"                   the kernel pipe gets F_SETPIPE_SZ\n"
"  --bytes N        bytes per run for every size and transport (default:\n"
"                   calibrated per transport and size to last --time)\n"
"  --time SEC       target seconds per timed run when calibrating (0.4);\n"
"                   --sparse: seconds of messages per run\n"
"  --repeat R       timed runs per transport and size (default 3)\n"
"  --writers W      writer threads (default 1); each writes bytes/W\n"
"  --readers R      reader threads (default 1)\n"
"  --lat-every N    time every Nth write (default: automatic)\n"
"  --timeout SEC    give up on a run after SEC seconds (default: automatic)\n"
"  --seed S         verification pattern seed (default 1)\n"
"  --json           one JSON object on stdout instead of the table\n"
"  --sweep          every writers x readers pair of {1,2,5} x {1,5,10}\n"
"  --processes      every writer and reader a process of its own, forked\n"
"                   before the run's pipe exists: they meet the uringpipe by\n"
"                   name (up_listen/up_connect) and the kernel pipe as a FIFO\n"
"  --memory-pressure  run `stress-ng --vm 2 --vm-bytes 50%` beside the\n"
"                   benchmark (stress-ng must be installed)\n"
"  --report FILE    also write a report (throughput, ratios, latency, calls;\n"
"                   checked before the runs): an SVG image if FILE ends in\n"
"                   .svg, else a self-contained HTML page\n"
"  -v, --verbose    print every run on stderr\n"
"  -h, --help       this text\n"
"  Sizes take binary suffixes K, M, G, T (also KiB ...) or decimal KB, MB,\n"
"  GB, TB.\n"
"  Exit: 0 ok, 1 runtime failure (lost/corrupt data, errors), 2 bad usage.\n",
	      f);
}

static void bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad_usage(const char *fmt, ...)
{
	va_list ap;
	fputs(BENCH_PFX, stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (uringpipe-cat --bench --help for the options)\n", stderr);
	exit(2);
}

/* A size option in [lo, hi]; the message gives the range. */
static uint64_t size_opt(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
	char a[32], b[32];
	uint64_t v;

	if (cat_parse_size(arg, &v) < 0)
		bad_usage("%s: '%s' is not a size", opt, arg);
	if (v < lo || v > hi)
		bad_usage("%s: '%s' out of range (%s .. %s)", opt, arg,
			  cat_bytes_label(lo, a, sizeof(a)), cat_bytes_label(hi, b, sizeof(b)));
	return v;
}

/* A count option in 1..@hi. */
static unsigned count_opt(const char *opt, const char *arg, unsigned hi)
{
	uint64_t v;

	if (cat_parse_uint(arg, &v, 10) < 0 || v < 1 || v > hi)
		bad_usage("%s: '%s' must be 1..%u", opt, arg, hi);
	return (unsigned)v;
}

static void parse_sizes(const char *arg, struct opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	const char *p;

	if (!copy)
		bench_die("out of memory");
	/* strtok would skip empty items silently; "4K,,1M" is a typo. */
	if (*arg == '\0' || *arg == ',' || arg[strlen(arg) - 1] == ',')
		bad_usage("--sizes: empty item in '%s'", arg);
	for (p = arg; *p; p++)
		if (p[0] == ',' && p[1] == ',')
			bad_usage("--sizes: empty item in '%s'", arg);
	o->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (o->nsizes == MAX_SIZES)
			bad_usage("--sizes: at most %d sizes", MAX_SIZES);
		if (cat_parse_size(tok, &v) < 0)
			bad_usage("--sizes: '%s' is not a size (digits, optional K/M/G)", tok);
		if (v == 0 || v > MAX_WRITE_SIZE)
			bad_usage("--sizes: '%s' out of range (1 B .. 1 GiB)", tok);
		o->sizes[o->nsizes++] = v;
	}
	free(copy);
}

/* The --vs names, the table's labels of the kernel transports. */
static const enum transport vs_t[] = {T_KERNEL, T_PIPE_URING, T_VMSPLICE, T_UNIX, T_TCP};

static void parse_vs(const char *arg, struct opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok;

	if (!copy)
		bench_die("out of memory");
	if (*arg == '\0' || *arg == ',' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
		bad_usage("--vs: empty item in '%s'", arg);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned i;
		for (i = 0; i < sizeof(vs_t) / sizeof(vs_t[0]); i++)
			if (strcmp(tok, bench_tlabel[vs_t[i]]) == 0)
				break;
		if (i == sizeof(vs_t) / sizeof(vs_t[0]))
			bad_usage("--vs: '%s' is not one of pipe, pipe-uring, vmsplice, unix, tcp",
				  tok);
#ifndef UP_CAT_HAVE_URING
		if (vs_t[i] == T_PIPE_URING)
			bad_usage("--vs: pipe-uring needs io_uring, and this build has no liburing");
#endif
		o->on[vs_t[i]] = true;
	}
	free(copy);
}

static void parse_gaps(const char *arg, struct opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok;

	if (!copy)
		bench_die("out of memory");
	if (*arg == '\0' || *arg == ',' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
		bad_usage("--gap: empty item in '%s'", arg);
	o->ngaps = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (o->ngaps == MAX_GAPS)
			bad_usage("--gap: at most %d gaps", MAX_GAPS);
		if (cat_parse_uint(tok, &v, 10) < 0 || v < 1 || v > 1000000)
			bad_usage("--gap: '%s' must be 1..1000000 us", tok);
		o->gaps[o->ngaps++] = (unsigned)v;
	}
	free(copy);
}

void bench_parse_args(int argc, char **argv, struct opts *o)
{
	enum { O_SIZES = 256, O_CAP, O_BYTES, O_REPEAT, O_WRITERS, O_READERS,
	       O_JSON, O_SEED, O_LAT, O_TIME, O_TIMEOUT, O_SWEEP, O_PRESSURE, O_REPORT, O_PROCS,
	       O_READ_SIZE, O_VS, O_SPARSE, O_GAP, O_EARLY_POLL, O_NO_EARLY };
	const char *read_size = NULL;
	static const struct option lo[] = {
		{"sizes", required_argument, NULL, O_SIZES},
		{"capacity", required_argument, NULL, O_CAP},
		{"bytes", required_argument, NULL, O_BYTES},
		{"repeat", required_argument, NULL, O_REPEAT},
		{"writers", required_argument, NULL, O_WRITERS},
		{"readers", required_argument, NULL, O_READERS},
		{"json", no_argument, NULL, O_JSON},
		{"seed", required_argument, NULL, O_SEED},
		{"lat-every", required_argument, NULL, O_LAT},
		{"time", required_argument, NULL, O_TIME},
		{"timeout", required_argument, NULL, O_TIMEOUT},
		{"sweep", no_argument, NULL, O_SWEEP},
		{"processes", no_argument, NULL, O_PROCS},
		{"memory-pressure", no_argument, NULL, O_PRESSURE},
		{"report", required_argument, NULL, O_REPORT},
		{"read-size", required_argument, NULL, O_READ_SIZE},
		{"vs", required_argument, NULL, O_VS},
		{"sparse", no_argument, NULL, O_SPARSE},
		{"gap", required_argument, NULL, O_GAP},
		{"early-poll", no_argument, NULL, O_EARLY_POLL},
		{"no-early", no_argument, NULL, O_NO_EARLY},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	memset(o, 0, sizeof(*o));
	o->sizes[0] = 100;
	o->sizes[1] = 4 * KiB;
	o->sizes[2] = 64 * KiB;
	o->sizes[3] = MiB;
	o->nsizes = 4;
	o->capacity = MiB;
	o->repeat = 3;
	o->writers = 1;
	o->readers = 1;
	o->seed = 1;
	o->run_time = 0.4;
	o->on[T_KERNEL] = o->on[T_URING] = o->on[T_URING_ZC] = true;
	o->gaps[0] = 50;
	o->gaps[1] = 200;
	o->gaps[2] = 1000;
	o->ngaps = 3;

	opterr = 0; /* we print our own message, then the usage */
	while ((c = getopt_long(argc, argv, ":vh", lo, NULL)) != -1) {
		switch (c) {
		case O_SIZES:
			parse_sizes(optarg, o);
			break;
		case O_CAP:
			o->capacity = size_opt("--capacity", optarg, 2 * UP_DEFAULT_PAGE_SIZE, GiB);
			break;
		case O_BYTES:
			o->bytes = size_opt("--bytes", optarg, 1, MAX_BYTES);
			break;
		case O_REPEAT:
			o->repeat = count_opt("--repeat", optarg, MAX_REPEAT);
			break;
		case O_WRITERS:
			o->writers = count_opt("--writers", optarg, MAX_THREADS);
			break;
		case O_READERS:
			o->readers = count_opt("--readers", optarg, MAX_THREADS);
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_SEED:
			if (cat_parse_uint(optarg, &v, 0) < 0) /* 0x... welcome */
				bad_usage("--seed: '%s' is not an unsigned integer", optarg);
			o->seed = v;
			break;
		case O_LAT:
			if (cat_parse_uint(optarg, &v, 10) < 0 || v < 1)
				bad_usage("--lat-every: '%s' must be a positive integer", optarg);
			o->lat_every = v;
			break;
		case O_TIME:
			if (parse_secs(optarg, &o->run_time) < 0 || o->run_time < 0.01 ||
			    o->run_time > 600.0)
				bad_usage("--time: '%s' must be 0.01..600 seconds", optarg);
			break;
		case O_TIMEOUT:
			if (parse_secs(optarg, &o->timeout) < 0)
				bad_usage("--timeout: '%s' must be 0..86400 seconds (0: automatic)",
					  optarg);
			break;
		case O_SWEEP:
			o->sweep = true;
			break;
		case O_PRESSURE:
			o->pressure = true;
			break;
		case O_PROCS:
			o->processes = true;
			break;
		case O_REPORT:
			if (!*optarg)
				bad_usage("--report: empty file name");
			o->report = optarg;
			break;
		case O_READ_SIZE:
			read_size = optarg; /* checked against the final --capacity */
			break;
		case O_VS:
			parse_vs(optarg, o);
			break;
		case O_SPARSE:
			o->sparse = true;
			break;
		case O_GAP:
			parse_gaps(optarg, o);
			break;
		case O_EARLY_POLL:
			o->early_poll = true;
			break;
		case O_NO_EARLY:
			o->no_early = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			bad_usage("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt)
				bad_usage("unknown option '-%c'", optopt);
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (read_size && strcmp(read_size, "max") == 0)
		o->read_size = READ_SIZE_MAX;
	else if (read_size)
		o->read_size = size_opt("--read-size", read_size, 1, o->capacity);
	if (o->processes) {
		for (int t = T_PIPE_URING; t < T_COUNT; t++)
			if (o->on[t])
				bad_usage("--processes runs the kernel pipe only, not --vs %s",
					  bench_tlabel[t]);
		if (o->sparse)
			bad_usage("--sparse runs threads; it does not take --processes");
	}
	if (o->sparse && (o->sweep || o->writers != 1 || o->readers != 1))
		bad_usage("--sparse is 1 writer x 1 reader; it takes no --sweep, --writers, --readers");
	if (o->sparse && o->report)
		bad_usage("--sparse draws no --report chart");
	if (o->early_poll && !o->sparse)
		bad_usage("--early-poll is for --sparse's epoll readers");
	if (o->no_early && !o->sparse)
		bad_usage("--no-early is for --sparse's readers");
	if (o->no_early && o->early_poll)
		bad_usage("--early-poll and --no-early ask for opposites");
	if (o->bytes && o->bytes < o->writers)
		bad_usage("--bytes: %" PRIu64 " is less than one byte per writer", o->bytes);
}
