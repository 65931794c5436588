/* SPDX-License-Identifier: MIT */
/*
 * cat_pump.c - the copy loop of uringpipe-cat.
 *
 * A reader thread reads the inputs straight into pipe pages (up_reserve ->
 * readv into the spans -> up_commit), a writer thread writes stdout straight
 * from them (up_peek -> writev of the spans -> up_consume). Every byte is
 * copied twice by the kernel (file -> page, page -> stdout) and never by us;
 * `cat f | cat` copies four times.
 *
 * The caller only waits: cat_pump_wait() sleeps on a condition variable with
 * a timeout, so a run without progress to draw costs no wakeups.
 *
 * --to and --from run one thread each (enum cat_side): the pipe's other
 * side is another process that met us by name (cat_named.c).
 *
 * SIGPIPE: a library must not raise it, and io_uring may perform a write on
 * a kernel worker thread, where who gets the signal is not obvious. So the
 * pump ignores SIGPIPE for the run and turns -EPIPE from stdout back into
 * what cat would have done: if SIGPIPE was at its default disposition (and
 * not blocked) when we started, restore the default and raise it, so the
 * shell sees 128+13 = 141 and prints nothing; if the caller had ignored or
 * blocked it, cat would get EPIPE and report a write error, and so do we
 * (exit 3).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

#include "cat.h"

#define CAT_IOV 64 /* spans per readv/writev: 64 pages of 64 KiB = 4 MiB */

/*
 * The token bucket of -L, paid afterwards: a move may take up to a quantum
 * (a tenth of a second's worth) on credit, and the next call first waits
 * until the debt is paid. So N bytes at rate R take N/R seconds, the wait
 * for the last bytes' debt being the one before the read that finds the
 * end (a bucket paid in advance made that read wait for tokens it did not
 * use: 2 MiB at 1M took 2.12 s). The bucket holds half a second: the time
 * a thread spends between two calls (its read, its write, descheduled)
 * refills it and is not lost to the cap, while a consumer that stalled
 * for longer gets half a second's worth at once afterwards, not the whole
 * stall: pv's limit does not make up for lost time either.
 */
void cat_rate_init(struct cat_rate *rl, uint64_t rate)
{
	memset(rl, 0, sizeof(*rl));
	rl->rate = (double)rate;
	rl->quantum = rl->rate / 10.0 < 1.0 ? 1.0 : rl->rate / 10.0;
	rl->burst = 5.0 * rl->quantum;
	rl->last = cat_mono();
}

static void rate_refill(struct cat_rate *rl, double now)
{
	rl->tokens += (now - rl->last) * rl->rate;
	if (rl->tokens > rl->burst)
		rl->tokens = rl->burst;
	rl->last = now;
}

size_t cat_rate_limit(struct cat_rate *rl, size_t want)
{
	double may;

	if (rl->rate <= 0 || want == 0)
		return want;
	rate_refill(rl, cat_mono());
	while (rl->tokens < 0) {
		double s = -rl->tokens / rl->rate;
		struct timespec ts = {.tv_sec = (time_t)s,
				      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) + 1};

		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		/* Relative: a signal (a stop and continue) only shortens the
		 * sleep, and the loop tops the bucket up and goes again. */
		nanosleep(&ts, NULL);
		rate_refill(rl, cat_mono());
	}
	/* What the bucket holds, or a quantum on credit; never less than a
	 * byte, so that every call makes progress. */
	may = rl->tokens > rl->quantum ? rl->tokens : rl->quantum;
	return may < (double)want ? (size_t)may : want;
}

void cat_rate_used(struct cat_rate *rl, size_t n)
{
	if (rl->rate > 0)
		rl->tokens -= (double)n;
}

/* The newlines in the first @n bytes of @iov (-l). */
static uint64_t count_lines(const struct iovec *iov, int cnt, size_t n)
{
	uint64_t lines = 0;

	for (int i = 0; i < cnt && n > 0; i++) {
		const char *p = iov[i].iov_base;
		size_t len = iov[i].iov_len < n ? iov[i].iov_len : n;
		const char *end = p + len;

		n -= len;
		while ((p = memchr(p, '\n', (size_t)(end - p)))) {
			lines++;
			p++;
		}
	}
	return lines;
}

/* Cuts @iov down to @max bytes; returns the spans left. */
static int iov_trim(struct iovec *iov, int cnt, size_t max)
{
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len >= max) {
			iov[i].iov_len = max;
			return i + 1;
		}
		max -= iov[i].iov_len;
	}
	return cnt;
}

static void set_pipe_err(struct cat_pump *pm, int r, const char *where)
{
	pthread_mutex_lock(&pm->mu);
	if (!pm->pipe_err) {
		pm->pipe_err = r;
		pm->pipe_err_where = where;
	}
	pthread_mutex_unlock(&pm->mu);
}

static void thread_done(struct cat_pump *pm)
{
	pthread_mutex_lock(&pm->mu);
	pm->running--;
	pthread_cond_signal(&pm->cv);
	pthread_mutex_unlock(&pm->mu);
}

