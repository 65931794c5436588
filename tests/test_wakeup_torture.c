/* SPDX-License-Identifier: MIT */
/*
 * test_wakeup_torture.c - lost-wakeup torture (issue 3).
 *
 * Usage: test_wakeup_torture [CASE] [--seed N] [--seconds S]
 * Prints "seed=N" first; --seconds is split among the cases.
 *
 * Bursts: W writers and R readers (1x1 and 3x2, as threads and as forked
 * processes on one memfd) move many short bursts of framed 64-byte records
 * with an idle gap after each burst. The gap (clock_nanosleep, 80 us .. 1.5
 * ms) outlasts the library's spin phase (at most ~50 us), so a reader really
 * goes to sleep between bursts and the next burst must wake it; a burst may
 * also be larger than the pipe, so writers sleep on a full ring too. The gap
 * only shapes the load: correctness never depends on it (the coordinator
 * waits for the burst's bytes to be consumed by polling a counter).
 * Every record carries writer id, burst and sequence number, a payload derived
 * from them and a check word; readers verify each record, per-writer order
 * within their own view, and the totals (count and an order-independent hash
 * per writer) must match what the writers sent: nothing lost, nothing twice.
 *
 * Ping-pong: two pipes, 1-byte request/response, thousands of rounds, with
 * random idle gaps on either side so that the peer is asleep at times: the
 * classic lost-wakeup detector.
 *
 * Detecting a lost wakeup. A sleeping side re-checks every 50 ms (the wait
 * slice that also covers dead peers), so a lost wakeup shows up as a stall,
 * not a hang. The coordinator therefore watches progress: when nothing moved
 * for 20 ms while data is pending (or a writer is inside up_write, or, for
 * ping-pong, both sides are inside a call) and EVERY worker that is inside a
 * library call is in scheduler state 'S' (read from /proc/<tid>/stat), then
 * everyone is asleep although someone has work: that is a lost wakeup and the
 * test fails. A preempted thread is 'R', so a noisy host causes no false
 * failure. A real hang is turned into a failure by the watchdog.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "harness.h"
#include "up_int.h" /* the shared lines, for the stall report */
#include "uringpipe.h"

#define REC        64u
#define MAXW       4
#define MAXR       4
#define MAXWK      (MAXW + MAXR)
#define CAPACITY   (64u * 1024u)
#define STALL_NS   20000000ull /* 20 ms without progress */

enum { PH_IDLE = 0, PH_READ = 1, PH_WRITE = 2 };

struct rec {
	uint32_t writer;
	uint32_t burst;
	uint64_t seq;
	uint8_t pay[40];
	uint64_t check;
};
_Static_assert(sizeof(struct rec) == REC, "record size");

struct worker {
	_Atomic int32_t tid;
	_Atomic int32_t phase;
};

/* Lives in a MAP_SHARED page: shared by threads and forked processes. */
struct ctl {
	_Atomic uint32_t burst; /* futex word: writers wait for the next burst */
	_Atomic uint32_t stop;
	_Atomic uint32_t ready; /* start barrier */
	_Atomic uint64_t produced, consumed; /* bytes, after the call returned */
	_Atomic uint64_t progress;           /* bumped by every returned call */
	struct worker wk[MAXWK];
	/* results */
	uint64_t w_count[MAXW], w_hash[MAXW];
	uint64_t r_count[MAXR][MAXW], r_hash[MAXR][MAXW];
	uint64_t r_waits[MAXR];
	uint64_t rounds;
};

struct cfg {
	const char *name;
	int nw, nr;
	bool procs;
	bool pingpong;
};

/*
 * Under TSan the cases with forked processes do not run: their children
 * start threads of their own (the close watcher, at their first sleep), and
 * TSan does not support threads started after a multi-threaded fork. One
 * such child hung in TSan's pthread_create() in CI, waiting for its new
 * thread to start. The release and ASan builds run them; TSan, the
 * threaded cases (UP_TEST_TSAN: harness.h).
 */

static uint64_t g_seed;
static double g_case_seconds;
static struct ctl *g_ctl;
static struct up_pipe *g_pipe, *g_pipe2;
static struct cfg g_cfg;

