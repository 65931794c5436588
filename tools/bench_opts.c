/* SPDX-License-Identifier: MIT */
/*
 * bench_opts.c - the options of `uringpipe-cat --bench` and its --help.
 *
 * Sizes use the CLI's syntax (cat_size.c). A bad option prints the message,
 * then the whole usage, and exits 2.
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
"  --capacity N     pipe capacity for both transports (default 1M);\n"
"                   the kernel pipe gets F_SETPIPE_SZ\n"
"  --bytes N        bytes per run for every size and transport (default:\n"
"                   calibrated per transport and size to last --time)\n"
"  --time SEC       target seconds per timed run when calibrating (0.4)\n"
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
"  --report FILE    also write a chart of MB/s against write size: an SVG\n"
"                   image if FILE ends in .svg, else a self-contained HTML page\n"
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
	fputs("\n\n", stderr);
	usage(stderr);
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

void bench_parse_args(int argc, char **argv, struct opts *o)
{
	enum { O_SIZES = 256, O_CAP, O_BYTES, O_REPEAT, O_WRITERS, O_READERS,
	       O_JSON, O_SEED, O_LAT, O_TIME, O_TIMEOUT, O_SWEEP, O_PRESSURE, O_REPORT, O_PROCS };
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
	if (o->bytes && o->bytes < o->writers)
		bad_usage("--bytes: %" PRIu64 " is less than one byte per writer", o->bytes);
}
