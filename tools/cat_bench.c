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
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/wait.h>

#include "uringpipe.h"

#include "cat.h"

#define BENCH_IOV 64

#define MAX_SIZES      32
#define MAX_THREADS    64
#define MAX_REPEAT     100
#define MAX_WRITE_SIZE GiB
#define MAX_BYTES      (1024 * GiB)
#define LAT_CAP        ((size_t)1 << 20) /* latency samples per run, all writers */
#define VERIFY_BYTES   (16 * MiB)
#define CAL_MIN_SECS   0.1
#define CAL_MAX_BYTES  (32 * GiB)


enum transport { T_KERNEL = CAT_T_KERNEL, T_URING = CAT_T_URING, T_URING_ZC = CAT_T_URING_ZC,
		 T_COUNT = CAT_T_COUNT };
static const char *const tname[T_COUNT] = {"kernel", "uringpipe", "uringpipe_zc"};

/* Either flavour of uringpipe endpoint. */
static inline bool is_up(enum transport t)
{
	return t != T_KERNEL;
}

/* --sweep: the kernel's pipe_bench grid. */
static const unsigned sweep_w[] = {1, 2, 5};
static const unsigned sweep_r[] = {1, 5, 10};

struct opts {
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes;
	uint64_t capacity;
	uint64_t bytes; /* 0: calibrate per transport and size */
	unsigned repeat, writers, readers;
	bool json, verbose, sweep, pressure;
	const char *report;
	uint64_t seed;
	uint64_t lat_every; /* 0: automatic */
	double run_time;    /* target seconds per timed run when calibrating */
	double timeout;     /* seconds per run; 0: automatic */
};

/* What the machine and the library turned out to be, found once at start. */
struct env {
	int cpu[2];        /* first two CPUs we may run on, or -1 */
	int kpipe_req;     /* argument for F_SETPIPE_SZ, 0 = leave the default */
	long kpipe_size;   /* F_GETPIPE_SZ read back */
	long kpipe_max;    /* /proc/sys/fs/pipe-max-size, -1 if unreadable */
	char kpipe_note[320];
	char backend[17];
	int numa_node;
	size_t up_capacity, up_page;
	double clock_ns;   /* cost of one clock_gettime(CLOCK_MONOTONIC) */
};

struct shared {
	enum transport t;
	size_t size;
	uint64_t key; /* pattern key derived from --seed */
	bool verify;
	pthread_barrier_t bar;
	/* The watchdog: workers count themselves out here. Waiting on a
	 * condition variable rather than pthread_clockjoin_np() because TSan
	 * (gcc 12) does not intercept the latter and then flags every read of a
	 * joined worker's results as a race. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned done;
};

struct worker {
	struct shared *sh;
	pthread_t tid;
	bool writer;
	unsigned idx;
	int fd;             /* kernel transport */
	struct up_end *end; /* uringpipe transport */
	unsigned char *buf;
	size_t buflen;
	unsigned char *scratch; /* reader, verify pass: expected bytes */
	uint64_t quota;         /* writer: bytes to write */
	uint64_t moved;         /* bytes written or read */
	uint64_t calls;         /* write()/read() or up_write()/up_read() calls */
	uint64_t *lat;          /* writer: sampled write durations, ns */
	size_t lat_cap, nlat;
	uint64_t every;
	bool bad;               /* reader: integrity already failed */
	struct timespec t0, t1;
	/* Read only by the watchdog to say where a hung run stopped: relaxed,
	 * it orders nothing. */
	_Atomic uint64_t progress;
	char err[256];
} __attribute__((aligned(64)));

struct run_out {
	double secs;
	uint64_t bytes;
	uint64_t syscalls; /* kernel: our write+read calls; uringpipe: up_stats */
	double p50, p99, max; /* µs */
	size_t nlat;
	uint64_t every;
	bool have_st;
	struct up_stats st;
};

/* ---------------------------------------------------------------- utils */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fputs("uringpipe-cat --bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

/* A data buffer (what writers copy from, readers copy into) on the node the
 * pipes live on, from the library's node arenas: up_buf_alloc(3). */
static unsigned char *xbuf_alloc(size_t n, int node)
{
	void *p = NULL;
	int r = up_buf_alloc(n ? n : 1, node, &p);
	if (r < 0)
		die("up_buf_alloc(%zu bytes, node %d): %s", n, node, up_strerror(r));
	return p;
}

static inline uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* vDSO on x86 (tsc/kvm-clock) and arm64: no system call. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_ns(&ts);
}

