/* SPDX-License-Identifier: MIT */
/*
 * test_pidns.c - one side of a pipe in its own pid namespace.
 *
 * A service in a container and its peer on the host share a pipe: by a
 * name (up_listen/up_connect; abstract names belong to the network
 * namespace, which both share) or by a memfd inherited over fork and exec.
 * One peer runs under `unshare --pid --fork` (and, in a second variant,
 * `--mount-proc`, so that even its /proc is the namespace's), the other on
 * the host, each in both roles. What must hold, as between two processes
 * of one namespace:
 *
 *  - eof:   the stream arrives intact (2 MiB through a 256 KiB pipe, so
 *           both sides block), and the reader sees end of stream only after
 *           the writer closed: a read with a 300 ms timeout while the
 *           writer lives gives -ETIMEDOUT, not 0;
 *  - killw: kill -9 of the writer is seen by the blocked reader (end of
 *           stream) within 1 s;
 *  - killr: kill -9 of the reader is seen by the blocked writer (-EPIPE)
 *           within 1 s.
 * Each kill case runs with the namespaced peer killed (the host peer must
 * notice) and with the host peer killed (the namespaced one must notice);
 * the measured latency is printed.
 *
 * Liveness by pid cannot pass this: a pid means another process (or
 * nothing) in the other namespace. A namespaced reader that looks up its
 * writer's host pid finds nobody and takes end of stream early; a host peer
 * that looks up pid 1 (the namespaced peer's pid in its own namespace)
 * finds init alive forever.
 *
 * The peers are this program again (--peer ...), exec'd directly on the
 * host and through unshare(1) for the namespace; reports come back over a
 * pipe(2) per peer, commands go out over another. Needs root and unshare(1):
 * skips (77) otherwise, or when the kernel refuses a pid namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

#define CAPACITY   (256u * 1024u)
#define STREAM     (2u * 1024u * 1024u)
#define NOTICE_NS  1000000000ull /* a death must be noticed within 1 s */
#define WAIT_MS    3000          /* how long the test waits for a notice */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned char pat(size_t i)
{
	return (unsigned char)(i * 131u + 7u + (i >> 12));
}

/* One report from a peer: what (a tag), a value, when (CLOCK_MONOTONIC,
 * which pid namespaces share). */
struct msg {
	char tag;
	int val;
	uint64_t ns;
};

/* ---- the peer ----------------------------------------------------------- */

static int rep_fd = -1;

