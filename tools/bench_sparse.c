/* SPDX-License-Identifier: MIT */
/*
 * bench_sparse.c - `uringpipe-cat --bench --sparse`: how long a sparse
 * message takes from its writer to its reader.
 *
 * One writer thread (on the first CPU) writes a 64-byte message --gap µs
 * after its last write began (an absolute CLOCK_MONOTONIC deadline; a late
 * wake-up delays the rest rather than bunching them up): each message
 * carries the writer's clock read just before its write and its sequence
 * number. One reader thread (on the second CPU) reads whole messages and
 * records, per message, its own clock after the last byte arrived minus
 * the writer's: the write-to-read latency, wake-up included, since the
 * reader has had the gap to go to sleep. Two readers per transport:
 *
 *   blocking  the transport's blocking read (read(), an io_uring READ,
 *             up_read(), up_peek());
 *   epoll     a non-blocking end: read until -EAGAIN, then epoll_wait() on
 *             the fd (kernel transports) or on up_pollfd() after
 *             up_poll_arm() (uringpipe), the event loop's way.
 *
 * The rounds alternate transports and readers within each gap, so that a
 * slow phase of the machine hits them all. A message that arrives out of
 * order or a stream that ends inside a message fails the run (exit 1): the
 * bytes come from a transport under test and are checked, not trusted.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MIN_MSGS 100

/* One run: a transport, a reader, a gap. */
struct sp_run {
	const struct opts *o;
	const struct env *env;
	struct run rn;           /* for bench_kernel_open(): t, n, ws, sh */
	struct worker ws[2];     /* [0] the writer, [1] the reader */
	int rd;                  /* SP_RD_BLOCK or SP_RD_EPOLL */
	uint64_t gap_ns;
	unsigned nmsg;
	uint64_t *lat;           /* per message, ns */
	unsigned nlat;
	/* Per message, ns: the writer's call (wcall, nwcall of them); an epoll
	 * reader's wait return less the write's start (wake) and the message
	 * read less that return (take), for the nsplit messages whose last
	 * wait returned after their write began. */
	uint64_t *wcall, *wake, *take;
	unsigned nwcall, nsplit;
	double rd_cpu;           /* the reader thread's CPU time / its wall time */
	struct up_pipe *pipe;    /* uringpipe: held for up_stats() after the run */
};

/* This thread's CPU time (user + system), ns. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Named for profilers, as --bench's workers are (bench_workers.c): w or
 * r, b or e for the reader's kind, then the transport (15 characters at
 * most: "re:uringpipe_zc"). */
static void sp_name(const struct sp_run *sr, int which)
{
	char name[16];

	snprintf(name, sizeof(name), "%c%c:%s", which ? 'r' : 'w',
		 sr->rd == SP_RD_EPOLL ? 'e' : 'b', bench_tname[sr->rn.t]);
	(void)prctl(PR_SET_NAME, name);
}

