/* SPDX-License-Identifier: MIT */
/*
 * bench_run.c - runs of `uringpipe-cat --bench`: one run of a transport
 * (threads, endpoints, watchdog, results), the calibration of a run's byte
 * count, and every size of one writers x readers configuration.
 *
 * A run: W writer and R reader threads wait on one barrier. Each writer
 * writes its share (bytes/W) in size-byte chunks from a pre-filled buffer and
 * closes its end; each reader reads --read-size bytes per call (default: the
 * write size; bench_workers.c) until EOF.
 * The run's time is from the earliest barrier exit to the last reader's EOF,
 * on CLOCK_MONOTONIC. Bytes read must equal bytes written. The writers' and
 * readers' buffers come from up_buf_alloc() on the node the pipes live on
 * (up_stats().numa_node of the start-up probe), for every transport alike.
 *
 * Verification is always 1 x 1: with several writers the chunks interleave
 * and there is no single expected stream.
 *
 * With --processes the same workers run in processes of their own
 * (bench_proc.c); what is set up and summed up here stays the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define LAT_CAP        ((size_t)1 << 20) /* latency samples per run, all writers */
#define VERIFY_BYTES   (16 * MiB)
#define CAL_MIN_SECS   0.1
#define CAL_MAX_BYTES  (32 * GiB)