static inline uint64_t mix64(uint64_t x)
{
	/* splitmix64 finaliser: every input bit reaches every output bit. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9u;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebu;
	x ^= x >> 31;
	return x;
}

/* Byte at stream offset o is byte (o & 7) of mix64((o >> 3) + key). */
static void pattern_fill(unsigned char *dst, uint64_t off, size_t n, uint64_t key)
{
	size_t i = 0;
	while (i < n) {
		uint64_t o = off + i;
		uint64_t word = mix64((o >> 3) + key);
		for (unsigned sh = (unsigned)(o & 7); sh < 8 && i < n; sh++, i++)
			dst[i] = (unsigned char)(word >> (8 * sh));
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

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

/* Nearest rank on a sorted array. */
static uint64_t pct(const uint64_t *s, size_t n, double p)
{
	size_t r;
	if (n == 0)
		return 0;
	r = (size_t)((double)n * p + 0.999999);
	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return s[r - 1];
}

#define parse_uint cat_parse_uint
#define size_label cat_size_label
#define bytes_label cat_bytes_label
#define parse_size cat_parse_size

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
	fputs("uringpipe-cat --bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n\n", stderr);
	usage(stderr);
	exit(2);
}

static void parse_sizes(const char *arg, struct opts *o)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	const char *p;

	if (!copy)
		die("out of memory");
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
		if (parse_size(tok, &v) < 0)
			bad_usage("--sizes: '%s' is not a size (digits, optional K/M/G)", tok);
		if (v == 0 || v > MAX_WRITE_SIZE)
			bad_usage("--sizes: '%s' out of range (1 B .. 1 GiB)", tok);
		o->sizes[o->nsizes++] = v;
	}
	free(copy);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum { O_SIZES = 256, O_CAP, O_BYTES, O_REPEAT, O_WRITERS, O_READERS,
	       O_JSON, O_SEED, O_LAT, O_TIME, O_TIMEOUT, O_SWEEP, O_PRESSURE, O_REPORT };
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
			if (parse_size(optarg, &v) < 0)
				bad_usage("--capacity: '%s' is not a size", optarg);
			if (v < 2 * UP_DEFAULT_PAGE_SIZE || v > GiB)
				bad_usage("--capacity: '%s' out of range (8 KiB .. 1 GiB)", optarg);
			o->capacity = v;
			break;
		case O_BYTES:
			if (parse_size(optarg, &v) < 0)
				bad_usage("--bytes: '%s' is not a size", optarg);
			if (v == 0 || v > MAX_BYTES)
				bad_usage("--bytes: '%s' out of range (1 B .. 1 TiB)", optarg);
			o->bytes = v;
			break;
		case O_REPEAT:
			if (parse_uint(optarg, &v, 10) < 0 || v < 1 || v > MAX_REPEAT)
				bad_usage("--repeat: '%s' must be 1..%d", optarg, MAX_REPEAT);
			o->repeat = (unsigned)v;
			break;
		case O_WRITERS:
		case O_READERS:
			if (parse_uint(optarg, &v, 10) < 0 || v < 1 || v > MAX_THREADS)
				bad_usage("--%s: '%s' must be 1..%d",
					  c == O_WRITERS ? "writers" : "readers", optarg, MAX_THREADS);
			if (c == O_WRITERS)
				o->writers = (unsigned)v;
			else
				o->readers = (unsigned)v;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_SEED:
			if (parse_uint(optarg, &v, 0) < 0) /* 0x... welcome */
				bad_usage("--seed: '%s' is not an unsigned integer", optarg);
			o->seed = v;
			break;
		case O_LAT:
			if (parse_uint(optarg, &v, 10) < 0 || v < 1)
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

/* ----------------------------------------------------------- env probes */

static long read_long_file(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void probe_cpus(struct env *env)
{
	cpu_set_t set;
	int n = 0;
	env->cpu[0] = env->cpu[1] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET((size_t)c, &set))
			env->cpu[n++] = c;
}

static void probe_clock(struct env *env)
{
	enum { N = 200000 };
	uint64_t a = now_ns(), b;
	for (int i = 0; i < N; i++)
		(void)now_ns();
	b = now_ns();
	env->clock_ns = (double)(b - a) / N;
}

/*
 * F_SETPIPE_SZ is capped at /proc/sys/fs/pipe-max-size for processes without
 * CAP_SYS_RESOURCE (EPERM), and by the per-user pipe-user-pages-* limits.
 * When the capacity is refused, fall back to the largest size we may have and
 * say so: a benchmark against a smaller kernel pipe is still informative, as
 * long as it is labelled.
 */
static void probe_kernel_pipe(uint64_t cap, struct env *env)
{
	int fds[2], r, e;
	char cb[32];

	env->kpipe_max = read_long_file("/proc/sys/fs/pipe-max-size");
	env->kpipe_note[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) < 0)
		die("pipe2: %s", strerror(errno));
	env->kpipe_req = (int)cap; /* cap <= 1 GiB, checked by the parser */
	r = fcntl(fds[1], F_SETPIPE_SZ, env->kpipe_req);
	if (r < 0) {
		e = errno;
		if (e == EPERM && env->kpipe_max > 0 && (long)cap > env->kpipe_max) {
			snprintf(env->kpipe_note, sizeof(env->kpipe_note),
				 "F_SETPIPE_SZ(%s) refused: above /proc/sys/fs/pipe-max-size "
				 "(%ld) without CAP_SYS_RESOURCE; kernel pipe uses pipe-max-size",
				 bytes_label(cap, cb, sizeof(cb)), env->kpipe_max);
			env->kpipe_req = (int)env->kpipe_max;
			if (fcntl(fds[1], F_SETPIPE_SZ, env->kpipe_req) < 0)
				env->kpipe_req = 0;
		} else {
			snprintf(env->kpipe_note, sizeof(env->kpipe_note),
				 "F_SETPIPE_SZ(%s) failed: %s%s; kernel pipe keeps its default size",
				 bytes_label(cap, cb, sizeof(cb)), strerror(e),
				 e == EPERM ? " (per-user pipe-user-pages-* limit?)" : "");
			env->kpipe_req = 0;
		}
	} else if (env->kpipe_max > 0 && (long)cap > env->kpipe_max) {
		snprintf(env->kpipe_note, sizeof(env->kpipe_note),
			 "capacity is above /proc/sys/fs/pipe-max-size (%ld); allowed by "
			 "CAP_SYS_RESOURCE", env->kpipe_max);
	}
	env->kpipe_size = fcntl(fds[1], F_GETPIPE_SZ);
	if (env->kpipe_size < 0)
		die("F_GETPIPE_SZ: %s", strerror(errno));
	if (!env->kpipe_note[0] && (uint64_t)env->kpipe_size != cap)
		snprintf(env->kpipe_note, sizeof(env->kpipe_note),
			 "kernel rounded the pipe to %ld B (a power-of-two number of pages)",
			 env->kpipe_size);
	close(fds[0]);
	close(fds[1]);
}

