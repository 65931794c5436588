/* SPDX-License-Identifier: MIT */
/*
 * test_footprint.c - a pipe holds what its traffic needs, not its capacity.
 *
 *  - idle: a new pipe holds no data page, one that carried a byte holds
 *    one, and the whole segment stays under 64 KiB resident;
 *  - trickle: after a burst through a 64 MiB pipe, one byte every 100 ms
 *    for 3 s leaves at most a quarter of the capacity resident, with a
 *    blocking, a non-blocking and a poll-mode reader; every byte arrives;
 *  - poll_idle: after a burst, a poll-mode reader that only waits on its
 *    pollfd (no trickle, no call of its own) still gets the pages given
 *    back, with the writer in this process or in a child;
 *  - idle_looks_stop: once that is done, a reader's looks stop before the
 *    pool, so an idle pipe costs no work however often its reader retries;
 *  - populated_ahead: a writer that woke its reader populates the base page
 *    its next write enters, once past the middle of the one before, and
 *    does nothing of the kind otherwise; populate_refused: where a seccomp
 *    filter refuses that call, it is made once and then no more.
 *
 * Residency is mincore() over the segment's mapping: the memfd's pages, who
 * ever faulted them. The waits for a trim poll that figure against a
 * deadline: the deadline is a failure bound, not synchronisation. The 100 ms
 * between trickle bytes is the workload's pace.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "mode_reader.h"
#include "ring.h"
#include "up_int.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

static size_t data_resident(struct up_pipe *p)
{
	return harness_resident(p->pages, (size_t)p->g.page_count * p->g.page_size);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void idle(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	size_t seg, data;
	char c = 'x';

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	data = data_resident(p);
	seg = harness_resident(p->base, p->g.off.size);
	printf("# new pipe: %zu KiB data, %zu KiB segment resident\n", data / KIB, seg / KIB);
	CHECK_EQ(data, 0);
	CHECK(seg <= 64 * KIB);
	CHECK_EQ(up_write(w, &c, 1), 1);
	CHECK_EQ(up_read(r, &c, 1), 1);
	data = data_resident(p);
	seg = harness_resident(p->base, p->g.off.size);
	printf("# after one byte: %zu KiB data, %zu KiB segment resident\n", data / KIB,
	       seg / KIB);
	/* A byte faults in one 4 KiB page of the memfd, however large the
	 * ring's pages (16 KiB at this capacity). */
	CHECK(data <= 4 * KIB);
	CHECK(seg <= 64 * KIB);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* Burst @total bytes through a 64 MiB pipe; then @trickle_ms of one byte
 * every 100 ms (0: none). Returns resident bytes after, checks the bound. */
static void burst_then(enum reader_mode mode, uint64_t trickle_ms)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *w;
	struct mode_reader rd = { .mode = mode, .pat_seed = 7, .max = 1 << 20 };
	pthread_t t;
	static char chunk[1 << 16];
	const uint64_t total = 512ull * MIB;
	uint64_t sent = 0, start, deadline;
	size_t peak, after, bound;

	up_config_init(&cfg);
	cfg.capacity = 64 * MIB;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD | (mode == READ_BLOCKING ? 0 : UP_NONBLOCK), &rd.e));
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(pthread_create(&t, NULL, mode_reader_main, &rd), 0);
	while (sent < total) {
		ssize_t n;

		harness_fill(7, sent, chunk, sizeof(chunk));
		n = up_write(w, chunk, sizeof(chunk));
		CHECK(n == (ssize_t)sizeof(chunk));
		sent += (uint64_t)n;
	}
	peak = data_resident(p);
	bound = cfg.capacity / 4;
	start = now_ms();
	while (now_ms() - start < trickle_ms) {
		harness_fill(7, sent, chunk, 1);
		CHECK_EQ(up_write(w, chunk, 1), 1);
		sent++;
		usleep(100 * 1000); /* the trickle's pace */
	}
	after = data_resident(p);
	if (!trickle_ms) {
		/* Nothing calls the library now but the armed reader's ticks. */
		deadline = now_ms() + 5000;
		while ((after = data_resident(p)) > bound && now_ms() < deadline)
			usleep(10 * 1000); /* polling a figure against a deadline */
	}
	printf("# mode %d: peak %zu MiB, after %s %zu KiB (bound %zu KiB)\n", (int)mode,
	       peak / MIB, trickle_ms ? "the trickle" : "idling", after / KIB, bound / KIB);
	/* The burst went round the pool, so every page held memory at some
	 * point (a slow build trims during the burst, so the peak may not
	 * show it). relaxed: read after the writes, a count. */
	CHECK(atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed) >= p->g.page_count);
	CHECK(after <= bound);
	up_close(w);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(rd.last, 0);
	CHECK_EQ(rd.got, sent);
	CHECK_EQ(rd.bad, 0);
	up_close(rd.e);
	up_pipe_release(p);
}

