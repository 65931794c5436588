/* SPDX-License-Identifier: MIT */
/*
 * test_peer_death.c - SIGKILL of a peer process (issue 3: a peer process
 * that dies without closing counts as closed, and the survivor finds out
 * within 100 ms even while it sleeps).
 *
 * Usage: test_peer_death [CASE] [--reps N]
 *
 * Each kill case forks a victim process that attaches to the memfd and
 * opens one end; the survivor is a thread of the test process. The victim is
 * killed with SIGKILL:
 *   writer_dies_while_reader_sleeps  the reader drained everything and is
 *                                    asleep in up_read;
 *   writer_dies_while_streaming      the reader is consuming a live stream;
 *   reader_dies_while_writer_sleeps  the writer is asleep in up_write on a
 *                                    full pipe;
 *   reader_dies_while_streaming      the writer is writing a live stream.
 * The survivor's call must return 0 (end of stream) / -EPIPE within 100 ms
 * of the kill (CLOCK_MONOTONIC from just before kill() to the return).
 * "Asleep" is established without sleeping: the survivor announces that it
 * is about to enter the call, and the test then polls /proc/<tid>/stat until
 * the thread is in state S (and the endpoint's wait counter moved).
 *
 * Published data: the victim writer sends framed records (<= PIPE_BUF each,
 * so each is atomic), and after each up_write returns it bumps a counter in
 * a MAP_SHARED page. The survivor must receive at least that many records,
 * at most one more (written but not yet counted), every one intact, and no
 * torn tail at end of stream.
 *
 * The victim is reaped right after the kill, as a supervisor would. The case
 * zombie_writer_not_reaped leaves it a zombie until the survivor has seen
 * end of stream: a process that has exited is dead for the pipe's purposes
 * even before its parent collects its status (the parent may be the very
 * process that is waiting on the pipe).
 *
 * writer_dies_paced_*: the victim writer sends a record every 1 ms, a
 * steady gap the survivor reader learns, so that it wakes early for them
 * (core/early.c): blocking, it sleeps until just before each and spins; in
 * poll mode (UP_EARLY_POLL, the default), its fd turns readable ahead of
 * each and its loop polls through the window, with no peer watched. The
 * other poll-mode survivor readers open with UP_NO_EARLY. Killed at any
 * point of that, the writer's death must still reach it within the bound.
 * Each rep kills only after its survivor has caught a record early (else
 * the case proves nothing about the early paths); one that has not within
 * 10 s fails.
 *
 * dies_mid_reserve: a writer process holding reserved, uncommitted pages is
 * killed; the survivors must keep streaming and see end of stream once their
 * own writer closes. The pages the dead writer held are measured (how much
 * a non-blocking writer can put into an empty pipe before and after) and
 * reported; reserve_pages_recovered asserts they come back (issue 3: "no
 * leaked pages forever (the pool recovers them)").
 *
 * benign_closes_in_foreign_ns: a close of the memfd by a live process
 * wakes a sleeper whose peer is in another pid namespace (the close of a
 * description is how such a death wakes it, core/closewatch.c); it must
 * not end the stream nor spin.
 *
 * On io_uring, a sleeping survivor must be woken by the death itself (a
 * pidfd, or the close of the dead peer's description), not by the end of
 * its 50 ms slice, in most reps of each sleeping case.
 *
 * Every case is repeated (--reps, default 20) on the backend of the
 * environment (UP_FORCE_FUTEX=1 forces futex(2), whose 50 ms wait slices
 * must also meet the 100 ms bound). Max and median latencies are printed.
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "harness.h"
#include "up_int.h"
#include "uringpipe.h"

#define CAPACITY   (64u * 1024u)
#define BOUND_NS   100000000ull /* 100 ms */
#define REC_MAGIC  0x52454331u
#define MAX_REPS   200

struct rec_hdr {
	uint32_t magic;
	uint32_t len; /* whole record, header included */
	uint64_t seq;
	uint64_t check;
};

/* Shared with the victim (a memfd's page, mapped again after its exec). */
struct shared {
	_Atomic uint64_t published; /* records whose up_write returned */
	_Atomic uint64_t consumed;  /* victim reader: bytes read */
	_Atomic uint32_t victim_ready;
	_Atomic int32_t victim_pid; /* the victim, when a middle process made it */
};

/* Survivor thread state (same process). */
struct surv {
	struct up_end *e;
	bool is_reader;
	_Atomic int32_t tid;
	_Atomic uint32_t in_final_call; /* about to block / blocked */
	_Atomic uint64_t records;       /* reader: records received; writer: written */
	_Atomic uint64_t t_done;        /* CLOCK_MONOTONIC ns of the 0/-EPIPE return */
	_Atomic int64_t result;
	uint64_t stop_after;            /* reader, sleep case: records before final read */
	bool streaming;
	bool nonblock;                  /* UP_NONBLOCK, retrying -EAGAIN without polling */
	bool paced;                     /* writer: a small record every PACE_NS */
	_Atomic uint32_t saw_again;     /* nonblock: a call returned -EAGAIN */
	bool poll;                      /* nonblock: arms and poll(2)s on -EAGAIN */
	uint64_t poll_wakes;            /* poll: times the pollfd turned readable */
	_Atomic uint64_t t_arm;         /* poll: CLOCK_MONOTONIC ns of the last arm */
};

/* Variants of every kill case (set per case by main()). */
static bool g_ns;     /* the victim runs in a pid namespace of its own */
static bool g_nb;     /* the survivor is UP_NONBLOCK and retries */
static bool g_poll;   /* ... and retries when its pollfd turns readable */
static bool g_early;  /* the survivor reader opens with UP_EARLY_POLL */
static bool g_vpaced; /* the victim writer sends a record every VPACE_NS */
#define VPACE_NS 1000000ull
/* The earliest an armed end's tick comes after its arm: the futex
 * backend's ticks are on a grid of half a 50 ms slice, one step at least
 * after the arm (pollfd_futex.c); the io_uring one's a whole slice. */