static void probe_uring(uint64_t cap, struct env *env)
{
	struct up_end *ends[2];
	struct up_config cfg;
	struct up_stats st;
	int r;

	up_config_init(&cfg);
	cfg.capacity = (size_t)cap;
	r = up_pipe2(ends, &cfg);
	if (r < 0)
		die("up_pipe2(capacity %" PRIu64 "): %s", cap, up_strerror(r));
	env->up_capacity = up_capacity(up_end_pipe(ends[0]));
	env->up_page = up_page_size(up_end_pipe(ends[0]));
	r = up_stats(up_end_pipe(ends[0]), &st);
	if (r < 0)
		die("up_stats: %s", up_strerror(r));
	memcpy(env->backend, st.backend, sizeof(st.backend));
	env->backend[sizeof(st.backend)] = '\0';
	env->numa_node = st.numa_node;
	up_close(ends[1]);
	up_close(ends[0]);
}

/* ------------------------------------------------------------- workers */

static ssize_t zc_write(struct worker *w, const unsigned char *p, size_t n);

static ssize_t do_write(struct worker *w, const void *p, size_t n)
{
	if (w->sh->t == T_URING_ZC)
		return zc_write(w, p, n);
	if (is_up(w->sh->t))
		return up_write(w->end, p, n);
	for (;;) {
		ssize_t r = write(w->fd, p, n);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
		w->calls++; /* the interrupted call was a system call too */
	}
}

static ssize_t do_read(struct worker *w, void *p, size_t n)
{
	if (is_up(w->sh->t))
		return up_read(w->end, p, n);
	for (;;) {
		ssize_t r = read(w->fd, p, n);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
		w->calls++;
	}
}

/* @e is a positive errno; up_strerror() takes the library's negative code. */
static const char *err_str(const struct worker *w, int e)
{
	return is_up(w->sh->t) ? up_strerror(-e) : strerror(e);
}

/*
 * The zero-copy writer: reserve pages, fill them from the same source buffer
 * the copying writers use (standing in for a producer that generates data in
 * place), commit. One reserve+commit pair is one "write" for the latency.
 */
static ssize_t zc_write(struct worker *w, const unsigned char *p, size_t n)
{
	struct iovec iov[BENCH_IOV];
	int cnt = BENCH_IOV;
	ssize_t r = up_reserve(w->end, n, iov, &cnt);
	size_t k = 0;

	if (r <= 0)
		return r;
	for (int i = 0; i < cnt; i++) {
		memcpy(iov[i].iov_base, p + k, iov[i].iov_len);
		k += iov[i].iov_len;
	}
	r = up_commit(w->end, k);
	return r < 0 ? r : (ssize_t)k;
}

static void close_end(struct worker *w)
{
	if (is_up(w->sh->t)) {
		up_close(w->end);
		w->end = NULL;
	} else if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
}

static void *writer_main(void *arg)
{
	struct worker *w = arg;
	const struct shared *sh = w->sh;
	uint64_t left = w->quota, countdown = 0;

	pthread_barrier_wait(&w->sh->bar);
	clock_gettime(CLOCK_MONOTONIC, &w->t0);
	while (left > 0) {
		size_t n = left < sh->size ? (size_t)left : sh->size;
		const unsigned char *p = w->buf;
		size_t rem = n;
		bool sample = false;

		if (sh->verify)
			pattern_fill(w->buf, w->moved, n, sh->key);
		if (w->lat && countdown-- == 0) {
			sample = true;
			countdown = w->every - 1;
		}
		while (rem > 0) {
			uint64_t a = sample ? now_ns() : 0;
			ssize_t r = do_write(w, p, rem);
			if (sample && w->nlat < w->lat_cap)
				w->lat[w->nlat++] = now_ns() - a;
			w->calls++;
			if (r <= 0) {
				if (r == 0)
					snprintf(w->err, sizeof(w->err),
						 "writer %u: write of %zu returned 0 after %" PRIu64
						 " bytes", w->idx, rem, w->moved);
				else
					snprintf(w->err, sizeof(w->err),
						 "writer %u: write failed after %" PRIu64 " bytes: %s (%d)",
						 w->idx, w->moved + (n - rem), err_str(w, (int)-r), (int)r);
				w->moved += n - rem;
				goto out;
			}
			p += r;
			rem -= (size_t)r;
		}
		w->moved += n;
		left -= n;
		/* Relaxed: a progress hint for the watchdog, publishes nothing. */
		atomic_store_explicit(&w->progress, w->moved, memory_order_relaxed);
	}
out:
	close_end(w); /* the last writer's close is the readers' EOF */
	clock_gettime(CLOCK_MONOTONIC, &w->t1);
	return NULL;
}

static void verify_chunk(struct worker *w, const unsigned char *got, size_t n)
{
	pattern_fill(w->scratch, w->moved, n, w->sh->key);
	if (memcmp(w->scratch, got, n) == 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (w->scratch[i] != got[i]) {
			snprintf(w->err, sizeof(w->err),
				 "integrity: stream offset %" PRIu64 ": expected 0x%02x, read 0x%02x"
				 " (read of %zu bytes at offset %" PRIu64 ")",
				 w->moved + i, w->scratch[i], got[i], n, w->moved);
			break;
		}
	}
	w->bad = true; /* keep draining so the writer finishes */
}

/* The zero-copy reader: peek, look at the bytes in place (verify pass
 * only: a timed run leaves them untouched, as a consumer that forwards a
 * pointer would), consume. */
static void zc_reader(struct worker *w)
{
	for (;;) {
		struct iovec iov[BENCH_IOV];
		int cnt = BENCH_IOV;
		ssize_t r = up_peek(w->end, iov, &cnt);
		int c;

		w->calls++;
		if (r == 0)
			return;
		if (r < 0) {
			snprintf(w->err, sizeof(w->err), "reader %u: peek failed after %" PRIu64
				 " bytes: %s (%d)", w->idx, w->moved, up_strerror((int)r), (int)r);
			close_end(w);
			return;
		}
		if (w->sh->verify) {
			uint64_t at = w->moved;
			for (int i = 0; i < cnt && !w->bad; i++) {
				size_t done = 0;
				/* scratch holds max(1 MiB, size): verify in slices;
				 * verify_chunk takes the offset from w->moved. */
				while (done < iov[i].iov_len && !w->bad) {
					size_t k = iov[i].iov_len - done;
					if (k > w->buflen)
						k = w->buflen;
					verify_chunk(w, (const unsigned char *)iov[i].iov_base + done, k);
					w->moved += k;
					done += k;
				}
			}
			w->moved = at;
		}
		c = up_consume(w->end, (size_t)r);
		if (c < 0) {
			snprintf(w->err, sizeof(w->err), "reader %u: consume failed after %" PRIu64
				 " bytes: %s (%d)", w->idx, w->moved, up_strerror(c), c);
			close_end(w);
			return;
		}
		w->moved += (uint64_t)r;
		atomic_store_explicit(&w->progress, w->moved, memory_order_relaxed);
	}
}

