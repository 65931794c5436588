/* SPDX-License-Identifier: MIT */
/*
 * up_footprint.c - what a pipe costs to hold and to make, against the
 * kernel's pipe(2) and socketpair(2), in one run.
 *
 *   uringpipe-footprint [N [--burst]]
 *
 * Hold: N pipes (default 100) with both ends open and idle in this process:
 * resident KiB per pipe (Rss + RssShmem from /proc/self/status, before and
 * after) and descriptors per pipe (/proc/self/fd). The uringpipe ends have
 * each written and read one byte, as a pipe in use would.
 * Make: create, write a byte, read it, close, N times: us per pipe; and
 * attach: a second process maps an existing pipe and opens a reader.
 * --burst: a 64 MiB pipe's resident memory after 1 GiB, under a trickle and
 * idle (burst_trickle()).
 * Every figure is printed; nothing is judged here.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* VmRSS in KiB (anonymous, file and shmem pages this process maps). */
static long rss_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

static void die(const char *what, int r)
{
	fprintf(stderr, "uringpipe-footprint: %s: %s\n", what, up_strerror(r));
	exit(1);
}

static void hold_uringpipe(int n)
{
	struct up_end **ends = calloc((size_t)n * 2, sizeof(*ends));
	long rss0 = rss_kib();
	int fd0 = nfds(), i, r;
	char c = 'x';

	if (!ends)
		die("calloc", -12);
	for (i = 0; i < n; i++) {
		r = up_pipe2(&ends[2 * i], NULL);
		if (r < 0) {
			fprintf(stderr, "uringpipe-footprint: pipe %d: %s (fds %d, limit ", i,
				up_strerror(r), nfds());
			{
				struct rlimit rl;

				getrlimit(RLIMIT_NOFILE, &rl);
				fprintf(stderr, "%llu)\n", (unsigned long long)rl.rlim_cur);
			}
			n = i;
			break;
		}
		if (up_write(ends[2 * i + 1], &c, 1) != 1 || up_read(ends[2 * i], &c, 1) != 1)
			die("one byte", -5);
	}
	if (n > 0)
		printf("uringpipe   %5d pipes  %8.1f KiB/pipe resident  %5.2f fds/pipe\n", n,
		       (double)(rss_kib() - rss0) / n, (double)(nfds() - fd0) / n);
	for (i = 0; i < 2 * n; i++)
		up_close(ends[i]);
	free(ends);
}

static void hold_kernel(int n, bool sock)
{
	int *fds = calloc((size_t)n * 2, sizeof(int));
	long rss0 = rss_kib();
	int fd0 = nfds(), i;
	char c = 'x';

	if (!fds)
		die("calloc", -12);
	for (i = 0; i < n; i++) {
		if ((sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, &fds[2 * i]) : pipe(&fds[2 * i])) < 0) {
			n = i;
			break;
		}
		if (write(fds[2 * i + 1], &c, 1) != 1 || read(fds[2 * i], &c, 1) != 1)
			die("one byte", -5);
	}
	if (n > 0)
		printf("%-11s %5d pipes  %8.1f KiB/pipe resident  %5.2f fds/pipe\n",
		       sock ? "socketpair" : "pipe(2)", n, (double)(rss_kib() - rss0) / n,
		       (double)(nfds() - fd0) / n);
	for (i = 0; i < 2 * n; i++)
		close(fds[i]);
	free(fds);
}

static void make_uringpipe(int n)
{
	uint64_t t0 = now_ns();
	struct up_end *e[2];
	int i;
	char c = 'x';

	for (i = 0; i < n; i++) {
		int r = up_pipe2(e, NULL);

		if (r < 0)
			die("up_pipe2", r);
		if (up_write(e[1], &c, 1) != 1 || up_read(e[0], &c, 1) != 1)
			die("one byte", -5);
		up_close(e[1]);
		up_close(e[0]);
	}
	printf("uringpipe   create+use+close %8.1f us/pipe\n", (double)(now_ns() - t0) / n / 1e3);
}

static void make_kernel(int n, bool sock)
{
	uint64_t t0 = now_ns();
	int fd[2], i;
	char c = 'x';

	for (i = 0; i < n; i++) {
		if ((sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, fd) : pipe(fd)) < 0)
			die("pipe", -24);
		if (write(fd[1], &c, 1) != 1 || read(fd[0], &c, 1) != 1)
			die("one byte", -5);
		close(fd[0]);
		close(fd[1]);
	}
	printf("%-11s create+use+close %8.1f us/pipe\n", sock ? "socketpair" : "pipe(2)",
	       (double)(now_ns() - t0) / n / 1e3);
}

