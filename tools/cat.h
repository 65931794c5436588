/* SPDX-License-Identifier: MIT */
/*
 * cat.h - private interfaces shared by the uringpipe-cat sources. Nothing here
 * is installed; the tool sees the library only through uringpipe.h.
 *
 *   cat_main.c     sets up a run: the pipe, the pump, progress, the --json
 *                  summary, exit codes;
 *   cat_cli.c      option parsing, --help and --version;
 *   cat_pump.c     the copy loop: reader thread -> uringpipe -> writer thread;
 *   cat_named.c    --to and --from: one side of the pump each, the pipe
 *                  served at a name or got from it;
 *   cat_io.c       file I/O for the pump: one small io_uring per thread, or
 *                  readv/writev where io_uring is refused or disabled;
 *   cat_progress.c the pv-like progress line;
 *   cat_time.c     the monotonic clock, shared by the pump and --bench;
 *   cat_size.c     size parsing and formatting, shared by the pump and --bench;
 *   cat_bench.c    --bench: uringpipe against kernel pipes; its parts are the
 *                  bench_*.c files, with their own header bench.h;
 *   cat_report.c   --report: the self-contained HTML/SVG page; its parts are
 *                  report_svg.c (charts), report_heat.c (a sweep's heat map)
 *                  and report_html.c (page, table), with their header report.h.
 */
#ifndef UP_TOOLS_CAT_H
#define UP_TOOLS_CAT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define TiB ((uint64_t)1 << 40)

#define CAT_PROG "uringpipe-cat"

/* Exit statuses, documented in --help and uringpipe-cat(1). */
enum {
	CAT_EXIT_OK = 0,
	CAT_EXIT_INPUT = 1,  /* an input could not be opened or read */
	CAT_EXIT_USAGE = 2,  /* bad option, bad size */
	CAT_EXIT_OUTPUT = 3, /* writing stdout failed (or EPIPE with SIGPIPE ignored) */
	CAT_EXIT_PIPE = 4,   /* uringpipe itself failed (create, open, -EPROTO);
			      * --from: nothing listened at NAME in time;
			      * --to: NAME is taken */
};

/* ------------------------------------------------------------- cat_cli.c */

struct cat_opts {
	uint64_t capacity, page_size, size;
	int node;
	bool have_size, quiet, progress, json, no_uring;
	const char *to;   /* --to NAME: serve the pipe there, no writer thread */
	const char *from; /* --from NAME: read the pipe from there, no reader thread */
	unsigned mode;    /* --mode, the listener's permission bits (0600) */
	int wait_ms;      /* --wait in ms: -1 for ever (default), 0 a single try */
	int tcp_timeout_ms; /* --tcp-timeout in ms (cat_tcp.c) */
	char **files;
	int nfiles;
	/* pv's options, with pv's meanings (uringpipe-cat(1)). */
	uint64_t rate_limit; /* -L: bytes per second, 0 for none */
	double interval;     /* -i: seconds between updates (0.5) */
	const char *name;    /* -N: the meter's prefix, or NULL */
	unsigned fields;     /* -t -e -r -a -b -p: CAT_F_* bits; 0 for the default set */
	bool numeric;        /* -n: numbers, one line per update (forces the meter) */
	bool wait_first;     /* -W: nothing shown and no timer until the first byte */
	bool cursor;         /* -c: several meters on one terminal, a row each */
	bool lines;          /* -l: count lines, not bytes (the count, rate and -s) */
};

/*
 * cat_parse_args - the pump's options into *o. Exits with CAT_EXIT_USAGE and
 * a message on a bad one, and with 0 after --help or --version.
 */
void cat_parse_args(int argc, char **argv, struct cat_opts *o);
bool cat_opt_takes_value(const char *arg);

/* ------------------------------------------------------------ cat_pump.c */

struct up_end;

/*
 * The rate limit (-L): a token bucket that fills at @rate bytes per second,
 * starts empty, holds half a second's worth, and lends a tenth of a
 * second's worth (the quantum, at least a byte) that the next call waits to
 * pay back. Any thread that
 * moves data can own one: the pump's reader thread for the plain copy and
 * --to, its writer thread for --from.
 */
struct cat_rate {
	double rate;   /* bytes per second; 0: no limit */
	double burst;  /* the bucket's size, bytes */
	double quantum; /* the most lent at once, bytes */
	double tokens; /* bytes that may go now */
	double last;   /* cat_mono() of the last refill */
};