/* ---- small helpers ---- */

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void fwait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void fwake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void set_phase(int wk, int ph)
{
	atomic_store_explicit(&g_ctl->wk[wk].phase, ph, memory_order_seq_cst);
}

static void bump_progress(void)
{
	atomic_fetch_add_explicit(&g_ctl->progress, 1, memory_order_relaxed);
}

/* Start barrier: every worker has opened its end before data moves (a reader
 * alone would see EOF, a writer alone -EPIPE). Polls: state, not a delay. */
static void barrier(int total)
{
	atomic_fetch_add_explicit(&g_ctl->ready, 1, memory_order_seq_cst);
	while (atomic_load_explicit(&g_ctl->ready, memory_order_seq_cst) < (uint32_t)total)
		harness_nap_ns(20000);
}

/* ---- records ---- */

static uint64_t rec_check(uint32_t w, uint32_t b, uint64_t seq)
{
	return harness_mix64(g_seed ^ ((uint64_t)w << 56) ^ ((uint64_t)b << 32) ^
			     (seq * 0x9e3779b97f4a7c15ull));
}

static void rec_make(struct rec *r, uint32_t w, uint32_t b, uint64_t seq)
{
	uint64_t c = rec_check(w, b, seq);
	size_t i;

	r->writer = w;
	r->burst = b;
	r->seq = seq;
	for (i = 0; i < sizeof(r->pay); i++)
		r->pay[i] = (uint8_t)(harness_mix64(c + i / 8) >> ((i % 8) * 8));
	r->check = c;
}

static void rec_verify(const struct rec *r, int nw)
{
	struct rec want;

	if (r->writer >= (uint32_t)nw) {
		fprintf(stderr, "bad record: writer %u\n", r->writer);
		harness_fail();
	}
	rec_make(&want, r->writer, r->burst, r->seq);
	if (memcmp(&want, r, sizeof(want)) != 0) {
		fprintf(stderr, "torn/corrupt record: writer %u burst %u seq %" PRIu64 "\n",
			r->writer, r->burst, r->seq);
		harness_fail();
	}
}

/* Records writer @w sends in burst @b: mostly small, sometimes several times
 * the capacity (writers then sleep on a full ring). Deterministic from seed. */
static uint32_t burst_records(uint32_t b, int w)
{
	struct harness_rng rng;
	uint64_t x;

	harness_rng_seed(&rng, g_seed ^ ((uint64_t)b << 8) ^ (uint64_t)w ^ 0xb0b0);
	x = harness_rng_range(&rng, 0, 99);
	if (x < 60)
		return (uint32_t)harness_rng_range(&rng, 1, 8);
	if (x < 90)
		return (uint32_t)harness_rng_range(&rng, 1, 200);
	return (uint32_t)harness_rng_range(&rng, 200, 3 * CAPACITY / REC);
}

/* ---- burst workers ---- */

static void writer_run(int wi, struct up_pipe *p)
{
	struct up_end *w = NULL;
	struct harness_rng rng;
	struct rec buf[4096 / REC];
	uint32_t last = 0;
	uint64_t seq = 0, hash = 0;
	int wk = wi;

	atomic_store_explicit(&g_ctl->wk[wk].tid, my_tid(), memory_order_relaxed);
	CHECK_OK(up_open(p, UP_WR, &w));
	barrier(g_cfg.nw + g_cfg.nr);
	harness_rng_seed(&rng, g_seed ^ 0x77 ^ (uint64_t)wi);
	for (;;) {
		uint32_t b, n, i = 0;

		while ((b = atomic_load_explicit(&g_ctl->burst, memory_order_acquire)) == last &&
		       !atomic_load_explicit(&g_ctl->stop, memory_order_acquire))
			fwait(&g_ctl->burst, last);
		if (b == last)
			break; /* stop */
		last = b;
		n = burst_records(b, wi);
		while (i < n) {
			uint32_t k = (uint32_t)harness_rng_range(&rng, 1, 4096 / REC), j;
			ssize_t r;

			if (k > n - i)
				k = n - i;
			for (j = 0; j < k; j++) {
				rec_make(&buf[j], (uint32_t)wi, b, seq + j);
				hash += harness_mix64(buf[j].check);
			}
			set_phase(wk, PH_WRITE);
			r = up_write(w, buf, (size_t)k * REC);
			set_phase(wk, PH_IDLE);
			CHECK_EQ(r, (ssize_t)k * REC);
			atomic_fetch_add_explicit(&g_ctl->produced, (uint64_t)r, memory_order_seq_cst);
			bump_progress();
			seq += k;
			i += k;
		}
	}
	g_ctl->w_count[wi] = seq;
	g_ctl->w_hash[wi] = hash;
	CHECK_OK(up_close(w));
}

