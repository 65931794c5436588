/* SPDX-License-Identifier: MIT */
/*
 * cat_main.c - uringpipe-cat: cat(1) with a uringpipe in the middle, pv-like
 * progress, and (--bench) the comparison with kernel pipes.
 *
 * Pump: a reader thread reads the inputs straight into pipe pages
 * (up_reserve -> readv into the spans -> up_commit), a writer thread writes
 * stdout straight from them (up_peek -> writev of the spans -> up_consume).
 * Every byte is copied twice by the kernel (file -> page, page -> stdout) and
 * never by us; `cat f | cat` copies four times.
 *
 * The main thread only draws progress and waits: it sleeps on a condition
 * variable with a timeout, so a run without progress costs no wakeups.
 *
 * SIGPIPE: a library must not raise it, and io_uring may perform a write on
 * a kernel worker thread, where who gets the signal is not obvious. So the
 * tool ignores SIGPIPE for the run and turns -EPIPE from stdout back into
 * what cat would have done: if SIGPIPE was at its default disposition (and
 * not blocked) when we started, restore the default and raise it, so the
 * shell sees 128+13 = 141 and prints nothing; if the caller had ignored or
 * blocked it, cat would get EPIPE and report a write error, and so do we
 * (exit 3).
 *
 * Rejected: a single thread alternating read and write through one io_uring
 * with linked SQEs. It needs no uringpipe at all, which defeats the tool's
 * purpose of exercising the library, and a slow stdout would stall input.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

#include "cat.h"

#define PROG "uringpipe-cat"
#define CAT_IOV 64 /* spans per readv/writev: 64 pages of 64 KiB = 4 MiB */
#define CAT_DEFAULT_CAPACITY (8 * MiB)
#define CAT_DEFAULT_PAGE (64 * KiB)

struct cat_opts {
	uint64_t capacity, page_size, size;
	int node;
	bool have_size, quiet, progress, json, no_uring;
	char **files;
	int nfiles;
};

struct pump {
	const struct cat_opts *o;
	struct up_end *rd, *wr;
	bool sigpipe_default; /* SIGPIPE was SIG_DFL and unblocked at start */
	/* Relaxed counters: read by the progress loop for display only. */
	_Atomic uint64_t in_bytes, out_bytes;
	int input_errors;  /* reader thread only, read after join */
	int out_err;       /* writer thread only, read after join: -errno */
	int pipe_err;      /* either thread, first uringpipe failure */
	const char *pipe_err_where;
	char io_name[16];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running; /* threads still running, under mu */
};

static void usage(FILE *f)
{
	fputs(
"usage: " PROG " [OPTION]... [FILE]...\n"
"       " PROG " --bench [BENCH OPTION]...   (see " PROG " --bench --help)\n"
"Concatenate FILEs (or standard input; '-' is standard input) to standard\n"
"output through a uringpipe shared-memory pipe between a reading thread and\n"
"a writing thread; file I/O goes through io_uring where the kernel allows.\n"
"\n"
"  -B, --buffer SIZE     pipe capacity (default 8M; 8K .. 1G)\n"
"      --page-size SIZE  bytes per pipe page (default 64K; power of two,\n"
"                        4K .. 1M)\n"
"      --node N          place the pipe on NUMA node N (default: local)\n"
"  -p, --progress        show progress on stderr even if it is not a terminal\n"
"  -q, --quiet           no progress, even on a terminal\n"
"  -s, --size SIZE       expected total size, for the percentage and ETA\n"
"                        (default: the sum of the inputs if all are regular\n"
"                        files)\n"
"      --json            print a JSON summary on stderr at the end\n"
"      --no-uring        use readv/writev for file I/O (also UPCAT_NO_URING=1;\n"
"                        UP_FORCE_FUTEX=1 also disables the io_uring waker)\n"
"      --bench           compare uringpipe with kernel pipes instead\n"
"  -h, --help            this text\n"
"  -V, --version         version, wake backend and file I/O backend\n"
"\n"
"SIZE is a number of bytes with an optional suffix: K M G T (binary, also\n"
"KiB MiB GiB TiB) or KB MB GB TB (decimal).\n"
"\n"
"Exit status: 0 all inputs copied; 1 some input could not be opened or read\n"
"(the others were still copied); 2 bad usage; 3 writing standard output\n"
"failed; 4 the uringpipe failed. When the reader of standard output goes away\n"
"the tool ends like cat, killed by SIGPIPE (status 141 in the shell), unless\n"
"SIGPIPE was ignored by the caller: then it is a write error (status 3).\n",
	      f);
}