static void trickle_blocking(void)
{
	burst_then(READ_BLOCKING, 3000);
}

static void trickle_nonblock(void)
{
	burst_then(READ_NONBLOCK, 3000);
}

static void trickle_poll(void)
{
	burst_then(READ_POLL, 3000);
}

static void poll_idle(void)
{
	burst_then(READ_POLL, 0);
}

/*
 * As poll_idle, with the writer in another process: its pidfd covers its
 * death, so the armed reader has no peer tick of its own, and only the
 * trim's (poll.c, trim_due) brings it back to give the pages back.
 */
static void poll_idle_peer(void)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct mode_reader rd = { .mode = READ_POLL, .pat_seed = 7, .max = 1 << 20 };
	const uint64_t total = 512ull * MIB;
	int done[2], hold[2], st;
	uint64_t deadline;
	size_t peak, after, bound;
	pthread_t t;
	pid_t pid;
	char c;

	up_config_init(&cfg);
	cfg.capacity = 64 * MIB;
	bound = cfg.capacity / 4;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &rd.e));
	CHECK_SYS(pipe(done));
	CHECK_SYS(pipe(hold));
	CHECK_EQ(pthread_create(&t, NULL, mode_reader_main, &rd), 0);
	pid = fork();
	CHECK_SYS(pid);
	if (pid == 0) {
		static char chunk[1 << 16];
		struct up_end *w;
		uint64_t sent;

		CHECK_OK(up_open(p, UP_WR, &w));
		for (sent = 0; sent < total; sent += sizeof(chunk)) {
			harness_fill(7, sent, chunk, sizeof(chunk));
			CHECK_EQ(up_write(w, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
		}
		CHECK_EQ(write(done[1], "d", 1), 1);
		CHECK_EQ(read(hold[0], &c, 1), 1);
		up_close(w);
		_exit(0);
	}
	CHECK_EQ(read(done[0], &c, 1), 1);
	peak = data_resident(p);
	deadline = now_ms() + 5000;
	while ((after = data_resident(p)) > bound && now_ms() < deadline)
		usleep(10 * 1000); /* polling a figure against a deadline */
	printf("# writer in a child: peak %zu MiB, after idling %zu KiB (bound %zu KiB)\n",
	       peak / MIB, after / KIB, bound / KIB);
	CHECK_EQ(write(hold[1], "h", 1), 1);
	CHECK_SYS(waitpid(pid, &st, 0));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK(atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed) >= p->g.page_count);
	CHECK(after <= bound);
	CHECK_EQ(rd.last, 0);
	CHECK_EQ(rd.got, total);
	CHECK_EQ(rd.bad, 0);
	up_close(rd.e);
	up_pipe_release(p);
	close(done[0]);
	close(done[1]);
	close(hold[0]);
	close(hold[1]);
}

/*
 * Once an idle pipe's memory is back, a reader that keeps looking (a
 * non-blocking one that retries) finds nothing to do: its looks stop before
 * the pool, whatever the capacity. Each look that goes through the pool is
 * counted (up_end's trims); a second of retries after the trim may add at
 * most the one look that sees the last pages come home.
 */