static void reader_account(int ri, const struct rec *r, uint64_t *next_seq)
{
	rec_verify(r, g_cfg.nw);
	/* In one reader's view a writer's records come in order (a later one
	 * can be missing: the other reader took it). */
	if (r->seq < next_seq[r->writer]) {
		fprintf(stderr, "reader %d: writer %u seq %" PRIu64 " after %" PRIu64 "\n", ri,
			r->writer, r->seq, next_seq[r->writer]);
		harness_fail();
	}
	next_seq[r->writer] = r->seq + 1;
	g_ctl->r_count[ri][r->writer]++;
	g_ctl->r_hash[ri][r->writer] += harness_mix64(r->check);
}

static void reader_run(int ri, struct up_pipe *p)
{
	struct up_end *rd = NULL;
	struct harness_rng rng;
	uint64_t next_seq[MAXW] = { 0 };
	static _Thread_local unsigned char buf[8192];
	size_t have = 0;
	int wk = MAXW + ri;
	struct up_stats st;

	atomic_store_explicit(&g_ctl->wk[wk].tid, my_tid(), memory_order_relaxed);
	CHECK_OK(up_open(p, UP_RD, &rd));
	barrier(g_cfg.nw + g_cfg.nr);
	harness_rng_seed(&rng, g_seed ^ 0x99 ^ (uint64_t)ri);
	for (;;) {
		/* One reader: random read sizes, records reassembled. Several:
		 * exactly one record per read (writes are whole records and
		 * atomic, so a read of REC bytes must get a whole record). */
		size_t want = g_cfg.nr == 1 ? (size_t)harness_rng_range(&rng, 1, 4096) : REC;
		ssize_t n;
		size_t off = 0;

		set_phase(wk, PH_READ);
		n = up_read(rd, buf + have, want);
		set_phase(wk, PH_IDLE);
		CHECK_OK(n);
		if (n == 0)
			break;
		if (g_cfg.nr > 1 && n != (ssize_t)REC) {
			fprintf(stderr, "reader %d: read of %u bytes returned %zd with whole records queued\n",
				ri, REC, n);
			harness_fail();
		}
		have += (size_t)n;
		while (have - off >= REC) {
			struct rec r;

			memcpy(&r, buf + off, REC);
			reader_account(ri, &r, next_seq);
			off += REC;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
		atomic_fetch_add_explicit(&g_ctl->consumed, (uint64_t)n, memory_order_seq_cst);
		bump_progress();
	}
	if (have != 0) {
		fprintf(stderr, "reader %d: %zu bytes of a torn record at end of stream\n", ri, have);
		harness_fail();
	}
	CHECK_OK(up_stats(p, &st));
	g_ctl->r_waits[ri] = st.waits;
	CHECK_OK(up_close(rd));
}

/* ---- ping-pong workers (two pipes, 1 byte) ---- */

static void pp_run(int side)
{
	struct up_end *out = NULL, *in = NULL;
	struct harness_rng rng;
	uint64_t deadline = harness_now_ns() + (uint64_t)(g_case_seconds * 1e9);
	uint64_t round = 0;
	const uint64_t max_rounds = 200000;

	atomic_store_explicit(&g_ctl->wk[side].tid, my_tid(), memory_order_relaxed);
	/* side 0: writes pipe 1, reads pipe 2; side 1 the other way round. */
	CHECK_OK(up_open(side == 0 ? g_pipe : g_pipe2, UP_WR, &out));
	CHECK_OK(up_open(side == 0 ? g_pipe2 : g_pipe, UP_RD, &in));
	barrier(2);
	harness_rng_seed(&rng, g_seed ^ 0x5151 ^ (uint64_t)side);
	for (;;) {
		uint8_t b = 0, want = (uint8_t)(round * 7 + 1);
		ssize_t r;

		if (side == 0 &&
		    (round >= max_rounds || (round >= 2000 && harness_now_ns() > deadline)))
			break;
		/* A gap on either side now and then: the peer, spinning for
		 * at most ~50 us, then finds itself asleep. */
		if (side == 0 && harness_rng_range(&rng, 0, 3) == 0)
			harness_nap_ns(harness_rng_range(&rng, 60000, 300000));
		if (side == 0) {
			set_phase(side, PH_WRITE);
			r = up_write(out, &want, 1);
			set_phase(side, PH_IDLE);
			CHECK_EQ(r, 1);
			atomic_fetch_add_explicit(&g_ctl->produced, 1, memory_order_seq_cst);
		}
		set_phase(side, PH_READ);
		r = up_read(in, &b, 1);
		set_phase(side, PH_IDLE);
		CHECK_OK(r);
		if (r == 0) {
			CHECK_EQ(side, 1); /* side 0 closed: the end */
			break;
		}
		CHECK_EQ(r, 1);
		atomic_fetch_add_explicit(&g_ctl->consumed, 1, memory_order_seq_cst);
		CHECK_EQ(b, side == 0 ? (uint8_t)(want ^ 0xff) : want);
		if (side == 1) {
			uint8_t resp = (uint8_t)(b ^ 0xff);

			if (harness_rng_range(&rng, 0, 7) == 0)
				harness_nap_ns(harness_rng_range(&rng, 60000, 300000));
			set_phase(side, PH_WRITE);
			r = up_write(out, &resp, 1);
			set_phase(side, PH_IDLE);
			CHECK_EQ(r, 1);
			atomic_fetch_add_explicit(&g_ctl->produced, 1, memory_order_seq_cst);
		}
		bump_progress();
		round++;
	}
	if (side == 0) {
		g_ctl->rounds = round;
		atomic_store_explicit(&g_ctl->stop, 1, memory_order_release);
	}
	CHECK_OK(up_close(out));
	if (side == 0) {
		/* Drain to EOF so the peer's last write never sees -EPIPE
		 * racing with our close. */
		uint8_t b;

		CHECK_EQ(up_read(in, &b, 1), 0);
	}
	CHECK_OK(up_close(in));
}

/* ---- launching ---- */

struct thr_arg {
	int kind; /* 0 writer, 1 reader, 2 ping-pong side */
	int idx;
};

static void run_worker(const struct thr_arg *a, struct up_pipe *p)
{
	if (a->kind == 0)
		writer_run(a->idx, p);
	else if (a->kind == 1)
		reader_run(a->idx, p);
	else
		pp_run(a->idx);
}

static void *thr_main(void *arg)
{
	run_worker(arg, g_pipe);
	return NULL;
}

static struct up_pipe *attach(struct up_pipe *inh)
{
	struct up_pipe *q = NULL;

	CHECK_OK(up_pipe_attach(up_pipe_fd(inh), &q));
	return q;
}

/*
 * The lost-wakeup detector (see the top of the file). Returns true when
 * every worker inside a library call is asleep although work is pending.
 */
static bool all_asleep_with_work(int nwk, const int *wkidx)
{
	int64_t pend = (int64_t)(atomic_load(&g_ctl->produced) - atomic_load(&g_ctl->consumed));
	int incall = 0, writer_in = 0, i;

	for (i = 0; i < nwk; i++) {
		int ph = atomic_load(&g_ctl->wk[wkidx[i]].phase);
		char st = harness_tid_state(atomic_load(&g_ctl->wk[wkidx[i]].tid));

		/* A worker between calls that is running or runnable will make
		 * its next call: nothing is stalled while it has not (under
		 * TSan on a busy machine it can wait tens of ms for a CPU). One
		 * between calls and asleep waits for the driver's next burst. */
		if (ph == PH_IDLE) {
			if (st == 'R')
				return false;
			continue;
		}
		if (st != 'S')
			return false;
		incall++;
		writer_in |= ph == PH_WRITE;
	}
	if (incall == 0)
		return false;
	if (g_cfg.pingpong)
		return incall == nwk;
	return pend > 0 || writer_in;
}

/* Print one line of a /proc file, prefixed, if it can be read. */
static void print_proc_line(const char *what, pid_t tid)
{
	char path[64], buf[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)tid, what);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f))
		fprintf(stderr, "    %s: %.*s\n", what, (int)strcspn(buf, "\n"), buf);
	fclose(f);
}

