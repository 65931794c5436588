/* SPDX-License-Identifier: MIT */
/*
 * bench_machine.c - where and how `uringpipe-cat --bench` ran, for the
 * header of the table, the "machine" object of --json and the --report
 * page: a figure means little without the CPU, the kernel, the wake backend
 * and the exact command that gave it. And the phase the machine was in: a
 * cache line's round trip between the two CPUs the runs are pinned to,
 * measured before every round, since on a VM it moves several times over
 * (the host places the two vCPUs near each other or far apart) and every
 * message-sized figure moves with it.
 *
 * Also any trace events enabled in tracefs: a tracepoint on the system
 * calls (raw_syscalls) or the scheduler runs on every call or switch even
 * with tracing off, which slows the kernel transports, a call per write
 * and per read, and so inflates every ratio to them. One left enabled by a
 * tracing session turned 400 MB/s of 100-byte pipe writes into 260 here.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* The events listed in tracefs's set_event (root only), space separated
 * into @out; "" when none or unreadable. */
static void trace_events(char *out, size_t n)
{
	static const char *const where[] = { "/sys/kernel/tracing/set_event",
					     "/sys/kernel/debug/tracing/set_event" };
	char line[128];
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		FILE *f = fopen(where[i], "re");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			if (line[0] && len + strlen(line) + 2 < n)
				len += (size_t)snprintf(out + len, n - len, "%s%s", len ? " " : "",
							line);
		}
		fclose(f);
		return;
	}
}

/* The value of the first "@key<spaces>: value" line of /proc/cpuinfo. */
static bool cpuinfo(const char *key, char *out, size_t n)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	size_t kl = strlen(key);
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *v;

		if (strncmp(line, key, kl) != 0 || !(v = strchr(line + kl, ':')))
			continue;
		if (strspn(line + kl, " \t") != (size_t)(v - line - (ptrdiff_t)kl))
			continue;
		v += strspn(v + 1, " \t") + 1;
		v[strcspn(v, "\n")] = '\0';
		if (*v) {
			snprintf(out, n, "%s", v);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Words that a POSIX shell reads back unchanged need no quotes. */
static bool shell_plain(const char *s)
{
	return *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "_@%+=:,./-") == strlen(s);
}

/* Appends @word, shell-quoted, to @b (of @n bytes, holding @len). A word
 * that does not fit ends the line with "..." instead of a cut quote. */
static size_t append_word(char *b, size_t n, size_t len, const char *word)
{
	char q[1024];
	size_t ql = 0;

	if (shell_plain(word)) {
		ql = (size_t)snprintf(q, sizeof(q), "%s", word);
	} else {
		q[ql++] = '\'';
		for (const char *p = word; *p && ql + 6 < sizeof(q); p++) {
			if (*p == '\'') {
				memcpy(q + ql, "'\\''", 4);
				ql += 4;
			} else {
				q[ql++] = *p;
			}
		}
		q[ql++] = '\'';
		q[ql] = '\0';
	}
	if (len + (len ? 1 : 0) + ql + 4 >= n || ql >= sizeof(q) - 1) {
		if (len + 4 < n && !strstr(b, "..."))
			len += (size_t)snprintf(b + len, n - len, " ...");
		return len;
	}
	len += (size_t)snprintf(b + len, n - len, "%s%s", len ? " " : "", q);
	return len;
}