static void *reader_main(void *arg)
{
	struct worker *w = arg;
	const struct shared *sh = w->sh;

	pthread_barrier_wait(&w->sh->bar);
	clock_gettime(CLOCK_MONOTONIC, &w->t0);
	if (sh->t == T_URING_ZC) {
		zc_reader(w);
		goto out;
	}
	for (;;) {
		ssize_t r = do_read(w, w->buf, w->buflen);
		w->calls++;
		if (r == 0)
			break;
		if (r < 0) {
			snprintf(w->err, sizeof(w->err), "reader %u: read failed after %" PRIu64
				 " bytes: %s (%d)", w->idx, w->moved, err_str(w, (int)-r), (int)r);
			close_end(w); /* so a blocked writer sees EPIPE, not a hang */
			break;
		}
		if (sh->verify && !w->bad)
			verify_chunk(w, w->buf, (size_t)r);
		w->moved += (uint64_t)r;
		atomic_store_explicit(&w->progress, w->moved, memory_order_relaxed);
	}
out:
	clock_gettime(CLOCK_MONOTONIC, &w->t1);
	return NULL;
}

/* ------------------------------------------------------------------ run */

static uint64_t auto_every(uint64_t size, uint64_t writes, size_t cap)
{
	uint64_t e = size >= 4096 ? 1 : (4096 + size - 1) / size;
	uint64_t need = (writes + cap - 1) / cap;
	return need > e ? need : e;
}

static void *worker_start(struct worker *w)
{
	return w->writer ? writer_main(w) : reader_main(w);
}