static void bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad_usage(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " --help' for more information.\n", stderr);
	exit(CAT_EXIT_USAGE);
}

static uint64_t size_arg(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
	uint64_t v;
	char a[32], b[32];
	int r = cat_parse_size(arg, &v);

	if (r == -ERANGE)
		bad_usage("%s: '%s' is too large", opt, arg);
	if (r < 0)
		bad_usage("%s: '%s' is not a size (digits with an optional K, M, G, T "
			  "or KB, MB, GB, TB suffix)", opt, arg);
	if (v < lo || v > hi)
		bad_usage("%s: '%s' is out of range (%s .. %s)", opt, arg,
			  cat_bytes_label(lo, a, sizeof(a)), cat_bytes_label(hi, b, sizeof(b)));
	return v;
}

static void print_version(void)
{
	struct up_pipe *p = NULL;
	struct up_stats st;
	struct cat_io *io;
	const char *backend = "unavailable";
	int r;

	/* The wake backend is chosen per endpoint at run time: ask a real
	 * pipe rather than guess from the build. */
	r = up_pipe_create(NULL, &p);
	if (r == 0 && up_stats(p, &st) == 0)
		backend = st.backend;
	printf(PROG " %s\n", UP_VERSION_STRING);
	printf("wake backend: %s\n", r == 0 ? backend : up_strerror(r));
	io = cat_io_open(false);
	printf("file I/O: %s\n", io ? cat_io_name(io) : "unavailable");
	cat_io_close(io);
	up_pipe_release(p);
}