/* -EPIPE from the writer end: with both threads the writer thread stopped
 * and says why; with --to every reader of the name left, which is ours to
 * report. */
static void write_end_gone(struct cat_pump *pm)
{
	if (pm->side == CAT_TO)
		pm->peer_gone = true;
}

/*
 * How much to reserve for the next read. A read from a kernel pipe or a
 * socket returns what is there (64 KiB at most from a pipe), often less than
 * a page: committed on its own it would be a slot of its own, and a ring of
 * 1 MiB pages would hold 64 KiB per slot, a sixteenth of its capacity. So
 * while the last page published has room (pm->last_fill bytes of it used),
 * the next read goes into that room: a reservation smaller than a page goes
 * at the end of the last page (up_reserve(3)), and the lone writer's always
 * does. A full page (last_fill 0) takes @chunk, whole pages.
 *
 * The merge reservation holds the writers' lock until its commit, across a
 * read that may block. Only another writer would wait for it, and the pump
 * is its pipe's only writer: the plain copy's pipe is private, and
 * uringpipe-cat --from opens reader ends only. A program that opens a
 * writer end on a --to pipe shares the lock with a reader of slow input.
 */
static size_t pump_want(const struct cat_pump *pm, size_t chunk)
{
	return pm->last_fill ? pm->page_size - pm->last_fill : chunk;
}

/* Copy one input into the pipe. Returns false when the output side is gone
 * (or the pipe broke): then no further input is worth opening. */
static bool pump_file(struct cat_pump *pm, struct cat_io *io, int fd, const char *name)
{
	const size_t chunk = 1 * MiB;

	for (;;) {
		struct iovec iov[CAT_IOV];
		int cnt = CAT_IOV;
		/* -L: the reservation is what the bucket allows, so a read
		 * never takes more than may go. */
		size_t want = cat_rate_limit(&pm->rl, pump_want(pm, chunk));
		ssize_t n = up_reserve(pm->wr, want, iov, &cnt);
		ssize_t r;
		int c;

		if (n == -EPIPE) {
			write_end_gone(pm);
			return false;
		}
		if (n < 0) {
			set_pipe_err(pm, (int)n, "up_reserve");
			return false;
		}
		r = cat_io_readv(io, fd, iov, cnt);
		if (r <= 0) {
			up_commit(pm->wr, 0); /* drop the reservation */
			if (r < 0) {
				fprintf(stderr, CAT_PROG ": %s: %s\n", name, strerror((int)-r));
				pm->input_errors++;
			}
			return true;
		}
		cat_rate_used(&pm->rl, (size_t)r);
		if (pm->o->lines && pm->side == CAT_TO)
			/* relaxed: a count for the meter only */
			atomic_fetch_add_explicit(&pm->lines, count_lines(iov, cnt, (size_t)r),
						  memory_order_relaxed);
		c = up_commit(pm->wr, (size_t)r);
		if (c == -EPIPE) {
			write_end_gone(pm);
			return false;
		}
		if (c < 0) {
			set_pipe_err(pm, c, "up_commit");
			return false;
		}
		/* A merge reservation started at last_fill and ends at most at
		 * the page's end; one of whole pages started at a page's start.
		 * Should another writer have published meanwhile, last_fill is
		 * wrong and the next read merely fills less than a page. */
		pm->last_fill = (pm->last_fill + (size_t)r) & (pm->page_size - 1);
		atomic_fetch_add_explicit(&pm->in_bytes, (uint64_t)r, memory_order_relaxed);
	}
}

/*
 * cat's rule: a regular file that is also stdout, read from a position
 * before its end, is not copied: `cat f >> f` would feed itself until the
 * disk is full. An empty input (or one already at its end) is harmless.
 */
static bool input_is_output(const struct cat_pump *pm, int fd, const char *name)
{
	struct stat st;

	if (!pm->out_isreg || fstat(fd, &st) < 0 || (uint64_t)st.st_dev != pm->out_dev ||
	    (uint64_t)st.st_ino != pm->out_ino)
		return false;
	if (lseek(fd, 0, SEEK_CUR) >= st.st_size)
		return false;
	fprintf(stderr, CAT_PROG ": %s: input file is output file\n", name);
	return true;
}