#define POLL_TICK_MIN_NS 25000000ull
#define PACE_NS 2000000ull /* paced writer: one record every 2 ms */
/* A non-blocking survivor retries every 12 ms: slow enough that only a check
 * made on the -EAGAIN itself, not one every few calls, meets the bound. */
#define RETRY_NS 12000000ull

static struct shared *g_sh;
static int g_sh_fd = -1; /* g_sh's memfd, mapped again by an exec'd victim */
static char g_self[4096]; /* this program, for the victim's exec */
static int g_reps = 20;
static const char *g_backend = "?";
static uint64_t g_max_lat_all;
static int g_sliced; /* reps of the case whose survivor saw the death by its slice */
static int g_caught; /* reps of the case whose survivor caught a record early */
static bool g_inotify = true; /* this process may have an inotify instance and watch */

/* ---- records ---- */

static size_t rec_len(uint64_t seq)
{
	return 32 + (size_t)(harness_mix64(seq ^ 0x1e4) % (4096 - 32 + 1));
}

static size_t rec_make(uint8_t *buf, uint64_t seq)
{
	struct rec_hdr h;

	h.magic = REC_MAGIC;
	h.len = (uint32_t)rec_len(seq);
	h.seq = seq;
	h.check = harness_mix64(seq * 31 + h.len);
	memcpy(buf, &h, sizeof(h));
	harness_fill(h.check, 0, buf + sizeof(h), h.len - sizeof(h));
	return h.len;
}

/* Parses whole records off the front of @buf; returns bytes consumed. */
static size_t rec_parse(const uint8_t *buf, size_t n, uint64_t *next_seq)
{
	size_t off = 0;

	while (n - off >= sizeof(struct rec_hdr)) {
		struct rec_hdr h;

		memcpy(&h, buf + off, sizeof(h));
		if (h.magic != REC_MAGIC || h.seq != *next_seq || h.len != rec_len(h.seq) ||
		    h.check != harness_mix64(h.seq * 31 + h.len)) {
			fprintf(stderr, "bad record header at seq %" PRIu64 " (got seq %" PRIu64
				", len %u)\n", *next_seq, h.seq, h.len);
			harness_fail();
		}
		if (n - off < h.len)
			break;
		if (harness_verify(h.check, 0, buf + off + sizeof(h), h.len - sizeof(h)) !=
		    (size_t)-1) {
			fprintf(stderr, "corrupt payload in record %" PRIu64 "\n", h.seq);
			harness_fail();
		}
		off += h.len;
		(*next_seq)++;
	}
	return off;
}

/* ---- the victim (a forked child) ---- */

static HARNESS_NORETURN void victim_block(void)
{
	for (;;)
		pause(); /* until SIGKILL */
}

static HARNESS_NORETURN void victim_writer(int fd, uint64_t nrec, bool stream, bool paced)
{
	struct up_pipe *q = NULL;
	struct up_end *w = NULL;
	static uint8_t buf[4096];
	uint64_t seq, dl = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
	/* Paced: the deadlines to the µs (the default slack is 50 us, as
	 * wide as the early wake's window); the workload's pace, not a sync. */
	if (paced)
		prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	harness_watchdog(60);
	CHECK_OK(up_pipe_attach(fd, &q));
	CHECK_OK(up_open(q, UP_WR, &w));
	atomic_store_explicit(&g_sh->victim_ready, 1, memory_order_seq_cst);
	for (seq = 0; stream || seq < nrec; seq++) {
		size_t n = rec_make(buf, seq);

		if (paced) {
			struct timespec ts;

			dl = dl ? dl + VPACE_NS : harness_now_ns();
			ts.tv_sec = (time_t)(dl / 1000000000u);
			ts.tv_nsec = (long)(dl % 1000000000u);
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
				;
		}
		CHECK_EQ(up_write(w, buf, n), (ssize_t)n);
		atomic_store_explicit(&g_sh->published, seq + 1, memory_order_seq_cst);
	}
	victim_block();
}

static HARNESS_NORETURN void victim_reader(int fd, bool stream)
{
	struct up_pipe *q = NULL;
	struct up_end *r = NULL;
	static uint8_t buf[65536];

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
	harness_watchdog(60);
	CHECK_OK(up_pipe_attach(fd, &q));
	CHECK_OK(up_open(q, UP_RD, &r));
	atomic_store_explicit(&g_sh->victim_ready, 1, memory_order_seq_cst);
	while (stream) {
		ssize_t n = up_read(r, buf, sizeof(buf));

		CHECK(n > 0);
		atomic_fetch_add_explicit(&g_sh->consumed, (uint64_t)n, memory_order_relaxed);
	}
	victim_block();
}

/* A victim that reserves half the pipe, fills it and dies before its
 * commit (mid_reserve()). */
static HARNESS_NORETURN void victim_reserver(int fd)
{
	struct up_pipe *q = NULL;
	struct up_end *vw = NULL;
	struct iovec iov[16];
	int cnt = 16, i;
	ssize_t n;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
	harness_watchdog(60);
	CHECK_OK(up_pipe_attach(fd, &q));
	CHECK_OK(up_open(q, UP_WR, &vw));
	n = up_reserve(vw, CAPACITY / 2, iov, &cnt);
	CHECK(n > 0);
	for (i = 0; i < cnt; i++)
		memset(iov[i].iov_base, 0xee, iov[i].iov_len); /* never committed */
	atomic_store(&g_sh->published, (uint64_t)n);
	atomic_store(&g_sh->victim_ready, 1);
	victim_block();
}

/*
 * The victim's fds after its exec: the pipe's memfd and the shared page's.
 * A victim is this program run again, not the forked copy of a process
 * with threads: a sanitizer runtime copied by fork() may hold the lock of
 * its thread table for a thread of ours that was starting or ending, and
 * the child's first thread (the library's close watch) would wait on it
 * for ever. exec() gives the victim a runtime of its own, and drops the
 * ends it inherited with the memfd (close-on-exec).
 */