static void *thread_entry(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	worker_start(w);
	pthread_mutex_lock(&sh->mu);
	sh->done++;
	pthread_cond_signal(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	return NULL;
}

static void watchdog_fail(const struct opts *o, enum transport t, uint64_t size, double tmo,
			  struct worker *ws, unsigned n)
{
	char sb[32];
	(void)o;
	fflush(stdout);
	fprintf(stderr, "uringpipe-cat --bench: %s run with %s writes did not finish within %.0f s;"
		" progress:", tname[t], size_label(size, sb, sizeof(sb)), tmo);
	for (unsigned i = 0; i < n; i++)
		fprintf(stderr, " %s%u=%" PRIu64, ws[i].writer ? "w" : "r", ws[i].idx,
			atomic_load_explicit(&ws[i].progress, memory_order_relaxed));
	fputc('\n', stderr);
	exit(1);
}

/*
 * One run: returns 0 and fills *out, or prints why on stderr and returns -1.
 */
static int run_once(const struct opts *o, const struct env *env, enum transport t,
		    uint64_t size, uint64_t bytes, unsigned nw, unsigned nr, bool verify,
		    bool sample, struct run_out *out)
{
	struct shared sh;
	struct worker *ws;
	unsigned n = nw + nr;
	bool pin = nw == 1 && nr == 1 && env->cpu[1] >= 0;
	uint64_t wrote = 0, read = 0, start = UINT64_MAX, end = 0;
	size_t rlen = size > MiB ? (size_t)size : (size_t)MiB;
	size_t lat_cap = LAT_CAP / nw;
	/* Every pipe of a run is created like the probe's, so it lands where
	 * the probe's did (-1: not known, follow the memory policy). */
	int node = env->numa_node >= 0 ? env->numa_node : -1;
	struct timespec deadline;
	double tmo;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	memset(&sh, 0, sizeof(sh));
	sh.t = t;
	sh.size = (size_t)size;
	sh.key = mix64(o->seed ^ 0x75726970697065u);
	sh.verify = verify;
	if (pthread_barrier_init(&sh.bar, NULL, n) != 0)
		die("pthread_barrier_init failed");
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&sh.cv, &ca);
		pthread_condattr_destroy(&ca);
		pthread_mutex_init(&sh.mu, NULL);
	}

	ws = aligned_alloc(64, sizeof(*ws) * n);
	if (!ws)
		die("out of memory");
	memset(ws, 0, sizeof(*ws) * n);
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &ws[i];
		w->sh = &sh;
		w->writer = i < nw;
		w->idx = w->writer ? i : i - nw;
		w->fd = -1;
		atomic_init(&w->progress, 0);
		if (w->writer) {
			w->quota = bytes / nw + (w->idx < bytes % nw ? 1 : 0);
			w->buflen = (size_t)size;
			w->buf = xbuf_alloc(w->buflen, node);
			pattern_fill(w->buf, 0, w->buflen, sh.key); /* also faults it in */
			if (sample) {
				uint64_t writes = (w->quota + size - 1) / size;
				w->every = o->lat_every ? o->lat_every
							: auto_every(size, writes, lat_cap);
				w->lat_cap = (size_t)((writes + w->every - 1) / w->every) + 16;
				if (w->lat_cap > lat_cap)
					w->lat_cap = lat_cap;
				w->lat = xmalloc(w->lat_cap * sizeof(*w->lat));
				memset(w->lat, 0, w->lat_cap * sizeof(*w->lat));
			}
		} else {
			w->buflen = rlen;
			w->buf = xbuf_alloc(rlen, node);
			memset(w->buf, 0, rlen);
			if (verify) {
				w->scratch = xbuf_alloc(rlen, node);
				memset(w->scratch, 0, rlen);
			}
		}
	}

	/* Endpoints: one per thread, so each thread's close is its own. */
	if (t == T_KERNEL) {
		int fds[2];
		long got;
		if (pipe2(fds, O_CLOEXEC) < 0)
			die("pipe2: %s", strerror(errno));
		if (env->kpipe_req > 0 && fcntl(fds[1], F_SETPIPE_SZ, env->kpipe_req) < 0)
			die("F_SETPIPE_SZ(%d): %s (it worked at start-up)", env->kpipe_req,
			    strerror(errno));
		got = fcntl(fds[1], F_GETPIPE_SZ);
		if (got != env->kpipe_size)
			die("kernel pipe is %ld B, expected %ld B (per-user pipe limits?)", got,
			    env->kpipe_size);
		for (unsigned i = 0; i < n; i++) {
			int base = ws[i].writer ? fds[1] : fds[0];
			bool first = ws[i].idx == 0;
			ws[i].fd = first ? base : fcntl(base, F_DUPFD_CLOEXEC, 0);
			if (ws[i].fd < 0)
				die("dup: %s", strerror(errno));
		}
	} else {
		struct up_end *ends[2];
		struct up_config cfg;
		int r;
		up_config_init(&cfg);
		cfg.capacity = (size_t)o->capacity;
		r = up_pipe2(ends, &cfg);
		if (r < 0)
			die("up_pipe2: %s", up_strerror(r));
		for (unsigned i = 0; i < n; i++) {
			struct worker *w = &ws[i];
			if (w->idx == 0) {
				w->end = w->writer ? ends[1] : ends[0];
				continue;
			}
			r = up_open(up_end_pipe(ends[0]), w->writer ? UP_WR : UP_RD, &w->end);
			if (r < 0)
				die("up_open(%s): %s", w->writer ? "UP_WR" : "UP_RD", up_strerror(r));
		}
	}

	for (unsigned i = 0; i < n; i++) {
		pthread_attr_t attr;
		int e;
		pthread_attr_init(&attr);
		if (pin) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET((size_t)(ws[i].writer ? env->cpu[0] : env->cpu[1]), &set);
			pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		}
		e = pthread_create(&ws[i].tid, &attr, thread_entry, &ws[i]);
		pthread_attr_destroy(&attr);
		if (e != 0)
			/* The others wait on the barrier forever: nothing to unwind. */
			die("pthread_create: %s", strerror(e));
	}

	/* A library that loses a wakeup would hang us: bound every run. */
	tmo = o->timeout > 0 ? o->timeout : 60.0 + (double)bytes / 10e6;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += (time_t)tmo;
	pthread_mutex_lock(&sh.mu);
	while (sh.done < n) {
		int e = pthread_cond_timedwait(&sh.cv, &sh.mu, &deadline);
		if (e == ETIMEDOUT && sh.done < n)
			watchdog_fail(o, t, size, tmo, ws, n);
	}
	pthread_mutex_unlock(&sh.mu);
	for (unsigned i = 0; i < n; i++) {
		int e = pthread_join(ws[i].tid, NULL);
		if (e != 0)
			die("pthread_join: %s", strerror(e));
	}
	pthread_barrier_destroy(&sh.bar);
	pthread_cond_destroy(&sh.cv);
	pthread_mutex_destroy(&sh.mu);

	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &ws[i];
		if (w->err[0]) {
			fprintf(stderr, "uringpipe-cat --bench: %s, %" PRIu64 "-byte writes%s: %s\n",
				tname[t], size, verify ? ", verification pass" : "", w->err);
			rc = -1;
		}
		if (w->writer)
			wrote += w->moved;
		else
			read += w->moved;
		if (ts_ns(&w->t0) < start)
			start = ts_ns(&w->t0);
		if (!w->writer && ts_ns(&w->t1) > end)
			end = ts_ns(&w->t1);
		if (t == T_KERNEL)
			out->syscalls += w->calls;
	}
	if (rc == 0 && (wrote != bytes || read != bytes)) {
		fprintf(stderr, "uringpipe-cat --bench: %s, %" PRIu64 "-byte writes: byte count mismatch:"
			" asked %" PRIu64 ", written %" PRIu64 ", read %" PRIu64 "\n",
			tname[t], size, bytes, wrote, read);
		rc = -1;
	}

	if (is_up(t)) {
		struct up_end *keep = NULL;
		for (unsigned i = nw; i < n && !keep; i++)
			keep = ws[i].end;
		/* A reader end is still open, so the pipe handle (and with it the
		 * counters of the closed writer ends) is still alive. */
		if (keep && rc == 0) {
			int r = up_stats(up_end_pipe(keep), &out->st);
			if (r < 0) {
				fprintf(stderr, "uringpipe-cat --bench: up_stats: %s\n", up_strerror(r));
				rc = -1;
			} else {
				out->have_st = true;
				out->syscalls = out->st.syscalls;
			}
		}
	}
	for (unsigned i = 0; i < n; i++)
		close_end(&ws[i]);

	out->secs = (double)(end - start) / 1e9;
	out->bytes = bytes;
	if (sample) {
		uint64_t *all;
		size_t tot = 0, k = 0;
		for (unsigned i = 0; i < nw; i++)
			tot += ws[i].nlat;
		all = nw == 1 ? ws[0].lat : xmalloc((tot ? tot : 1) * sizeof(*all));
		if (nw > 1)
			for (unsigned i = 0; i < nw; i++) {
				memcpy(all + k, ws[i].lat, ws[i].nlat * sizeof(*all));
				k += ws[i].nlat;
			}
		qsort(all, tot, sizeof(*all), cmp_u64);
		out->nlat = tot;
		out->every = ws[0].every;
		out->p50 = (double)pct(all, tot, 0.50) / 1e3;
		out->p99 = (double)pct(all, tot, 0.99) / 1e3;
		out->max = tot ? (double)all[tot - 1] / 1e3 : 0.0;
		if (nw > 1)
			free(all);
	}
	for (unsigned i = 0; i < n; i++) {
		/* scratch, when there is one, is a reader's: buflen bytes too. */
		up_buf_free(ws[i].buf, ws[i].buflen ? ws[i].buflen : 1);
		up_buf_free(ws[i].scratch, ws[i].buflen ? ws[i].buflen : 1);
		free(ws[i].lat);
	}
	free(ws);

	if (rc == 0 && o->verbose) {
		char sb[32];
		fprintf(stderr, "  %-9s %6s %s %10.1f MB/s  %8.3f s  %" PRIu64 " B  syscalls %"
			PRIu64 "\n", tname[t], size_label(size, sb, sizeof(sb)),
			verify ? "verify" : sample ? "timed " : "calib ",
			out->secs > 0 ? (double)bytes / out->secs / 1e6 : 0.0, out->secs, bytes,
			out->syscalls);
	}
	return rc;
}