void cat_rate_init(struct cat_rate *rl, uint64_t rate);
/* cat_rate_limit - how much of @want may go now: sleeps until the last
 * moves' debt is paid, then returns what the bucket holds or else a quantum,
 * @want at most; @want itself when there
 * is no limit. Charge what was then moved with cat_rate_used(). */
size_t cat_rate_limit(struct cat_rate *rl, size_t want);
void cat_rate_used(struct cat_rate *rl, size_t n);

/*
 * Which threads a pump runs: both (the plain copy), or one side of it:
 * --to has only the reader thread (inputs -> pipe), --from only the writer
 * thread (pipe -> stdout); the other side is another process.
 */
enum cat_side { CAT_BOTH, CAT_TO, CAT_FROM };

struct cat_pump {
	const struct cat_opts *o;
	enum cat_side side;
	struct up_end *rd, *wr;
	bool sigpipe_default; /* SIGPIPE was SIG_DFL and unblocked at start */
	/* Relaxed counters: read by the progress loop for display only. */
	_Atomic uint64_t in_bytes, out_bytes;
	int input_errors;  /* reader thread only, read after join */
	/* Reader thread only: the pipe's page size, and the bytes of the last
	 * page it published, 0 when that page is full (cat_pump.c, pump_want()). */
	size_t page_size, last_fill;
	bool peer_gone;    /* reader thread only (CAT_TO): every reader left, -EPIPE */
	double first_out;  /* writer thread only: cat_mono() after the first byte
			    * reached stdout, 0 before */
	int out_err;       /* writer thread only, read after join: -errno */
	int pipe_err;      /* either thread, first uringpipe failure */
	const char *pipe_err_where;
	char io_name[16];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running; /* threads still running, under mu */
	pthread_t rt, wt;
	/* -l: newlines moved, counted by the thread whose bytes the meter
	 * shows (cat_main.c); relaxed, for display only. */
	_Atomic uint64_t lines;
	struct cat_rate rl; /* -L: the rate-limited thread's only */
	/* stdout at the start, for "input file is output file" (cat's rule) */
	bool out_isreg;
	uint64_t out_dev, out_ino;
};

/* cat_pump_init - an idle pump for @o; also ignores SIGPIPE from here on,
 * remembering whether it was at its default (see cat_pump.c). The caller
 * opens the ends of its side before cat_pump_start(): pm->rd and pm->wr on
 * one pipe (CAT_BOTH), pm->wr (CAT_TO) or pm->rd (CAT_FROM). With CAT_TO
 * the reader thread leaves pm->wr open when the inputs are done: the caller
 * decides when the stream ends (cat_to_linger) and closes it. */
void cat_pump_init(struct cat_pump *pm, const struct cat_opts *o);
/* cat_pump_start - starts the threads of its side. 0, or pthread_create's
 * error. */
int cat_pump_start(struct cat_pump *pm);
/* cat_pump_wait - until both threads are done, then joins them. Calls @tick
 * (unless NULL) every half second meanwhile, without the pump's lock held. */
void cat_pump_wait(struct cat_pump *pm, void (*tick)(void *arg), void *arg);
void cat_pump_destroy(struct cat_pump *pm);

/* ----------------------------------------------------------- cat_named.c */

struct up_pipe;
struct up_listener;

/* What cat_main.c's --json adds for --to and --from; seconds from @t0, the
 * start of the process. */
struct cat_named_info {
	double t0;
	double ready;        /* listening (--to) or connected (--from) */
	double last_reader;  /* --to: no reader left, the listener closed */
	bool reader_came;    /* --to: a reader had the pipe open */
};

/*
 * cat_to_listen - serve @p, whose writer end pm->wr is, at o->to with
 * o->mode. Returns CAT_EXIT_OK and
 * *l, or says why not (a name in use, a bad directory...) and returns the
 * exit status. Also sets up the removal of a path name on SIGINT, SIGTERM
 * and SIGHUP, until cat_to_close().
 */
int cat_to_listen(const struct cat_opts *o, struct cat_pump *pm, struct up_pipe *p,
		  struct up_listener **l);
/*
 * cat_to_linger - after the inputs: hold pm->wr open until a reader has
 * the pipe open (as a FIFO writer's open(2) waits for one), close it (the
 * readers' end of stream), then keep serving @l until no reader is left.
 * Returns at once, closing pm->wr, if the pump failed or the readers left.
 */