#define VICTIM_PIPE_FD 200
#define VICTIM_SHARED_FD 201

/* In the forked child: become victim @role ('w', 'r' or 'v') of @p. */
static HARNESS_NORETURN void victim_exec(struct up_pipe *p, char role, uint64_t nrec, bool stream)
{
	char r[2] = { role, 0 }, n[24], st[2] = { stream ? (g_vpaced ? '2' : '1') : '0', 0 };

	snprintf(n, sizeof(n), "%" PRIu64, nrec);
	if (dup2(up_pipe_fd(p), VICTIM_PIPE_FD) < 0 || dup2(g_sh_fd, VICTIM_SHARED_FD) < 0)
		_exit(126);
	execl(g_self, g_self, "--victim", r, n, st, (char *)NULL);
	_exit(127);
}

/* main() of an exec'd victim: argv = --victim ROLE NREC STREAM. */
static HARNESS_NORETURN void victim_main(char **argv)
{
	uint64_t nrec = strtoull(argv[3], NULL, 10);
	bool stream = argv[4][0] != '0', paced = argv[4][0] == '2';

	g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED, VICTIM_SHARED_FD, 0);
	if (g_sh == MAP_FAILED)
		_exit(125);
	if (argv[2][0] == 'w')
		victim_writer(VICTIM_PIPE_FD, nrec, stream, paced);
	if (argv[2][0] == 'r')
		victim_reader(VICTIM_PIPE_FD, stream);
	victim_reserver(VICTIM_PIPE_FD);
}

/* Polls the shared flag; a victim that died before setting it fails. */
static void victim_wait_ready(pid_t pid)
{
	uint64_t deadline = harness_now_ns() + 10000000000ull;
	int status;

	while (!atomic_load(&g_sh->victim_ready)) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "victim %d exited early (status 0x%x)\n", (int)pid, status);
			harness_fail();
		}
		CHECK(harness_now_ns() < deadline);
		harness_nap_ns(50000);
	}
}

/* ---- the survivor (a thread) ---- */

/*
 * Poll mode: the event loop's turn after -EAGAIN. Arms, then waits for the
 * pollfd in poll(2); a pollfd that stays quiet for 5 s after a death fails
 * the case by the join's bound, not here.
 */
static void surv_poll(struct surv *s)
{
	struct pollfd pfd = { .fd = up_pollfd(s->e), .events = POLLIN };
	int r;

	CHECK(pfd.fd >= 0);
	atomic_store(&s->t_arm, harness_now_ns());
	r = up_poll_arm(s->e);
	CHECK(r == 0 || r == 1);
	if (r == 1)
		return;
	while ((r = poll(&pfd, 1, -1)) < 0)
		CHECK(errno == EINTR);
	s->poll_wakes++;
}

static void *surv_reader(void *arg)
{
	struct surv *s = arg;
	static uint8_t buf[3 * 4096 + 65536];
	size_t have = 0;
	uint64_t next = 0;

	atomic_store(&s->tid, (int32_t)syscall(SYS_gettid));
	for (;;) {
		ssize_t n;

		if (!s->streaming && next >= s->stop_after)
			atomic_store_explicit(&s->in_final_call, 1, memory_order_seq_cst);
		n = up_read(s->e, buf + have, sizeof(buf) - have);
		if (n == -EAGAIN && s->nonblock) {
			if (!s->streaming && next >= s->stop_after)
				atomic_store(&s->saw_again, 1);
			if (s->poll)
				surv_poll(s);
			else
				harness_nap_ns(RETRY_NS); /* the application's retry pace */
			continue;
		}
		if (n <= 0) {
			atomic_store(&s->t_done, harness_now_ns());
			atomic_store(&s->result, n);
			break;
		}
		have += (size_t)n;
		{
			size_t used = rec_parse(buf, have, &next);

			memmove(buf, buf + used, have - used);
			have -= used;
		}
		atomic_store(&s->records, next);
	}
	if (have != 0 && s->result == 0) {
		fprintf(stderr, "torn record at end of stream: %zu bytes of record %" PRIu64 "\n",
			have, next);
		harness_fail();
	}
	return NULL;
}

static void *surv_writer(void *arg)
{
	struct surv *s = arg;
	static uint8_t buf[4096];
	uint64_t seq = 0;

	atomic_store(&s->tid, (int32_t)syscall(SYS_gettid));
	for (;;) {
		size_t n = rec_make(buf, seq);
		ssize_t r;

		/* Sleep case: the victim never reads, so some call will block
		 * on the full pipe; the flag says "this may be it". */
		if (!s->streaming)
			atomic_store_explicit(&s->in_final_call, 1, memory_order_seq_cst);
		r = up_write(s->e, buf, n);
		if (r == -EAGAIN && s->nonblock) {
			atomic_store(&s->saw_again, 1);
			if (s->poll)
				surv_poll(s);
			else
				harness_nap_ns(RETRY_NS); /* the application's retry pace */
			continue;
		}
		if (r < 0) {
			atomic_store(&s->t_done, harness_now_ns());
			atomic_store(&s->result, r);
			break;
		}
		if (r != (ssize_t)n) {
			fprintf(stderr, "short write %zd of %zu\n", r, n);
			harness_fail();
		}
		atomic_store(&s->records, ++seq);
		if (s->paced)
			harness_nap_ns(PACE_NS); /* the workload's pace, not a sync */
	}
	return NULL;
}

/* ---- one kill ---- */

enum kcase { WRITER_SLEEP, WRITER_STREAM, READER_SLEEP, READER_STREAM, ZOMBIE_WRITER,
	     READER_PACED, WRITER_PACED };

static struct up_pipe *mk_pipe_cap(size_t cap)
{
	struct up_config cfg;
	struct up_pipe *p = NULL;

	up_config_init(&cfg);
	cfg.capacity = cap;
	CHECK_OK(up_pipe_create(&cfg, &p));
	return p;
}

static struct up_pipe *mk_pipe(void)
{
	return mk_pipe_cap(CAPACITY);
}