static void report(char tag, int val)
{
	struct msg m = { .tag = tag, .val = val, .ns = now_ns() };

	if (write(rep_fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(3);
}

static int peer_open(const char *meet, int role, struct up_end **e, struct up_listener **l)
{
	struct up_pipe *p;
	int r;

	if (strncmp(meet, "fd:", 3) == 0) {
		r = up_pipe_attach(atoi(meet + 3), &p);
		if (r < 0)
			return r;
		close(atoi(meet + 3));
	} else if (role == UP_WR) {
		struct up_config cfg;

		up_config_init(&cfg);
		cfg.capacity = CAPACITY;
		r = up_pipe_create(&cfg, &p);
		if (r < 0)
			return r;
		r = up_listen(p, meet + 5, 0600, l);
		if (r < 0)
			return r;
	} else {
		r = up_connect(meet + 5, 10000, &p);
		if (r < 0)
			return r;
	}
	r = up_open(p, role, e);
	up_pipe_release(p);
	return r;
}

static int peer_main(char **argv)
{
	const char *role = argv[0], *mode = argv[1], *meet = argv[2];
	int ctl = atoi(argv[3]);
	static unsigned char buf[65536];
	struct up_listener *l = NULL;
	struct up_end *e;
	size_t done = 0, i;
	ssize_t r;
	char c;
	bool ok = true;

	rep_fd = atoi(argv[4]);
	r = peer_open(meet, role[0] == 'w' ? UP_WR : UP_RD, &e, &l);
	if (r < 0) {
		report('!', (int)r);
		return 1;
	}
	if (role[0] == 'w') {
		while (done < STREAM) {
			size_t n = STREAM - done < 40000 ? STREAM - done : 40000;

			for (i = 0; i < n; i++)
				buf[i] = pat(done + i);
			r = up_write(e, buf, n);
			if (r <= 0) {
				report('!', (int)r);
				return 1;
			}
			done += (size_t)r;
		}
		report('w', 0);
		if (strcmp(mode, "killr") == 0) {
			/* Fill the pipe and block until the reader is gone. */
			do
				r = up_write(e, buf, sizeof(buf));
			while (r > 0);
			report('e', (int)r);
			return 0;
		}
		/* eof: close when told; killw: wait here to be killed. */
		if (read(ctl, &c, 1) != 1)
			return 1;
		up_close(e);
		up_listener_close(l);
		report('x', 0);
		return 0;
	}
	while (done < STREAM) {
		/* Not past the stream: a killr writer goes on writing. */
		r = up_read(e, buf, STREAM - done < sizeof(buf) ? STREAM - done : sizeof(buf));
		if (r <= 0) {
			report('!', (int)r);
			return 1;
		}
		for (i = 0; i < (size_t)r; i++)
			if (buf[i] != pat(done + i))
				ok = false;
		done += (size_t)r;
	}
	report('r', ok);
	if (strcmp(mode, "killr") == 0) {
		if (read(ctl, &c, 1) != 1) /* wait here to be killed */
			return 1;
		return 0;
	}
	if (strcmp(mode, "eof") == 0) {
		/* The writer lives and has not closed: no end of stream. */
		up_set_timeout(e, 300);
		r = up_read(e, buf, sizeof(buf));
		report('t', (int)r);
		up_set_timeout(e, -1);
	}
	r = up_read(e, buf, sizeof(buf));
	report('e', (int)r);
	return 0;
}

/* ---- the test ----------------------------------------------------------- */

static const char *self;
static int failures;

#define FAIL(...)                                                              \
	do {                                                                   \
		printf("FAIL: " __VA_ARGS__);                                  \
		putchar('\n');                                                 \
		failures++;                                                    \
	} while (0)

struct peer {
	pid_t pid;    /* what we fork: the peer itself, or unshare(1) */
	pid_t target; /* whom kill -9 hits: the peer (pid 1 of its namespace) */
	int ctl;      /* our end of its command pipe */
	int rep;      /* our end of its report pipe */
	bool ns;
};

/* Wait up to @ms for the next report of @pr; false on timeout or EOF. */
static bool next_msg(struct peer *pr, struct msg *m, int ms)
{
	struct pollfd pf = { .fd = pr->rep, .events = POLLIN };
	size_t got = 0;

	while (got < sizeof(*m)) {
		ssize_t r;

		if (poll(&pf, 1, ms) <= 0)
			return false;
		r = read(pr->rep, (char *)m + got, sizeof(*m) - got);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* Expect report @tag from @pr within @ms; reports an error report or
 * silence as a failure. */
static bool expect_msg(struct peer *pr, char tag, struct msg *m, int ms, const char *what)
{
	if (!next_msg(pr, m, ms)) {
		FAIL("%s: no '%c' from the %s peer within %d ms", what, tag,
		     pr->ns ? "namespaced" : "host", ms);
		return false;
	}
	if (m->tag != tag) {
		FAIL("%s: the %s peer reported '%c' %d (%s), not '%c'", what,
		     pr->ns ? "namespaced" : "host", m->tag, m->val,
		     m->val < 0 ? up_strerror(m->val) : "", tag);
		return false;
	}
	return true;
}

/* The host pid of unshare(1)'s child, the namespace's pid 1. */
static pid_t ns_child(pid_t unshare_pid)
{
	char path[64];
	FILE *f;
	int pid = -1;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)unshare_pid,
		 (int)unshare_pid);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &pid) != 1)
			pid = -1;
		fclose(f);
	}
	return pid;
}

