/* SPDX-License-Identifier: MIT */
/*
 * cat_main.c - uringpipe-cat: cat(1) with a uringpipe in the middle, pv-like
 * progress, and (--bench) the comparison with kernel pipes.
 *
 * This file sets up a run and reports on it: it creates the pipe (or, with
 * --to, serves it at a name; with --from, gets it from one: cat_named.c),
 * starts the pump (cat_pump.c), draws progress while it waits, then prints
 * the --json summary and picks the exit status. The options are parsed in
 * cat_cli.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

#include "cat.h"

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

/* The bytes the run is about: what went into the pipe with --to, else what
 * came out of it to stdout. */
static const _Atomic uint64_t *moved_bytes(const struct cat_pump *pm)
{
	return pm->side == CAT_TO ? &pm->in_bytes : &pm->out_bytes;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* --to and --from: the name, the role and when things happened, in seconds
 * from the start of the process; started_at (CLOCK_REALTIME) lets two
 * processes' figures be put on one time line. */
static void print_json_named(const struct cat_pump *pm, const struct cat_named_info *ni,
			     double started_at)
{
	const struct cat_opts *o = pm->o;

	fprintf(stderr, ",\"role\":\"%s\",\"name\":", pm->side == CAT_TO ? "to" : "from");
	json_str(stderr, pm->side == CAT_TO ? o->to : o->from);
	fprintf(stderr, ",\"started_at\":%.6f,\"%s\":%.6f", started_at,
		pm->side == CAT_TO ? "listening_seconds" : "connected_seconds", ni->ready - ni->t0);
	if (pm->side == CAT_FROM) {
		fprintf(stderr, ",\"wait_ms\":%d,\"first_byte_seconds\":", o->wait_ms);
		if (pm->first_out > 0)
			fprintf(stderr, "%.6f", pm->first_out - ni->t0);
		else
			fputs("null", stderr);
	} else {
		fprintf(stderr, ",\"mode\":\"%04o\",\"reader_came\":%s,\"done_seconds\":%.6f",
			o->mode, ni->reader_came ? "true" : "false",
			(ni->last_reader > 0 ? ni->last_reader : cat_mono()) - ni->t0);
	}
}

static void print_json(const struct cat_pump *pm, const struct up_stats *st, bool have_st,
		       double secs, int status, size_t cap, size_t page, bool known, uint64_t total,
		       const struct cat_named_info *ni, double started_at)
{
	uint64_t out = atomic_load_explicit(moved_bytes(pm), memory_order_relaxed);
	int inputs = pm->side == CAT_FROM ? 0 : pm->o->nfiles ? pm->o->nfiles : 1;

	fprintf(stderr, "{\"tool\":\"" CAT_PROG "\",\"version\":\"%s\",\"bytes\":%" PRIu64
		",\"seconds\":%.6f,\"mb_per_s\":%.3f,\"inputs\":%d,\"input_errors\":%d,"
		"\"exit\":%d,\"capacity\":%zu,\"page_size\":%zu,\"file_io\":\"%s\"",
		UP_VERSION_STRING, out, secs, secs > 0 ? (double)out / secs / 1e6 : 0.0,
		inputs, pm->input_errors, status, cap, page,
		pm->io_name[0] ? pm->io_name : "none");
	if (pm->side != CAT_BOTH)
		print_json_named(pm, ni, started_at);
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

/* Creates the pipe and opens the ends of the pump's side (both, or the
 * writer end for --to). Returns CAT_EXIT_OK, or says why not and returns
 * the exit status. */
static int open_pipe(const struct cat_opts *o, struct cat_pump *pm, struct up_pipe **p)
{
	struct up_config cfg;
	int r;

	up_config_init(&cfg);
	cfg.capacity = (size_t)o->capacity;
	cfg.page_size = (size_t)o->page_size;
	cfg.numa_node = o->node;
	r = up_pipe_create(&cfg, p);
	if (r == 0 && pm->side == CAT_BOTH)
		r = up_open(*p, UP_RD, &pm->rd);
	if (r == 0)
		r = up_open(*p, UP_WR, &pm->wr);
	if (r < 0) {
		fprintf(stderr, CAT_PROG ": cannot create the pipe (capacity %" PRIu64 ", page %"
			PRIu64 ", node %d): %s\n", o->capacity, o->page_size, o->node,
			up_strerror(r));
		return r == -EINVAL ? CAT_EXIT_USAGE : CAT_EXIT_PIPE;
	}
	return CAT_EXIT_OK;
}

/* The meter's count: bytes moved, or with -l the newlines among them. */
static uint64_t meter_count(const struct cat_pump *pm)
{
	/* relaxed: display only; the final count is read after the join */
	return pm->o->lines ? atomic_load_explicit(&pm->lines, memory_order_relaxed)
			    : atomic_load_explicit(moved_bytes(pm), memory_order_relaxed);
}

/* Whether and how the meter is drawn: on stderr only, when it is a terminal
 * or the meter is forced (-p, -f, -n); never with -q. The expected count is
 * -s, else (bytes only) the sum of the inputs' sizes. */
void cat_progress_init(struct cat_progress *pg, const struct cat_opts *o, const struct cat_pump *pm)
{
	bool tty = isatty(STDERR_FILENO) == 1, known;
	uint64_t total = 0;

	memset(pg, 0, sizeof(*pg));
	pg->pm = pm;
	pg->show = !o->quiet && (o->progress || o->numeric || tty);
	known = o->have_size || (!o->lines && pm->side != CAT_FROM && known_total(o, &total));
	if (o->have_size)
		total = o->size;
	cat_meter_init(&pg->m, o, tty, known, total, cat_mono());
}

void cat_progress_tick(void *arg)
{
	struct cat_progress *pg = arg;

	cat_meter_update(&pg->m, meter_count(pg->pm), cat_mono(), false);
}

void cat_progress_end(struct cat_progress *pg)
{
	if (pg->show)
		cat_meter_update(&pg->m, meter_count(pg->pm), cat_mono(), true);
	cat_meter_done(&pg->m);
}

/* Reports what went wrong and returns the exit status: a write error
 * outranks a pipe failure, which outranks an unreadable input. */
static int run_status(const struct cat_pump *pm)
{
	int status = CAT_EXIT_OK;

	if (pm->input_errors)
		status = CAT_EXIT_INPUT;
	if (pm->pipe_err) {
		fprintf(stderr, CAT_PROG ": %s: %s\n", pm->pipe_err_where, up_strerror(pm->pipe_err));
		status = CAT_EXIT_PIPE;
	}
	if (pm->out_err) {
		fprintf(stderr, CAT_PROG ": write error: %s\n", strerror(-pm->out_err));
		status = CAT_EXIT_OUTPUT;
	}
	if (pm->peer_gone) {
		/* --to: what the plain copy does when stdout's reader goes. */
		fprintf(stderr, CAT_PROG ": --to %s: write error: %s (every reader left)\n",
			pm->o->to, strerror(EPIPE));
		status = CAT_EXIT_OUTPUT;
	}
	return status;
}

/* Sets up the side of the pump that the options ask for: the pipe and both
 * ends; or the pipe, its writer end and the listener (--to); or the pipe
 * from the name and a reader end (--from). */
static int setup(const struct cat_opts *o, struct cat_pump *pm, struct up_pipe **p,
		 struct up_listener **l, struct cat_named_info *ni)
{
	int status;

	if (pm->side == CAT_FROM)
		status = cat_from_connect(o, pm, p);
	else
		status = open_pipe(o, pm, p);
	/* --to: stamped as it starts to listen, since a --from can connect
	 * from the listen(2) on, before this thread is back from it; so a
	 * --from's connected time is never before it on one clock. */
	ni->ready = cat_mono();
	if (status == CAT_EXIT_OK && pm->side == CAT_TO)
		status = cat_to_listen(o, pm, *p, l);
	else if (status == CAT_EXIT_OK)
		ni->ready = cat_mono();
	return status;
}

int main(int argc, char **argv)
{
	struct cat_opts o;
	struct cat_pump pm;
	struct up_pipe *p = NULL;
	struct up_listener *l = NULL;
	struct cat_named_info ni = {.t0 = cat_mono()};
	struct up_stats st;
	struct cat_progress pg;
	struct timespec rt;
	bool have_st;
	double t0, secs;
	int r, status;

	clock_gettime(CLOCK_REALTIME, &rt);
	occupy_std_fds();
	/* --bench anywhere before "--" selects the other mode; the rest of
	 * the arguments are its own. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--bench") == 0) {
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
			return cat_bench_main(argc - 1, argv);
		}
		if (cat_opt_takes_value(argv[i]))
			i++; /* its value, whatever it says ("-N --bench") */
	}

	cat_parse_args(argc, argv, &o);
	if (cat_tcp_wanted(&o)) /* --to/--from tcp:...: cat_tcp.c */
		return cat_tcp_main(&o);
	cat_pump_init(&pm, &o);
	status = setup(&o, &pm, &p, &l, &ni);
	if (status != CAT_EXIT_OK)
		return status;

	cat_progress_init(&pg, &o, &pm);
	t0 = cat_mono();
	if ((r = cat_pump_start(&pm)) != 0) {
		fprintf(stderr, CAT_PROG ": pthread_create: %s\n", strerror(r));
		cat_to_close(l);
		return CAT_EXIT_PIPE; /* a started thread would block on a dead pipe */
	}
	cat_pump_wait(&pm, pg.show ? cat_progress_tick : NULL, &pg);
	secs = cat_mono() - t0;
	cat_progress_end(&pg);
	if (pm.side == CAT_TO)
		cat_to_linger(&pm, p, &ni);
	if (pm.peer_gone) {
		/* --to without a reader left: as the plain copy without one
		 * on stdout, and the name removed first. */
		cat_to_close(l);
		l = NULL;
		if (pm.sigpipe_default) {
			signal(SIGPIPE, SIG_DFL);
			raise(SIGPIPE);
		}
	}

	status = run_status(&pm);
	have_st = up_stats(p, &st) == 0;
	if (o.json)
		print_json(&pm, &st, have_st, secs, status, up_capacity(p), up_page_size(p),
			   pg.m.known, pg.m.total, &ni, (double)rt.tv_sec + (double)rt.tv_nsec / 1e9);
	cat_to_close(l);
	up_pipe_release(p);
	cat_pump_destroy(&pm);
	return status;
}