static void sp_pin(const struct env *env, int which)
{
	cpu_set_t set;

	if (env->cpu[1] < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET((size_t)env->cpu[which], &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void sp_done(struct worker *w)
{
	pthread_mutex_lock(&w->sh->mu);
	w->sh->done++;
	pthread_cond_signal(&w->sh->cv);
	pthread_mutex_unlock(&w->sh->mu);
}

static ssize_t sp_write(struct worker *w, const unsigned char *p, size_t n)
{
	if (is_up(w->sh->t))
		return up_write(w->end, p, n);
	return bench_kernel_write(w, p, n);
}

/* Up to @n bytes of the stream into @p: bytes, 0 at EOF, or -errno
 * (-EAGAIN: a non-blocking end has none now). */
static ssize_t sp_read(struct worker *w, unsigned char *p, size_t n)
{
	struct iovec iov[4];
	int cnt = 4, c;
	size_t k = 0;
	ssize_t r;

	if (w->sh->t == T_URING)
		return up_read(w->end, p, n);
	if (w->sh->t != T_URING_ZC)
		return bench_kernel_read(w, p, n);
	r = up_peek(w->end, iov, &cnt);
	if (r <= 0)
		return r;
	for (int i = 0; i < cnt && k < n; i++) {
		size_t m = iov[i].iov_len < n - k ? iov[i].iov_len : n - k;
		memcpy(p + k, iov[i].iov_base, m);
		k += m;
	}
	c = up_consume(w->end, k);
	return c < 0 ? c : (ssize_t)k;
}

static void *sp_writer(void *arg)
{
	struct sp_run *sr = arg;
	struct worker *w = &sr->ws[0];
	unsigned char msg[SPARSE_MSG];
	uint64_t stamp;
	unsigned nw = 0; /* into sr at the end: that line is the reader's */

	sp_pin(sr->env, 0);
	sp_name(sr, 0);
	/* The deadlines are met to the µs, not to the default 50 µs slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (!is_up(w->sh->t) && bench_kernel_thread_init(w) < 0) {
		pthread_barrier_wait(&w->sh->bar);
		goto out;
	}
	bench_pattern_fill(msg, 0, sizeof(msg), w->sh->key);
	pthread_barrier_wait(&w->sh->bar);
	stamp = now_ns();
	for (unsigned i = 0; i < sr->nmsg; i++) {
		/* A gap from the last write, not from a schedule: a writer woken
		 * late must not catch up with a burst the reader, awake for the
		 * first message, would take without sleeping. */
		uint64_t dl = stamp + sr->gap_ns, seq = i;
		struct timespec ts = {(time_t)(dl / 1000000000u), (long)(dl % 1000000000u)};
		size_t done = 0;

		/* Pacing only: nothing waits on the writer's sleep. */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		stamp = now_ns();
		memcpy(msg, &stamp, 8);
		memcpy(msg + 8, &seq, 8);
		while (done < sizeof(msg)) {
			ssize_t r = sp_write(w, msg + done, sizeof(msg) - done);
			w->calls++;
			if (r <= 0) {
				snprintf(w->err, sizeof(w->err), "writer: message %u: write returned"
					 " %zd", i, r);
				goto out;
			}
			done += (size_t)r;
		}
		sr->wcall[nw++] = now_ns() - stamp;
		w->moved += sizeof(msg);
	}
out:
	sr->nwcall = nw;
	bench_close_end(w);
	sp_done(w);
	return NULL;
}

/* The reader's wait for more bytes on a non-blocking end: 0, or -errno;
 * *@back gets the clock when epoll_wait() returned. */
static int sp_wait(struct worker *w, int ep, uint64_t *back)
{
	struct epoll_event ev;

	if (is_up(w->sh->t)) {
		int a = up_poll_arm(w->end);
		if (a < 0)
			return a;
		if (a == 1)
			return 0; /* progress possible now: retry */
	}
	while (epoll_wait(ep, &ev, 1, -1) < 0)
		if (errno != EINTR)
			return -errno;
	*back = now_ns();
	return 0;
}

/* Sets up the reader's epoll (SP_RD_EPOLL): its fd, or -errno in w->err. */
static int sp_epoll(struct sp_run *sr, struct worker *w)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC), fd;

	if (is_up(w->sh->t)) {
		fd = up_pollfd(w->end);
		if (fd < 0) {
			snprintf(w->err, sizeof(w->err), "up_pollfd: %s", up_strerror(fd));
			close(ep);
			return fd;
		}
	} else {
		fd = w->fd;
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
			ep = -1;
	}
	(void)sr;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		snprintf(w->err, sizeof(w->err), "epoll on fd %d: %s", fd, strerror(errno));
		if (ep >= 0)
			close(ep);
		return -1;
	}
	return ep;
}

