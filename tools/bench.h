/* SPDX-License-Identifier: MIT */
/*
 * bench.h - private interfaces of `uringpipe-cat --bench`, shared by its
 * sources only:
 *
 *   cat_bench.c     the mode's entry: probes, configurations, output order;
 *                   fatal errors and allocation for all of its parts;
 *   bench_opts.c    its options and --bench --help;
 *   bench_probe.c   what the machine and the library turn out to be;
 *   bench_workers.c the writer and reader threads of one run;
 *   bench_kernel.c  the kernel transports --vs adds: a pipe driven by io_uring,
 *                   a vmsplice() writer, AF_UNIX and TCP stream sockets;
 *   bench_sparse.c  --sparse: write-to-read latency of sparse 64-byte messages;
 *   bench_sparse_out.c  what --sparse prints for each gap;
 *   bench_run.c     one run (set-up, watchdog, results), calibration, and
 *                   every size of one writers x readers configuration;
 *   bench_proc.c    --processes: one run with every worker a process, the
 *                   pipes met by name (uringpipe) or path (a kernel FIFO);
 *   bench_out.c     the text table, the JSON object and the --report data;
 *   bench_pressure.c --memory-pressure: stress-ng beside the benchmark;
 *   bench_machine.c what the output says about where it ran: CPU, cores,
 *                   kernel, backend, pinning, date, command line.
 */
#ifndef UP_TOOLS_BENCH_H
#define UP_TOOLS_BENCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "uringpipe.h"

#include "byte_sum.h"
#include "cat.h"

#define BENCH_PFX "uringpipe-cat --bench: " /* before every message */

#define MAX_SIZES  32
#define MAX_REPEAT 100

enum transport { T_KERNEL = CAT_T_KERNEL, T_URING = CAT_T_URING, T_URING_ZC = CAT_T_URING_ZC,
		 T_PIPE_URING = CAT_T_PIPE_URING, T_VMSPLICE = CAT_T_VMSPLICE, T_UNIX = CAT_T_UNIX,
		 T_TCP = CAT_T_TCP, T_COUNT = CAT_T_COUNT };
/* The JSON's names (T_KERNEL stays "kernel", as before --vs). */
extern const char *const bench_tname[T_COUNT];
/* The table's names: what --vs takes for the kernel ones. */
extern const char *const bench_tlabel[T_COUNT];

/* Either flavour of uringpipe endpoint; every other transport is a file
 * descriptor (w->fd). */
static inline bool is_up(enum transport t)
{
	return t == T_URING || t == T_URING_ZC;
}

#define READ_SIZE_MAX UINT64_MAX /* --read-size max: up to the capacity */
#define MAX_GAPS      8
#define SPARSE_MSG    64 /* --sparse message bytes */

struct opts {
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes;
	uint64_t capacity;
	uint64_t bytes; /* 0: calibrate per transport and size */
	unsigned repeat, writers, readers;
	bool json, verbose, sweep, pressure;
	bool processes; /* every worker a process of its own (bench_proc.c) */
	const char *report;
	uint64_t seed;
	uint64_t lat_every; /* 0: automatic */
	double run_time;    /* target seconds per timed run when calibrating */
	double timeout;     /* seconds per run; 0: automatic */
	uint64_t read_size; /* bytes a reader asks for per call: 0 the write size,
			     * READ_SIZE_MAX the capacity */
	bool on[T_COUNT];   /* transports that run: both uringpipe ones, the
			     * kernel pipe, and what --vs adds */
	bool sparse;        /* --sparse instead of the throughput runs */
	unsigned gaps[MAX_GAPS], ngaps; /* --sparse gaps, µs */
	bool early_poll;    /* --early-poll: the default, accepted for scripts */
	bool no_early;      /* --no-early: uringpipe's readers UP_NO_EARLY */
};

/* The reader's bytes per call for @size-byte writes (--read-size). */
static inline uint64_t bench_read_size(const struct opts *o, uint64_t size)
{
	if (o->read_size == READ_SIZE_MAX)
		return o->capacity;
	return o->read_size ? o->read_size : size;
}

/* Where and how the bench ran, as the header, the JSON and the report name
 * it (bench_machine.c). Plain text, NUL-terminated, possibly truncated. */
struct bench_machine {
	char cpu[128];     /* "model name" of /proc/cpuinfo, or the machine */
	unsigned cores;    /* online CPUs (sysconf) */
	char kernel[256];  /* uname -r -v */
	char backend[17];  /* the library's wake backend, as up_stats() says */
	char pinning[96];
	char date[32];     /* UTC, ISO 8601, when the bench started */
	char command[1024]; /* argv, shell-quoted, "--bench" first */
	/* Trace events enabled in the kernel's tracefs (set_event), space
	 * separated; "" when none or unreadable. */
	char trace_events[256];
};

