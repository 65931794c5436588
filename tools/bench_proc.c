/* SPDX-License-Identifier: MIT */
/*
 * bench_proc.c - `uringpipe-cat --bench --processes`: the runs of the
 * benchmark with every writer and reader in a process of its own, meeting
 * the pipe by name as two unrelated programs would: the uringpipe at
 * "@upcat-bench-<pid>-<n>" (up_listen/up_connect), the kernel pipe as a
 * FIFO (mkfifo) in a private directory that is removed at exit.
 *
 * One run:
 *   1. the parent maps the workers' records and the gate MAP_SHARED and
 *      forks one process per worker. No pipe of the run exists yet, so no
 *      child inherits an end: uringpipe ends, like pipe fds, live on in a
 *      child until it closes them, and one held there would keep the
 *      stream open (no end of stream, no EPIPE);
 *   2. each child allocates and faults in its own buffers (the timed
 *      window must see no copy-on-write faults), pins itself in a 1 x 1
 *      run as the threads are pinned, and waits at the gate's GATE_MADE;
 *   3. the parent makes the pipe (the FIFO, or a uringpipe and a listener
 *      at the name) and opens GATE_MADE;
 *   4. the children open it by name: open(2) of the FIFO (writer 0 sets
 *      F_SETPIPE_SZ), or up_connect + up_open, and wait at GATE_GO;
 *   5. with every end open the parent unlinks the FIFO or closes the
 *      listener, then opens GATE_GO: the run itself is bench_workers.c's,
 *      unchanged, timed from the gate as threads are from the barrier;
 *   6. each child closes its end, leaves its figures (and its up_stats())
 *      in its record and exits; the parent reaps them all.
 * A child that dies, or a run that outlives the watchdog, ends the whole
 * benchmark (exit 1) with the children killed; children die with the
 * parent too (PR_SET_PDEATHSIG).
 *
 * The gate is two phases of two words each in the shared mapping, futex(2)
 * on them: children count themselves in and sleep until the parent opens
 * the phase. The parent's waits are timed, so it notices a dead child.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define CONNECT_MS 10000 /* a worker's up_connect: the name exists already */
#define SETUP_SECS 30.0  /* forks, buffers and opens, on top of the run's own bound */
#define SLICE_NS   250000000L /* the parent looks for dead children this often */

struct bench_gate {
	_Atomic uint32_t arrived[2]; /* children at each phase */
	_Atomic uint32_t open[2];    /* set by the parent */
	_Atomic uint32_t left;       /* children done with their records */
} __attribute__((aligned(64)));

/* The parent's view of the run under way (one at a time). */
struct proc_run {
	struct run *rn;
	struct bench_gate *g;
	pid_t parent;
	pid_t pid[2 * 64 + 2]; /* 0 once reaped; writers then readers */
	int status[2 * 64 + 2];
	unsigned live;
	double tmo, deadline; /* the watchdog's bound, and when it is up */
	struct up_listener *l;
	char name[64];       /* uringpipe */
	char fifo[PATH_MAX]; /* kernel */
};

/* The mappings of the run under way, for bench_proc_free(). */
static void *area, *lat_area;
static size_t area_len, lat_len;

/* The FIFOs' directory, made on first use; removed at exit with the FIFO
 * of a run that died before it was unlinked. */
static char fifo_dir[PATH_MAX - 32];
static char fifo_left[PATH_MAX];

