/* SPDX-License-Identifier: MIT */
/*
 * bench_pressure.c - --memory-pressure: stress-ng beside the benchmark.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "bench.h"

/*
 * stress-ng runs in its own process group so that one kill reaches its
 * workers too, and so that a terminal's ^C (sent to our group) does not
 * leave it orphaned: our exit path kills it, whichever way we leave.
 * A static is the only way atexit() can find it; this is a tool, not the
 * library, which keeps no global state.
 */
static pid_t pressure_pid = -1;

void bench_pressure_stop(void)
{
	if (pressure_pid <= 0)
		return;
	kill(-pressure_pid, SIGTERM);
	/* stress-ng stops its workers on SIGTERM; reap it so no zombie and
	 * no memory hog outlives the benchmark. */
	while (waitpid(pressure_pid, NULL, 0) < 0 && errno == EINTR)
		;
	pressure_pid = -1;
}

static void pressure_signal(int sig)
{
	if (pressure_pid > 0)
		kill(-pressure_pid, SIGTERM);
	signal(sig, SIG_DFL);
	raise(sig);
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *c = strchr(path, ':');
		size_t n = c ? (size_t)(c - path) : strlen(path);
		if (n > 0 && n + strlen(prog) + 2 <= sizeof(buf)) {
			memcpy(buf, path, n);
			buf[n] = '/';
			strcpy(buf + n + 1, prog);
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += n + (c ? 1 : 0);
	}
	return false;
}

void bench_pressure_start(void)
{
	pid_t pid;

	/* Checked here, not by a failed exec in the child, so the message is
	 * printed once, before any work, and the status is the usual one. */
	if (!in_path("stress-ng"))
		bench_die("--memory-pressure needs stress-ng, which is not in PATH "
		    "(Debian: apt-get install stress-ng)");
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		setpgid(0, 0);
		if (devnull >= 0) {
			dup2(devnull, STDOUT_FILENO);
			close(devnull);
		}
		execlp("stress-ng", "stress-ng", "--vm", "2", "--vm-bytes", "50%", "--quiet",
		       (char *)NULL);
		fprintf(stderr, BENCH_PFX "exec stress-ng: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid); /* also here: whichever runs first, the group exists */
	pressure_pid = pid;
	atexit(bench_pressure_stop);
	signal(SIGINT, pressure_signal);
	signal(SIGTERM, pressure_signal);
	signal(SIGHUP, pressure_signal);
}