/* What the machine and the library turned out to be, found once at start. */
struct env {
	int cpu[2];        /* first two CPUs we may run on, or -1 */
	int kpipe_req;     /* argument for F_SETPIPE_SZ, 0 = leave the default */
	long kpipe_size;   /* F_GETPIPE_SZ read back */
	long kpipe_max;    /* /proc/sys/fs/pipe-max-size, -1 if unreadable */
	char kpipe_note[320];
	char backend[17];
	int numa_node;
	size_t up_capacity, up_page;
	double clock_ns;   /* cost of one clock_gettime(CLOCK_MONOTONIC) */
	/* --vs unix/tcp: SO_SNDBUF and SO_RCVBUF read back after asking for
	 * the capacity (the kernel caps them at wmem_max/rmem_max unless we
	 * may force them); 0 when the transport does not run. */
	long unix_buf[2], tcp_buf[2];

	struct bench_machine mach; /* bench_machine_env() fills it after bench_probe() */
};

/* A 1 x 1 run is pinned, writer and reader on two CPUs, when it may be. */
static inline bool bench_pinned(const struct env *env, unsigned writers, unsigned readers)
{
	return writers == 1 && readers == 1 && env->cpu[1] >= 0;
}

struct bench_gate; /* --processes: the start line, in shared memory */

/* What the threads of one run share. */
struct shared {
	enum transport t;
	size_t size;
	uint64_t key; /* pattern key derived from --seed */
	bool verify;
	/* Workers start together: threads at the barrier, processes
	 * (--processes) at the gate's second phase when there is one. */
	pthread_barrier_t bar;
	struct bench_gate *gate;
	/* The watchdog: workers count themselves out here. A condition
	 * variable rather than pthread_clockjoin_np(), which TSan does not
	 * intercept: it would flag every read of a joined worker's results. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned done;
};

struct worker {
	struct shared *sh;
	pthread_t tid;
	bool writer;
	unsigned idx;
	int fd;             /* kernel transport */
	struct up_end *end; /* uringpipe transport */
	void *ring;         /* pipe-uring: this thread's io_uring */
	unsigned char *vbuf; /* vmsplice writer: the rotating buffers */
	size_t vlen, voff;
	unsigned char *buf;
	size_t buflen;      /* a reader's: its bytes per call (--read-size) */
	uint64_t sum;       /* reader: sum of every byte it read; writer, in a
			     * verification pass: of every byte it wrote */
	unsigned char *scratch; /* reader, verify pass: expected bytes */
	uint64_t quota;         /* writer: bytes to write */
	uint64_t moved;         /* bytes written or read */
	uint64_t calls;         /* write()/read() or up_write()/up_read() calls */
	uint64_t *lat;          /* writer: sampled write durations, ns */
	size_t lat_cap, nlat;
	uint64_t every;
	bool bad;               /* reader: integrity already failed */
	struct timespec t0, t1;
	/* Read only by the watchdog to say where a hung run stopped: relaxed,
	 * it orders nothing. */
	_Atomic uint64_t progress;
	/* --processes, uringpipe: the worker process's own counters (its
	 * up_stats() after its end closed), for the parent to add up. */
	struct up_stats st;
	bool have_st;
	char err[256];
} __attribute__((aligned(64)));

/* What a run is for: it decides the threads, the checks and the sampling. */
enum run_kind {
	RUN_VERIFY,    /* 1 writer x 1 reader, every byte checked, untimed */
	RUN_CALIBRATE, /* the configured threads, timed as a whole only */
	RUN_TIMED,     /* the configured threads, write latencies sampled */
};

/* One run being set up, run and summed up. */
struct run {
	const struct opts *o;
	const struct env *env;
	enum transport t;
	enum run_kind kind;
	uint64_t size, bytes;
	unsigned nw, n; /* writers; writers + readers */
	struct shared sh;
	struct worker *ws;
};