void bench_machine_probe(struct bench_machine *m, int argc, char *const *argv)
{
	struct utsname u;
	struct tm tm;
	time_t now = time(NULL);
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	size_t len = 0;

	memset(m, 0, sizeof(*m));
	if (uname(&u) == 0) {
		snprintf(m->kernel, sizeof(m->kernel), "%s %s", u.release, u.version);
		/* x86 says "model name"; arm64 has no name, only numbers. */
		if (!cpuinfo("model name", m->cpu, sizeof(m->cpu)) &&
		    !cpuinfo("Hardware", m->cpu, sizeof(m->cpu)))
			snprintf(m->cpu, sizeof(m->cpu), "%s (no model name in /proc/cpuinfo)",
				 u.machine);
	}
	m->cores = cores > 0 ? (unsigned)cores : 0;
	trace_events(m->trace_events, sizeof(m->trace_events));
	if (gmtime_r(&now, &tm))
		strftime(m->date, sizeof(m->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* "--bench" may have stood anywhere before "--"; first is the same. */
	len = append_word(m->command, sizeof(m->command), len, argc > 0 ? argv[0] : CAT_PROG);
	len = append_word(m->command, sizeof(m->command), len, "--bench");
	for (int i = 1; i < argc; i++)
		len = append_word(m->command, sizeof(m->command), len, argv[i]);
}

void bench_machine_env(struct env *env, const struct bench_machine *m)
{
	env->mach = *m;
	snprintf(env->mach.backend, sizeof(env->mach.backend), "%s", env->backend);
	if (env->cpu[1] >= 0)
		snprintf(env->mach.pinning, sizeof(env->mach.pinning),
			 "1 x 1 runs: writer on cpu%d, reader on cpu%d; others not pinned",
			 env->cpu[0], env->cpu[1]);
	else
		snprintf(env->mach.pinning, sizeof(env->mach.pinning),
			 "not pinned (fewer than two CPUs allowed)");
}

/* The round trip: the line goes odd to the peer, even back; RTT_QUIT sends
 * the peer home. */
#define RTT_TRIPS 20000u
#define RTT_QUIT  UINT32_MAX

struct rtt_line {
	_Alignas(64) _Atomic uint32_t word;
	int cpu;
};

static bool pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

/* Wait for @want in the line, or RTT_QUIT, or (every 4096 looks) until
 * @until_ns has passed; true for @want. */
static bool rtt_wait(struct rtt_line *l, uint32_t want, uint64_t until_ns)
{
	for (uint32_t n = 1;; n++) {
		/* [rtt] acq: the trip's turn; pairs with [rtt] rel in
		 * rtt_pass(). */
		uint32_t v = atomic_load_explicit(&l->word, memory_order_acquire);

		if (v == want)
			return true;
		if (v == RTT_QUIT || ((n & 4095) == 0 && now_ns() > until_ns))
			return false;
	}
}

static void rtt_pass(struct rtt_line *l, uint32_t v)
{
	/* [rtt] rel: pairs with [rtt] acq in rtt_wait(). */
	atomic_store_explicit(&l->word, v, memory_order_release);
}

static void *rtt_peer(void *arg)
{
	struct rtt_line *l = arg;
	uint64_t until = now_ns() + 2000000000ull;

	if (!pin_self(l->cpu)) {
		rtt_pass(l, RTT_QUIT);
		return NULL;
	}
	for (uint32_t i = 1; i < 2 * RTT_TRIPS; i += 2) {
		if (!rtt_wait(l, i, until))
			return NULL;
		rtt_pass(l, i + 1);
	}
	return NULL;
}

double bench_line_rtt_ns(const struct env *env)
{
	static struct rtt_line l;
	uint64_t t0, t1, until;
	bool ok = true;
	cpu_set_t old;
	pthread_t t;

	if (env->cpu[0] < 0 || env->cpu[1] < 0 ||
	    pthread_getaffinity_np(pthread_self(), sizeof(old), &old) != 0)
		return 0;
	atomic_init(&l.word, 0);
	l.cpu = env->cpu[1];
	if (!pin_self(env->cpu[0]) || pthread_create(&t, NULL, rtt_peer, &l) != 0) {
		pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
		return 0;
	}
	t0 = now_ns();
	until = t0 + 2000000000ull;
	for (uint32_t i = 0; ok && i < 2 * RTT_TRIPS; i += 2) {
		rtt_pass(&l, i + 1);
		ok = rtt_wait(&l, i + 2, until);
	}
	t1 = now_ns();
	if (!ok)
		rtt_pass(&l, RTT_QUIT);
	pthread_join(t, NULL);
	pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
	return ok ? (double)(t1 - t0) / RTT_TRIPS : 0;
}