/*
 * A stall was found: say where every worker sleeps (its system call and
 * kernel wait channel) and what the pipe's shared lines hold, so that a
 * failure seen once in CI can be explained without a rerun. (This is how
 * the lost lock hand-off of lock_take(), now up__lock_take_slow(), was found.)
 */
static void report_stall(int nwk, const int *wkidx)
{
	const struct up_shm_lines *l = g_pipe->ln;
	uint64_t pos = atomic_load(&l->cons.pos);
	int i;

	for (i = 0; i < nwk; i++) {
		const struct worker *w = &g_ctl->wk[wkidx[i]];
		pid_t tid = atomic_load(&w->tid);

		fprintf(stderr, "  worker %d: phase %d, tid %d, state %c\n", wkidx[i],
			(int)atomic_load(&w->phase), (int)tid, harness_tid_state(tid));
		print_proc_line("syscall", tid);
		print_proc_line("wchan", tid);
	}
	fprintf(stderr,
		"  wlock %#x bias %#x, rlock %#x, head %u, tail %u + %u, pool get %u put %u, "
		"readers %u writers %u\n",
		atomic_load(&l->wlock.word), atomic_load(&l->wlock.bias),
		atomic_load(&l->rlock.word), atomic_load(&l->prod.head), up__pos_tail(pos),
		up__pos_off(pos), atomic_load(&l->pget.get), atomic_load(&l->pput.put),
		atomic_load(&l->state.readers), atomic_load(&l->state.writers));
	fprintf(stderr, "  rd_wait seq %u nwait %u pending %u; wr_wait seq %u nwait %u pending %u\n",
		atomic_load(&l->rd_wait.seq), atomic_load(&l->rd_wait.nwait),
		atomic_load(&l->rd_wait.pending), atomic_load(&l->wr_wait.seq),
		atomic_load(&l->wr_wait.nwait), atomic_load(&l->wr_wait.pending));
	for (i = 0; i < (int)g_pipe->g.max_ends; i++) {
		const struct up_shm_end *e = &g_pipe->ends[i];

		if (atomic_load(&e->state) != UP_END_FREE)
			fprintf(stderr, "  end %d: state %#x pid %d busy %u armed %u\n", i,
				atomic_load(&e->state), (int)atomic_load(&e->pid),
				atomic_load(&e->busy), atomic_load(&e->armed));
	}
}