/*
 * Fork the victim; with g_ns, through a middle process that enters a new
 * pid namespace first, so the victim is pid 1 of its own namespace (as in a
 * container) and its pid means nothing to us. Returns the pid to wait for;
 * *victim is the one to kill.
 */
static pid_t fork_victim(struct surv *s, struct up_pipe *p, bool writer_victim, uint64_t nrec,
			 bool stream, pid_t *victim)
{
	pid_t pid = fork();

	CHECK_SYS(pid);
	if (pid == 0) {
		/* Our copy of the survivor's end is an end of our own: close
		 * it, or our death would end the other side too (and it would
		 * not be the victim's own end whose death is measured). */
		harness_close_inherited(&s->e, 1);
		if (g_ns) {
			pid_t v;
			int st;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			CHECK_SYS(unshare(CLONE_NEWPID));
			v = fork();
			CHECK_SYS(v);
			if (v != 0) {
				atomic_store(&g_sh->victim_pid, v);
				while (waitpid(v, &st, 0) < 0)
					CHECK(errno == EINTR);
				_exit(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 3);
			}
			CHECK_EQ(getpid(), 1);
		}
		victim_exec(p, writer_victim ? 'w' : 'r', nrec, stream);
	}
	*victim = pid;
	if (g_ns) {
		uint64_t deadline = harness_now_ns() + 10000000000ull;

		while ((*victim = atomic_load(&g_sh->victim_pid)) == 0) {
			CHECK(harness_now_ns() < deadline);
			harness_nap_ns(50000);
		}
	}
	return pid;
}