static long futex_op(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	/* Not FUTEX_PRIVATE_FLAG: the word is shared with other processes. */
	return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

void bench_gate_pass(struct bench_gate *g, unsigned phase)
{
	/* rel: the child's record (its error, say) before its count. */
	atomic_fetch_add_explicit(&g->arrived[phase], 1, memory_order_release);
	futex_op(&g->arrived[phase], FUTEX_WAKE, INT_MAX, NULL);
	/* acq: pairs with the parent's release that opens the phase. */
	while (atomic_load_explicit(&g->open[phase], memory_order_acquire) == 0)
		futex_op(&g->open[phase], FUTEX_WAIT, 0, NULL);
}

static void gate_open(struct bench_gate *g, unsigned phase)
{
	atomic_store_explicit(&g->open[phase], 1, memory_order_release);
	futex_op(&g->open[phase], FUTEX_WAKE, INT_MAX, NULL);
}

static void remove_fifos(void)
{
	if (fifo_left[0])
		unlink(fifo_left);
	if (fifo_dir[0])
		rmdir(fifo_dir);
}

static void make_fifo_dir(void)
{
	const char *tmp = getenv("TMPDIR");

	if (fifo_dir[0])
		return;
	if (!tmp || !*tmp || strlen(tmp) > sizeof(fifo_dir) - 32)
		tmp = "/tmp";
	snprintf(fifo_dir, sizeof(fifo_dir), "%s/upcat-bench.XXXXXX", tmp);
	if (!mkdtemp(fifo_dir)) {
		int e = errno;
		fifo_dir[0] = '\0';
		bench_die("mkdtemp in %s: %s", tmp, strerror(e));
	}
	atexit(remove_fifos);
}

/* ------------------------------------------------------------- children */

static void child_exit(const struct proc_run *pr, int code) __attribute__((noreturn));
static void child_exit(const struct proc_run *pr, int code)
{
	/* rel: the record before the count the parent reads it after. */
	atomic_fetch_add_explicit(&pr->g->left, 1, memory_order_release);
	futex_op(&pr->g->left, FUTEX_WAKE, INT_MAX, NULL);
	_exit(code);
}

/* The end of this worker, by name. 0, or -1 with w->err set. */
static int child_open(const struct proc_run *pr, struct worker *w, struct up_pipe **p)
{
	const struct env *env = pr->rn->env;
	const char *who = w->writer ? "writer" : "reader";
	int r;

	if (pr->rn->t == T_KERNEL) {
		long got;

		w->fd = open(pr->fifo, (w->writer ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
		if (w->fd < 0) {
			snprintf(w->err, sizeof(w->err), "%s %u: open %.160s: %s", who, w->idx, pr->fifo,
				 strerror(errno));
			return -1;
		}
		if (!w->writer || w->idx != 0)
			return 0;
		if (env->kpipe_req > 0 && fcntl(w->fd, F_SETPIPE_SZ, env->kpipe_req) < 0) {
			snprintf(w->err, sizeof(w->err), "F_SETPIPE_SZ(%d) on the FIFO: %s",
				 env->kpipe_req, strerror(errno));
			return -1;
		}
		got = fcntl(w->fd, F_GETPIPE_SZ);
		if (got != env->kpipe_size) {
			snprintf(w->err, sizeof(w->err), "the FIFO's pipe is %ld B, expected %ld B",
				 got, env->kpipe_size);
			return -1;
		}
		return 0;
	}
	r = up_connect(pr->name, CONNECT_MS, p);
	if (r == 0)
		r = up_open(*p, w->writer ? UP_WR : UP_RD, &w->end);
	if (r < 0) {
		snprintf(w->err, sizeof(w->err), "%s %u: %s %s: %s", who, w->idx,
			 *p ? "up_open on" : "up_connect", pr->name, up_strerror(r));
		return -1;
	}
	if (w->writer && pr->rn->nw == 1) {
		/* The lone writer's first lock registers its process for
		 * membarrier(2), 10 ms and more; threads pay it once per
		 * benchmark, in an untimed pass. Pay it here, before the
		 * start: a dropped reservation publishes nothing. */
		struct iovec iov[1];
		int cnt = 1;
		if (up_reserve(w->end, 1, iov, &cnt) > 0)
			up_commit(w->end, 0);
	}
	return 0;
}

static void child_main(const struct proc_run *pr, struct worker *w) __attribute__((noreturn));
static void child_main(const struct proc_run *pr, struct worker *w)
{
	const struct run *rn = pr->rn;
	const struct env *env = rn->env;
	struct up_pipe *p = NULL;

	bench_in_child = true;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != pr->parent)
		_exit(1); /* the parent is gone already */
	if (bench_pinned(env, rn->nw, rn->n - rn->nw)) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((size_t)(w->writer ? env->cpu[0] : env->cpu[1]), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	bench_worker_alloc(rn, w, env->numa_node >= 0 ? env->numa_node : -1);
	bench_gate_pass(pr->g, GATE_MADE);
	if (child_open(pr, w, &p) < 0)
		child_exit(pr, 1);
	bench_worker_main(w); /* passes GATE_GO */
	bench_close_end(w);   /* a reader's; the writer closed its own */
	if (p) {
		w->have_st = up_stats(p, &w->st) == 0;
		up_pipe_release(p);
	}
	child_exit(pr, w->err[0] ? 1 : 0);
}

/* --------------------------------------------------------------- parent */

static void reap(struct proc_run *pr)
{
	for (unsigned i = 0; i < pr->rn->n; i++) {
		if (pr->pid[i] > 0 && waitpid(pr->pid[i], &pr->status[i], WNOHANG) == pr->pid[i]) {
			pr->pid[i] = 0;
			pr->live--;
		}
	}
}

static void kill_all(struct proc_run *pr)
{
	for (unsigned i = 0; i < pr->rn->n; i++)
		if (pr->pid[i] > 0)
			kill(pr->pid[i], SIGKILL);
	for (unsigned i = 0; i < pr->rn->n; i++)
		if (pr->pid[i] > 0 && waitpid(pr->pid[i], &pr->status[i], 0) == pr->pid[i]) {
			pr->pid[i] = 0;
			pr->live--;
		}
	up_listener_close(pr->l);
	pr->l = NULL;
}

static const char *worker_name(const struct proc_run *pr, unsigned i, char *b, size_t bl)
{
	const struct worker *w = &pr->rn->ws[i];

	snprintf(b, bl, "%s %s %u", bench_tname[pr->rn->t], w->writer ? "writer" : "reader",
		 w->idx);
	return b;
}

/* Says what each worker reported, kills the rest, dies with @why. */
static void fail(struct proc_run *pr, const char *why) __attribute__((noreturn));
static void fail(struct proc_run *pr, const char *why)
{
	char b[64];

	kill_all(pr);
	fflush(stdout);
	for (unsigned i = 0; i < pr->rn->n; i++) {
		const int st = pr->status[i];
		if (pr->rn->ws[i].err[0])
			fprintf(stderr, BENCH_PFX "%s\n", pr->rn->ws[i].err);
		else if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
			fprintf(stderr, BENCH_PFX "%s: killed by signal %d\n",
				worker_name(pr, i, b, sizeof(b)), WTERMSIG(st));
	}
	bench_die("processes: %s", why);
}

/* Until @ctr reaches the number of workers; fails if a child ended first
 * or the run's time is up. */
static void await(struct proc_run *pr, _Atomic uint32_t *ctr, const char *what)
{
	for (;;) {
		/* acq: pairs with the children's release of their counts. */
		uint32_t v = atomic_load_explicit(ctr, memory_order_acquire);
		struct timespec ts = {0, SLICE_NS};

		if (v >= pr->rn->n)
			return;
		reap(pr);
		if (pr->live < pr->rn->n)
			fail(pr, what);
		if (cat_mono() > pr->deadline) {
			bench_hung(pr->rn, pr->tmo);
			kill_all(pr);
			exit(1);
		}
		futex_op(ctr, FUTEX_WAIT, v, &ts);
	}
}

/* Until every child has exited; fails at once on one killed by a signal,
 * or at the deadline. */
static void await_exit(struct proc_run *pr)
{
	char b[64], why[128];

	for (;;) {
		uint32_t v = atomic_load_explicit(&pr->g->left, memory_order_acquire);
		struct timespec ts = {0, SLICE_NS};

		reap(pr);
		for (unsigned i = 0; i < pr->rn->n; i++) {
			if (pr->pid[i] == 0 && WIFSIGNALED(pr->status[i])) {
				snprintf(why, sizeof(why), "%s was killed by signal %d",
					 worker_name(pr, i, b, sizeof(b)), WTERMSIG(pr->status[i]));
				fail(pr, why);
			}
		}
		if (pr->live == 0)
			return;
		if (cat_mono() > pr->deadline) {
			bench_hung(pr->rn, pr->tmo);
			kill_all(pr);
			exit(1);
		}
		futex_op(&pr->g->left, FUTEX_WAIT, v, &ts);
	}
}

/* The shared records: the gate, then the workers; the timed writers'
 * latency samples in a mapping of their own. */
static void map_records(struct run *rn)
{
	size_t lat_total = 0, off = 0;

	area_len = sizeof(struct bench_gate) + (size_t)rn->n * sizeof(struct worker);
	area = mmap(NULL, area_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		bench_die("mmap of %zu shared bytes: %s", area_len, strerror(errno));
	rn->sh.gate = area;
	rn->ws = (struct worker *)((char *)area + sizeof(struct bench_gate));
	for (unsigned i = 0; i < rn->n; i++) {
		bench_worker_plan(rn, &rn->ws[i], i);
		lat_total += rn->ws[i].lat_cap * sizeof(uint64_t);
	}
	lat_area = NULL;
	lat_len = lat_total;
	if (!lat_total)
		return;
	lat_area = mmap(NULL, lat_total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
			0);
	if (lat_area == MAP_FAILED)
		bench_die("mmap of %zu shared bytes: %s", lat_total, strerror(errno));
	memset(lat_area, 0, lat_total); /* faulted in before the run, as threads' are */
	for (unsigned i = 0; i < rn->n; i++) {
		if (!rn->ws[i].lat_cap)
			continue;
		rn->ws[i].lat = (uint64_t *)((char *)lat_area + off);
		off += rn->ws[i].lat_cap * sizeof(uint64_t);
	}
}

/* The run's pipe, made after the fork: the FIFO, or the uringpipe and the
 * listener at its name. */
static void make_pipe(struct proc_run *pr)
{
	struct up_pipe *p;
	struct up_config cfg;
	char why[PATH_MAX + 64];
	int r;

	if (pr->rn->t == T_KERNEL) {
		if (mkfifo(pr->fifo, 0600) < 0) {
			snprintf(why, sizeof(why), "mkfifo %s: %s", pr->fifo, strerror(errno));
			fail(pr, why);
		}
		snprintf(fifo_left, sizeof(fifo_left), "%s", pr->fifo);
		return;
	}
	up_config_init(&cfg);
	cfg.capacity = (size_t)pr->rn->o->capacity;
	r = up_pipe_create(&cfg, &p);
	if (r == 0) {
		r = up_listen(p, pr->name, 0600, &pr->l);
		up_pipe_release(p); /* the listener keeps the memfd */
	}
	if (r < 0) {
		snprintf(why, sizeof(why), "up_listen %s: %s", pr->name, up_strerror(r));
		fail(pr, why);
	}
}

/* The name goes once every end is open: nobody else is to join. */
static void unmake_name(struct proc_run *pr)
{
	if (pr->rn->t == T_KERNEL) {
		unlink(pr->fifo);
		fifo_left[0] = '\0';
	}
	up_listener_close(pr->l);
	pr->l = NULL;
}

void bench_proc_run(struct run *rn)
{
	static unsigned runs;
	static struct proc_run pr; /* static: the children's copy is the same object */
	if (rn->n > sizeof(pr.pid) / sizeof(pr.pid[0]))
		bench_die("processes: %u workers, at most %zu", rn->n,
			  sizeof(pr.pid) / sizeof(pr.pid[0]));
	memset(&pr, 0, sizeof(pr));
	pr.rn = rn;
	pr.parent = getpid();
	runs++;
	if (rn->t == T_KERNEL) {
		make_fifo_dir();
		snprintf(pr.fifo, sizeof(pr.fifo), "%s/fifo-%u", fifo_dir, runs);
	} else {
		snprintf(pr.name, sizeof(pr.name), "@upcat-bench-%d-%u", (int)pr.parent, runs);
	}
	map_records(rn);
	pr.g = rn->sh.gate;
	pr.tmo = bench_run_timeout(rn);
	pr.deadline = cat_mono() + SETUP_SECS + pr.tmo;

	fflush(stdout);
	fflush(stderr);
	for (unsigned i = 0; i < rn->n; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			char why[96];
			snprintf(why, sizeof(why), "fork: %s", strerror(errno));
			fail(&pr, why);
		}
		if (pid == 0)
			child_main(&pr, &rn->ws[i]);
		pr.pid[i] = pid;
		pr.live++;
	}
	make_pipe(&pr);
	await(&pr, &pr.g->arrived[GATE_MADE], "a worker process ended before the pipe was made");
	gate_open(pr.g, GATE_MADE);
	await(&pr, &pr.g->arrived[GATE_GO], "a worker process could not open the pipe by name");
	unmake_name(&pr);
	gate_open(pr.g, GATE_GO);
	pr.deadline = cat_mono() + pr.tmo;
	await_exit(&pr);

	for (unsigned i = 0; i < rn->n; i++) {
		struct worker *w = &rn->ws[i];
		if (!w->err[0] && (!WIFEXITED(pr.status[i]) || WEXITSTATUS(pr.status[i]) != 0))
			snprintf(w->err, sizeof(w->err), "%s %u: worker process exited with status %d",
				 w->writer ? "writer" : "reader", w->idx, WEXITSTATUS(pr.status[i]));
	}
}

bool bench_proc_stats(const struct run *rn, struct up_stats *st)
{
	bool any = false;

	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < rn->n; i++) {
		const struct up_stats *s = &rn->ws[i].st;
		if (!rn->ws[i].have_st)
			continue;
		if (!any) {
			memcpy(st->backend, s->backend, sizeof(st->backend));
			st->numa_node = s->numa_node;
		}
		any = true;
		st->bytes_written += s->bytes_written;
		st->bytes_read += s->bytes_read;
		st->writes += s->writes;
		st->reads += s->reads;
		st->waits += s->waits;
		st->wakes += s->wakes;
		st->syscalls += s->syscalls;
	}
	return any;
}

void bench_proc_free(struct run *rn)
{
	if (lat_area)
		munmap(lat_area, lat_len);
	if (area)
		munmap(area, area_len);
	area = lat_area = NULL;
	rn->ws = NULL;
	rn->sh.gate = NULL;
}