/* Polls @done, running the detector. */
static void watch_until(bool (*done)(uint64_t), uint64_t arg, int nwk, const int *wkidx,
			uint64_t *max_stall)
{
	uint64_t last_prog = atomic_load(&g_ctl->progress), t_prog = harness_now_ns();

	while (!done(arg)) {
		siginfo_t si;
		uint64_t pr = atomic_load(&g_ctl->progress), t = harness_now_ns();

		/* A forked worker that failed: stop here, not at the watchdog. */
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0 &&
		    (si.si_code != CLD_EXITED || si.si_status != 0)) {
			fprintf(stderr, "worker process %d failed (code %d status %d)\n",
				(int)si.si_pid, si.si_code, si.si_status);
			harness_fail();
		}
		if (pr != last_prog) {
			if (t - t_prog > *max_stall)
				*max_stall = t - t_prog;
			last_prog = pr;
			t_prog = t;
		} else if (t - t_prog > STALL_NS && all_asleep_with_work(nwk, wkidx)) {
			/* Confirm once: still nothing moved, still all asleep. */
			harness_nap_ns(2000000);
			if (atomic_load(&g_ctl->progress) == last_prog && !done(arg) &&
			    all_asleep_with_work(nwk, wkidx)) {
				fprintf(stderr,
					"LOST WAKEUP: no progress for %.1f ms, every worker in a call is asleep "
					"(produced %" PRIu64 ", consumed %" PRIu64 ")\n",
					(double)(harness_now_ns() - t_prog) / 1e6,
					atomic_load(&g_ctl->produced), atomic_load(&g_ctl->consumed));
				report_stall(nwk, wkidx);
				harness_fail();
			}
		}
		harness_nap_ns(100000);
	}
}