/* Polls until the survivor thread is inside its final call and asleep. */
static void wait_survivor_asleep(struct surv *s, struct up_pipe *p)
{
	uint64_t deadline = harness_now_ns() + 10000000000ull;
	struct up_stats st;
	uint64_t waits0;

	while (!atomic_load(&s->in_final_call) || atomic_load(&s->tid) == 0) {
		CHECK(harness_now_ns() < deadline);
		harness_nap_ns(50000);
	}
	CHECK_OK(up_stats(p, &st));
	waits0 = st.waits;
	for (;;) {
		CHECK(harness_now_ns() < deadline);
		CHECK_EQ(atomic_load(&s->t_done), 0); /* must not return by itself */
		if (harness_tid_state(atomic_load(&s->tid)) == 'S') {
			CHECK_OK(up_stats(p, &st));
			/* S inside the library with a wait counted: asleep
			 * (the count rises before the sleep, S confirms it). */
			if (st.waits > waits0 || atomic_load(&s->records) > 0)
				if (harness_tid_state(atomic_load(&s->tid)) == 'S')
					break;
		}
		harness_nap_ns(100000);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t kill_once(enum kcase kc, int rep)
{
	bool writer_victim = kc == WRITER_SLEEP || kc == WRITER_STREAM || kc == ZOMBIE_WRITER ||
			     kc == WRITER_PACED;
	bool stream = kc == WRITER_STREAM || kc == READER_STREAM || kc == READER_PACED ||
		      kc == WRITER_PACED;
	/* Paced: a pipe the writer would take many seconds to fill, so only
	 * a check made while streaming can notice the death in time. */
	struct up_pipe *p = mk_pipe_cap(kc == READER_PACED ? 16u << 20 : CAPACITY);
	struct surv s;
	pthread_t th;
	uint64_t nrec = 20 + (uint64_t)rep * 37, t0, lat, published, timeouts;
	bool sliced;
	int status = 0;
	pid_t pid, victim;
	struct up_stats st;

	memset(&s, 0, sizeof(s));
	memset(g_sh, 0, sizeof(*g_sh));
	s.is_reader = writer_victim;
	s.streaming = stream;
	s.stop_after = nrec;
	s.nonblock = g_nb;
	s.poll = g_poll;
	s.paced = kc == READER_PACED;
	g_vpaced = kc == WRITER_PACED;
	/* The survivor's end exists before the victim's: neither side can
	 * see the other's role count at zero before both are open. */
	/* A survivor reader in poll mode reads ahead of a paced stream by
	 * default: without g_early it opts out, for the plain armed wait. */
	CHECK_OK(up_open(p, (writer_victim ? UP_RD : UP_WR) | (g_nb ? UP_NONBLOCK : 0) |
				    (g_early ? UP_EARLY_POLL : 0) |
				    (writer_victim && g_poll && !g_early ? UP_NO_EARLY : 0),
			 &s.e));
	pid = fork_victim(&s, p, writer_victim, nrec, stream, &victim);
	/* The victim's end is open before the survivor starts. Polled. */
	victim_wait_ready(pid);
	CHECK_EQ(pthread_create(&th, NULL, writer_victim ? surv_reader : surv_writer, &s), 0);
	if (stream) {
		/* Let a real stream run: a few hundred records each way. A
		 * survivor of a paced writer runs until it has also caught a
		 * record early once: its learning of the gap takes a number of
		 * records that a loaded, sanitized run cannot bound, and the
		 * deadline fails a survivor that never wakes early. */
		uint64_t deadline = harness_now_ns() + 10000000000ull;

		while ((writer_victim ? atomic_load(&s.records)
				      : atomic_load(&g_sh->consumed) / 2048) <
			       (s.paced || g_vpaced ? 30 : 300) ||
		       /* relaxed: a counter, read for progress only. */
		       (g_vpaced && atomic_load_explicit(&s.e->c.early, memory_order_relaxed) == 0)) {
			if (harness_now_ns() >= deadline) {
				fprintf(stderr, "rep %d: no record caught early in 10 s\n", rep);
				harness_fail();
			}
			harness_nap_ns(50000);
		}
	} else if (g_nb) {
		/* Retrying: it has seen the pipe empty (full) at least once. */
		uint64_t deadline = harness_now_ns() + 10000000000ull;

		while (!atomic_load(&s.saw_again)) {
			CHECK(harness_now_ns() < deadline);
			harness_nap_ns(50000);
		}
	} else {
		wait_survivor_asleep(&s, p);
	}
	/* relaxed: a counter of the survivor's end, asleep now. */
	timeouts = atomic_load_explicit(&s.e->c.timeouts, memory_order_relaxed);
	t0 = harness_now_ns();
	CHECK_SYS(kill(victim, SIGKILL));
	if (kc != ZOMBIE_WRITER) {
		while (waitpid(pid, &status, 0) < 0)
			CHECK(errno == EINTR);
	}
	/* Bounded join: a survivor that never returns fails here. */
	{
		struct timespec dl;

		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 5;
		if (pthread_timedjoin_np(th, NULL, &dl) != 0) {
			fprintf(stderr, "rep %d: survivor still blocked 5 s after the kill%s\n", rep,
				kc == ZOMBIE_WRITER ? " (victim is an unreaped zombie)" : "");
			harness_fail();
		}
	}
	if (kc == ZOMBIE_WRITER) {
		while (waitpid(pid, &status, 0) < 0)
			CHECK(errno == EINTR);
	}
	if (g_ns)
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* the middle */
	else
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	lat = atomic_load(&s.t_done) - t0;
	/* relaxed: the survivor thread is joined. A slice's end that came
	 * more than 10 ms after the kill: not the short look again that
	 * follows a close seen before the lock was dropped (2 ms). A sleeper
	 * counts the slices that ended its sleeps (timeouts); an armed end's
	 * tick comes POLL_TICK_MIN_NS or more after its arm, so a return
	 * sooner after the last arm was not the tick's, however late the
	 * scheduler made it. */
	if (g_poll)
		sliced = atomic_load(&s.t_done) - atomic_load(&s.t_arm) >= POLL_TICK_MIN_NS;
	else
		sliced = atomic_load_explicit(&s.e->c.timeouts, memory_order_relaxed) != timeouts;
	g_sliced += sliced && lat > 10000000ull;
	CHECK_EQ(atomic_load(&s.result), writer_victim ? 0 : -EPIPE);
	published = atomic_load(&g_sh->published);
	if (writer_victim) {
		uint64_t got = atomic_load(&s.records);

		if (got < published || got > published + 1) {
			fprintf(stderr, "rep %d: victim published %" PRIu64 " records, survivor got %" PRIu64
				"\n", rep, published, got);
			harness_fail();
		}
		if (!stream)
			CHECK_EQ(got, nrec);
	}
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(writer_victim ? st.writers : st.readers, 0);
	/* relaxed: the survivor thread is joined. */
	g_caught += atomic_load_explicit(&s.e->c.early, memory_order_relaxed) != 0;
	if (lat > BOUND_NS) {
		fprintf(stderr, "rep %d: peer death noticed after %.1f ms (bound 100 ms)\n", rep,
			(double)lat / 1e6);
		harness_fail();
	}
	CHECK_OK(up_close(s.e));
	up_pipe_release(p);
	return lat;
}

static void kill_case(enum kcase kc, const char *name)
{
	uint64_t lat[MAX_REPS];
	int i;

	g_sliced = g_caught = 0;
	for (i = 0; i < g_reps; i++)
		lat[i] = kill_once(kc, i);
	qsort(lat, (size_t)g_reps, sizeof(lat[0]), cmp_u64);
	printf("# %-32s backend=%s reps=%d kill->return p50=%.2f p99=%.2f max=%.2f ms;"
	       " seen by a slice's end in %d; caught early in %d\n", name, g_backend, g_reps,
	       (double)lat[g_reps / 2] / 1e6, (double)lat[(g_reps * 99) / 100] / 1e6,
	       (double)lat[g_reps - 1] / 1e6, g_sliced, g_caught);
	if (kc == WRITER_PACED && g_caught != g_reps) {
		fprintf(stderr, "%s: only %d of %d survivors caught a record early\n", name,
			g_caught, g_reps);
		harness_fail();
	}
	/* A sleeper, or an armed event loop (a poll-mode end's tick comes
	 * 25-50 ms after its arm, as late as a slice), is woken by the death
	 * itself, in any pid namespace and on either backend: a pidfd of the peer, or the close of its description
	 * of the memfd (a wake, not the 50 ms slice, so that the bound holds
	 * with a margin of tens of ms for a late timer). A slice that ends
	 * in the same fraction of a millisecond as the death, or the short
	 * look again after a close that came before the lock was dropped, is
	 * allowed now and then, not as the rule. */
	if ((!g_nb || g_poll) && g_inotify &&
	    (kc == WRITER_SLEEP || kc == READER_SLEEP || kc == ZOMBIE_WRITER) &&
	    g_sliced > g_reps / 4) {
		fprintf(stderr,
			"%s: %d of %d sleepers saw the death only when their slice or tick ended\n",
			name, g_sliced, g_reps);
		harness_fail();
	}
	if (lat[g_reps - 1] > g_max_lat_all)
		g_max_lat_all = lat[g_reps - 1];
}

static void writer_dies_while_reader_sleeps(void)
{
	kill_case(WRITER_SLEEP, __func__);
}

static void writer_dies_while_streaming(void)
{
	kill_case(WRITER_STREAM, __func__);
}

static void reader_dies_while_writer_sleeps(void)
{
	kill_case(READER_SLEEP, __func__);
}

static void reader_dies_while_streaming(void)
{
	kill_case(READER_STREAM, __func__);
}

static void reader_dies_while_writer_paces(void)
{
	kill_case(READER_PACED, __func__);
}

/* The survivor UP_NONBLOCK, retrying -EAGAIN without polling. */
static void writer_dies_nonblock_reader_retries(void)
{
	g_nb = true;
	kill_case(WRITER_SLEEP, __func__);
	g_nb = false;
}

static void reader_dies_nonblock_writer_retries(void)
{
	g_nb = true;
	kill_case(READER_SLEEP, __func__);
	g_nb = false;
}

/* The survivor an event loop's: UP_NONBLOCK, up_poll_arm() and poll(2). */
static void writer_dies_poll_reader_waits(void)
{
	g_nb = g_poll = true;
	kill_case(WRITER_SLEEP, __func__);
	g_nb = g_poll = false;
}

/* The survivor reader wakes early for a writer that sends a record every
 * 1 ms: blocking, and in an event loop with UP_EARLY_POLL. */
static void writer_dies_paced_reader_early(void)
{
	kill_case(WRITER_PACED, __func__);
}

static void writer_dies_paced_poll_reader_early(void)
{
	g_nb = g_poll = g_early = true;
	kill_case(WRITER_PACED, __func__);
	g_nb = g_poll = g_early = false;
}

static void reader_dies_poll_writer_waits(void)
{
	g_nb = g_poll = true;
	kill_case(READER_SLEEP, __func__);
	g_nb = g_poll = false;
}

/* The victim in a pid namespace of its own: pid 1 there. */
static bool ns_ok(void)
{
	pid_t pid = fork();
	int st;

	CHECK_SYS(pid);
	if (pid == 0)
		_exit(unshare(CLONE_NEWPID) == 0 ? 0 : 1);
	while (waitpid(pid, &st, 0) < 0)
		CHECK(errno == EINTR);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

#define NS_CASE_POLL(fn, kc, nb, pl)                                           \
	static void fn(void)                                                   \
	{                                                                      \
		if (!ns_ok()) {                                                \
			printf("# %s: skipped (no CLONE_NEWPID here)\n", #fn); \
			return;                                                \
		}                                                              \
		g_ns = true;                                                   \
		g_nb = nb;                                                     \
		g_poll = pl;                                                   \
		kill_case(kc, #fn);                                            \
		g_ns = false;                                                  \
		g_nb = false;                                                  \
		g_poll = false;                                                \
	}
#define NS_CASE(fn, kc, nb) NS_CASE_POLL(fn, kc, nb, false)
NS_CASE(ns_writer_dies_while_reader_sleeps, WRITER_SLEEP, false)
NS_CASE(ns_writer_dies_while_streaming, WRITER_STREAM, false)
NS_CASE(ns_reader_dies_while_writer_sleeps, READER_SLEEP, false)
NS_CASE(ns_reader_dies_while_streaming, READER_STREAM, false)
NS_CASE(ns_reader_dies_while_writer_paces, READER_PACED, false)
NS_CASE(ns_writer_dies_nonblock_reader_retries, WRITER_SLEEP, true)
NS_CASE(ns_reader_dies_nonblock_writer_retries, READER_SLEEP, true)
NS_CASE_POLL(ns_writer_dies_poll_reader_waits, WRITER_SLEEP, true, true)
NS_CASE_POLL(ns_reader_dies_poll_writer_waits, READER_SLEEP, true, true)

/*
 * The close of a description of the memfd by a live process (this one,
 * opening and closing the memfd, as an attach or a name lookup does) wakes
 * a sleeper whose writer is in another pid namespace: the close is all the
 * kernel can tell it. It must ask the locks, find the writer alive, and
 * sleep on, neither ending the stream nor spinning on an event it drained.
 * Per close: one sleep woken early, and at most a short look again after it.
 */
/* A case with its victim in a pid namespace of its own and the close
 * watch: a fresh pipe and survivor record (g_ns set), or NULL when the host
 * has no CLONE_NEWPID or no inotify (the case is skipped). */
static struct up_pipe *ns_inotify_begin(const char *name, struct surv *s)
{
	if (!ns_ok() || !g_inotify) {
		printf("# %s: skipped (no CLONE_NEWPID or no inotify here)\n", name);
		return NULL;
	}
	g_ns = true;
	memset(s, 0, sizeof(*s));
	memset(g_sh, 0, sizeof(*g_sh));
	return mk_pipe();
}

#define BENIGN_CLOSES 40

static void benign_closes_in_foreign_ns(void)
{
	struct up_pipe *p;
	struct surv s;
	pthread_t th;
	char path[64];
	uint64_t waits0, timeouts0, woken;
	int i, status;
	pid_t pid, victim;

	p = ns_inotify_begin(__func__, &s);
	if (!p)
		return;
	s.is_reader = true;
	s.stop_after = 20;
	CHECK_OK(up_open(p, UP_RD, &s.e));
	pid = fork_victim(&s, p, true, 20, false, &victim);
	victim_wait_ready(pid);
	CHECK_EQ(pthread_create(&th, NULL, surv_reader, &s), 0);
	wait_survivor_asleep(&s, p);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", up_pipe_fd(p));
	/* relaxed: counters of the survivor's end, read while it sleeps. */
	waits0 = atomic_load_explicit(&s.e->c.waits, memory_order_relaxed);
	timeouts0 = atomic_load_explicit(&s.e->c.timeouts, memory_order_relaxed);
	for (i = 0; i < BENIGN_CLOSES; i++) {
		uint64_t deadline = harness_now_ns() + 5000000000ull;
		uint64_t w = atomic_load_explicit(&s.e->c.waits, memory_order_relaxed);
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		CHECK_SYS(fd);
		CHECK_SYS(close(fd));
		/* Polled: asleep again after the close (or a slice) woke it. */
		while (atomic_load_explicit(&s.e->c.waits, memory_order_relaxed) == w ||
		       harness_tid_state(atomic_load(&s.tid)) != 'S') {
			CHECK(harness_now_ns() < deadline);
			CHECK_EQ(atomic_load(&s.t_done), 0); /* the writer lives */
			harness_nap_ns(50000);
		}
	}
	/* Sleeps begun after a wake that was not the slice's end. */
	woken = (atomic_load_explicit(&s.e->c.waits, memory_order_relaxed) - waits0) -
		(atomic_load_explicit(&s.e->c.timeouts, memory_order_relaxed) - timeouts0);
	printf("# %s: %d closes, %" PRIu64 " sleeps, %" PRIu64 " of them after a wake\n", __func__,
	       BENIGN_CLOSES,
	       atomic_load_explicit(&s.e->c.waits, memory_order_relaxed) - waits0, woken);
	if (woken < BENIGN_CLOSES / 2) {
		fprintf(stderr, "only %" PRIu64 " of %d closes woke the sleeper\n", woken,
			BENIGN_CLOSES);
		harness_fail();
	}
	CHECK(atomic_load_explicit(&s.e->c.waits, memory_order_relaxed) - waits0 <=
	      3 * BENIGN_CLOSES + 8);
	CHECK_EQ(atomic_load(&s.t_done), 0);
	CHECK_SYS(kill(victim, SIGKILL));
	while (waitpid(pid, &status, 0) < 0)
		CHECK(errno == EINTR);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(atomic_load(&s.result), 0);
	CHECK_EQ(atomic_load(&s.records), 20);
	CHECK_EQ(harness_inotify_watches(), 1);
	CHECK_OK(up_close(s.e));
	up_pipe_release(p);
	/* The watch pinned the memfd's pages; it goes with the last handle,
	 * and the instance with its last watch (on the futex backend the
	 * serving thread closes it before the release returns). */
	CHECK_EQ(harness_inotify_watches(), 0);
	CHECK_EQ(harness_fds("inotify"), 0);
	g_ns = false;
}

/*
 * A blind writer that died, and closed its description of the memfd,
 * after the reader built its list of writers and asked their locks but
 * before the reader's watch existed: no close will ever be reported for
 * it. The arm that makes the watch must ask the locks again, and so find
 * the end of the stream at once instead of at its tick 25-50 ms later.
 */
static void blind_death_before_the_watch(void)
{
	struct up_pipe *p;
	struct up_stats st;
	struct surv s;
	char buf[64];
	int status;
	pid_t pid, victim;

	p = ns_inotify_begin(__func__, &s);
	if (!p)
		return;
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &s.e));
	CHECK(up_pollfd(s.e) >= 0);
	pid = fork_victim(&s, p, true, 0, false, &victim);
	victim_wait_ready(pid);
	/* What an arm does first: the list, and the locks asked. */
	CHECK_EQ(up__peers_watch(s.e, UP_END_WRITER), 1);
	up__peers_reap(s.e);
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.writers, 1);
	CHECK_SYS(kill(victim, SIGKILL));
	/* The middle reaps the victim and exits: it is dead and closed. */
	while (waitpid(pid, &status, 0) < 0)
		CHECK(errno == EINTR);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(up_poll_arm(s.e), 1);
	CHECK_EQ(up_read(s.e, buf, sizeof(buf)), 0);
	CHECK_OK(up_close(s.e));
	up_pipe_release(p);
	g_ns = false;
}

static void zombie_writer_not_reaped(void)
{
	kill_case(ZOMBIE_WRITER, __func__);
}

/* ---- dying mid-reserve ---- */

/* Bytes a fresh non-blocking writer can put into the (drained) pipe. */
static size_t fill_capacity(struct up_pipe *p, struct up_end *rd)
{
	struct up_end *w = NULL;
	static uint8_t buf[4096];
	size_t total = 0;
	ssize_t r;

	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w));
	while ((r = up_write(w, buf, sizeof(buf))) > 0)
		total += (size_t)r;
	CHECK_EQ(r, -EAGAIN);
	CHECK_OK(up_close(w));
	/* Drain it again (the reader is non-blocking here). */
	while ((r = up_read(rd, buf, sizeof(buf))) > 0)
		;
	CHECK_EQ(r, -EAGAIN);
	return total;
}