static void *sp_reader(void *arg)
{
	struct sp_run *sr = arg;
	struct worker *w = &sr->ws[1];
	unsigned char msg[SPARSE_MSG];
	uint64_t cpu0 = 0, wall0 = 0;
	int ep = -1;

	sp_pin(sr->env, 1);
	sp_name(sr, 1);
	if ((!is_up(w->sh->t) && bench_kernel_thread_init(w) < 0) ||
	    (sr->rd == SP_RD_EPOLL && (ep = sp_epoll(sr, w)) < 0)) {
		pthread_barrier_wait(&w->sh->bar);
		goto out;
	}
	pthread_barrier_wait(&w->sh->bar);
	cpu0 = thread_cpu_ns();
	wall0 = now_ns();
	for (;;) {
		size_t got = 0;
		uint64_t now, stamp, seq, back = 0;

		while (got < sizeof(msg)) {
			ssize_t r = sp_read(w, msg + got, sizeof(msg) - got);
			w->calls++;
			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			if (r == 0 && got == 0)
				goto out; /* the writer closed between messages */
			if (r == 0) {
				snprintf(w->err, sizeof(w->err), "reader: the stream ended %zu bytes"
					 " into message %u", got, sr->nlat);
				goto out;
			}
			if (r == -EAGAIN && ep >= 0) {
				int e = sp_wait(w, ep, &back);
				if (e == 0)
					continue;
				r = e;
			}
			snprintf(w->err, sizeof(w->err), "reader: message %u: read failed: %s (%zd)",
				 sr->nlat, is_up(w->sh->t) ? up_strerror((int)r) : strerror((int)-r), r);
			goto out;
		}
		now = now_ns();
		memcpy(&stamp, msg, 8);
		memcpy(&seq, msg + 8, 8);
		w->sum += bench_byte_sum(msg, sizeof(msg));
		if (seq != sr->nlat || sr->nlat >= sr->nmsg || stamp > now) {
			snprintf(w->err, sizeof(w->err), "reader: message %u came as %" PRIu64
				 " (stamp %" PRIu64 ", now %" PRIu64 ")", sr->nlat, seq, stamp, now);
			goto out;
		}
		sr->lat[sr->nlat++] = now - stamp;
		/* A wait that returned before the write began (the fd was
		 * readable for something else) is not this message's wake. */
		if (back > stamp) {
			sr->wake[sr->nsplit] = back - stamp;
			sr->take[sr->nsplit++] = now - back;
		}
		w->moved += sizeof(msg);
	}
out:
	if (sr->nlat != 0)
		sr->rd_cpu = (double)(thread_cpu_ns() - cpu0) / (double)(now_ns() - wall0);
	if (ep >= 0)
		close(ep);
	/* Closed here so that a failed reader gives the writer EPIPE, not a
	 * wait for ever on a full pipe. */
	bench_close_end(w);
	sp_done(w);
	return NULL;
}

