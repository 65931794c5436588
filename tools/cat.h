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
 *   cat_report.c   --report: the self-contained HTML/SVG chart.
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
	char **files;
	int nfiles;
};

/*
 * cat_parse_args - the pump's options into *o. Exits with CAT_EXIT_USAGE and
 * a message on a bad one, and with 0 after --help or --version.
 */
void cat_parse_args(int argc, char **argv, struct cat_opts *o);

/* ------------------------------------------------------------ cat_pump.c */

struct up_end;

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

/* One progress line on stderr: @el seconds elapsed, @rate bytes/s; @known
 * adds a bar, a percentage and an ETA against @total. @final ends the line. */
void cat_progress_line(uint64_t bytes, double el, double rate, bool known, uint64_t total,
		       bool tty, bool final);

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

enum { CAT_T_KERNEL = 0, CAT_T_URING = 1, CAT_T_URING_ZC = 2, CAT_T_COUNT = 3 };

struct cat_report_point {
	uint64_t size;
	double mbps[CAT_T_COUNT]; /* medians, MB = 10^6 B */
};

struct cat_report_series {
	unsigned writers, readers;
	const struct cat_report_point *pts;
	unsigned npts;
};

/*
 * cat_write_report - write the chart to @path: an SVG document if the name
 * ends in .svg, else an XHTML page with the SVG inline and a table. No
 * scripts, no external fetches. @title is plain text (escaped here).
 * Returns 0 or -errno.
 */
int cat_write_report(const char *path, const char *title, const char *subtitle,
		     const struct cat_report_series *s, unsigned ns);

#endif /* UP_TOOLS_CAT_H */