struct streamer {
	struct up_end *e;
	uint64_t bytes;
	uint64_t t_eof;
};

static void *stream_writer(void *arg)
{
	struct streamer *s = arg;
	static uint8_t buf[65536];
	uint64_t off = 0;

	while (off < s->bytes) {
		size_t n = sizeof(buf);
		ssize_t r;

		if (n > s->bytes - off)
			n = (size_t)(s->bytes - off);
		harness_fill(0x5eed, off, buf, n);
		r = up_write(s->e, buf, n);
		CHECK_EQ(r, (ssize_t)n);
		off += n;
	}
	return NULL;
}

static void *stream_reader(void *arg)
{
	struct streamer *s = arg;
	static uint8_t buf[65536];
	uint64_t off = 0;

	for (;;) {
		ssize_t r = up_read(s->e, buf, sizeof(buf));

		CHECK_OK(r);
		if (r == 0)
			break;
		if (harness_verify(0x5eed, off, buf, (size_t)r) != (size_t)-1) {
			fprintf(stderr, "stream corrupt near offset %" PRIu64 "\n", off);
			harness_fail();
		}
		off += (uint64_t)r;
	}
	s->t_eof = harness_now_ns();
	s->bytes = off;
	return NULL;
}

static size_t g_leak_before, g_leak_after, g_leak_later;