/* One write size: every run's figures, per transport. */
struct row {
	uint64_t size;
	uint64_t bytes[T_COUNT];
	uint64_t verified[T_COUNT];
	double mbps[T_COUNT][MAX_REPEAT];
	double secs[T_COUNT][MAX_REPEAT];
	double p50[T_COUNT][MAX_REPEAT], p99[T_COUNT][MAX_REPEAT];
	double lmax[T_COUNT];
	double sys_gib[T_COUNT][MAX_REPEAT];
	uint64_t syscalls[T_COUNT][MAX_REPEAT];
	uint64_t rcalls[T_COUNT][MAX_REPEAT], wcalls[T_COUNT][MAX_REPEAT]; /* readers', writers' */
	size_t nlat[T_COUNT];
	uint64_t every[T_COUNT];
	struct up_stats st[MAX_REPEAT];
	bool have_st[MAX_REPEAT];
	/* A cache line's round trip between the pinned CPUs (ns), before each
	 * round and after the last (bench_line_rtt_ns()); 0: not measured. */
	double rtt_ns[MAX_REPEAT + 1];
	unsigned nrtt;
};

/* One run configuration (writers x readers) and its rows. */
struct config {
	unsigned writers, readers;
	struct row *rows;
};

static inline uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* vDSO on x86 (tsc/kvm-clock) and arm64: no system call. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_ns(&ts);
}