static void spawn(struct peer *pr, const char *role, const char *mode, const char *meet,
		  const char *nsflags, int keep_fd)
{
	int ctl[2], rep[2];
	char sctl[16], srep[16];

	if (pipe(ctl) || pipe(rep)) {
		perror("pipe");
		exit(1);
	}
	fflush(NULL);
	pr->pid = fork();
	if (pr->pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pr->pid == 0) {
		close(ctl[1]);
		close(rep[0]);
		snprintf(sctl, sizeof(sctl), "%d", ctl[0]);
		snprintf(srep, sizeof(srep), "%d", rep[1]);
		(void)keep_fd; /* inherited: no O_CLOEXEC */
		if (nsflags && strcmp(nsflags, "mount-proc") == 0)
			execlp("unshare", "unshare", "--pid", "--fork", "--mount-proc", self,
			       "--peer", role, mode, meet, sctl, srep, (char *)NULL);
		else if (nsflags)
			execlp("unshare", "unshare", "--pid", "--fork", self, "--peer", role,
			       mode, meet, sctl, srep, (char *)NULL);
		else
			execl(self, self, "--peer", role, mode, meet, sctl, srep, (char *)NULL);
		_exit(127);
	}
	close(ctl[0]);
	close(rep[1]);
	pr->ctl = ctl[1];
	pr->rep = rep[0];
	pr->ns = nsflags != NULL;
	pr->target = pr->ns ? -1 : pr->pid;
}

static void reap(struct peer *pr)
{
	if (pr->target > 0)
		kill(pr->target, SIGKILL);
	kill(pr->pid, SIGKILL);
	waitpid(pr->pid, NULL, 0);
	close(pr->ctl);
	close(pr->rep);
}

static int case_no;

/*
 * One case: @nsflags the namespace variant, @meet "name" or "fd", @ns_role
 * 'w' or 'r' (which peer is namespaced), @mode eof/killw/killr.
 */