static void idle_looks_stop(void)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *r, *w;
	static char chunk[1 << 16];
	uint64_t sent, t0, looks;
	size_t bound;
	ssize_t n;

	up_config_init(&cfg);
	cfg.capacity = 64 * MIB;
	cfg.trim_ms = 10;
	bound = cfg.capacity / 4;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w));
	/* Fill and drain the whole pipe a few times: every page held memory. */
	for (sent = 0; sent < 4 * cfg.capacity;) {
		while ((n = up_write(w, chunk, sizeof(chunk))) > 0)
			sent += (uint64_t)n;
		CHECK_EQ(n, -EAGAIN);
		while ((n = up_read(r, chunk, sizeof(chunk))) > 0)
			;
		CHECK_EQ(n, -EAGAIN);
	}
	CHECK(data_resident(p) > bound);
	t0 = now_ms();
	while (data_resident(p) > bound) {
		CHECK(now_ms() - t0 < 5000);
		CHECK_EQ(up_read(r, chunk, sizeof(chunk)), -EAGAIN);
		usleep(1000); /* a program that retries now and then */
	}
	looks = atomic_load(&r->c.trims);
	t0 = now_ms();
	while (now_ms() - t0 < 1000) {
		CHECK_EQ(up_read(r, chunk, sizeof(chunk)), -EAGAIN);
		usleep(1000); /* as above: about 100 looks' worth of retries */
	}
	printf("# trim looks through the pool: %llu to give the memory back, %llu in the "
	       "idle second after\n", (unsigned long long)looks,
	       (unsigned long long)(atomic_load(&r->c.trims) - looks));
	CHECK(looks >= 1);
	CHECK(atomic_load(&r->c.trims) - looks <= 1);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* @n bytes of @w, then read back by @r (non-blocking); with @arm, @r is
 * armed first, so the write finds it announced and wakes it. Returns the
 * writer's wakes for that write. */
static uint64_t write_read(struct up_end *w, struct up_end *r, size_t n, bool arm)
{
	static char buf[64 * KIB];
	uint64_t wakes = atomic_load(&w->c.wakes);

	CHECK(n <= sizeof(buf));
	if (arm)
		CHECK_EQ(up_poll_arm(r), 0);
	memset(buf, 'a', n);
	CHECK_EQ(up_write(w, buf, n), (ssize_t)n);
	wakes = atomic_load(&w->c.wakes) - wakes;
	CHECK_EQ(up_read(r, buf, sizeof(buf)), (ssize_t)n);
	return wakes;
}

/*
 * A sparse writer's next write should not pay the first touch of a memfd
 * page (writer.c, populate_ahead()). Base pages of the first ring page, in
 * order: a wake with the write ending in the first half populates nothing;
 * a write past the middle with nobody asleep makes no call and populates
 * nothing; one past the middle that wakes populates the next base page; one
 * that fills the ring page populates the first base page of the page the
 * next write takes from the writer's cache.
 */
