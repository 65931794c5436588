/* SPDX-License-Identifier: MIT */
/*
 * test_fence.c - the barrier a bias revoker runs for an owner of its own
 * process reaches the CPU that owner runs on (core/fence.c).
 *
 * The biased locks rest on it: the owner enters with a store and a load and
 * no fence between, and the revoker's barrier must run a full fence on the
 * owner's CPU. MEMBARRIER_CMD_GLOBAL_EXPEDITED picks CPUs by a per-CPU copy
 * of the running process's registration, refreshed only when the scheduler
 * switches between two address spaces; a CPU that ran the process before it
 * registered and has gone idle since keeps the stale copy and is skipped
 * while a registered thread spins there. test_bias's churn then lost a
 * record about once in a hundred runs.
 *
 * So the scene is set for that: a fresh process runs on CPU b, moves to CPU
 * a and sleeps (b idles, lazily keeping our address space), registers, then
 * starts a thread spinning on b. The function-call IPIs that b takes
 * (/proc/interrupts, CAL) while a calls the barrier are counted. Skips (77)
 * with fewer than two CPUs, without a CAL line (not x86), or where
 * membarrier is refused.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"

#define CALLS    2000
#define ATTEMPTS 50

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) != 0)
		_exit(70);
}

/* Function-call IPIs CPU @cpu has taken, or -1 when not counted here. */
static long cal_of(int cpu)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[8192], *tok, *save;
	int col = -1, i;
	long v = -1;

	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f)) {
		char want[16];

		snprintf(want, sizeof(want), "CPU%d", cpu);
		for (i = 0, tok = strtok_r(line, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save), i++)
			if (strcmp(tok, want) == 0)
				col = i;
	}
	while (col >= 0 && fgets(line, sizeof(line), f)) {
		char *p = line;

		while (*p == ' ')
			p++;
		if (strncmp(p, "CAL:", 4) != 0)
			continue;
		p += 4;
		for (i = 0; i <= col; i++)
			v = strtol(p, &p, 10);
		break;
	}
	fclose(f);
	return v;
}

static _Atomic int spin_on = -1; /* the CPU the spinner runs on, once there */
static _Atomic bool spin_stop;
static _Atomic uint64_t spins; /* the spinner's progress */

static void *spinner(void *arg)
{
	int cpu = (int)(intptr_t)arg;
	uint64_t n = 0;

	pin(cpu);
	atomic_store(&spin_on, sched_getcpu());
	while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
		atomic_store_explicit(&spins, ++n, memory_order_relaxed);
	return NULL;
}

/* One barrier; true when the spinner moved across it, so was running on
 * its CPU then (another task there may take turns with it). */
static bool fence_once(bool ours, uint64_t *sc)
{
	uint64_t s0 = atomic_load_explicit(&spins, memory_order_relaxed);

	if (ours) {
		if (up__membarrier(UP_FENCE_OWN, sc) != 0)
			_exit(72);
	} else {
		syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0u, 0);
	}
	return atomic_load_explicit(&spins, memory_order_relaxed) != s0;
}

static void burn_ms(int ms)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

/* In a fresh process: the scene above; writes, for CALLS raw global
 * expedited barriers and CALLS of ours, the IPIs b took and the calls
 * that found the spinner running, summed over the attempts. */
static void scene(int a, int b, int out)
{
	long counts[4] = { 0 };
	pthread_t t;
	uint64_t sc = 0;

	pin(b);
	burn_ms(20);
	pin(a);
	usleep(50000);
	if (!up__membarrier_registered(getpid(), &sc))
		_exit(77);
	if (pthread_create(&t, NULL, spinner, (void *)(intptr_t)b) != 0)
		_exit(71);
	while (atomic_load(&spin_on) != b)
		sched_yield();
	/* Until the spinner was running for CALLS of ours (bounded). */
	for (int k = 0; k < ATTEMPTS && counts[3] < CALLS; k++) {
		long c0 = cal_of(b), c1, c2;

		for (int i = 0; i < CALLS; i++)
			counts[2] += fence_once(false, &sc);
		c1 = cal_of(b);
		for (int i = 0; i < CALLS; i++)
			counts[3] += fence_once(true, &sc);
		c2 = cal_of(b);
		counts[0] += c1 - c0;
		counts[1] += c2 - c1;
	}
	atomic_store(&spin_stop, true);
	pthread_join(t, NULL);
	if (write(out, counts, sizeof(counts)) != (ssize_t)sizeof(counts))
		_exit(73);
	_exit(0);
}

static void own_fence_reaches_the_owners_cpu(void)
{
	long counts[4];
	int fds[2], status, a = -1, b = -1;
	cpu_set_t s;
	pid_t pid;

	CHECK(sched_getaffinity(0, sizeof(s), &s) == 0);
	for (int c = 0; c < CPU_SETSIZE && b < 0; c++)
		if (CPU_ISSET(c, &s)) {
			if (a < 0)
				a = c;
			else
				b = c;
		}
	if (b < 0)
		SKIP("one CPU: no other CPU to reach");
	if (cal_of(b) < 0)
		SKIP("no function-call IPI count in /proc/interrupts here");
	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		scene(a, b, fds[1]);
	}
	close(fds[1]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		SKIP("membarrier registration refused here");
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_EQ(read(fds[0], counts, sizeof(counts)), (ssize_t)sizeof(counts));
	close(fds[0]);
	printf("# CPU %d took %ld IPIs from global expedited barriers that found the "
	       "spinner there %ld times, %ld from ours that found it %ld times\n",
	       b, counts[0], counts[2], counts[1], counts[3]);
	/* The spinner shares its CPU with whatever else runs there (another
	 * test), so not every call finds it running; one that does must reach
	 * it (a few may see it move just as it is preempted). A barrier that
	 * skips its CPU reaches it in none. */
	if (counts[3] < 100)
		SKIP("the spinner hardly ran: too busy a machine to tell");
	CHECK(counts[1] >= counts[3] / 2);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	RUN(own_fence_reaches_the_owners_cpu);
	return 0;
}
