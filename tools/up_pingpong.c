/* SPDX-License-Identifier: MIT */
/*
 * up_pingpong - 1-byte ping-pong round trips between two threads: kernel
 * pipes vs uringpipe, with a bare cache-line round trip for reference.
 *
 * Usage: uringpipe-pingpong [--rounds N] [--gap-rounds N] [--gap-us U]
 *                           [--no-reexec]
 *
 * Modes, each printed as p50/p99/max of the per-round round-trip time:
 *   cacheline     two atomics on separate 64-byte lines, both threads spin;
 *   kpipe b2b     two kernel pipes, back-to-back rounds;
 *   uringpipe b2b two uringpipes, back-to-back: the library's spin phase
 *                 may catch the reply without sleeping;
 *   kpipe gap     as kpipe b2b, but the initiator idles --gap-us (default
 *                 300 us, well beyond the library's spin phase)
 *                 before each round, so the responder is asleep when the
 *                 ping arrives;
 *   uringpipe gap the same for uringpipe: the ping must wake a sleeper
 *                 (there is no public knob to turn spinning off; the gap is
 *                 how "both threads sleep between messages" is produced).
 *                 The reply still may be caught by the initiator's spin.
 * Only the round trip is timed, never the gap. The two threads are pinned
 * to two different CPUs when the affinity mask allows it.
 *
 * The uringpipe modes run on the backend the library picks (io_uring unless
 * refused); then the program re-executes itself with UP_FORCE_FUTEX=1 to
 * measure the futex(2) fallback in the same run (--no-reexec to skip).
 * Figures on a VM move between runs: compare the ratios of one run.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

static int g_cpu[2] = { -1, -1 };
static cpu_set_t g_orig_mask; /* restored before the re-exec: pins survive exec */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void die(const char *what, long err)
{
	fprintf(stderr, "uringpipe-pingpong: %s: %s\n", what,
		err < 0 ? strerror((int)-err) : "unexpected result");
	exit(1);
}

