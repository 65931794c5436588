/* SPDX-License-Identifier: MIT */
/*
 * up_liveprobe.c - what one "is that peer alive?" costs, by mechanism.
 *
 * A child process holds an OFD lock on a byte of a memfd and waits; the
 * parent asks, N times each, in the same run:
 *   ofd-getlk      F_OFD_GETLK on the byte (what uringpipe uses)
 *   pidfd          pidfd_open + poll(0) + close (what 0.1 used)
 *   kill0          kill(pid, 0) (cannot tell a zombie, nor another
 *                  namespace's pid)
 * and prints ns per check. Only the first works across pid namespaces
 * without a channel between the processes.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100000, i, fd, go[2], alive = 0;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	uint64_t t0;
	pid_t pid;
	char c;

	fd = memfd_create("liveprobe", MFD_CLOEXEC);
	if (fd < 0 || pipe(go) < 0 || n <= 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		char path[40];
		int own;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		own = open(path, O_RDWR | O_CLOEXEC); /* a description of its own */
		if (own < 0 || fcntl(own, F_OFD_SETLK, &fl) < 0)
			_exit(1);
		if (write(go[1], "R", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(go[0], &c, 1) != 1)
		return 1;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		struct flock q = fl;

		q.l_pid = 0;
		if (fcntl(fd, F_OFD_GETLK, &q) == 0 && q.l_type != F_UNLCK)
			alive++;
	}
	printf("ofd-getlk %8.0f ns/check  alive %d/%d\n", (double)(now_ns() - t0) / n, alive, n);

	alive = 0;
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		if (pfd >= 0 && poll(&p, 1, 0) == 0)
			alive++;
		if (pfd >= 0)
			close(pfd);
	}
	printf("pidfd     %8.0f ns/check  alive %d/%d\n", (double)(now_ns() - t0) / n, alive, n);

	alive = 0;
	t0 = now_ns();
	for (i = 0; i < n; i++)
		alive += kill(pid, 0) == 0;
	printf("kill0     %8.0f ns/check  alive %d/%d\n", (double)(now_ns() - t0) / n, alive, n);

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	{
		struct flock q = fl;

		q.l_pid = 0;
		fcntl(fd, F_OFD_GETLK, &q);
		printf("after SIGKILL: ofd-getlk says %s\n", q.l_type == F_UNLCK ? "gone" : "alive");
	}
	return 0;
}