static bool consumed_reached(uint64_t want)
{
	return atomic_load(&g_ctl->consumed) >= want;
}

static bool ready_reached(uint64_t want)
{
	return atomic_load(&g_ctl->ready) >= want;
}

static bool rounds_done(uint64_t unused)
{
	(void)unused;
	return atomic_load(&g_ctl->stop) != 0;
}

static void run_case(const struct cfg *c)
{
	struct up_config ucfg;
	struct thr_arg args[MAXWK];
	pthread_t th[MAXWK];
	pid_t pids[MAXWK];
	int wkidx[MAXWK];
	int n = 0, i;
	uint64_t max_stall = 0, bursts = 0, total_bytes = 0, waits = 0;
	struct up_stats st;
	double t0 = harness_now();

	g_cfg = *c;
	memset(g_ctl, 0, sizeof(*g_ctl));
	up_config_init(&ucfg);
	ucfg.capacity = c->pingpong ? 16384 : CAPACITY;
	CHECK_OK(up_pipe_create(&ucfg, &g_pipe));
	g_pipe2 = NULL;
	if (c->pingpong) {
		CHECK_OK(up_pipe_create(&ucfg, &g_pipe2));
		args[0] = (struct thr_arg){ 2, 0 };
		args[1] = (struct thr_arg){ 2, 1 };
		wkidx[0] = 0;
		wkidx[1] = 1;
		n = 2;
	} else {
		for (i = 0; i < c->nw; i++) {
			args[n] = (struct thr_arg){ 0, i };
			wkidx[n++] = i;
		}
		for (i = 0; i < c->nr; i++) {
			args[n] = (struct thr_arg){ 1, i };
			wkidx[n++] = MAXW + i;
		}
	}
	for (i = 0; i < n; i++) {
		if (c->procs) {
			/* This process opens no end: a worker inherits none. */
			pids[i] = fork();
			CHECK_SYS(pids[i]);
			if (pids[i] == 0) {
				/* A failed parent must not leave workers behind. */
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				harness_watchdog((unsigned)(g_case_seconds + 60));
				g_pipe = attach(g_pipe);
				if (g_pipe2)
					g_pipe2 = attach(g_pipe2);
				run_worker(&args[i], g_pipe);
				fflush(stdout);
				_exit(0);
			}
		} else {
			CHECK_EQ(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
		}
	}
	watch_until(ready_reached, (uint64_t)n, 0, wkidx, &max_stall);
	if (c->pingpong) {
		/* Side 0 ends the run: watch until it says so. */
		watch_until(rounds_done, 0, n, wkidx, &max_stall);
	} else {
		struct harness_rng rng;
		uint64_t deadline = harness_now_ns() + (uint64_t)(g_case_seconds * 1e9);

		harness_rng_seed(&rng, g_seed ^ 0x6a9);
		for (bursts = 1; bursts < 100000; bursts++) {
			for (i = 0; i < c->nw; i++)
				total_bytes += (uint64_t)burst_records((uint32_t)bursts, i) * REC;
			atomic_store_explicit(&g_ctl->burst, (uint32_t)bursts, memory_order_release);
			fwake(&g_ctl->burst);
			watch_until(consumed_reached, total_bytes, n, wkidx, &max_stall);
			/* The idle gap: load shaping only. */
			harness_nap_ns(harness_rng_range(&rng, 80000, 1500000));
			if (bursts >= 50 && harness_now_ns() > deadline)
				break;
		}
		atomic_store_explicit(&g_ctl->stop, 1, memory_order_release);
		fwake(&g_ctl->burst);
	}
	for (i = 0; i < n; i++) {
		if (c->procs)
			harness_reap_ok(pids[i], g_case_seconds + 60, c->name);
		else
			CHECK_EQ(pthread_join(th[i], NULL), 0);
	}
	CHECK_OK(up_stats(g_pipe, &st));
	if (c->pingpong) {
		CHECK(g_ctl->rounds >= 2000);
		CHECK_EQ(atomic_load(&g_ctl->produced), 2 * g_ctl->rounds);
		CHECK_EQ(atomic_load(&g_ctl->consumed), 2 * g_ctl->rounds);
		printf("# %-14s backend=%s rounds=%" PRIu64 " max_stall=%.2f ms (%.2f s)\n", c->name,
		       st.backend, g_ctl->rounds, (double)max_stall / 1e6, harness_now() - t0);
	} else {
		int w, r;

		for (w = 0; w < c->nw; w++) {
			uint64_t cnt = 0, h = 0;

			for (r = 0; r < c->nr; r++) {
				cnt += g_ctl->r_count[r][w];
				h += g_ctl->r_hash[r][w];
			}
			if (cnt != g_ctl->w_count[w] || h != g_ctl->w_hash[w]) {
				fprintf(stderr,
					"%s: writer %d sent %" PRIu64 " records (hash %016" PRIx64
					"), readers got %" PRIu64 " (hash %016" PRIx64 ")\n",
					c->name, w, g_ctl->w_count[w], g_ctl->w_hash[w], cnt, h);
				harness_fail();
			}
		}
		CHECK_EQ(atomic_load(&g_ctl->consumed), total_bytes);
		for (r = 0; r < c->nr; r++)
			waits += g_ctl->r_waits[r];
		printf("# %-14s backend=%s bursts=%" PRIu64 " bytes=%" PRIu64
		       " reader_sleeps=%" PRIu64 " max_stall=%.2f ms (%.2f s)\n",
		       c->name, st.backend, bursts, total_bytes, waits,
		       (double)max_stall / 1e6, harness_now() - t0);
		/* The gaps must really have put readers to sleep, or this
		 * test tortures nothing. */
		CHECK(waits > 0 || c->procs);
	}
	up_pipe_release(g_pipe);
	up_pipe_release(g_pipe2);
	g_pipe = g_pipe2 = NULL;
}

static const struct cfg g_cases[] = {
	{ "burst_thr_1x1", 1, 1, false, false },
	{ "burst_thr_3x2", 3, 2, false, false },
	{ "burst_proc_1x1", 1, 1, true, false },
	{ "burst_proc_3x2", 3, 2, true, false },
	{ "pingpong_thr", 1, 1, false, true },
	{ "pingpong_proc", 1, 1, true, true },
};

int main(int argc, char **argv)
{
	double seconds = 2.0;
	const char *only = NULL;
	size_t i, ncase = sizeof(g_cases) / sizeof(g_cases[0]), nrun = 0;
	int a;

	g_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc)
			g_seed = strtoull(argv[++a], NULL, 0);
		else if (strcmp(argv[a], "--seconds") == 0 && a + 1 < argc)
			seconds = strtod(argv[++a], NULL);
		else if (argv[a][0] != '-')
			only = argv[a];
		else {
			fprintf(stderr, "usage: %s [CASE] [--seed N] [--seconds S]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("seed=%" PRIu64 "\n", g_seed);
	harness_fail_on_sigpipe();
	for (i = 0; i < ncase; i++) {
		if (only && strcmp(only, g_cases[i].name) != 0)
			continue;
		if (UP_TEST_TSAN && g_cases[i].procs) {
			printf("skip %s: processes, under TSan (see the top)\n", g_cases[i].name);
			if (only)
				return 77;
			continue;
		}
		nrun++;
	}
	if (nrun == 0) {
		fprintf(stderr, "no case named %s\n", only);
		return 2;
	}
	g_case_seconds = seconds / (double)nrun;
	harness_watchdog((unsigned)(seconds + 60 + 10 * (double)nrun));
	g_ctl = mmap(NULL, sizeof(*g_ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	CHECK(g_ctl != MAP_FAILED);
	harness_block_sigchld();
	for (i = 0; i < ncase; i++) {
		if ((only && strcmp(only, g_cases[i].name) != 0) ||
		    (UP_TEST_TSAN && g_cases[i].procs))
			continue;
		run_case(&g_cases[i]);
		printf("ok %s\n", g_cases[i].name);
	}
	return 0;
}
