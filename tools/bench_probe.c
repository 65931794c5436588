/* SPDX-License-Identifier: MIT */
/*
 * bench_probe.c - what the machine and the library turn out to be, found
 * once before the first run: the CPUs we may pin to, the cost of reading the
 * clock, the kernel pipe we may have, and the uringpipe the library makes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static long read_long_file(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void probe_cpus(struct env *env)
{
	cpu_set_t set;
	int n = 0;
	env->cpu[0] = env->cpu[1] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET((size_t)c, &set))
			env->cpu[n++] = c;
}

static void probe_clock(struct env *env)
{
	enum { N = 200000 };
	uint64_t a = now_ns(), b;
	for (int i = 0; i < N; i++)
		(void)now_ns();
	b = now_ns();
	env->clock_ns = (double)(b - a) / N;
}

/*
 * F_SETPIPE_SZ is capped at /proc/sys/fs/pipe-max-size for processes without
 * CAP_SYS_RESOURCE (EPERM), and by the per-user pipe-user-pages-* limits.
 * When the capacity is refused, fall back to the largest size we may have and
 * say so: a benchmark against a smaller kernel pipe is still informative, as
 * long as it is labelled.
 */
static void probe_kernel_pipe(uint64_t cap, struct env *env)
{
	int fds[2], r, e;
	char cb[32];

	env->kpipe_max = read_long_file("/proc/sys/fs/pipe-max-size");
	env->kpipe_note[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) < 0)
		bench_die("pipe2: %s", strerror(errno));
	env->kpipe_req = (int)cap; /* cap <= 1 GiB, checked by the parser */
	r = fcntl(fds[1], F_SETPIPE_SZ, env->kpipe_req);
	if (r < 0) {
		e = errno;
		if (e == EPERM && env->kpipe_max > 0 && (long)cap > env->kpipe_max) {
			snprintf(env->kpipe_note, sizeof(env->kpipe_note),
				 "F_SETPIPE_SZ(%s) refused: above /proc/sys/fs/pipe-max-size "
				 "(%ld) without CAP_SYS_RESOURCE; kernel pipe uses pipe-max-size",
				 cat_bytes_label(cap, cb, sizeof(cb)), env->kpipe_max);
			env->kpipe_req = (int)env->kpipe_max;
			if (fcntl(fds[1], F_SETPIPE_SZ, env->kpipe_req) < 0)
				env->kpipe_req = 0;
		} else {
			snprintf(env->kpipe_note, sizeof(env->kpipe_note),
				 "F_SETPIPE_SZ(%s) failed: %s%s; kernel pipe keeps its default size",
				 cat_bytes_label(cap, cb, sizeof(cb)), strerror(e),
				 e == EPERM ? " (per-user pipe-user-pages-* limit?)" : "");
			env->kpipe_req = 0;
		}
	} else if (env->kpipe_max > 0 && (long)cap > env->kpipe_max) {
		snprintf(env->kpipe_note, sizeof(env->kpipe_note),
			 "capacity is above /proc/sys/fs/pipe-max-size (%ld); allowed by "
			 "CAP_SYS_RESOURCE", env->kpipe_max);
	}
	env->kpipe_size = fcntl(fds[1], F_GETPIPE_SZ);
	if (env->kpipe_size < 0)
		bench_die("F_GETPIPE_SZ: %s", strerror(errno));
	if (!env->kpipe_note[0] && (uint64_t)env->kpipe_size != cap)
		snprintf(env->kpipe_note, sizeof(env->kpipe_note),
			 "kernel rounded the pipe to %ld B (a power-of-two number of pages)",
			 env->kpipe_size);
	close(fds[0]);
	close(fds[1]);
}

static void probe_uring(uint64_t cap, struct env *env)
{
	struct up_end *ends[2];
	struct up_config cfg;
	struct up_stats st;
	int r;

	up_config_init(&cfg);
	cfg.capacity = (size_t)cap;
	r = up_pipe2(ends, &cfg);
	if (r < 0)
		bench_die("up_pipe2(capacity %" PRIu64 "): %s", cap, up_strerror(r));
	env->up_capacity = up_capacity(up_end_pipe(ends[0]));
	env->up_page = up_page_size(up_end_pipe(ends[0]));
	r = up_stats(up_end_pipe(ends[0]), &st);
	if (r < 0)
		bench_die("up_stats: %s", up_strerror(r));
	memcpy(env->backend, st.backend, sizeof(st.backend));
	env->backend[sizeof(st.backend)] = '\0';
	env->numa_node = st.numa_node;
	up_close(ends[1]);
	up_close(ends[0]);
}

void bench_probe(uint64_t capacity, struct env *env)
{
	memset(env, 0, sizeof(*env));
	probe_cpus(env);
	probe_clock(env);
	probe_kernel_pipe(capacity, env);
	probe_uring(capacity, env);
}