/* Double a short run until it lasts CAL_MIN_SECS, then scale to run_time. */
static uint64_t calibrate(const struct opts *o, const struct env *env, enum transport t,
			  uint64_t size)
{
	uint64_t unit = size * o->writers;
	uint64_t b = 8 * MiB > 8 * unit ? 8 * MiB : 8 * unit;
	struct run_out r;
	double want;

	for (;;) {
		double f;
		if (run_once(o, env, t, size, b, o->writers, o->readers, false, false, &r) < 0)
			exit(1);
		if (r.secs >= CAL_MIN_SECS || b >= CAL_MAX_BYTES)
			break;
		f = r.secs > 0 ? 1.5 * CAL_MIN_SECS / r.secs : 16.0;
		if (f < 2.0)
			f = 2.0;
		if (f > 16.0)
			f = 16.0;
		b = (uint64_t)((double)b * f);
		if (b > CAL_MAX_BYTES)
			b = CAL_MAX_BYTES;
	}
	want = (double)b * o->run_time / (r.secs > 0 ? r.secs : 1e-9);
	if (want > (double)CAL_MAX_BYTES)
		want = (double)CAL_MAX_BYTES;
	b = (uint64_t)want / unit * unit;
	return b < unit ? unit : b;
}

/* ---------------------------------------------------------------- report */

struct row {
	uint64_t size;
	uint64_t bytes[T_COUNT];
	uint64_t verified[T_COUNT];
	double mbps[T_COUNT][MAX_REPEAT];
	double secs[T_COUNT][MAX_REPEAT];
	double p50[T_COUNT][MAX_REPEAT], p99[T_COUNT][MAX_REPEAT];
	double lmax[T_COUNT];
	double sys_gib[T_COUNT][MAX_REPEAT];
	uint64_t syscalls[T_COUNT][MAX_REPEAT];
	size_t nlat[T_COUNT];
	uint64_t every[T_COUNT];
	struct up_stats st[MAX_REPEAT];
	bool have_st[MAX_REPEAT];
};

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