/* A second process attaches to an existing pipe and opens a reader: the
 * cost a peer pays to join (fork excluded: timed in the child). */
static void attach_cost(int n)
{
	struct up_pipe *p;
	int r = up_pipe_create(NULL, &p), st;
	pid_t pid;

	if (r < 0)
		die("up_pipe_create", r);
	fflush(stdout); /* or the child prints it again */
	pid = fork();
	if (pid == 0) {
		uint64_t t0 = now_ns();
		int i;

		for (i = 0; i < n; i++) {
			struct up_pipe *q;
			struct up_end *rd;

			if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_RD, &rd) < 0)
				_exit(1);
			up_close(rd);
			up_pipe_release(q);
		}
		printf("uringpipe   attach+open+close (other process) %8.1f us\n",
		       (double)(now_ns() - t0) / n / 1e3);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	up_pipe_release(p);
}

/* KiB of the memfd that hold memory, seen through a mapping of our own. */
static long seg_resident_kib(int fd)
{
	size_t sys = (size_t)sysconf(_SC_PAGESIZE), n, i, res = 0;
	struct stat st;
	unsigned char *vec;
	void *m;

	if (fstat(fd, &st) < 0)
		return -1;
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	n = ((size_t)st.st_size + sys - 1) / sys;
	vec = malloc(n);
	if (vec && mincore(m, (size_t)st.st_size, vec) == 0)
		for (i = 0; i < n; i++)
			res += vec[i] & 1;
	free(vec);
	munmap(m, (size_t)st.st_size);
	return (long)(res * sys / 1024);
}

struct drain {
	struct up_end *rd;
	uint64_t got;
};

static void *drain_main(void *arg)
{
	struct drain *d = arg;
	char *buf = malloc(1 << 20);
	ssize_t n;

	while (buf && (n = up_read(d->rd, buf, 1 << 20)) > 0)
		d->got += (uint64_t)n;
	free(buf);
	return NULL;
}

/*
 * After a burst: 1 GiB through a 64 MiB pipe to a blocking reader, then a
 * byte every 100 ms for 3 s. Prints the segment's resident KiB at the end
 * of the burst, after the trickle, and a second after it ends. A kernel pipe
 * holds only the bytes not yet read (none here).
 */
static void burst_trickle(void)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *w;
	struct drain d = { 0 };
	pthread_t t;
	char *chunk = calloc(1, 1 << 16);
	uint64_t sent = 0, t0;
	long peak, trickled, idle;
	int r;

	up_config_init(&cfg);
	cfg.capacity = 64u << 20;
	if (!chunk)
		die("calloc", -12);
	if ((r = up_pipe_create(&cfg, &p)) < 0 || (r = up_open(p, UP_RD, &d.rd)) < 0 ||
	    (r = up_open(p, UP_WR, &w)) < 0)
		die("64 MiB pipe", r);
	if (pthread_create(&t, NULL, drain_main, &d) != 0)
		die("pthread_create", -11);
	t0 = now_ns();
	while (sent < (1ull << 30)) {
		ssize_t n = up_write(w, chunk, 1 << 16);

		if (n < 0)
			die("up_write", (int)n);
		sent += (uint64_t)n;
	}
	printf("uringpipe   64 MiB pipe: 1 GiB burst in %.2f s\n", (double)(now_ns() - t0) / 1e9);
	peak = seg_resident_kib(up_pipe_fd(p));
	t0 = now_ns();
	while (now_ns() - t0 < 3000000000ull) {
		if (up_write(w, chunk, 1) != 1)
			die("up_write", -5);
		usleep(100000); /* the trickle's pace */
	}
	trickled = seg_resident_kib(up_pipe_fd(p));
	usleep(1000000); /* idle a second */
	idle = seg_resident_kib(up_pipe_fd(p));
	printf("uringpipe   64 MiB pipe resident: %ld KiB after the burst, %ld KiB after a 3 s "
	       "trickle (1 B / 100 ms), %ld KiB 1 s idle after\n", peak, trickled, idle);
	up_close(w);
	pthread_join(t, NULL);
	up_close(d.rd);
	up_pipe_release(p);
	free(chunk);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	bool burst = argc > 2 && strcmp(argv[2], "--burst") == 0;

	if (n <= 0 || n > 100000 || (argc > 2 && !burst) || argc > 3) {
		fprintf(stderr, "usage: uringpipe-footprint [N [--burst]]\n");
		return 2;
	}
	hold_kernel(n, false);
	hold_kernel(n, true);
	hold_uringpipe(n);
	make_kernel(n, false);
	make_kernel(n, true);
	make_uringpipe(n);
	attach_cost(n);
	if (burst)
		burst_trickle();
	return 0;
}