static void pin(int side)
{
	cpu_set_t set;

	if (g_cpu[side] < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(g_cpu[side], &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void pick_cpus(void)
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	g_orig_mask = set;
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			g_cpu[n++] = i;
	if (n < 2)
		g_cpu[0] = g_cpu[1] = -1;
}

/* ---- results ---- */

struct result {
	double p50, p99, max; /* microseconds */
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct result summarise(uint64_t *ns, size_t n)
{
	struct result r;

	qsort(ns, n, sizeof(ns[0]), cmp_u64);
	r.p50 = (double)ns[n / 2] / 1e3;
	r.p99 = (double)ns[(n * 99) / 100] / 1e3;
	r.max = (double)ns[n - 1] / 1e3;
	return r;
}

static void show(const char *name, const char *backend, struct result r)
{
	printf("%-15s %-9s p50 %9.2f us   p99 %9.2f us   max %9.2f us\n", name, backend, r.p50,
	       r.p99, r.max);
}

/* ---- the bare cache-line round trip ---- */

struct cl {
	_Alignas(64) _Atomic uint64_t ping;
	_Alignas(64) _Atomic uint64_t pong;
	_Alignas(64) uint64_t rounds;
};

static void *cl_responder(void *arg)
{
	struct cl *c = arg;
	uint64_t i;

	pin(1);
	for (i = 1; i <= c->rounds; i++) {
		/* acquire/release: a message, as a real transport's would be. */
		while (atomic_load_explicit(&c->ping, memory_order_acquire) != i)
			;
		atomic_store_explicit(&c->pong, i, memory_order_release);
	}
	return NULL;
}

static struct result run_cacheline(uint64_t rounds)
{
	static struct cl c;
	uint64_t *ns = calloc(rounds, sizeof(*ns)), i;
	pthread_t th;

	if (!ns)
		die("calloc", -ENOMEM);
	atomic_store(&c.ping, 0);
	atomic_store(&c.pong, 0);
	c.rounds = rounds;
	if (pthread_create(&th, NULL, cl_responder, &c) != 0)
		die("pthread_create", -EAGAIN);
	pin(0);
	for (i = 1; i <= rounds; i++) {
		uint64_t t0 = now_ns();

		atomic_store_explicit(&c.ping, i, memory_order_release);
		while (atomic_load_explicit(&c.pong, memory_order_acquire) != i)
			;
		ns[i - 1] = now_ns() - t0;
	}
	pthread_join(th, NULL);
	{
		struct result r = summarise(ns, rounds);

		free(ns);
		return r;
	}
}

/* ---- transports: kernel pipes and uringpipes ---- */

struct chan {
	bool up;
	int kfd[2][2];           /* [0]: ping pipe, [1]: pong pipe; [x][0] read end */
	struct up_end *ue[2][2]; /* same layout */
};

static void chan_open(struct chan *c, bool up)
{
	int i;

	memset(c, 0, sizeof(*c));
	c->up = up;
	for (i = 0; i < 2; i++) {
		if (up) {
			struct up_config cfg;
			int r;

			up_config_init(&cfg);
			cfg.capacity = 16384;
			r = up_pipe2(c->ue[i], &cfg);
			if (r < 0)
				die("up_pipe2", r);
		} else if (pipe(c->kfd[i]) != 0) {
			die("pipe", -errno);
		}
	}
}

static void chan_send(struct chan *c, int which, uint8_t b)
{
	long r = c->up ? (long)up_write(c->ue[which][1], &b, 1)
		       : (long)write(c->kfd[which][1], &b, 1);

	if (r != 1)
		die("write", r < 0 && !c->up ? -errno : r);
}

/* Returns 1, or 0 at end of stream. */
static int chan_recv(struct chan *c, int which, uint8_t *b)
{
	long r = c->up ? (long)up_read(c->ue[which][0], b, 1) : (long)read(c->kfd[which][0], b, 1);

	if (r < 0)
		die("read", c->up ? r : -errno);
	return (int)r;
}

static void chan_close_ping_writer(struct chan *c)
{
	if (c->up) {
		up_close(c->ue[0][1]);
		c->ue[0][1] = NULL;
	} else {
		close(c->kfd[0][1]);
		c->kfd[0][1] = -1;
	}
}

static void chan_close(struct chan *c)
{
	int i, j;

	for (i = 0; i < 2; i++)
		for (j = 0; j < 2; j++) {
			if (c->up)
				up_close(c->ue[i][j]);
			else if (c->kfd[i][j] >= 0)
				close(c->kfd[i][j]);
		}
}

static void *responder(void *arg)
{
	struct chan *c = arg;
	uint8_t b;

	pin(1);
	while (chan_recv(c, 0, &b) == 1)
		chan_send(c, 1, (uint8_t)(0xffu - b)); /* the complement */
	return NULL;
}

static const char *backend_of(struct chan *c)
{
	static struct up_stats st;

	if (!c->up)
		return "kernel";
	if (up_stats(up_end_pipe(c->ue[0][0]), &st) < 0)
		return "?";
	return st.backend;
}

static struct result run_chan(bool up, uint64_t rounds, uint64_t gap_ns, const char **backend)
{
	struct chan c;
	uint64_t *ns = calloc(rounds, sizeof(*ns)), i;
	pthread_t th;
	struct result r;

	if (!ns)
		die("calloc", -ENOMEM);
	chan_open(&c, up);
	*backend = backend_of(&c);
	if (pthread_create(&th, NULL, responder, &c) != 0)
		die("pthread_create", -EAGAIN);
	pin(0);
	/* A few unmeasured rounds: page faults, ring set-up, spin warm-up. */
	for (i = 0; i < rounds + 50; i++) {
		uint8_t b = 0, want = (uint8_t)i;
		uint64_t t0;

		if (gap_ns)
			nap_ns(gap_ns);
		t0 = now_ns();
		chan_send(&c, 0, want);
		if (chan_recv(&c, 1, &b) != 1 || (unsigned)b + (unsigned)want != 0xffu)
			die("round trip", 0);
		if (i >= 50)
			ns[i - 50] = now_ns() - t0;
	}
	chan_close_ping_writer(&c);
	pthread_join(th, NULL);
	chan_close(&c);
	r = summarise(ns, rounds);
	free(ns);
	return r;
}

int main(int argc, char **argv)
{
	uint64_t rounds = 20000, gap_rounds = 2000, gap_us = 300;
	bool reexec = true, up_only = false;
	struct result cl = { 0 }, kb = { 0 }, kg = { 0 }, ub, ug;
	const char *kbe = "kernel", *ube = "?";
	int a;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--rounds") == 0 && a + 1 < argc)
			rounds = strtoull(argv[++a], NULL, 0);
		else if (strcmp(argv[a], "--gap-rounds") == 0 && a + 1 < argc)
			gap_rounds = strtoull(argv[++a], NULL, 0);
		else if (strcmp(argv[a], "--gap-us") == 0 && a + 1 < argc)
			gap_us = strtoull(argv[++a], NULL, 0);
		else if (strcmp(argv[a], "--no-reexec") == 0)
			reexec = false;
		else if (strcmp(argv[a], "--uringpipe-only") == 0 && a + 1 < argc) {
			/* internal: the re-executed run, with the reference p50s */
			up_only = true;
			reexec = false;
			if (sscanf(argv[++a], "%lf,%lf,%lf", &cl.p50, &kb.p50, &kg.p50) != 3)
				return 2;
		}
		else {
			fprintf(stderr,
				"usage: %s [--rounds N] [--gap-rounds N] [--gap-us U] [--no-reexec]\n",
				argv[0]);
			return 2;
		}
	}
	if (rounds < 100 || gap_rounds < 100) {
		fprintf(stderr, "need at least 100 rounds\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pick_cpus();
	if (!up_only) {
		printf("# 1-byte round trips; threads on CPUs %d and %d; %" PRIu64
		       " back-to-back rounds, %" PRIu64 " rounds after a %" PRIu64 " us gap\n",
		       g_cpu[0], g_cpu[1], rounds, gap_rounds, gap_us);
		cl = run_cacheline(rounds * 5);
		show("cacheline", "-", cl);
		kb = run_chan(false, rounds, 0, &kbe);
		show("kpipe b2b", kbe, kb);
		kg = run_chan(false, gap_rounds, gap_us * 1000, &kbe);
		show("kpipe gap", kbe, kg);
	}
	ub = run_chan(true, rounds, 0, &ube);
	show("uringpipe b2b", ube, ub);
	ug = run_chan(true, gap_rounds, gap_us * 1000, &ube);
	show("uringpipe gap", ube, ug);
	printf("ratio %-9s uringpipe gap / kpipe gap (p50) = %.2f  (goal <= 1)\n", ube,
	       ug.p50 / kg.p50);
	printf("ratio %-9s uringpipe b2b / kpipe b2b (p50) = %.2f\n", ube, ub.p50 / kb.p50);
	printf("ratio %-9s uringpipe b2b / cacheline (p50) = %.2f  (goal <= 3)\n", ube,
	       ub.p50 / cl.p50);
	if (!up_only) {
		/* The fallback, in the same run: re-execute with it forced. */
		if (reexec && !getenv("UP_FORCE_FUTEX")) {
			char r1[32], r2[32], r3[32], ref[96];

			fflush(stdout);
			snprintf(r1, sizeof(r1), "%" PRIu64, rounds);
			snprintf(r2, sizeof(r2), "%" PRIu64, gap_rounds);
			snprintf(r3, sizeof(r3), "%" PRIu64, gap_us);
			snprintf(ref, sizeof(ref), "%.4f,%.4f,%.4f", cl.p50, kb.p50, kg.p50);
			setenv("UP_FORCE_FUTEX", "1", 1);
			(void)sched_setaffinity(0, sizeof(g_orig_mask), &g_orig_mask);
			execl("/proc/self/exe", argv[0], "--uringpipe-only", ref, "--rounds", r1,
			      "--gap-rounds", r2, "--gap-us", r3, (char *)NULL);
			perror("re-exec with UP_FORCE_FUTEX=1");
			return 1;
		}
	}
	return 0;
}