static void parse_args(int argc, char **argv, struct cat_opts *o)
{
	enum { O_PAGE = 256, O_NODE, O_JSON, O_NO_URING };
	static const struct option lo[] = {
		{"buffer", required_argument, NULL, 'B'},
		{"page-size", required_argument, NULL, O_PAGE},
		{"node", required_argument, NULL, O_NODE},
		{"progress", no_argument, NULL, 'p'},
		{"quiet", no_argument, NULL, 'q'},
		{"size", required_argument, NULL, 's'},
		{"json", no_argument, NULL, O_JSON},
		{"no-uring", no_argument, NULL, O_NO_URING},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	memset(o, 0, sizeof(*o));
	o->capacity = CAT_DEFAULT_CAPACITY;
	o->page_size = CAT_DEFAULT_PAGE;
	o->node = -1;
	opterr = 0; /* our own messages, naming the option */
	while ((c = getopt_long(argc, argv, ":B:pqs:hV", lo, NULL)) != -1) {
		switch (c) {
		case 'B':
			o->capacity = size_arg("--buffer", optarg, 8 * KiB, GiB);
			break;
		case O_PAGE:
			o->page_size = size_arg("--page-size", optarg, 4 * KiB, MiB);
			if (o->page_size & (o->page_size - 1))
				bad_usage("--page-size: '%s' is not a power of two", optarg);
			break;
		case O_NODE:
			if (cat_parse_uint(optarg, &v, 10) < 0 || v > 4095)
				bad_usage("--node: '%s' is not a NUMA node number", optarg);
			o->node = (int)v;
			break;
		case 'p':
			o->progress = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 's':
			o->size = size_arg("--size", optarg, 0, UINT64_MAX);
			o->have_size = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_NO_URING:
			o->no_uring = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			print_version();
			exit(0);
		case ':':
			bad_usage("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt)
				bad_usage("invalid option -- '%c'", optopt);
			bad_usage("unrecognized option '%s'", argv[optind - 1]);
		}
	}
	if (o->capacity < 2 * o->page_size)
		bad_usage("--buffer must hold at least two pages (page size %" PRIu64 ")",
			  o->page_size);
	o->files = argv + optind;
	o->nfiles = argc - optind;
}

/* ------------------------------------------------------------ progress */

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *hms(double s, char *b, size_t bl)
{
	uint64_t t = s > 0 ? (uint64_t)(s + 0.5) : 0;
	snprintf(b, bl, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, t / 3600, t / 60 % 60, t % 60);
	return b;
}

/* pv's layout: bytes, elapsed, [rate], and with a known size a bar, % and
 * ETA. \r on a terminal so the line updates in place; \n otherwise, so a
 * log file gets one readable line per update. */
static void progress_line(uint64_t bytes, double el, double rate, bool known, uint64_t total,
			  bool tty, bool final)
{
	char b[32], r[32], e[32], eta[48], line[256];
	int n;

	n = snprintf(line, sizeof(line), "%10s %s [%10s/s]", cat_human((double)bytes, b, sizeof(b)),
		     hms(el, e, sizeof(e)), cat_human(rate, r, sizeof(r)));
	if (known && total > 0 && n > 0 && (size_t)n < sizeof(line)) {
		double f = (double)bytes / (double)total;
		char bar[24];
		int fill;

		if (f > 1.0)
			f = 1.0;
		fill = (int)(f * 20.0);
		for (int i = 0; i < 20; i++)
			bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
		bar[20] = '\0';
		if (final)
			snprintf(eta, sizeof(eta), "   ");
		else if (rate > 0)
			snprintf(eta, sizeof(eta), "ETA %s",
				 hms((double)(total - (bytes < total ? bytes : total)) / rate, e,
				     sizeof(e)));
		else
			snprintf(eta, sizeof(eta), "ETA ?");
		snprintf(line + n, sizeof(line) - (size_t)n, " [%s] %3.0f%% %s", bar, f * 100.0, eta);
	} else if (known && n > 0 && (size_t)n < sizeof(line)) {
		snprintf(line + n, sizeof(line) - (size_t)n, " 100%%");
	}
	fprintf(stderr, "%s%s", tty ? "\r" : "", line);
	if (final || !tty)
		fputc('\n', stderr);
	fflush(stderr);
}

/* -------------------------------------------------------------- threads */

static void set_pipe_err(struct pump *pm, int r, const char *where)
{
	pthread_mutex_lock(&pm->mu);
	if (!pm->pipe_err) {
		pm->pipe_err = r;
		pm->pipe_err_where = where;
	}
	pthread_mutex_unlock(&pm->mu);
}

static void thread_done(struct pump *pm)
{
	pthread_mutex_lock(&pm->mu);
	pm->running--;
	pthread_cond_signal(&pm->cv);
	pthread_mutex_unlock(&pm->mu);
}

/* Copy one input into the pipe. Returns false when the output side is gone
 * (or the pipe broke): then no further input is worth opening. */
static bool pump_file(struct pump *pm, struct cat_io *io, int fd, const char *name)
{
	const size_t chunk = 1 * MiB;

	for (;;) {
		struct iovec iov[CAT_IOV];
		int cnt = CAT_IOV;
		ssize_t n = up_reserve(pm->wr, chunk, iov, &cnt);
		ssize_t r;
		int c;

		if (n == -EPIPE)
			return false; /* the writer thread stopped: it says why */
		if (n < 0) {
			set_pipe_err(pm, (int)n, "up_reserve");
			return false;
		}
		r = cat_io_readv(io, fd, iov, cnt);
		if (r <= 0) {
			up_commit(pm->wr, 0); /* drop the reservation */
			if (r < 0) {
				fprintf(stderr, PROG ": %s: %s\n", name, strerror((int)-r));
				pm->input_errors++;
			}
			return true;
		}
		c = up_commit(pm->wr, (size_t)r);
		if (c == -EPIPE)
			return false;
		if (c < 0) {
			set_pipe_err(pm, c, "up_commit");
			return false;
		}
		atomic_fetch_add_explicit(&pm->in_bytes, (uint64_t)r, memory_order_relaxed);
	}
}

static void *reader_thread(void *arg)
{
	struct pump *pm = arg;
	const struct cat_opts *o = pm->o;
	struct cat_io *io = cat_io_open(o->no_uring);
	static char *const stdin_only[] = {"-"};
	char *const *files = o->nfiles ? o->files : stdin_only;
	int nfiles = o->nfiles ? o->nfiles : 1;

	if (!io) {
		set_pipe_err(pm, -ENOMEM, "cat_io_open");
		goto out;
	}
	for (int i = 0; i < nfiles; i++) {
		const char *name = files[i];
		bool is_stdin = strcmp(name, "-") == 0;
		int fd = is_stdin ? STDIN_FILENO : open(name, O_RDONLY | O_CLOEXEC);
		bool more;

		if (fd < 0) {
			fprintf(stderr, PROG ": %s: %s\n", name, strerror(errno));
			pm->input_errors++;
			continue;
		}
		/* Advisory: doubles the kernel's readahead window. */
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		more = pump_file(pm, io, fd, name);
		if (!is_stdin)
			close(fd);
		if (!more)
			break;
	}
out:
	cat_io_close(io);
	up_close(pm->wr); /* the writer thread's EOF */
	pm->wr = NULL;
	thread_done(pm);
	return NULL;
}

static void *writer_thread(void *arg)
{
	struct pump *pm = arg;
	struct cat_io *io = cat_io_open(pm->o->no_uring);

	if (!io) {
		set_pipe_err(pm, -ENOMEM, "cat_io_open");
		goto out;
	}
	snprintf(pm->io_name, sizeof(pm->io_name), "%s", cat_io_name(io));
	for (;;) {
		struct iovec iov[CAT_IOV];
		int cnt = CAT_IOV;
		ssize_t n = up_peek(pm->rd, iov, &cnt);
		ssize_t w;
		int c;

		if (n == 0)
			break; /* every input done and the pipe drained */
		if (n < 0) {
			set_pipe_err(pm, (int)n, "up_peek");
			break;
		}
		w = cat_io_writev(io, STDOUT_FILENO, iov, cnt);
		if (w == 0)
			w = -EIO; /* writev of > 0 bytes returning 0: no progress possible */
		if (w < 0) {
			if (w == -EPIPE && pm->sigpipe_default) {
				/* Die as cat would (see the note at the top). */
				signal(SIGPIPE, SIG_DFL);
				raise(SIGPIPE);
			}
			pm->out_err = (int)w;
			break;
		}
		c = up_consume(pm->rd, (size_t)w);
		if (c < 0) {
			set_pipe_err(pm, c, "up_consume");
			break;
		}
		atomic_fetch_add_explicit(&pm->out_bytes, (uint64_t)w, memory_order_relaxed);
	}
out:
	cat_io_close(io);
	/* Closing the read end makes the reader thread's next reserve fail
	 * with -EPIPE, so it stops opening inputs nobody will see. */
	up_close(pm->rd);
	pm->rd = NULL;
	thread_done(pm);
	return NULL;
}

/* ---------------------------------------------------------------- main */

/* Sum of the input sizes if every input is a regular file, else false. */
static bool known_total(const struct cat_opts *o, uint64_t *total)
{
	uint64_t sum = 0;
	int n = o->nfiles ? o->nfiles : 1;

	for (int i = 0; i < n; i++) {
		const char *name = o->nfiles ? o->files[i] : "-";
		struct stat st;

		if (strcmp(name, "-") == 0) {
			off_t pos;
			if (fstat(STDIN_FILENO, &st) < 0 || !S_ISREG(st.st_mode))
				return false;
			/* stdin may already be partly read by the caller. */
			pos = lseek(STDIN_FILENO, 0, SEEK_CUR);
			sum += (uint64_t)(st.st_size - (pos > 0 && pos <= st.st_size ? pos : 0));
			continue;
		}
		if (stat(name, &st) < 0)
			continue; /* reported when it is opened; counts as 0 */
		if (!S_ISREG(st.st_mode))
			return false;
		sum += (uint64_t)st.st_size;
	}
	*total = sum;
	return true;
}

/*
 * A closed 0, 1 or 2 would be reused by the next open: the pipe's memfd
 * could become "stdout" and the writer thread would overwrite the ring
 * header with the data. Park /dev/null there, opened in the direction that
 * fails (stdout read-only, stdin write-only), so the tool sees EBADF exactly
 * as cat does on the closed descriptor.
 */
static void occupy_std_fds(void)
{
	static const int mode[3] = {O_WRONLY, O_RDONLY, O_RDONLY};

	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int n = open("/dev/null", mode[fd]);
		if (n >= 0 && n != fd) {
			/* A lower fd was also closed and is handled first, so
			 * this cannot happen; be safe anyway. */
			dup2(n, fd);
			close(n);
		}
	}
}

static bool sigpipe_is_default(void)
{
	struct sigaction sa;
	sigset_t cur;

	if (sigaction(SIGPIPE, NULL, &sa) < 0 || sa.sa_handler != SIG_DFL)
		return false;
	if (pthread_sigmask(SIG_BLOCK, NULL, &cur) != 0 || sigismember(&cur, SIGPIPE))
		return false;
	return true;
}

static void print_json(const struct pump *pm, const struct up_stats *st, bool have_st,
		       double secs, int status, size_t cap, size_t page, bool known, uint64_t total)
{
	uint64_t out = atomic_load_explicit(&pm->out_bytes, memory_order_relaxed);

	fprintf(stderr, "{\"tool\":\"" PROG "\",\"version\":\"%s\",\"bytes\":%" PRIu64
		",\"seconds\":%.6f,\"mb_per_s\":%.3f,\"inputs\":%d,\"input_errors\":%d,"
		"\"exit\":%d,\"capacity\":%zu,\"page_size\":%zu,\"file_io\":\"%s\"",
		UP_VERSION_STRING, out, secs, secs > 0 ? (double)out / secs / 1e6 : 0.0,
		pm->o->nfiles ? pm->o->nfiles : 1, pm->input_errors, status, cap, page,
		pm->io_name[0] ? pm->io_name : "none");
	if (known)
		fprintf(stderr, ",\"expected_size\":%" PRIu64, total);
	if (have_st)
		fprintf(stderr, ",\"backend\":\"%s\",\"numa_node\":%d,\"stats\":{\"writes\":%"
			PRIu64 ",\"reads\":%" PRIu64 ",\"waits\":%" PRIu64 ",\"wakes\":%" PRIu64
			",\"syscalls\":%" PRIu64 "}",
			st->backend, st->numa_node, st->writes, st->reads, st->waits, st->wakes,
			st->syscalls);
	fputs("}\n", stderr);
}

int main(int argc, char **argv)
{
	struct cat_opts o;
	struct pump pm;
	struct up_config cfg;
	struct up_pipe *p = NULL;
	struct up_stats st;
	pthread_t rt, wt;
	bool show, tty, known, have_st;
	uint64_t total = 0;
	double t0, secs;
	int r, status;

	occupy_std_fds();
	/* --bench anywhere before "--" selects the other mode; the rest of
	 * the arguments are its own. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--bench") == 0) {
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
			return cat_bench_main(argc - 1, argv);
		}
	}

	parse_args(argc, argv, &o);
	memset(&pm, 0, sizeof(pm));
	pm.o = &o;
	pm.sigpipe_default = sigpipe_is_default();
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&pm.mu, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&pm.cv, &ca);
		pthread_condattr_destroy(&ca);
	}

	up_config_init(&cfg);
	cfg.capacity = (size_t)o.capacity;
	cfg.page_size = (size_t)o.page_size;
	cfg.numa_node = o.node;
	r = up_pipe_create(&cfg, &p);
	if (r == 0)
		r = up_open(p, UP_RD, &pm.rd);
	if (r == 0)
		r = up_open(p, UP_WR, &pm.wr);
	if (r < 0) {
		fprintf(stderr, PROG ": cannot create the pipe (capacity %" PRIu64 ", page %" PRIu64
			", node %d): %s\n", o.capacity, o.page_size, o.node, up_strerror(r));
		return r == -EINVAL ? CAT_EXIT_USAGE : CAT_EXIT_PIPE;
	}

	tty = isatty(STDERR_FILENO) == 1;
	show = !o.quiet && (o.progress || tty);
	known = o.have_size || known_total(&o, &total);
	if (o.have_size)
		total = o.size;

	t0 = mono();
	pm.running = 2;
	if ((r = pthread_create(&rt, NULL, reader_thread, &pm)) != 0 ||
	    (r = pthread_create(&wt, NULL, writer_thread, &pm)) != 0) {
		fprintf(stderr, PROG ": pthread_create: %s\n", strerror(r));
		return CAT_EXIT_PIPE; /* a started thread would block on a dead pipe */
	}

	pthread_mutex_lock(&pm.mu);
	while (pm.running > 0) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		/* pv redraws once a second; half that feels live on a terminal. */
		dl.tv_nsec += 500000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&pm.cv, &pm.mu, &dl) == ETIMEDOUT && show) {
			uint64_t b = atomic_load_explicit(&pm.out_bytes, memory_order_relaxed);
			double el = mono() - t0;
			pthread_mutex_unlock(&pm.mu);
			progress_line(b, el, el > 0 ? (double)b / el : 0.0, known, total, tty, false);
			pthread_mutex_lock(&pm.mu);
		}
	}
	pthread_mutex_unlock(&pm.mu);
	pthread_join(rt, NULL);
	pthread_join(wt, NULL);
	secs = mono() - t0;

	if (show) {
		uint64_t b = atomic_load_explicit(&pm.out_bytes, memory_order_relaxed);
		progress_line(b, secs, secs > 0 ? (double)b / secs : 0.0, known, total, tty, true);
	}

	status = CAT_EXIT_OK;
	if (pm.input_errors)
		status = CAT_EXIT_INPUT;
	if (pm.pipe_err) {
		fprintf(stderr, PROG ": %s: %s\n", pm.pipe_err_where, up_strerror(pm.pipe_err));
		status = CAT_EXIT_PIPE;
	}
	if (pm.out_err) {
		fprintf(stderr, PROG ": write error: %s\n", strerror(-pm.out_err));
		status = CAT_EXIT_OUTPUT;
	}
	have_st = up_stats(p, &st) == 0;
	if (o.json)
		print_json(&pm, &st, have_st, secs, status, up_capacity(p), up_page_size(p), known,
			   total);
	up_pipe_release(p);
	pthread_cond_destroy(&pm.cv);
	pthread_mutex_destroy(&pm.mu);
	return status;
}