struct run_out {
	double secs;
	uint64_t bytes;
	uint64_t syscalls; /* kernel: our write+read calls; uringpipe: up_stats */
	uint64_t rcalls, wcalls; /* the readers' and writers' calls */
	double p50, p99, max; /* µs */
	size_t nlat;
	uint64_t every;
	bool have_st;
	struct up_stats st;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
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

/*
 * Which writes to time. A sample costs two clock reads, about what two small
 * uringpipe writes cost, and the writer pays it inside the run: time one
 * write per 64 KiB of stream (every write when a write is >= 64 KiB), so
 * the sampling takes under 1% of any transport's time, and keep to @cap
 * samples (--lat-every overrides).
 */
#define LAT_STRIDE (64u << 10)

static uint64_t auto_every(uint64_t size, uint64_t writes, size_t cap)
{
	uint64_t e = size >= LAT_STRIDE ? 1 : (LAT_STRIDE + size - 1) / size;
	uint64_t need = (writes + cap - 1) / cap;
	return need > e ? need : e;
}

static void *thread_entry(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	bench_worker_main(w);
	pthread_mutex_lock(&sh->mu);
	sh->done++;
	pthread_cond_signal(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	return NULL;
}

void bench_hung(const struct run *rn, double tmo)
{
	char sb[32];
	fflush(stdout);
	fprintf(stderr, BENCH_PFX "%s run with %s writes did not finish within %.0f s;"
		" progress:", bench_tname[rn->t], cat_size_label(rn->size, sb, sizeof(sb)), tmo);
	/* relaxed: where a hung worker stopped, a hint that orders nothing. */
	for (unsigned i = 0; i < rn->n; i++)
		fprintf(stderr, " %s%u=%" PRIu64, rn->ws[i].writer ? "w" : "r", rn->ws[i].idx,
			atomic_load_explicit(&rn->ws[i].progress, memory_order_relaxed));
	fputc('\n', stderr);
}

double bench_run_timeout(const struct run *rn)
{
	/* A library that loses a wakeup would hang us: bound every run. */
	return rn->o->timeout > 0 ? rn->o->timeout : 60.0 + (double)rn->bytes / 10e6;
}

static void shared_init(struct run *rn)
{
	struct shared *sh = &rn->sh;

	memset(sh, 0, sizeof(*sh));
	sh->t = rn->t;
	sh->size = (size_t)rn->size;
	sh->key = mix64(rn->o->seed ^ 0x75726970697065u);
	sh->verify = rn->kind == RUN_VERIFY;
	if (pthread_barrier_init(&sh->bar, NULL, rn->n) != 0)
		bench_die("pthread_barrier_init failed");
	cat_cond_init_mono(&sh->cv);
	pthread_mutex_init(&sh->mu, NULL);
}

static void shared_destroy(struct run *rn)
{
	pthread_barrier_destroy(&rn->sh.bar);
	pthread_cond_destroy(&rn->sh.cv);
	pthread_mutex_destroy(&rn->sh.mu);
}

void bench_worker_plan(const struct run *rn, struct worker *w, unsigned i)
{
	const size_t lat_cap = LAT_CAP / rn->nw;
	uint64_t size = rn->size, writes;

	w->sh = (struct shared *)&rn->sh;
	w->writer = i < rn->nw;
	w->idx = w->writer ? i : i - rn->nw;
	w->fd = -1;
	atomic_init(&w->progress, 0);
	/* A reader asks for --read-size bytes per call. */
	w->buflen = w->writer ? (size_t)size : (size_t)bench_read_size(rn->o, size);
	if (!w->writer)
		return;
	/* A writer's share of the bytes and, timed, its latency sampling. */
	w->quota = rn->bytes / rn->nw + (w->idx < rn->bytes % rn->nw ? 1 : 0);
	if (rn->kind != RUN_TIMED)
		return;
	writes = (w->quota + size - 1) / size;
	w->every = rn->o->lat_every ? rn->o->lat_every : auto_every(size, writes, lat_cap);
	w->lat_cap = (size_t)((writes + w->every - 1) / w->every) + 16;
	if (w->lat_cap > lat_cap)
		w->lat_cap = lat_cap;
}

void bench_worker_alloc(const struct run *rn, struct worker *w, int node)
{
	w->buf = bench_xbuf_alloc(w->buflen, node);
	if (w->writer) {
		bench_pattern_fill(w->buf, 0, w->buflen, rn->sh.key); /* also faults it in */
		if (w->lat_cap && !w->lat) {
			w->lat = bench_xmalloc(w->lat_cap * sizeof(*w->lat));
			memset(w->lat, 0, w->lat_cap * sizeof(*w->lat));
		}
		return;
	}
	memset(w->buf, 0, w->buflen);
	if (rn->kind == RUN_VERIFY) {
		/* As much again for the expected bytes. */
		w->scratch = bench_xbuf_alloc(w->buflen, node);
		memset(w->scratch, 0, w->buflen);
	}
}

static void workers_new(struct run *rn)
{
	/* Every pipe of a run is created like the probe's, so it lands where
	 * the probe's did (-1: not known, follow the memory policy). */
	int node = rn->env->numa_node >= 0 ? rn->env->numa_node : -1;

	rn->ws = aligned_alloc(64, sizeof(*rn->ws) * rn->n);
	if (!rn->ws)
		bench_die("out of memory");
	memset(rn->ws, 0, sizeof(*rn->ws) * rn->n);
	for (unsigned i = 0; i < rn->n; i++) {
		bench_worker_plan(rn, &rn->ws[i], i);
		bench_worker_alloc(rn, &rn->ws[i], node);
	}
}

static void workers_free(struct run *rn)
{
	for (unsigned i = 0; i < rn->n; i++) {
		struct worker *w = &rn->ws[i];
		/* scratch, when there is one, is a reader's: buflen bytes too. */
		up_buf_free(w->buf, w->buflen ? w->buflen : 1);
		up_buf_free(w->scratch, w->buflen ? w->buflen : 1);
		free(w->lat);
	}
	free(rn->ws);
}

static void open_uring_ends(struct run *rn)
{
	struct up_end *ends[2];
	struct up_config cfg;
	int r;

	up_config_init(&cfg);
	cfg.capacity = (size_t)rn->o->capacity;
	r = up_pipe2(ends, &cfg);
	if (r < 0)
		bench_die("up_pipe2: %s", up_strerror(r));
	for (unsigned i = 0; i < rn->n; i++) {
		struct worker *w = &rn->ws[i];
		if (w->idx == 0) {
			w->end = w->writer ? ends[1] : ends[0];
			continue;
		}
		r = up_open(up_end_pipe(ends[0]), w->writer ? UP_WR : UP_RD, &w->end);
		if (r < 0)
			bench_die("up_open(%s): %s", w->writer ? "UP_WR" : "UP_RD", up_strerror(r));
	}
}

static void start_threads(struct run *rn)
{
	const struct env *env = rn->env;
	bool pin = bench_pinned(env, rn->nw, rn->n - rn->nw);

	for (unsigned i = 0; i < rn->n; i++) {
		struct worker *w = &rn->ws[i];
		pthread_attr_t attr;
		int e;
		pthread_attr_init(&attr);
		if (pin) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET((size_t)(w->writer ? env->cpu[0] : env->cpu[1]), &set);
			pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		}
		e = pthread_create(&w->tid, &attr, thread_entry, w);
		pthread_attr_destroy(&attr);
		if (e != 0)
			/* The others wait on the barrier forever: nothing to unwind. */
			bench_die("pthread_create: %s", strerror(e));
	}
}

/* Until every thread is done, or exits 1 at the deadline. */
static void join_threads(struct run *rn)
{
	struct shared *sh = &rn->sh;
	struct timespec deadline;
	double tmo = bench_run_timeout(rn);

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += (time_t)tmo;
	pthread_mutex_lock(&sh->mu);
	while (sh->done < rn->n) {
		int e = pthread_cond_timedwait(&sh->cv, &sh->mu, &deadline);
		if (e == ETIMEDOUT && sh->done < rn->n) {
			bench_hung(rn, tmo);
			exit(1);
		}
	}
	pthread_mutex_unlock(&sh->mu);
	for (unsigned i = 0; i < rn->n; i++) {
		int e = pthread_join(rn->ws[i].tid, NULL);
		if (e != 0)
			bench_die("pthread_join: %s", strerror(e));
	}
}

/* The workers' errors and byte counts, the run's time (earliest start to
 * the last reader's EOF) and the kernel transport's system calls. Returns
 * 0, or -1 after saying what went wrong. */
static int sum_workers(const struct run *rn, struct run_out *out)
{
	uint64_t wrote = 0, read = 0, start = UINT64_MAX, end = 0;
	int rc = 0;

	for (unsigned i = 0; i < rn->n; i++) {
		const struct worker *w = &rn->ws[i];
		if (w->err[0]) {
			fprintf(stderr, BENCH_PFX "%s, %" PRIu64 "-byte writes%s: %s\n",
				bench_tname[rn->t], rn->size,
				rn->kind == RUN_VERIFY ? ", verification pass" : "", w->err);
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
		if (!is_up(rn->t))
			out->syscalls += w->calls;
		if (w->writer)
			out->wcalls += w->calls;
		else
			out->rcalls += w->calls;
	}
	/* A verification pass is 1 x 1: the reader's sum of what it read must
	 * be the writer's of what it wrote (every byte touched, none twice). */
	if (rc == 0 && rn->kind == RUN_VERIFY && rn->ws[0].sum != rn->ws[1].sum) {
		fprintf(stderr, BENCH_PFX "%s, %" PRIu64 "-byte writes, verification pass: the"
			" reader's byte sum %" PRIu64 " is not the writer's %" PRIu64 "\n",
			bench_tname[rn->t], rn->size, rn->ws[1].sum, rn->ws[0].sum);
		rc = -1;
	}
	if (rc == 0 && (wrote != rn->bytes || read != rn->bytes)) {
		fprintf(stderr, BENCH_PFX "%s, %" PRIu64 "-byte writes: byte count mismatch:"
			" asked %" PRIu64 ", written %" PRIu64 ", read %" PRIu64 "\n",
			bench_tname[rn->t], rn->size, rn->bytes, wrote, read);
		rc = -1;
	}
	out->secs = (double)(end - start) / 1e9;
	out->bytes = rn->bytes;
	return rc;
}

/* The uringpipe's own counters, its system calls among them. Returns 0, or
 * -1 after saying what went wrong. */
static int read_stats(const struct run *rn, struct run_out *out)
{
	struct up_end *keep = NULL;
	int r;

	for (unsigned i = rn->nw; i < rn->n && !keep; i++)
		keep = rn->ws[i].end;
	/* A reader end is still open, so the pipe handle (and with it the
	 * counters of the closed writer ends) is still alive. */
	if (!keep)
		return 0;
	r = up_stats(up_end_pipe(keep), &out->st);
	if (r < 0) {
		fprintf(stderr, BENCH_PFX "up_stats: %s\n", up_strerror(r));
		return -1;
	}
	out->have_st = true;
	out->syscalls = out->st.syscalls;
	return 0;
}

/* p50, p99 and max over every writer's samples. */
static void sum_latency(const struct run *rn, struct run_out *out)
{
	const struct worker *ws = rn->ws;
	unsigned nw = rn->nw;
	uint64_t *all;
	size_t tot = 0, k = 0;

	for (unsigned i = 0; i < nw; i++)
		tot += ws[i].nlat;
	/* One writer: sort its samples in place. */
	all = nw == 1 ? ws[0].lat : bench_xmalloc((tot ? tot : 1) * sizeof(*all));
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

/* --verbose: one line per run on stderr. */
static void log_run(const struct run *rn, const struct run_out *out)
{
	static const char *const what[] = {"verify", "calib ", "timed "};
	char sb[32];

	fprintf(stderr, "  %-9s %6s %s %10.1f MB/s  %8.3f s  %" PRIu64 " B  syscalls %"
		PRIu64 "\n", bench_tname[rn->t], cat_size_label(rn->size, sb, sizeof(sb)),
		what[rn->kind], out->secs > 0 ? (double)rn->bytes / out->secs / 1e6 : 0.0,
		out->secs, rn->bytes, out->syscalls);
}

/*
 * One run of @t with @size-byte writes, @bytes in all: returns 0 and fills
 * *out, or prints why on stderr and returns -1.
 */
static int run_once(const struct opts *o, const struct env *env, enum transport t,
		    enum run_kind kind, uint64_t size, uint64_t bytes, struct run_out *out)
{
	struct run rn = {
		.o = o, .env = env, .t = t, .kind = kind, .size = size, .bytes = bytes,
		.nw = kind == RUN_VERIFY ? 1 : o->writers,
	};
	int rc;

	rn.n = rn.nw + (kind == RUN_VERIFY ? 1 : o->readers);
	memset(out, 0, sizeof(*out));
	shared_init(&rn);
	if (o->processes) {
		bench_proc_run(&rn);
	} else {
		workers_new(&rn);
		if (is_up(t))
			open_uring_ends(&rn);
		else
			bench_kernel_open(&rn);
		start_threads(&rn);
		join_threads(&rn);
	}
	shared_destroy(&rn);

	rc = sum_workers(&rn, out);
	if (is_up(t) && rc == 0 && !o->processes)
		rc = read_stats(&rn, out);
	if (is_up(t) && rc == 0 && o->processes && bench_proc_stats(&rn, &out->st)) {
		out->have_st = true;
		out->syscalls = out->st.syscalls;
	}
	/* A worker process closed its own ends; their pointers and fds here
	 * are its, not ours. */
	for (unsigned i = 0; i < rn.n && !o->processes; i++)
		bench_close_end(&rn.ws[i]);
	if (kind == RUN_TIMED)
		sum_latency(&rn, out);
	if (o->processes)
		bench_proc_free(&rn);
	else
		workers_free(&rn);

	if (rc == 0 && o->verbose)
		log_run(&rn, out);
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
		if (run_once(o, env, t, RUN_CALIBRATE, size, b, &r) < 0)
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

/* Timed run @i of transport @t, into its row. */
static void record(struct row *rw, enum transport t, unsigned i, const struct run_out *r)
{
	rw->secs[t][i] = r->secs;
	rw->mbps[t][i] = r->secs > 0 ? (double)r->bytes / r->secs / 1e6 : 0.0;
	rw->p50[t][i] = r->p50;
	rw->p99[t][i] = r->p99;
	if (r->max > rw->lmax[t])
		rw->lmax[t] = r->max;
	rw->syscalls[t][i] = r->syscalls;
	rw->rcalls[t][i] = r->rcalls;
	rw->wcalls[t][i] = r->wcalls;
	rw->sys_gib[t][i] = (double)r->syscalls * (double)GiB / (double)r->bytes;
	rw->nlat[t] = r->nlat;
	rw->every[t] = r->every;
	if (t == T_URING) {
		rw->st[i] = r->st;
		rw->have_st[i] = r->have_st;
	}
}

/* The verification pass of every transport at @size; dies on a failure. */
static void verify_size(const struct opts *o, const struct env *env, struct row *rw,
			uint64_t size)
{
	uint64_t vb = VERIFY_BYTES > size ? VERIFY_BYTES : size;
	struct run_out r;

	for (int t = 0; t < T_COUNT; t++) {
		if (!o->on[t])
			continue;
		if (run_once(o, env, (enum transport)t, RUN_VERIFY, size, vb, &r) < 0)
			bench_die("verification of %s with %" PRIu64 "-byte writes failed",
				  bench_tname[t], size);
		rw->verified[t] = vb;
	}
}

void bench_run_config(const struct opts *o, const struct env *env, struct row *rows,
		      bool verify)
{
	for (unsigned s = 0; s < o->nsizes; s++) {
		struct row *rw = &rows[s];
		uint64_t size = o->sizes[s];
		struct run_out r;

		rw->size = size;
		if (verify)
			verify_size(o, env, rw, size);
		for (int t = 0; t < T_COUNT; t++)
			if (o->on[t])
				rw->bytes[t] = o->bytes ? o->bytes
							: calibrate(o, env, (enum transport)t, size);
		/* Alternating transports, so a slow phase of the machine hits
		 * each of them. */
		for (unsigned i = 0; i < o->repeat; i++) {
			rw->rtt_ns[rw->nrtt++] = bench_line_rtt_ns(env);
			for (int t = 0; t < T_COUNT; t++) {
				if (!o->on[t])
					continue;
				if (run_once(o, env, (enum transport)t, RUN_TIMED, size, rw->bytes[t],
					     &r) < 0)
					exit(1);
				record(rw, (enum transport)t, i, &r);
			}
		}
		rw->rtt_ns[rw->nrtt++] = bench_line_rtt_ns(env);
	}
}