static void mid_reserve(bool require_recovery)
{
	struct up_pipe *p = mk_pipe();
	struct up_end *rd = NULL, *rdb = NULL, *w = NULL;
	struct streamer sw, sr;
	pthread_t tw, tr;
	uint64_t t_close;
	int status = 0;
	pid_t pid;

	memset(g_sh, 0, sizeof(*g_sh));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &rd));
	CHECK_OK(up_open(p, UP_WR, &w)); /* the surviving writer */
	g_leak_before = fill_capacity(p, rd);
	pid = fork();
	CHECK_SYS(pid);
	if (pid == 0) {
		/* Our copies of the survivors' ends: the dead writer is the
		 * victim's own. */
		harness_close_inherited((struct up_end *[]){ rd, w }, 2);
		victim_exec(p, 'v', 0, false);
	}
	victim_wait_ready(pid);
	CHECK_SYS(kill(pid, SIGKILL));
	while (waitpid(pid, &status, 0) < 0)
		CHECK(errno == EINTR);
	g_leak_after = fill_capacity(p, rd);
	/* The survivors keep streaming, 32 MiB through the smaller pipe. */
	CHECK_OK(up_open(p, UP_RD, &rdb));
	CHECK_OK(up_close(rd));
	rd = NULL;
	sw = (struct streamer){ w, 32u << 20, 0 };
	sr = (struct streamer){ rdb, 0, 0 };
	CHECK_EQ(pthread_create(&tw, NULL, stream_writer, &sw), 0);
	CHECK_EQ(pthread_create(&tr, NULL, stream_reader, &sr), 0);
	CHECK_EQ(pthread_join(tw, NULL), 0);
	t_close = harness_now_ns();
	CHECK_OK(up_close(w));
	CHECK_EQ(pthread_join(tr, NULL), 0);
	CHECK_EQ(sr.bytes, 32u << 20);
	printf("# dies_mid_reserve: victim reserved %" PRIu64 " B; end of stream %.2f ms after the "
	       "last live writer closed\n",
	       atomic_load(&g_sh->published), (double)(sr.t_eof - t_close) / 1e6);
	CHECK(sr.t_eof - t_close < BOUND_NS);
	/* After the stream (thousands of pool round trips) and the reap: are
	 * the dead writer's pages back? A new writer end and the reader. */
	{
		struct up_end *r2 = NULL;

		CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r2));
		CHECK_OK(up_open(p, UP_WR, &w));
		g_leak_later = fill_capacity(p, r2);
		CHECK_OK(up_close(w));
		CHECK_OK(up_close(r2));
	}
	printf("# dies_mid_reserve: backend=%s capacity %u B; an empty pipe takes %zu B before the "
	       "kill, %zu B after it, %zu B after streaming 32 MiB (%zu pages %s)\n",
	       g_backend, CAPACITY, g_leak_before, g_leak_after, g_leak_later,
	       (g_leak_before - g_leak_later) / 4096,
	       g_leak_later == g_leak_before ? "recovered" : "still leaked");
	CHECK_EQ(g_leak_before, CAPACITY);
	if (require_recovery)
		CHECK_EQ(g_leak_later, g_leak_before);
	CHECK_OK(up_close(rdb));
	up_pipe_release(p);
}