static void populated_ahead(void)
{
	const size_t sys = (size_t)sysconf(_SC_PAGESIZE);
	struct up_pipe *p;
	struct up_end *r, *w;
	unsigned char *pg;
	uint64_t sc;

	CHECK_OK(up_pipe_create(NULL, &p));
	if (p->g.page_size < 4 * sys)
		SKIP("ring pages of fewer than four base pages");
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
	CHECK(up_pollfd(r) >= 0); /* poll mode: what up_poll_arm() arms */
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(write_read(w, r, sys / 4, true), 1);
	CHECK(w->last_ok);
	pg = w->last_base;
	CHECK_EQ(data_resident(p), sys);
	sc = atomic_load(&w->c.syscalls);
	CHECK_EQ(write_read(w, r, sys / 2, false), 0);
	CHECK_EQ(atomic_load(&w->c.syscalls), sc);
	CHECK_EQ(harness_resident(pg + sys, sys), 0);
	CHECK_EQ(write_read(w, r, 64, true), 1);
	CHECK_EQ(harness_resident(pg + sys, sys), sys);
	CHECK_EQ(data_resident(p), 2 * sys);
	/* The rest of the ring page, in one write that merges. */
	CHECK_EQ(write_read(w, r, p->g.page_size - (sys / 4 + sys / 2 + 64), true), 1);
	CHECK_EQ(w->last_base, pg);
	CHECK_EQ(w->last_len, p->g.page_size);
	CHECK(w->ncache > w->resv_pages);
	CHECK_EQ(harness_resident(up__page_ptr(p, w->cache[w->resv_pages]), sys), sys);
	CHECK_EQ(data_resident(p), (size_t)p->g.page_size + sys);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* This process's madvise(..., MADV_POPULATE_WRITE) fails with EPERM from
 * now on, as under a container's seccomp profile; the other calls, and
 * madvise's other advice, pass. 0, or -errno where seccomp is not to be had. */
static int refuse_populate(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
	const uint32_t arch = AUDIT_ARCH_X86_64;
#else
	const uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
	/* Another ABI's numbers are not madvise's: let them through. The
	 * advice is compared in its low word (both are little-endian). */
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 23 /* MADV_POPULATE_WRITE */, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		return -errno;
	return 0;
#else
	return -ENOSYS;
#endif
}

/*
 * Where a seccomp filter refuses the populate (EPERM, as Docker's default
 * profile answers calls it does not list), the writer makes it once and
 * then never again (writer.c, ahead_refused), rather than a refused call
 * on every wake. In a child, where the filter and the refusal stay: after
 * a first wake (the thread's ring made), two writes that end past the
 * middle of a base page, each waking the reader: the first makes one
 * system call more than the second, and neither next page holds memory.
 */
static void populate_refused(void)
{
	int status = 0;
	pid_t pid;

	harness_block_sigchld();
	pid = harness_fork(60);
	if (pid == 0) {
		const size_t sys = (size_t)sysconf(_SC_PAGESIZE);
		struct up_pipe *p;
		struct up_end *r, *w;
		uint64_t sc, first, second;

		if (refuse_populate() < 0)
			_exit(77);
		CHECK_OK(up_pipe_create(NULL, &p));
		if (p->g.page_size < 4 * sys)
			_exit(77);
		CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r));
		CHECK(up_pollfd(r) >= 0);
		CHECK_OK(up_open(p, UP_WR, &w));
		CHECK_EQ(write_read(w, r, 64, true), 1);
		sc = atomic_load(&w->c.syscalls);
		CHECK_EQ(write_read(w, r, sys / 2, true), 1);
		first = atomic_load(&w->c.syscalls) - sc;
		sc = atomic_load(&w->c.syscalls);
		CHECK_EQ(write_read(w, r, sys, true), 1);
		second = atomic_load(&w->c.syscalls) - sc;
		printf("# populate refused: the first wake past a middle made %llu system calls, "
		       "the second %llu\n", (unsigned long long)first, (unsigned long long)second);
		CHECK_EQ(first, second + 1);
		CHECK(w->last_ok);
		CHECK_EQ(harness_resident(w->last_base + 2 * sys, sys), 0);
		CHECK_EQ(data_resident(p), 2 * sys);
		up_close(w);
		up_close(r);
		up_pipe_release(p);
		fflush(stdout);
		_exit(0);
	}
	CHECK_EQ(harness_wait_child(pid, 60, &status), 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		SKIP("no seccomp filter to be had here, or ring pages too small");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(120);
	RUN(idle);
	RUN(trickle_blocking);
	RUN(trickle_nonblock);
	RUN(trickle_poll);
	RUN(poll_idle);
	RUN(poll_idle_peer);
	RUN(idle_looks_stop);
	RUN(populated_ahead);
	RUN(populate_refused);
	return 0;
}