static void *reader_thread(void *arg)
{
	struct cat_pump *pm = arg;
	const struct cat_opts *o = pm->o;
	struct cat_io *io = cat_io_open(o->no_uring);
	static char *const stdin_only[] = {"-"};
	char *const *files = o->nfiles ? o->files : stdin_only;
	int nfiles = o->nfiles ? o->nfiles : 1;

	if (!io) {
		set_pipe_err(pm, -ENOMEM, "cat_io_open");
		goto out;
	}
	pm->page_size = up_page_size(up_end_pipe(pm->wr));
	pm->last_fill = 0; /* the new ring's last slot looks full (no merge into it) */
	if (pm->side == CAT_TO) /* no writer thread to say it */
		snprintf(pm->io_name, sizeof(pm->io_name), "%s", cat_io_name(io));
	for (int i = 0; i < nfiles; i++) {
		const char *name = files[i];
		bool is_stdin = strcmp(name, "-") == 0;
		int fd = is_stdin ? STDIN_FILENO : open(name, O_RDONLY | O_CLOEXEC);
		bool more;

		if (fd < 0) {
			fprintf(stderr, CAT_PROG ": %s: %s\n", name, strerror(errno));
			pm->input_errors++;
			continue;
		}
		if (pm->side != CAT_TO && input_is_output(pm, fd, name)) {
			pm->input_errors++;
			if (!is_stdin)
				close(fd);
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
	if (pm->side != CAT_TO) {
		up_close(pm->wr); /* the writer thread's EOF */
		pm->wr = NULL;
	}
	thread_done(pm);
	return NULL;
}

static void *writer_thread(void *arg)
{
	struct cat_pump *pm = arg;
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
		if (pm->side == CAT_FROM) /* -L; the reader thread has it otherwise */
			cnt = iov_trim(iov, cnt, cat_rate_limit(&pm->rl, (size_t)n));
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
		if (pm->side == CAT_FROM)
			cat_rate_used(&pm->rl, (size_t)w);
		if (pm->o->lines)
			/* relaxed: a count for the meter only */
			atomic_fetch_add_explicit(&pm->lines, count_lines(iov, cnt, (size_t)w),
						  memory_order_relaxed);
		c = up_consume(pm->rd, (size_t)w);
		if (c < 0) {
			set_pipe_err(pm, c, "up_consume");
			break;
		}
		if (pm->first_out == 0)
			pm->first_out = cat_mono();
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

void cat_pump_init(struct cat_pump *pm, const struct cat_opts *o)
{
	struct stat st;

	memset(pm, 0, sizeof(*pm));
	pm->o = o;
	pm->side = o->to ? CAT_TO : o->from ? CAT_FROM : CAT_BOTH;
	pm->sigpipe_default = sigpipe_is_default();
	if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
		pm->out_isreg = true;
		pm->out_dev = (uint64_t)st.st_dev;
		pm->out_ino = (uint64_t)st.st_ino;
	}
	cat_rate_init(&pm->rl, o->rate_limit);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&pm->mu, NULL);
	cat_cond_init_mono(&pm->cv);
}

#define CAT_THREAD_STACK ((size_t)256 * 1024)

int cat_pump_start(struct cat_pump *pm)
{
	pthread_attr_t attr;
	int r;

	/* Counted before either starts: a thread that ends at once must not
	 * find the count at 0 while the other is still to come. */
	pm->running = pm->side == CAT_BOTH ? 2 : 1;
	/* Small stacks: the threads keep their buffers on the heap, and the
	 * default (8 MiB each, the stack rlimit) alone can exceed a small
	 * address-space limit (ulimit -v) before a byte is copied. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CAT_THREAD_STACK);
	r = 0;
	if (pm->side != CAT_FROM)
		r = pthread_create(&pm->rt, &attr, reader_thread, pm);
	if (r == 0 && pm->side != CAT_TO)
		r = pthread_create(&pm->wt, &attr, writer_thread, pm);
	pthread_attr_destroy(&attr);
	return r;
}

static void ts_add(struct timespec *t, long s, long ns)
{
	t->tv_sec += s;
	t->tv_nsec += ns;
	if (t->tv_nsec >= 1000000000) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000;
	}
}

void cat_pump_wait(struct cat_pump *pm, void (*tick)(void *arg), void *arg)
{
	/* pv redraws once a second; half that feels live on a terminal. -i
	 * sets it. */
	double iv = pm->o->interval > 0 ? pm->o->interval : 0.5;
	long iv_s = (long)iv, iv_ns = (long)((iv - (double)iv_s) * 1e9);
	struct timespec dl, now;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	ts_add(&dl, iv_s, iv_ns);
	pthread_mutex_lock(&pm->mu);
	while (pm->running > 0) {
		if (pthread_cond_timedwait(&pm->cv, &pm->mu, &dl) != ETIMEDOUT)
			continue; /* a thread ended: the deadline stays */
		if (tick) {
			/* Unlocked: drawing must not hold up a finishing thread. */
			pthread_mutex_unlock(&pm->mu);
			tick(arg);
			pthread_mutex_lock(&pm->mu);
		}
		/* Deadlines an interval apart, not an interval after each draw,
		 * unless the draws fell behind by more than an interval. */
		ts_add(&dl, iv_s, iv_ns);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (dl.tv_sec < now.tv_sec || (dl.tv_sec == now.tv_sec && dl.tv_nsec < now.tv_nsec)) {
			dl = now;
			ts_add(&dl, iv_s, iv_ns);
		}
	}
	pthread_mutex_unlock(&pm->mu);
	if (pm->side != CAT_FROM)
		pthread_join(pm->rt, NULL);
	if (pm->side != CAT_TO)
		pthread_join(pm->wt, NULL);
}

void cat_pump_destroy(struct cat_pump *pm)
{
	pthread_cond_destroy(&pm->cv);
	pthread_mutex_destroy(&pm->mu);
}