void cat_to_linger(struct cat_pump *pm, struct up_pipe *p, struct cat_named_info *ni);
/* cat_to_close - close @l (the name goes away) and undo cat_to_listen's
 * signal handlers. NULL is accepted. */
void cat_to_close(struct up_listener *l);
/*
 * cat_from_connect - get the pipe served at o->from, waiting o->wait_ms for
 * it, and open pm->rd on it. Returns CAT_EXIT_OK and *p, or says why not
 * and returns the exit status (CAT_EXIT_PIPE after --wait ran out).
 */
int cat_from_connect(const struct cat_opts *o, struct cat_pump *pm, struct up_pipe **p);

/* ------------------------------------------------------------- cat_tcp.c */

/* Whether --to or --from names "tcp:..."; cat_tcp_main() runs that side
 * over TCP (the library's bridge) and returns the exit status. */
bool cat_tcp_wanted(const struct cat_opts *o);
int cat_tcp_main(const struct cat_opts *o);

/* -------------------------------------------------------- cat_progress.c */

/* The fields of the meter, pv's -b -t -r -a -p -e. */
enum {
	CAT_F_BYTES = 1 << 0, /* -b: the count (bytes, or lines with -l) */
	CAT_F_TIMER = 1 << 1, /* -t: elapsed time */
	CAT_F_RATE = 1 << 2,  /* -r: rate over the last interval */
	CAT_F_AVG = 1 << 3,   /* -a: average rate since the start */
	CAT_F_BAR = 1 << 4,   /* -p: bar and percentage (a moving <=> if the size is unknown) */
	CAT_F_ETA = 1 << 5,   /* -e: time left, at the average rate (size known) */
	/* pv's default set (-pterb), with -a beside the current rate. */
	CAT_F_DEFAULT = CAT_F_BYTES | CAT_F_TIMER | CAT_F_RATE | CAT_F_AVG | CAT_F_BAR | CAT_F_ETA,
};

#define CAT_METER_MAX_WIDTH 1024 /* columns; a wider terminal gets this many */

struct cat_meter {
	const struct cat_opts *o;
	unsigned fields;
	bool tty;          /* stderr is a terminal (not with -n): update in place */
	bool known;        /* @total is the expected count */
	bool started;      /* false with -W until the first byte */
	bool cursor_tried; /* -c: the row was asked for (once) */
	uint64_t total;
	double t0;         /* cat_mono() at the start (with -W: the first byte) */
	double last_t;     /* the previous update, for the current rate */
	uint64_t last_n;
	int row;           /* -c: this meter's terminal row (1-based), 0 if none */
	int lock_fd;       /* -c: the terminal's lock file, -1 if none */
	uint64_t scrolls;  /* -c: its size when the row was taken */
};

/* cat_meter_init - a meter for @o on stderr, counting from @t0. */
void cat_meter_init(struct cat_meter *m, const struct cat_opts *o, bool tty, bool known,
		    uint64_t total, double t0);
/* cat_meter_update - one update at @now with @n moved (bytes, lines with
 * -l); @final ends the meter's line (the rate shown is then the average). */
void cat_meter_update(struct cat_meter *m, uint64_t n, double now, bool final);
void cat_meter_done(struct cat_meter *m);

/* ------------------------------------------------------------ cat_main.c */

/* The meter of a pump's run, as the local copy draws it; cat_tcp.c too. */
struct cat_progress {
	const struct cat_pump *pm;
	struct cat_meter m;
	bool show;
};
void cat_progress_init(struct cat_progress *pg, const struct cat_opts *o,
		       const struct cat_pump *pm);
/* For cat_pump_wait(): one update (@arg is the struct cat_progress). */
void cat_progress_tick(void *arg);
void cat_progress_end(struct cat_progress *pg);

/* ------------------------------------------------------------ cat_time.c */

/* Seconds on CLOCK_MONOTONIC. */
double cat_mono(void);
/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines. */
void cat_cond_init_mono(pthread_cond_t *cv);

/* ------------------------------------------------------------ cat_size.c */

/*
 * cat_parse_size - "123", "4K"/"4KiB" (binary: K M G T), "4KB" (decimal:
 * KB MB GB TB), lower case accepted. Returns 0 and *out, or -EINVAL for
 * anything else (empty, sign, trailing junk) and -ERANGE on overflow.
 */
int cat_parse_size(const char *s, uint64_t *out);

/* cat_parse_uint - digits in @base (0: C prefixes) only. 0 or -EINVAL/-ERANGE. */
int cat_parse_uint(const char *s, uint64_t *out, int base);