static void dies_mid_reserve(void)
{
	mid_reserve(false);
}

static void reserve_pages_recovered(void)
{
	mid_reserve(true);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int a;

	if (argc == 5 && strcmp(argv[1], "--victim") == 0)
		victim_main(argv);
	{
		ssize_t k = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);

		CHECK(k > 0 && k < (ssize_t)sizeof(g_self) - 1);
		g_self[k] = 0;
	}
	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc)
			g_reps = atoi(argv[++a]);
		else if (argv[a][0] != '-')
			only = argv[a];
	}
	if (g_reps < 1 || g_reps > MAX_REPS)
		g_reps = 20;
	harness_init(1, argv);
	harness_filter = only;
	harness_fail_on_sigpipe();
	harness_watchdog(120);
	g_sh_fd = memfd_create("peer_death_shared", MFD_CLOEXEC);
	CHECK_SYS(g_sh_fd);
	CHECK_SYS(ftruncate(g_sh_fd, sizeof(*g_sh)));
	g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED, g_sh_fd, 0);
	CHECK(g_sh != MAP_FAILED);
	{
		struct up_pipe *p = mk_pipe();
		struct up_end *e = NULL;
		static struct up_stats st;

		CHECK_OK(up_open(p, UP_RD, &e));
		CHECK_OK(up_stats(p, &st));
		g_backend = strdup(st.backend);
		{
			/* The wake by a close needs an inotify instance and a
			 * watch (per-user limits); without them, the slice. */
			char path[40];
			int fd = inotify_init1(IN_CLOEXEC);

			snprintf(path, sizeof(path), "/proc/self/fd/%d", up_pipe_fd(p));
			g_inotify = fd >= 0 &&
				    inotify_add_watch(fd, path, IN_CLOSE_WRITE) >= 0;
			if (fd >= 0)
				close(fd);
			if (!g_inotify)
				printf("# no inotify here: deaths are seen by the slice\n");
		}
		CHECK_OK(up_close(e));
		up_pipe_release(p);
	}
	printf("# backend=%s reps=%d\n", g_backend, g_reps);
	harness_block_sigchld();
	RUN(writer_dies_while_reader_sleeps);
	RUN(writer_dies_while_streaming);
	RUN(reader_dies_while_writer_sleeps);
	RUN(reader_dies_while_streaming);
	RUN(dies_mid_reserve);
	RUN(reader_dies_while_writer_paces);
	RUN(writer_dies_nonblock_reader_retries);
	RUN(reader_dies_nonblock_writer_retries);
	RUN(ns_writer_dies_while_reader_sleeps);
	RUN(ns_writer_dies_while_streaming);
	RUN(ns_reader_dies_while_writer_sleeps);
	RUN(ns_reader_dies_while_streaming);
	RUN(ns_reader_dies_while_writer_paces);
	RUN(ns_writer_dies_nonblock_reader_retries);
	RUN(ns_reader_dies_nonblock_writer_retries);
	RUN(writer_dies_poll_reader_waits);
	RUN(reader_dies_poll_writer_waits);
	RUN(writer_dies_paced_reader_early);
	RUN(writer_dies_paced_poll_reader_early);
	RUN(ns_writer_dies_poll_reader_waits);
	RUN(ns_reader_dies_poll_writer_waits);
	RUN(benign_closes_in_foreign_ns);
	RUN(blind_death_before_the_watch);
	/* Known-to-the-issue expectations, run only when named (registered
	 * as their own CTests so the cases above stay meaningful). */
	if (harness_filter && strcmp(harness_filter, "zombie_writer_not_reaped") == 0)
		RUN(zombie_writer_not_reaped);
	if (harness_filter && strcmp(harness_filter, "reserve_pages_recovered") == 0)
		RUN(reserve_pages_recovered);
	printf("# max kill->return latency over the cases run: %.2f ms (%s)\n",
	       (double)g_max_lat_all / 1e6, g_backend);
	return 0;
}