static void json_row(const struct opts *o, const struct row *rw)
{
	double mk = median(rw->mbps[T_KERNEL], o->repeat);

	printf("{\"size\":%" PRIu64, rw->size);
	for (int t = T_URING; t < T_COUNT; t++) {
		printf(",\"%s\":", t == T_URING ? "ratio" : "ratio_zc");
		if (mk > 0)
			printf("%.4f", median(rw->mbps[t], o->repeat) / mk);
		else
			printf("null");
	}
	for (int t = 0; t < T_COUNT; t++) {
		printf(",\"%s\":{\"bytes_per_run\":%" PRIu64 ",\"verified_bytes\":%" PRIu64
		       ",\"mbps_median\":%.3f,\"mbps\":",
		       tname[t], rw->bytes[t], rw->verified[t], median(rw->mbps[t], o->repeat));
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

/* One run configuration (writers x readers) and its rows. */
struct config {
	unsigned writers, readers;
	struct row *rows;
};

static bool pinned_for(const struct env *env, unsigned w, unsigned r)
{
	return w == 1 && r == 1 && env->cpu[1] >= 0;
}

static void print_json(const struct opts *o, const struct env *env, const struct config *cf,
		       unsigned ncf)
{
	printf("{\"tool\":\"uringpipe-cat --bench\",\"version\":\"%s\",", UP_VERSION_STRING);
	printf("\"capacity\":%" PRIu64 ",\"uringpipe_capacity\":%zu,\"page_size\":%zu,"
	       "\"kernel_pipe_size\":%ld,\"pipe_max_size\":%ld,\"kernel_pipe_note\":",
	       o->capacity, env->up_capacity, env->up_page, env->kpipe_size, env->kpipe_max);
	json_str(env->kpipe_note);
	printf(",\"backend\":");
	json_str(env->backend);
	printf(",\"numa_node\":%d,\"repeat\":%u,\"memory_pressure\":%s,\"writer_cpu\":%d,"
	       "\"reader_cpu\":%d,\"seed\":%" PRIu64 ",\"bytes_option\":%" PRIu64
	       ",\"run_time\":%.3f,\"clock_gettime_ns\":%.1f,\"mb\":1000000,"
	       "\"transports\":[\"kernel\",\"uringpipe\",\"uringpipe_zc\"],\"configs\":[",
	       env->numa_node, o->repeat, o->pressure ? "true" : "false", env->cpu[0],
	       env->cpu[1], o->seed, o->bytes, o->run_time, env->clock_ns);
	for (unsigned c = 0; c < ncf; c++) {
		printf("%s{\"writers\":%u,\"readers\":%u,\"pinned\":%s,\"rows\":[", c ? "," : "",
		       cf[c].writers, cf[c].readers,
		       pinned_for(env, cf[c].writers, cf[c].readers) ? "true" : "false");
		for (unsigned s = 0; s < o->nsizes; s++) {
			if (s)
				putchar(',');
			json_row(o, &cf[c].rows[s]);
		}
		printf("]}");
	}
	printf("]");
	/* Without --sweep there is one configuration: its rows also at the
	 * top, where the old uringpipe-bench JSON had them. */
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

static void print_header(const struct opts *o, const struct env *env)
{
	char cb[32];

	printf("uringpipe-cat --bench: capacity %s (kernel pipe %ld B), backend %s, %u repeat%s,"
	       " median%s\n", bytes_label(o->capacity, cb, sizeof(cb)), env->kpipe_size,
	       env->backend, o->repeat, o->repeat == 1 ? "" : "s",
	       o->pressure ? ", under stress-ng --vm memory pressure" : "");
	if (env->kpipe_note[0])
		printf("  note: %s\n", env->kpipe_note);
	printf("  uringpipe %s, page %zu B, numa node %d; seed %" PRIu64
	       "; clock_gettime %.0f ns; MB = 10^6 B; zc = reserve/commit + peek/consume\n",
	       UP_VERSION_STRING, env->up_page, env->numa_node, o->seed, env->clock_ns);
}

static void print_table(const struct opts *o, const struct env *env, const struct config *cf)
{
	const struct row *rows = cf->rows;

	if (pinned_for(env, cf->writers, cf->readers))
		printf("\n%u writer, %u reader, pinned writer->cpu%d reader->cpu%d\n", cf->writers,
		       cf->readers, env->cpu[0], env->cpu[1]);
	else
		printf("\n%u writer%s, %u reader%s, not pinned\n", cf->writers,
		       cf->writers == 1 ? "" : "s", cf->readers, cf->readers == 1 ? "" : "s");
	printf("%-5s %12s %12s %6s %12s %6s %18s %18s %18s %s\n", "size", "kernel MB/s",
	       "uringp MB/s", "ratio", "zc MB/s", "zc/k", "kern p50/p99/max", "up p50/p99/max",
	       "zc p50/p99/max", "syscalls/GiB k/up/zc");
	for (unsigned s = 0; s < o->nsizes; s++) {
		const struct row *rw = &rows[s];
		double m[T_COUNT];
		char sb[32], rb[2][32], l[T_COUNT][64], sy[64];

		for (int t = 0; t < T_COUNT; t++) {
			char a[16], b[16], c[16];
			m[t] = median(rw->mbps[t], o->repeat);
			snprintf(l[t], sizeof(l[t]), "%s/%s/%s",
				 fmt_us(median(rw->p50[t], o->repeat), a, sizeof(a)),
				 fmt_us(median(rw->p99[t], o->repeat), b, sizeof(b)),
				 fmt_us(rw->lmax[t], c, sizeof(c)));
		}
		for (int t = T_URING; t < T_COUNT; t++) {
			if (m[T_KERNEL] > 0)
				snprintf(rb[t - 1], sizeof(rb[0]), "%.2f", m[t] / m[T_KERNEL]);
			else
				snprintf(rb[t - 1], sizeof(rb[0]), "-");
		}
		snprintf(sy, sizeof(sy), "%.0f/%.0f/%.0f", median(rw->sys_gib[T_KERNEL], o->repeat),
			 median(rw->sys_gib[T_URING], o->repeat),
			 median(rw->sys_gib[T_URING_ZC], o->repeat));
		printf("%-5s %12.1f %12.1f %6s %12.1f %6s %18s %18s %18s %s\n",
		       size_label(rw->size, sb, sizeof(sb)), m[T_KERNEL], m[T_URING], rb[0],
		       m[T_URING_ZC], rb[1], l[0], l[1], l[2], sy);
	}
}

static void print_footer(const struct opts *o)
{
	printf("  %s; latency (us): median over runs of p50/p99, max over runs; kernel syscalls"
	       " = read()+write() calls, uringpipe = up_stats().syscalls\n",
	       o->bytes ? "bytes per run from --bytes" : "bytes per run calibrated per transport");
}

/* ------------------------------------------------------ memory pressure */

/*
 * stress-ng runs in its own process group so that one kill reaches its
 * workers too, and so that a terminal's ^C (sent to our group) does not
 * leave it orphaned: our exit path kills it, whichever way we leave.
 * A static is the only way atexit() can find it; this is a tool, not the
 * library, which keeps no global state.
 */
static pid_t pressure_pid = -1;

static void pressure_stop(void)
{
	if (pressure_pid <= 0)
		return;
	kill(-pressure_pid, SIGTERM);
	/* stress-ng stops its workers on SIGTERM; reap it so no zombie and
	 * no memory hog outlives the benchmark. */
	while (waitpid(pressure_pid, NULL, 0) < 0 && errno == EINTR)
		;
	pressure_pid = -1;
}

static void pressure_signal(int sig)
{
	if (pressure_pid > 0)
		kill(-pressure_pid, SIGTERM);
	signal(sig, SIG_DFL);
	raise(sig);
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *c = strchr(path, ':');
		size_t n = c ? (size_t)(c - path) : strlen(path);
		if (n > 0 && n + strlen(prog) + 2 <= sizeof(buf)) {
			memcpy(buf, path, n);
			buf[n] = '/';
			strcpy(buf + n + 1, prog);
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += n + (c ? 1 : 0);
	}
	return false;
}

static void pressure_start(void)
{
	pid_t pid;

	/* Checked here, not by a failed exec in the child, so the message is
	 * printed once, before any work, and the status is the usual one. */
	if (!in_path("stress-ng"))
		die("--memory-pressure needs stress-ng, which is not in PATH "
		    "(Debian: apt-get install stress-ng)");
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		setpgid(0, 0);
		if (devnull >= 0) {
			dup2(devnull, STDOUT_FILENO);
			close(devnull);
		}
		execlp("stress-ng", "stress-ng", "--vm", "2", "--vm-bytes", "50%", "--quiet",
		       (char *)NULL);
		fprintf(stderr, "uringpipe-cat --bench: exec stress-ng: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid); /* also here: whichever runs first, the group exists */
	pressure_pid = pid;
	atexit(pressure_stop);
	signal(SIGINT, pressure_signal);
	signal(SIGTERM, pressure_signal);
	signal(SIGHUP, pressure_signal);
}

/* ------------------------------------------------------------------ main */

/* Every size for one writers x readers configuration. The verification
 * pass (always 1 x 1) runs only with @verify: once per size is enough. */
static void run_config(const struct opts *o, const struct env *env, struct row *rows,
		       bool verify)
{
	for (unsigned s = 0; s < o->nsizes; s++) {
		struct row *rw = &rows[s];
		uint64_t size = o->sizes[s];
		struct run_out r;

		rw->size = size;
		for (int t = 0; t < T_COUNT && verify; t++) {
			uint64_t vb = VERIFY_BYTES > size ? VERIFY_BYTES : size;
			if (run_once(o, env, (enum transport)t, size, vb, 1, 1, true, false, &r) < 0)
				die("verification of %s with %" PRIu64 "-byte writes failed",
				    tname[t], size);
			rw->verified[t] = vb;
		}
		for (int t = 0; t < T_COUNT; t++)
			rw->bytes[t] = o->bytes ? o->bytes : calibrate(o, env, (enum transport)t, size);
		for (unsigned i = 0; i < o->repeat; i++) {
			for (int t = 0; t < T_COUNT; t++) {
				if (run_once(o, env, (enum transport)t, size, rw->bytes[t], o->writers,
					     o->readers, false, true, &r) < 0)
					exit(1);
				rw->secs[t][i] = r.secs;
				rw->mbps[t][i] = r.secs > 0 ? (double)r.bytes / r.secs / 1e6 : 0.0;
				rw->p50[t][i] = r.p50;
				rw->p99[t][i] = r.p99;
				if (r.max > rw->lmax[t])
					rw->lmax[t] = r.max;
				rw->syscalls[t][i] = r.syscalls;
				rw->sys_gib[t][i] = (double)r.syscalls * (double)GiB / (double)r.bytes;
				rw->nlat[t] = r.nlat;
				rw->every[t] = r.every;
				if (t == T_URING) {
					rw->st[i] = r.st;
					rw->have_st[i] = r.have_st;
				}
			}
		}
	}
}

static void write_report(const struct opts *o, const struct env *env, const struct config *cf,
			 unsigned ncf)
{
	struct cat_report_series *ser = calloc(ncf, sizeof(*ser));
	struct cat_report_point *pts = calloc((size_t)ncf * o->nsizes, sizeof(*pts));
	char sub[256], cb[32];
	int r;

	if (!ser || !pts)
		die("out of memory");
	for (unsigned c = 0; c < ncf; c++) {
		ser[c].writers = cf[c].writers;
		ser[c].readers = cf[c].readers;
		ser[c].pts = pts + (size_t)c * o->nsizes;
		ser[c].npts = o->nsizes;
		for (unsigned s = 0; s < o->nsizes; s++) {
			struct cat_report_point *p = &pts[(size_t)c * o->nsizes + s];
			p->size = cf[c].rows[s].size;
			for (int t = 0; t < T_COUNT; t++)
				p->mbps[t] = median(cf[c].rows[s].mbps[t], o->repeat);
		}
	}
	snprintf(sub, sizeof(sub), "capacity %s, backend %s, uringpipe %s, median of %u run%s%s",
		 bytes_label(o->capacity, cb, sizeof(cb)), env->backend, UP_VERSION_STRING,
		 o->repeat, o->repeat == 1 ? "" : "s",
		 o->pressure ? ", under memory pressure (stress-ng --vm)" : "");
	r = cat_write_report(o->report, "uringpipe vs kernel pipe: throughput by write size", sub,
			     ser, ncf);
	if (r < 0)
		die("--report %s: %s", o->report, strerror(-r));
	free(pts);
	free(ser);
}

int cat_bench_main(int argc, char **argv)
{
	struct opts o;
	struct env env;
	struct config cf[9];
	unsigned ncf = 0;

	parse_args(argc, argv, &o);
	/* A kernel pipe whose reader failed must give the writer EPIPE, not
	 * kill the benchmark before it can say what went wrong. */
	signal(SIGPIPE, SIG_IGN);

	memset(&env, 0, sizeof(env));
	probe_cpus(&env);
	probe_clock(&env);
	probe_kernel_pipe(o.capacity, &env);
	probe_uring(o.capacity, &env);
	/* The table carries the note; a JSON consumer may not read notes. */
	if (env.kpipe_note[0] && o.json)
		fprintf(stderr, "uringpipe-cat --bench: %s\n", env.kpipe_note);
	if (o.pressure)
		pressure_start();

	if (o.sweep) {
		for (unsigned i = 0; i < 3; i++)
			for (unsigned j = 0; j < 3; j++)
				cf[ncf++] = (struct config){sweep_w[i], sweep_r[j], NULL};
	} else {
		cf[ncf++] = (struct config){o.writers, o.readers, NULL};
	}
	if (!o.json)
		print_header(&o, &env);
	for (unsigned c = 0; c < ncf; c++) {
		struct opts oc = o;

		oc.writers = cf[c].writers;
		oc.readers = cf[c].readers;
		cf[c].rows = calloc(o.nsizes, sizeof(*cf[c].rows));
		if (!cf[c].rows)
			die("out of memory");
		run_config(&oc, &env, cf[c].rows, c == 0);
		/* Print as we go: a sweep takes minutes. */
		if (!o.json) {
			print_table(&oc, &env, &cf[c]);
			fflush(stdout);
		}
	}
	pressure_stop();

	if (o.json)
		print_json(&o, &env, cf, ncf);
	else
		print_footer(&o);
	if (o.report)
		write_report(&o, &env, cf, ncf);
	for (unsigned c = 0; c < ncf; c++)
		free(cf[c].rows);
	if (fflush(stdout) != 0 || ferror(stdout))
		die("writing the report failed");
	return 0;
}