/* "4K", "1M", "100": exact short form (table, labels). */
const char *cat_size_label(uint64_t v, char *b, size_t bl);
/* "4 KiB", "100 B": exact long form (up to TiB). */
const char *cat_bytes_label(uint64_t v, char *b, size_t bl);
/* "1.50 GiB": rounded human form for progress lines. */
const char *cat_human(double v, char *b, size_t bl);

/* ------------------------------------------------------------ cat_io.c */

struct cat_io;

/*
 * cat_io_open - per-thread I/O context. Uses io_uring unless @no_uring, or
 * UPCAT_NO_URING=1 / UP_FORCE_FUTEX=1 is set, or io_uring_queue_init fails
 * (seccomp, io_uring_disabled): then readv/writev. Returns NULL on ENOMEM.
 */
struct cat_io *cat_io_open(bool no_uring);
void cat_io_close(struct cat_io *io);
/* "io_uring" or "readv/writev". */
const char *cat_io_name(const struct cat_io *io);
/* Like readv/writev at the current file position: bytes, 0 (EOF), -errno.
 * EINTR is retried inside. */
ssize_t cat_io_readv(struct cat_io *io, int fd, const struct iovec *iov, int cnt);
ssize_t cat_io_writev(struct cat_io *io, int fd, const struct iovec *iov, int cnt);

/* ---------------------------------------------------------- cat_bench.c */

/* The --bench mode; argv[0] is the program name, "--bench" already removed.
 * Returns the exit status. */
int cat_bench_main(int argc, char **argv);

/* --------------------------------------------------------- cat_report.c */

/*
 * The --report page (cat_report.c, report_svg.c, report_html.c). It knows
 * transports by their --json key, not by number: a transport the bench adds
 * before CAT_T_COUNT appears in the report once its cells are measured, with
 * the name and colour report_transport() has for its key. The last four
 * transports are kernel ones that --vs adds; a cell of one that did not run
 * is not measured.
 */
enum {
	CAT_T_KERNEL = 0,     /* pipe2(), read/write */
	CAT_T_URING = 1,      /* up_write/up_read */
	CAT_T_URING_ZC = 2,   /* up_reserve/up_commit, up_peek/up_consume */
	CAT_T_PIPE_URING = 3, /* pipe2(), io_uring READ/WRITE */
	CAT_T_VMSPLICE = 4,   /* pipe2(), the writer vmsplice()s */
	CAT_T_UNIX = 5,       /* AF_UNIX stream socketpair */
	CAT_T_TCP = 6,        /* TCP over 127.0.0.1 */
	CAT_T_COUNT = 7
};

/* One transport at one write size in one configuration. The figures are the
 * ones --json prints for it (same medians), so a test can hold the two
 * against each other. */
struct cat_report_cell {
	bool measured;       /* false: not run (not in --vs), nothing drawn */
	unsigned nruns;
	const double *mbps;  /* every timed run, MB/s (MB = 10^6 B) */
	double mbps_median;
	double p50_us, p99_us; /* per-write latency, medians over the runs */
	double sys_gib;      /* system calls per GiB, median over the runs */
};

struct cat_report_point {
	uint64_t size;
	struct cat_report_cell c[CAT_T_COUNT];
};

struct cat_report_series {
	unsigned writers, readers;
	bool pinned;
	int wcpu, rcpu;      /* when pinned */
	const struct cat_report_point *pts;
	unsigned npts;
};

/* What the page says about where and how it was measured. Plain text,
 * escaped by the writer; NULL or "" leaves a field out. */
struct cat_report_info {
	const char *title;
	const char *key[CAT_T_COUNT]; /* --json keys: "kernel", "uringpipe", ... */
	const char *cpu, *kernel, *backend, *pinning, *date, *command;
	unsigned cores;
	const char *setup; /* capacity, version, repeat... one line */
	unsigned repeat;
};

/*
 * cat_write_report - write the report to @path: an SVG document if the name
 * ends in .svg, else an XHTML page with a header, the SVG inline and the
 * numbers as a table. No scripts, no external fetches. Returns 0 or -errno.
 */
int cat_write_report(const char *path, const struct cat_report_info *in,
		     const struct cat_report_series *s, unsigned ns);

/*
 * cat_report_check - can @path be written? Opens an existing file for
 * writing without truncating it, or creates and removes it. 0 or -errno;
 * the file is as it was either way.
 */
int cat_report_check(const char *path);

#endif /* UP_TOOLS_CAT_H */