static void sp_open_uring(struct sp_run *sr)
{
	struct up_config cfg;
	struct up_pipe *p;
	int r;

	up_config_init(&cfg);
	cfg.capacity = (size_t)sr->o->capacity;
	r = up_pipe_create(&cfg, &p);
	if (r == 0)
		r = up_open(p, UP_WR, &sr->ws[0].end);
	if (r == 0)
		r = up_open(p, UP_RD | (sr->rd == SP_RD_EPOLL ? UP_NONBLOCK : 0) |
				       (sr->o->no_early ? UP_NO_EARLY : 0),
			    &sr->ws[1].end);
	if (r < 0)
		bench_die("--sparse: making a uringpipe: %s", up_strerror(r));
	sr->pipe = p; /* released after the run, its wakes counted */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest rank of sorted @v. */
static double rank_us(const uint64_t *v, unsigned n, double p)
{
	size_t r = (size_t)((double)n * p + 0.999999);
	if (n == 0)
		return 0.0;
	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return (double)v[r - 1] / 1e3;
}

struct sp_out {
	double p50, p99, max; /* µs */
	double cpu;           /* the reader's CPU share, 0..1 */
	double wcall, wake, take; /* p50s, µs; below 0: none (struct sp_run) */
	double woken;             /* uringpipe: wakes issued per message; below 0: none */
};

/* A run's per-message arrays, each of the most messages a run has. */
struct sp_bufs {
	uint64_t *lat, *wcall, *wake, *take;
};

/* The p50 of @n values (sorted here), µs, or -1 for none. */
static double p50_us(uint64_t *v, unsigned n)
{
	if (n == 0)
		return -1.0;
	qsort(v, n, sizeof(*v), cmp_u64);
	return rank_us(v, n, 0.50);
}

/* One run; fills *out or dies saying why. */
static void sp_run_once(const struct opts *o, const struct env *env, enum transport t, int rd,
			unsigned gap_us, unsigned nmsg, const struct sp_bufs *b, struct sp_out *out)
{
	uint64_t *lat = b->lat;
	static struct sp_run sr; /* large workers: not on the stack */
	struct shared *sh = &sr.rn.sh;
	struct timespec dl;
	pthread_t tid[2];

	memset(&sr, 0, sizeof(sr));
	sr.o = o;
	sr.env = env;
	sr.rd = rd;
	sr.gap_ns = (uint64_t)gap_us * 1000u;
	sr.nmsg = nmsg;
	sr.lat = lat;
	sr.wcall = b->wcall;
	sr.wake = b->wake;
	sr.take = b->take;
	sr.rn.o = o;
	sr.rn.env = env;
	sr.rn.t = t;
	sr.rn.size = SPARSE_MSG;
	sr.rn.nw = 1;
	sr.rn.n = 2;
	sr.rn.ws = sr.ws;
	sh->t = t;
	sh->size = SPARSE_MSG;
	sh->key = mix64(o->seed ^ 0x73706172736575u);
	if (pthread_barrier_init(&sh->bar, NULL, 2) != 0)
		bench_die("pthread_barrier_init failed");
	pthread_mutex_init(&sh->mu, NULL);
	cat_cond_init_mono(&sh->cv);
	for (int i = 0; i < 2; i++) {
		sr.ws[i].sh = sh;
		sr.ws[i].writer = i == 0;
		sr.ws[i].fd = -1;
	}
	if (is_up(t))
		sp_open_uring(&sr);
	else
		bench_kernel_open(&sr.rn);
	if (pthread_create(&tid[0], NULL, sp_writer, &sr) != 0 ||
	    pthread_create(&tid[1], NULL, sp_reader, &sr) != 0)
		bench_die("pthread_create failed");
	/* A transport that loses a wake-up would hang us: bound the run. */
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 30 + (time_t)((uint64_t)nmsg * gap_us / 1000000u) * 4;
	pthread_mutex_lock(&sh->mu);
	while (sh->done < 2)
		if (pthread_cond_timedwait(&sh->cv, &sh->mu, &dl) == ETIMEDOUT && sh->done < 2)
			bench_die("--sparse: %s, %s reader, %u us gap: no end after %ld s (%u of %u"
				  " messages read)", bench_tname[t], bench_sp_rd_name[rd], gap_us,
				  (long)(30 + (uint64_t)nmsg * gap_us / 1000000u * 4), sr.nlat, nmsg);
	pthread_mutex_unlock(&sh->mu);
	pthread_join(tid[0], NULL);
	pthread_join(tid[1], NULL);
	pthread_barrier_destroy(&sh->bar);
	pthread_mutex_destroy(&sh->mu);
	pthread_cond_destroy(&sh->cv);
	for (int i = 0; i < 2; i++)
		if (sr.ws[i].err[0])
			bench_die("--sparse: %s, %s reader, %u us gap: %s", bench_tname[t],
				  bench_sp_rd_name[rd], gap_us, sr.ws[i].err);
	if (sr.nlat != nmsg)
		bench_die("--sparse: %s, %s reader, %u us gap: %u of %u messages read",
			  bench_tname[t], bench_sp_rd_name[rd], gap_us, sr.nlat, nmsg);
	qsort(lat, nmsg, sizeof(*lat), cmp_u64);
	out->p50 = rank_us(lat, nmsg, 0.50);
	out->p99 = rank_us(lat, nmsg, 0.99);
	out->max = rank_us(lat, nmsg, 1.0);
	out->cpu = sr.rd_cpu;
	out->woken = -1.0;
	if (sr.pipe) {
		struct up_stats st;

		/* Counted by every end, the closed ones too. */
		if (up_stats(sr.pipe, &st) == 0)
			out->woken = (double)st.wakes / nmsg;
		up_pipe_release(sr.pipe);
	}
	out->wcall = p50_us(sr.wcall, sr.nwcall);
	out->wake = p50_us(sr.wake, sr.nsplit);
	out->take = p50_us(sr.take, sr.nsplit);
}

void bench_sparse(const struct opts *o, const struct env *env)
{
	struct sp_cell (*c)[SP_RD_COUNT] = bench_xmalloc(sizeof(*c) * T_COUNT);
	struct sp_bufs b;
	unsigned most = 0;
	size_t each;

	for (unsigned g = 0; g < o->ngaps; g++) {
		unsigned n = (unsigned)(o->run_time * 1e6 / o->gaps[g]);
		most = n > most ? n : most;
	}
	each = sizeof(uint64_t) * (most > MIN_MSGS ? most : MIN_MSGS);
	b.lat = bench_xmalloc(each);
	b.wcall = bench_xmalloc(each);
	b.wake = bench_xmalloc(each);
	b.take = bench_xmalloc(each);
	if (o->json) {
		printf("{\"tool\":\"uringpipe-cat --bench\",\"version\":\"%s\",\"mode\":\"sparse\","
		       "\"message_size\":%d,\"capacity\":%" PRIu64 ",\"backend\":\"%s\","
		       "\"repeat\":%u,\"writer_cpu\":%d,\"reader_cpu\":%d,\"run_time\":%.3f,"
		       "\"early_poll\":%s,\"no_early\":%s,",
		       UP_VERSION_STRING, SPARSE_MSG, o->capacity, env->backend, o->repeat,
		       env->cpu[0], env->cpu[1], o->run_time, o->no_early ? "false" : "true",
		       o->no_early ? "true" : "false");
		bench_json_transports(o, env);
		printf(",\"gaps\":[");
	} else {
		bench_print_header(o, env);
		printf("\n--sparse: %d-byte messages, 1 writer -> 1 reader%s; latency from the"
		       " writer's clock\n  before its write to the reader's after the whole message;"
		       " median over %u\n  round%s of p50/p99, max over rounds; p99 rounds: the lowest and"
		       " highest\n  round's p99, the spread a p99 ratio must clear to mean anything;"
		       "\n  rd cpu: the reader thread's CPU time over its run's wall time, median\n"
		       "%s",
		       SPARSE_MSG,
		       env->cpu[1] >= 0 ? " (pinned)" : "", o->repeat, o->repeat == 1 ? "" : "s",
		       o->no_early ? "  uringpipe's readers: UP_NO_EARLY (--no-early), woken as a"
				     " pipe's are\n" : "");
	}
	for (unsigned g = 0; g < o->ngaps; g++) {
		unsigned gap = o->gaps[g];
		unsigned n = (unsigned)(o->run_time * 1e6 / gap);

		n = n < MIN_MSGS ? MIN_MSGS : n;
		memset(c, 0, sizeof(*c) * T_COUNT);
		/* Alternating: every transport and reader once per round. */
		for (unsigned i = 0; i < o->repeat; i++)
			for (int k = 0; k < T_COUNT; k++) {
				enum transport t = bench_sp_order[k];
				if (!o->on[t])
					continue;
				for (int rd = 0; rd < SP_RD_COUNT; rd++) {
					struct sp_out r;
					sp_run_once(o, env, t, rd, gap, n, &b, &r);
					c[t][rd].p50[i] = r.p50;
					c[t][rd].p99[i] = r.p99;
					c[t][rd].max[i] = r.max;
					c[t][rd].cpu[i] = r.cpu;
					c[t][rd].wcall[i] = r.wcall;
					c[t][rd].wake[i] = r.wake;
					c[t][rd].take[i] = r.take;
					c[t][rd].woken[i] = r.woken;
					if (o->verbose)
						fprintf(stderr, "  sparse %-12s %-8s gap %u us: p50 %.1f"
							" p99 %.1f max %.1f us\n", bench_tlabel[t],
							bench_sp_rd_name[rd], gap, r.p50, r.p99, r.max);
				}
			}
		if (o->json)
			bench_sp_json_gap(o, gap, n, c, g == 0);
		else
			bench_sp_print_gap(o, gap, n, c);
	}
	if (o->json)
		printf("]}\n");
	free(b.lat);
	free(b.wcall);
	free(b.wake);
	free(b.take);
	free(c);
}