static inline uint64_t mix64(uint64_t x)
{
	/* splitmix64 finaliser: every input bit reaches every output bit. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9u;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebu;
	x ^= x >> 31;
	return x;
}

/* ------------------------------------------------------------ cat_bench.c */

/* Prints BENCH_PFX and the message on stderr, after flushing stdout, and
 * exits 1; in a worker process (--processes) _exit(1), so that nothing of
 * the parent's atexit() runs there. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *bench_xmalloc(size_t n);
/* Set in a worker process of --processes, right after fork(). */
extern bool bench_in_child;
/* A data buffer (what writers copy from, readers copy into) on @node, from
 * the library's node arenas: up_buf_alloc(3). Free with up_buf_free(). */
unsigned char *bench_xbuf_alloc(size_t n, int node);

/* ----------------------------------------------------------- bench_opts.c */

/* Exits 2 with a message and the usage on a bad option, 0 after --help. */
void bench_parse_args(int argc, char **argv, struct opts *o);

/* ---------------------------------------------------------- bench_probe.c */

/* Fills *env for pipes of @capacity; dies if no pipe of either kind can be
 * made. */
void bench_probe(uint64_t capacity, struct env *env);

/* -------------------------------------------------------- bench_workers.c */

/* Byte at stream offset o is byte (o & 7) of mix64((o >> 3) + key). */
void bench_pattern_fill(unsigned char *dst, uint64_t off, size_t n, uint64_t key);
/* A worker thread's body: waits on the barrier, writes its quota or reads
 * to EOF, closes its end. */
void bench_worker_main(struct worker *w);
/* Closes the worker's end of the pipe, if still open. */
void bench_close_end(struct worker *w);

/* ----------------------------------------------------------- bench_kernel.c */

/* Makes the file descriptors of a run of kernel transport rn->t, one per
 * worker (w->fd); dies on failure. */
void bench_kernel_open(struct run *rn);
/* In the worker's thread, before the start line: its io_uring (pipe-uring)
 * or its rotating buffers (vmsplice writer). 0, or -errno in w->err. */
int bench_kernel_thread_init(struct worker *w);
/* One write or read system call (for pipe-uring one io_uring_enter()) on a
 * kernel transport: bytes, 0 at EOF, or -errno. EINTR is retried, and each
 * retry counted in w->calls. */
ssize_t bench_kernel_write(struct worker *w, const void *p, size_t n);
ssize_t bench_kernel_read(struct worker *w, void *p, size_t n);
/* Closes w->fd and frees what bench_kernel_thread_init() made. */
void bench_kernel_close(struct worker *w);
/* Fills env->unix_buf and env->tcp_buf for the transports in o->on. */
void bench_kernel_probe(const struct opts *o, struct env *env);

/* ----------------------------------------------------------- bench_sparse.c */

/* --sparse: every gap, alternating transports and readers per round; prints
 * the table or the JSON. Exits 1 when a run fails. */
void bench_sparse(const struct opts *o, const struct env *env);

/* ------------------------------------------------------- bench_sparse_out.c */

enum { SP_RD_BLOCK, SP_RD_EPOLL, SP_RD_COUNT };

/* One transport and reader at one gap: per round, the latency's p50, p99
 * and max (us), the reader's CPU share, and the p50s of the writer's call
 * and of an epoll reader's two parts (bench_sparse_out.c says which);
 * below 0 where a round had none. */
struct sp_cell {
	double p50[MAX_REPEAT], p99[MAX_REPEAT], max[MAX_REPEAT], cpu[MAX_REPEAT];
	double wcall[MAX_REPEAT], wake[MAX_REPEAT], take[MAX_REPEAT];
	double woken[MAX_REPEAT]; /* uringpipe: wakes issued per message; -1: none */
};

extern const enum transport bench_sp_order[T_COUNT];
extern const char *const bench_sp_rd_name[SP_RD_COUNT];
void bench_sp_print_gap(const struct opts *o, unsigned gap, unsigned nmsg,
			struct sp_cell (*c)[SP_RD_COUNT]);
void bench_sp_json_gap(const struct opts *o, unsigned gap, unsigned nmsg,
		       struct sp_cell (*c)[SP_RD_COUNT], bool first);

/* ------------------------------------------------------------ bench_run.c */

/* A worker's part of run @rn, before anything is allocated: its index,
 * direction, and for a writer its quota and latency sampling (every,
 * lat_cap). */
void bench_worker_plan(const struct run *rn, struct worker *w, unsigned i);
/* Its buffers, on @node: a writer's pre-filled source, a reader's buffer
 * and, to verify, its scratch; a timed writer's latency samples too unless
 * w->lat is already there. Faults them all in. */
void bench_worker_alloc(const struct run *rn, struct worker *w, int node);
/* The watchdog's message: where each worker of a hung run stopped. */
void bench_hung(const struct run *rn, double tmo);
/* Seconds a run may take before the watchdog ends it. */
double bench_run_timeout(const struct run *rn);

/* Every size for one writers x readers configuration into @rows. The
 * verification pass (always 1 x 1) runs only with @verify: once per size is
 * enough. Exits 1 when a run fails. */
void bench_run_config(const struct opts *o, const struct env *env, struct row *rows,
		      bool verify);

/* ----------------------------------------------------------- bench_proc.c */

/* The gate's phases: the pipe exists (open it now), every end is open
 * (start). */
enum { GATE_MADE = 0, GATE_GO = 1 };

/* A worker process arrives at @phase of the gate and waits for the parent
 * to open it. */
void bench_gate_pass(struct bench_gate *g, unsigned phase);
/*
 * bench_proc_run - run @rn with each worker in a process of its own,
 * forked before the run's pipe exists: the parent then makes the pipe (a
 * FIFO in a private directory, or a uringpipe served at
 * "@upcat-bench-<pid>-<n>") and the workers open it by name. Leaves the
 * results in rn->ws (shared memory; free with bench_proc_free). Exits 1,
 * children killed, when a worker process dies or the run hangs.
 */
void bench_proc_run(struct run *rn);
/* The worker processes' uringpipe counters, added up into *st: false when
 * none has any. */
bool bench_proc_stats(const struct run *rn, struct up_stats *st);
void bench_proc_free(struct run *rn);

/* ------------------------------------------------------------ bench_out.c */

/* The median of @n values (n <= MAX_REPEAT); 0 for none. */
double bench_median(const double *v, unsigned n);
void bench_print_header(const struct opts *o, const struct env *env);
/* The --vs socket buffers as they turned out (a line each), for the header. */
void bench_print_vs_note(const struct opts *o, const struct env *env);
/* The JSON members "read_size_option", "transports" and the socket buffers,
 * without a leading comma. */
void bench_json_transports(const struct opts *o, const struct env *env);
void bench_print_table(const struct opts *o, const struct env *env, const struct config *cf);
void bench_print_footer(const struct opts *o);
void bench_print_json(const struct opts *o, const struct env *env, const struct config *cf,
		      unsigned ncf);
/* --report: the page of every run's figures, written to o->report; says where
 * on stderr; dies on failure. */
void bench_write_report(const struct opts *o, const struct env *env, const struct config *cf,
			unsigned ncf);
/* --report FILE cannot be written: says so and exits 2, before any run. */
void bench_report_check(const char *path);

/* -------------------------------------------------------- bench_machine.c */

/* The CPU, cores, kernel, date and command line into *m: call it before the
 * options are parsed (getopt reorders argv). @argv as cat_bench_main() has
 * it, "--bench" taken out. */
void bench_machine_probe(struct bench_machine *m, int argc, char *const *argv);
/* After bench_probe(): *m into env->mach, with the backend and pinning. */
void bench_machine_env(struct env *env, const struct bench_machine *m);
/* A cache line's round trip between env->cpu[0] and cpu[1], in ns, the
 * calling thread pinned meanwhile; 0 without two CPUs or when the peer
 * thread could not run. */
double bench_line_rtt_ns(const struct env *env);

/* ------------------------------------------------------- bench_pressure.c */

/* Starts stress-ng in its own process group, or dies saying why not. */
void bench_pressure_start(void);
/* Stops and reaps it; nothing if it is not running. Also run at exit. */
void bench_pressure_stop(void);

#endif /* UP_TOOLS_BENCH_H */