static void run_case(const char *nsflags, const char *meet, char ns_role, const char *mode)
{
	struct peer w, r, *victim, *survivor;
	char what[160], smeet[64];
	const char *ns;
	struct up_pipe *p = NULL;
	struct msg m;
	int fd = -1, err;
	int before = failures;

	snprintf(what, sizeof(what), "%s, by %s, namespaced %s, %s", nsflags, meet,
		 ns_role == 'w' ? "writer" : "reader", mode);
	if (strcmp(meet, "fd") == 0) {
		struct up_config cfg;

		up_config_init(&cfg);
		cfg.capacity = CAPACITY;
		err = up_pipe_create(&cfg, &p);
		if (err < 0) {
			FAIL("%s: up_pipe_create: %s", what, up_strerror(err));
			return;
		}
		fd = dup(up_pipe_fd(p)); /* without O_CLOEXEC: for the exec'd peers */
		snprintf(smeet, sizeof(smeet), "fd:%d", fd);
	} else {
		snprintf(smeet, sizeof(smeet), "name:@up-test-pidns-%d-%d", (int)getpid(),
			 ++case_no);
	}
	/* "none": both on the host, the control that shows the harness right. */
	ns = strcmp(nsflags, "none") == 0 ? NULL : nsflags;
	spawn(&w, "w", mode, smeet, ns_role == 'w' ? ns : NULL, fd);
	spawn(&r, "r", mode, smeet, ns_role == 'r' ? ns : NULL, fd);
	if (fd >= 0)
		close(fd);
	up_pipe_release(p); /* the peers hold their own mappings */

	/* The stream, intact. */
	if (!expect_msg(&r, 'r', &m, 5000, what)) {
		/* Say why the reader starved, if the writer told. */
		bool told = next_msg(&w, &m, 0);

		if (told && m.tag == 'w')
			told = next_msg(&w, &m, 0);
		if (told && m.tag == '!')
			printf("# %s: the writer stopped: %d (%s)\n", what, m.val,
			       up_strerror(m.val));
		goto out;
	}
	if (!m.val)
		FAIL("%s: the stream arrived garbled", what);
	if (!expect_msg(&w, 'w', &m, 5000, what))
		goto out;
	if (w.ns)
		w.target = ns_child(w.pid);
	if (r.ns)
		r.target = ns_child(r.pid);

	if (strcmp(mode, "eof") == 0) {
		if (!expect_msg(&r, 't', &m, 5000, what))
			goto out;
		if (m.val != -ETIMEDOUT)
			FAIL("%s: with the writer alive and open, a read gave %d (%s), not "
			     "-ETIMEDOUT%s", what, m.val, m.val < 0 ? up_strerror(m.val) : "",
			     m.val == 0 ? ": a false end of stream" : "");
		if (write(w.ctl, "c", 1) != 1)
			FAIL("%s: cannot tell the writer to close", what);
		if (!expect_msg(&r, 'e', &m, 5000, what))
			goto out;
		if (m.val != 0)
			FAIL("%s: after the writer closed, a read gave %d, not 0", what, m.val);
		goto out;
	}
	victim = strcmp(mode, "killw") == 0 ? &w : &r;
	survivor = victim == &w ? &r : &w;
	if (victim->target <= 0) {
		FAIL("%s: cannot find the namespaced peer's host pid", what);
		goto out;
	}
	{
		uint64_t t0 = now_ns();
		int want = victim == &w ? 0 : -EPIPE;

		kill(victim->target, SIGKILL);
		if (!expect_msg(survivor, 'e', &m, WAIT_MS, what)) {
			printf("# %s: the %s peer's death not noticed in %d ms\n", what,
			       victim->ns ? "namespaced" : "host", WAIT_MS);
			goto out;
		}
		if (m.ns < t0) {
			FAIL("%s: the %s gave %d (%s) before the kill: a false %s", what,
			     survivor == &r ? "read" : "write", m.val,
			     m.val < 0 ? up_strerror(m.val) : "",
			     survivor == &r ? "end of stream" : "EPIPE");
			goto out;
		}
		printf("# %s: kill -9 of the %s %s noticed after %.2f ms\n", what,
		       victim->ns ? "namespaced" : "host", victim == &w ? "writer" : "reader",
		       (double)(m.ns - t0) / 1e6);
		if (m.val != want)
			FAIL("%s: after the kill, %s gave %d (%s), not %d", what,
			     survivor == &r ? "a read" : "a write", m.val,
			     m.val < 0 ? up_strerror(m.val) : "", want);
		if (m.ns - t0 > NOTICE_NS)
			FAIL("%s: noticed after %.2f ms, more than 1 s", what,
			     (double)(m.ns - t0) / 1e6);
	}
out:
	reap(&w);
	reap(&r);
	printf("%s: %s\n", failures == before ? "ok" : "not ok", what);
}

int main(int argc, char **argv)
{
	static const char *const variants[] = { "none", "pid", "mount-proc" };
	static const char *const meets[] = { "name", "fd" };
	static const char *const modes[] = { "eof", "killw", "killr" };
	size_t v, mt, md;
	int st;
	pid_t pid;

	if (argc == 7 && strcmp(argv[1], "--peer") == 0)
		return peer_main(argv + 2);
	signal(SIGPIPE, SIG_IGN);
	self = "/proc/self/exe";
	{
		static char path[4096];
		ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

		if (n > 0) {
			path[n] = '\0';
			self = path;
		}
	}
	if (geteuid() != 0) {
		printf("skip: needs root (unshare --pid)\n");
		return 77;
	}
	/* unshare(1) there and allowed to make a pid namespace here? */
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int dn = open("/dev/null", O_WRONLY);

		dup2(dn, 1);
		dup2(dn, 2);
		execlp("unshare", "unshare", "--pid", "--fork", "--mount-proc", "true",
		       (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("skip: unshare --pid --fork --mount-proc is missing or refused here\n");
		return 77;
	}
	for (v = 0; v < 3; v++)
		for (mt = 0; mt < 2; mt++)
			for (md = 0; md < 3; md++) {
				run_case(variants[v], meets[mt], 'w', modes[md]);
				run_case(variants[v], meets[mt], 'r', modes[md]);
			}
	if (failures) {
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
