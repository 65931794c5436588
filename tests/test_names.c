/* SPDX-License-Identifier: MIT */
/*
 * test_names.c - pipes by name: up_listen/up_listen2, up_connect,
 * up_listener_fd/serve/close (core/name.c).
 *
 * Real processes: the peer of most cases is tests/names_peer, fork+exec'd,
 * sharing nothing with this process but the name (and a report pipe that
 * tells the test when it connected and opened its end). Fake listeners are
 * raw AF_UNIX servers in a forked child, built from core/name.h. Every
 * case checks that /proc/self/fd holds as many fds after it as before, and
 * the cases that receive nothing check that no memfd arrived.
 *
 * Ordering is by pipes, waitpid and /proc thread states, never by sleeps:
 * the two naps here (start_order, late_listener_main) only let a connector
 * that is already seen asleep in its retry loop go round it a few times,
 * up to its longest backoff, so that the measured wait and latency cover
 * the worst case.
 *
 * Start-up order of the ends: any, as with a FIFO (a reader opened before
 * any writer waits for one, a writer before any reader keeps its data). The
 * exec_* cases open the listening side's end first and move data at once,
 * before the peer has even connected; the start_order cases open the
 * peer's end first, the listening side's only once the peer's reader waits.
 * Neither waits for the peer's 'O' before moving data: the peer's report of
 * when its end opened is checked afterwards.
 *
 * A forked child holds copies of this process's open ends (ends of its own,
 * as pipe(2) fds are); spawn_peer() closes them before exec, or the exec'd
 * peer would keep them counted until it exits.
 */
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <grp.h>

#include "harness.h"
#include "name.h"
#include "names_peer.h"
#include "up_int.h" /* the readers' wait line, to see a peer asleep in up_read */

#ifndef NAMES_PEER
#error "NAMES_PEER (the path of tests/names_peer) must be defined"
#endif

#define MiB ((size_t)1 << 20)
#define NOBODY 65534

static char g_dir[64];   /* a fresh directory for the path names */
static int g_case_seq;

/* ------------------------------------------------------------ helpers */

/* The listener threads of this process (core/name.c names them), and the
 * tid of the last one found in *tid if @tid is not NULL. */
static int listener_threads(char *tid, size_t len)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		char path[300], comm[32] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* gone meanwhile */
		if (fgets(comm, sizeof(comm), f) && strcmp(comm, "up-listen\n") == 0) {
			n++;
			if (tid && strlen(de->d_name) < len)
				memcpy(tid, de->d_name, strlen(de->d_name) + 1);
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* A joined thread may linger in /proc for a moment after pthread_join. */
static void wait_listener_threads(int want)
{
	double until = harness_now() + 10.0;

	while (listener_threads(NULL, 0) != want) {
		CHECK(harness_now() < until);
		sched_yield();
	}
}

/* A fresh name: "<dir>/<tag>N" or "@up-names-<pid>-<tag>N". */
static void mk_name(char *buf, size_t len, bool abstract, const char *tag)
{
	int n;

	if (abstract)
		n = snprintf(buf, len, "@up-names-%d-%s%d", (int)getpid(), tag, ++g_case_seq);
	else
		n = snprintf(buf, len, "%s/%s%d", g_dir, tag, ++g_case_seq);
	CHECK(n > 0 && (size_t)n < len);
}

static struct up_pipe *mk_pipe(void)
{
	struct up_pipe *p = NULL;

	CHECK_OK(up_pipe_create(NULL, &p));
	return p;
}

static struct up_end *mk_end(struct up_pipe *p, int flags)
{
	struct up_end *e = NULL;

	CHECK_OK(up_open(p, flags, &e));
	return e;
}

static struct up_listener *mk_listener(struct up_pipe *p, const char *name, unsigned mode,
				       unsigned flags)
{
	struct up_listener *l = NULL;

	CHECK_OK(up_listen2(p, name, mode, flags, &l));
	CHECK(l != NULL);
	return l;
}

/* Bytes @off .. @end of pattern @seed. */
static void write_pat_range(struct up_end *w, uint64_t seed, size_t off, size_t end)
{
	static unsigned char buf[1 << 16];

	while (off < end) {
		size_t n = end - off < sizeof(buf) ? end - off : sizeof(buf);
		ssize_t r;

		harness_fill(seed, off, buf, n);
		r = up_write(w, buf, n);
		CHECK_OK(r);
		off += (size_t)r;
	}
}

static void write_pat(struct up_end *w, uint64_t seed, size_t bytes)
{
	write_pat_range(w, seed, 0, bytes);
}

/* Reads exactly @bytes of pattern @seed, then expects end of stream. */
static void read_pat_eof(struct up_end *r, uint64_t seed, size_t bytes)
{
	static unsigned char buf[1 << 16];
	size_t off = 0;

	for (;;) {
		ssize_t n = up_read(r, buf, sizeof(buf));

		CHECK_OK(n);
		if (n == 0)
			break;
		CHECK(off + (size_t)n <= bytes);
		CHECK_EQ(harness_verify(seed, off, buf, (size_t)n), (size_t)-1);
		off += (size_t)n;
	}
	CHECK_EQ(off, bytes);
}

/* p and q map one pipe: a few bytes go from p's writer to q's reader. */
static void check_same_pipe(struct up_pipe *p, struct up_pipe *q)
{
	struct up_end *w = mk_end(p, UP_WR), *r = mk_end(q, UP_RD);
	char buf[16];

	CHECK_EQ(up_write(w, "named", 5), 5);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	CHECK(memcmp(buf, "named", 5) == 0);
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	CHECK_OK(up_close(r));
}

static bool path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static struct names_peer_rec read_rec(int fd, char tag)
{
	struct names_peer_rec rec;
	ssize_t n;

	do
		n = read(fd, &rec, sizeof(rec));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(rec) || rec.tag != tag) {
		fprintf(stderr, "peer report: wanted '%c', got %zd bytes, tag '%c'\n", tag, n,
			n > 0 ? rec.tag : '?');
		harness_fail();
	}
	return rec;
}

/* fork+exec tests/names_peer; *rep gets the read end of its reports. @inh:
 * this process's @ninh open ends, whose copies the child closes before exec
 * (the exec'd peer would hold them, counted, until it exits). */
static pid_t spawn_peer(const char *name, const char *mode, size_t bytes, uint64_t seed,
			int timeout_ms, struct up_end **inh, int ninh, int *rep)
{
	int fds[2];
	pid_t pid;

	CHECK_SYS(pipe2(fds, O_CLOEXEC));
	pid = harness_fork(60);
	if (pid == 0) {
		char a_bytes[32], a_seed[32], a_fd[16], a_to[16];

		harness_close_inherited(inh, ninh);
		close(fds[0]);
		if (fcntl(fds[1], F_SETFD, 0) < 0) /* this one crosses exec */
			_exit(127);
		snprintf(a_bytes, sizeof(a_bytes), "%zu", bytes);
		snprintf(a_seed, sizeof(a_seed), "%llu", (unsigned long long)seed);
		snprintf(a_fd, sizeof(a_fd), "%d", fds[1]);
		snprintf(a_to, sizeof(a_to), "%d", timeout_ms);
		execl(NAMES_PEER, "names_peer", name, mode, a_bytes, a_seed, a_fd, a_to,
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	*rep = fds[0];
	return pid;
}

/* Wait (bounded) until thread/process @tid sleeps in the kernel. */
static void wait_asleep(pid_t tid)
{
	double until = harness_now() + 10.0;

	while (harness_tid_state(tid) != 'S') {
		CHECK(harness_now() < until);
		sched_yield();
	}
}

/* Wait (bounded) until @p counts @want open readers, in any process. */
static void wait_readers(struct up_pipe *p, uint32_t want)
{
	double until = harness_now() + 10.0;
	struct up_stats st;

	for (;;) {
		CHECK_OK(up_stats(p, &st));
		if (st.readers == want)
			break;
		CHECK(harness_now() < until);
		sched_yield();
	}
}

/* Wait (bounded) until a reader of @p sleeps in up_read in process @pid
 * (single-threaded): announced on the readers' wait line, and asleep. */
static void wait_reader_asleep(struct up_pipe *p, pid_t pid)
{
	double until = harness_now() + 10.0;

	while (atomic_load(&p->ln->rd_wait.nwait) != 1 || harness_tid_state(pid) != 'S') {
		CHECK(harness_now() < until);
		sched_yield();
	}
}

/* A thread that reads a whole pattern stream to end of stream, its tid
 * published first, so the test can see it asleep in up_read. */
struct pat_reader {
	struct up_end *r;
	uint64_t seed;
	size_t bytes;
	_Atomic pid_t tid;
};

static void *pat_reader_main(void *arg)
{
	struct pat_reader *pr = arg;

	atomic_store(&pr->tid, (pid_t)syscall(SYS_gettid));
	read_pat_eof(pr->r, pr->seed, pr->bytes);
	return NULL;
}

/* In a forked child: become nobody, with @gid as the one extra group. */
static void become_nobody(gid_t extra)
{
	if (extra == (gid_t)-1)
		CHECK_SYS(setgroups(0, NULL));
	else
		CHECK_SYS(setgroups(1, &extra));
	CHECK_SYS(setgid(NOBODY));
	CHECK_SYS(setuid(NOBODY));
	CHECK_EQ(geteuid(), NOBODY);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* -------------------------------------------------------- same process */

static void listen_connect(bool abstract)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;
	struct up_listener *l;
	char name[128];
	struct stat st;

	mk_name(name, sizeof(name), abstract, "lc");
	CHECK_OK(up_listen(p, name, 0, &l));
	if (!abstract) {
		CHECK_SYS(lstat(name, &st));
		CHECK(S_ISSOCK(st.st_mode));
		CHECK_EQ(st.st_mode & 07777, 0600); /* mode 0 means 0600 */
	}
	CHECK_OK(up_connect(name, 1000, &q));
	CHECK(q != NULL && q != p);
	CHECK_EQ(up_capacity(q), up_capacity(p));
	check_same_pipe(p, q);
	up_pipe_release(q);
	/* Many connects, one listener. */
	for (int i = 0; i < 5; i++) {
		CHECK_OK(up_connect(name, 0, &q));
		up_pipe_release(q);
	}
	up_listener_close(l);
	CHECK(!path_exists(name) || abstract);
	CHECK_EQ(up_connect(name, 0, &q), -ENOENT);
	up_pipe_release(p);
}

static void same_process_path(void) { listen_connect(false); }
static void same_process_abstract(void) { listen_connect(true); }

/* The socket file gets exactly the mode asked, whatever the umask. */
static void path_mode_exact(void)
{
	static const unsigned modes[] = { 0600, 0640, 0666, 0777, 0200, 0 };
	struct up_pipe *p = mk_pipe();
	mode_t old = umask(077);

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct up_listener *l;
		char name[128];
		struct stat st;

		mk_name(name, sizeof(name), false, "mode");
		CHECK_OK(up_listen(p, name, modes[i], &l));
		CHECK_SYS(lstat(name, &st));
		CHECK_EQ(st.st_mode & 07777, modes[i] ? modes[i] : 0600);
		up_listener_close(l);
		CHECK(!path_exists(name));
	}
	umask(old);
	up_pipe_release(p);
}

/*
 * No window: the final name is made by a rename (IN_MOVED_TO), never by a
 * bind (IN_CREATE) that would show it with the umask's mode first; and no
 * temporary name is left behind, after success or failure.
 */
static void path_no_window(void)
{
	struct up_pipe *p = mk_pipe();
	struct up_listener *l, *l2 = NULL;
	char name[128], buf[4096];
	const char *base;
	bool created = false, moved = false;
	int in, n, entries = 0;
	DIR *d;
	struct dirent *de;

	mk_name(name, sizeof(name), false, "win");
	base = strrchr(name, '/') + 1;
	in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	CHECK(in >= 0);
	CHECK(inotify_add_watch(in, g_dir, IN_CREATE | IN_MOVED_TO) >= 0);
	CHECK_OK(up_listen(p, name, 0640, &l));
	CHECK_EQ(up_listen(p, name, 0640, &l2), -EADDRINUSE);
	while ((n = (int)read(in, buf, sizeof(buf))) > 0) {
		for (int off = 0; off < n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(buf + off);

			if (ev->len && strcmp(ev->name, base) == 0) {
				created |= (ev->mask & IN_CREATE) != 0;
				moved |= (ev->mask & IN_MOVED_TO) != 0;
			}
			off += (int)(sizeof(*ev) + ev->len);
		}
	}
	close(in);
	CHECK(!created);
	CHECK(moved);
	d = opendir(g_dir);
	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			entries++;
	closedir(d);
	CHECK_EQ(entries, 1); /* the name, no temporary one */
	up_listener_close(l);
	up_pipe_release(p);
}

/* The listener keeps its own dup of the memfd: the pipe may go. */
static void pipe_released_before_connect(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL, *q2 = NULL;
	struct up_listener *l;
	char name[128];

	mk_name(name, sizeof(name), true, "rel");
	CHECK_OK(up_listen(p, name, 0, &l));
	up_pipe_release(p);
	CHECK_OK(up_connect(name, 1000, &q));
	CHECK_OK(up_connect(name, 1000, &q2));
	check_same_pipe(q, q2);
	up_pipe_release(q);
	up_pipe_release(q2);
	up_listener_close(l);
}

/* 100 connects to a live listener (thread), one after the other. */
static void connect_latency(void)
{
	enum { N = 100 };
	struct up_pipe *p = mk_pipe();
	struct up_listener *l;
	uint64_t lat[N];
	char name[128];

	mk_name(name, sizeof(name), false, "lat");
	CHECK_OK(up_listen(p, name, 0, &l));
	for (int i = 0; i < N; i++) {
		struct up_pipe *q = NULL;
		uint64_t t0 = harness_now_ns();

		CHECK_OK(up_connect(name, 1000, &q));
		lat[i] = harness_now_ns() - t0;
		up_pipe_release(q);
	}
	qsort(lat, N, sizeof(lat[0]), cmp_u64);
	printf("connect latency over %d connects (connect + reply + attach): p50 %.1f us, "
	       "p90 %.1f us, max %.1f us\n", N, (double)lat[N / 2] / 1e3,
	       (double)lat[N * 9 / 10] / 1e3, (double)lat[N - 1] / 1e3);
	up_listener_close(l);
	up_pipe_release(p);
}

/* ------------------------------------------------------- across exec */

/*
 * The listener writes, an exec'd peer reads (and the other way), our end
 * first and moving data at once: before the peer exists, our writer has put
 * half the pipe's capacity in (kept for a reader to come, no -EPIPE), or
 * our reader is asleep waiting for a writer (no end of stream); the rest
 * moves without waiting for the peer to connect or open its end, so the
 * peer's end opens while ours writes into a full pipe or sleeps. The child
 * closes its copy of our end before exec (peer_reads: the exec'd peer's
 * copy of our writer would keep its reader from ever seeing end of stream).
 */
static void exec_peer(bool abstract, bool peer_reads)
{
	const size_t bytes = 4 * MiB + 777;
	const uint64_t seed = abstract ? 0xab5 : 0xfa7;
	struct up_pipe *p = mk_pipe();
	struct pat_reader pr = { .seed = seed, .bytes = bytes };
	struct up_end *mine;
	struct up_listener *l;
	size_t first = up_capacity(p) / 2;
	pthread_t t;
	char name[128];
	int rep;
	pid_t pid;

	CHECK(first > 0 && first < bytes);
	mk_name(name, sizeof(name), abstract, "ex");
	mine = mk_end(p, peer_reads ? UP_WR : UP_RD);
	CHECK_OK(up_listen(p, name, 0, &l));
	up_pipe_release(p); /* the end and the listener keep what they need */
	if (peer_reads) {
		write_pat_range(mine, seed, 0, first);
	} else {
		pr.r = mine;
		CHECK_EQ(pthread_create(&t, NULL, pat_reader_main, &pr), 0);
		while (atomic_load(&pr.tid) == 0)
			sched_yield();
		wait_asleep(atomic_load(&pr.tid));
	}
	pid = spawn_peer(name, peer_reads ? "rd" : "wr", bytes, seed, 5000, &mine, 1, &rep);
	if (peer_reads)
		write_pat_range(mine, seed, first, bytes);
	else
		CHECK_EQ(pthread_join(t, NULL), 0); /* all of it, then end of stream */
	CHECK_OK(up_close(mine));
	read_rec(rep, 'S');
	CHECK_EQ(read_rec(rep, 'C').res, 0);
	read_rec(rep, 'O');
	harness_reap_ok(pid, 60, "names_peer");
	close(rep);
	up_listener_close(l);
}

static void exec_path_peer_reads(void) { exec_peer(false, true); }
static void exec_path_peer_writes(void) { exec_peer(false, false); }
static void exec_abstract_peer_reads(void) { exec_peer(true, true); }
static void exec_abstract_peer_writes(void) { exec_peer(true, false); }

/*
 * The peer first, its end too: it connects before the name exists (timeout
 * 10 s) and is seen asleep in its retry loop; then the name appears, on a
 * pipe with no end open. The peer's reader opens before any writer and must
 * wait for one (not see end of stream): ours opens only once the peer's
 * reader is counted and asleep in up_read, and the peer's report says its
 * end opened before ours. Figures: how long it
 * waited in up_connect, and how long after up_listen returned its connect
 * got through (at most the longest backoff, 5 ms, plus scheduling).
 */
static void start_order(bool abstract)
{
	struct up_pipe *p;
	struct up_end *w;
	struct up_listener *l;
	struct names_peer_rec s, c, o;
	char name[128];
	uint64_t t_listen, t_open;
	double wait_ms, after_ms;
	int rep;
	pid_t pid;

	mk_name(name, sizeof(name), abstract, "so");
	pid = spawn_peer(name, "rd", 100000, 0x50, 10000, NULL, 0, &rep);
	s = read_rec(rep, 'S');
	wait_asleep(pid);
	/* Pacing, not ordering: let the backoff reach its longest step. */
	harness_nap_ns(30 * 1000000ull);
	p = mk_pipe();
	CHECK_OK(up_listen(p, name, 0, &l));
	t_listen = harness_now_ns();
	c = read_rec(rep, 'C');
	CHECK_EQ(c.res, 0);
	CHECK(c.t_ns > s.t_ns);
	wait_ms = (double)(c.t_ns - s.t_ns) / 1e6;
	after_ms = c.t_ns > t_listen ? (double)(c.t_ns - t_listen) / 1e6 : 0.0;
	printf("start order (%s): connect waited %.2f ms, got through %.3f ms after "
	       "up_listen returned\n", abstract ? "abstract" : "path", wait_ms, after_ms);
	CHECK(wait_ms >= 30.0);
	CHECK(after_ms < 250.0); /* 5 ms backoff; the rest is a shared machine */
	wait_readers(p, 1);
	wait_reader_asleep(p, pid); /* in up_read, with no writer yet */
	t_open = harness_now_ns();
	w = mk_end(p, UP_WR);
	write_pat(w, 0x50, 100000);
	CHECK_OK(up_close(w));
	o = read_rec(rep, 'O');
	CHECK(o.t_ns < t_open);
	harness_reap_ok(pid, 60, "names_peer");
	close(rep);
	up_listener_close(l);
	up_pipe_release(p);
}

static void start_order_path(void) { start_order(false); }
static void start_order_abstract(void) { start_order(true); }

/* --------------------------------------------------- many clients */

/*
 * Eight processes connect at once while four raw clients sit on the
 * listener: two that connected and send nothing, two that never read. All
 * eight are served; the raw ones got their reply too, waiting unread.
 */
static void concurrent_and_idle_clients(void)
{
	enum { KIDS = 8, RAW = 4 };
	struct up_pipe *p = mk_pipe();
	struct up_listener *l;
	struct sockaddr_un sa;
	socklen_t salen;
	pid_t kids[KIDS];
	int raw[RAW], go[2];
	char name[128];

	mk_name(name, sizeof(name), false, "many");
	CHECK_OK(up_listen(p, name, 0, &l));
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, name, strlen(name) + 1);
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name) + 1);
	for (int i = 0; i < RAW; i++) {
		raw[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(raw[i] >= 0);
		CHECK_SYS(connect(raw[i], (const struct sockaddr *)&sa, salen));
		if (i % 2) {
			/* Sends and never reads; the listener may have
			 * answered and closed already (then EPIPE). */
			ssize_t n = send(raw[i], "hello", 5, MSG_NOSIGNAL);

			CHECK(n == 5 || (n < 0 && errno == EPIPE));
		}
	}
	CHECK_SYS(pipe2(go, O_CLOEXEC));
	for (int i = 0; i < KIDS; i++) {
		kids[i] = harness_fork(30);
		if (kids[i] == 0) {
			struct up_pipe *q = NULL;
			char c;

			close(go[1]);
			CHECK_EQ(read(go[0], &c, 1), 0); /* all start together */
			CHECK_OK(up_connect(name, 5000, &q));
			CHECK_EQ(up_capacity(q), up_capacity(p));
			up_pipe_release(q);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]);
	for (int i = 0; i < KIDS; i++)
		harness_reap_ok(kids[i], 30, "concurrent connect");
	for (int i = 0; i < RAW; i++) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct up__name_hdr h;
		struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
		struct cmsghdr *c;
		int fd;

		CHECK_EQ(recvmsg(raw[i], &m, MSG_CMSG_CLOEXEC), (ssize_t)sizeof(h));
		CHECK_EQ(h.magic, UP_NAME_MAGIC);
		CHECK_EQ(h.status, 0);
		c = CMSG_FIRSTHDR(&m);
		CHECK(c != NULL && c->cmsg_type == SCM_RIGHTS);
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
		close(fd);
		close(raw[i]);
	}
	up_listener_close(l);
	up_pipe_release(p);
}

/* ------------------------------------------------------ access control */

/* Root only (setuid to nobody). Run alone (a filter), a case skips the
 * program with 77; in the full run it is reported skipped and the others'
 * results stand. */
static bool need_root(void)
{
	if (geteuid() == 0)
		return true;
	if (harness_filter)
		SKIP("access control cases need root (setuid to nobody)");
	printf("skip: access control needs root\n");
	return false;
}

/* A child that turns nobody (with @extra as its only extra group, or none)
 * and expects up_connect(@name) to give @want; a refused one must hold no
 * more fds than before and no memfd. */
static void connect_as_nobody(const char *name, gid_t extra, int want)
{
	pid_t pid = harness_fork(30);

	if (pid == 0) {
		struct up_pipe *q = NULL;
		int n0, m0;

		become_nobody(extra);
		n0 = harness_fds(NULL);
		m0 = harness_fds("/memfd:");
		CHECK_EQ(up_connect(name, 2000, &q), want);
		if (want == 0) {
			CHECK_EQ(harness_fds("/memfd:"), m0 + 1);
			up_pipe_release(q);
		} else {
			CHECK(q == NULL);
			CHECK_EQ(harness_fds(NULL), n0);
			CHECK_EQ(harness_fds("/memfd:"), m0); /* the fd never came */
		}
		_exit(0);
	}
	harness_reap_ok(pid, 30, name);
}

static void access_other_class(void)
{
	struct up_pipe *p;

	if (!need_root())
		return;
	p = mk_pipe();
	for (int abstract = 0; abstract < 2; abstract++) {
		struct up_listener *l;
		char name[128];

		/* 0600 (mode 0): nobody is in the other class, refused. For
		 * a path the kernel refuses first (the file's mode); for an
		 * abstract name only the listener's check does. */
		mk_name(name, sizeof(name), abstract, "acc");
		CHECK_OK(up_listen(p, name, 0, &l));
		connect_as_nobody(name, (gid_t)-1, -EACCES);
		up_listener_close(l);
		/* Write for others, but not read: connecting is writing. */
		mk_name(name, sizeof(name), abstract, "acc");
		CHECK_OK(up_listen(p, name, 0662, &l));
		connect_as_nobody(name, (gid_t)-1, 0);
		up_listener_close(l);
		mk_name(name, sizeof(name), abstract, "acc");
		CHECK_OK(up_listen(p, name, 0664, &l));
		connect_as_nobody(name, (gid_t)-1, -EACCES);
		up_listener_close(l);
	}
	up_pipe_release(p);
}

/* The group class: the listener's egid among the client's groups decides,
 * even against the other class's bits (as for a FIFO). Abstract names: the
 * listener's own check, SO_PEERGROUPS included. */
static void access_group_class(void)
{
	struct up_pipe *p;
	struct up_listener *l;
	char name[128];

	if (!need_root())
		return;
	p = mk_pipe();
	mk_name(name, sizeof(name), true, "grp");
	CHECK_OK(up_listen(p, name, 0620, &l));
	connect_as_nobody(name, getegid(), 0);        /* a supplementary group */
	connect_as_nobody(name, (gid_t)-1, -EACCES);  /* not in the group */
	up_listener_close(l);
	mk_name(name, sizeof(name), true, "grp");
	CHECK_OK(up_listen(p, name, 0602, &l));
	connect_as_nobody(name, getegid(), -EACCES);  /* group class: no w */
	connect_as_nobody(name, (gid_t)-1, 0);        /* other class: w */
	up_listener_close(l);
	up_pipe_release(p);
}

/*
 * Run by nobody, a listener serves two names. Mode 0400: only root passes
 * (for any other client no class has w; root is in the other class here).
 * Mode 0422: nobody is refused, as the owner class has no w, though group
 * and other have (nobody is in the listener's group too).
 */
static void access_owner_and_root(void)
{
	char root_only[128], not_owner[128];
	int ready[2], done[2];
	pid_t srv;

	if (!need_root())
		return;
	mk_name(root_only, sizeof(root_only), true, "own");
	mk_name(not_owner, sizeof(not_owner), true, "own");
	CHECK_SYS(pipe2(ready, O_CLOEXEC));
	CHECK_SYS(pipe2(done, O_CLOEXEC));
	srv = harness_fork(30);
	if (srv == 0) {
		struct up_pipe *sp;
		struct up_listener *sl, *sl2;
		char c;

		close(ready[0]);
		close(done[1]);
		become_nobody((gid_t)-1);
		sp = mk_pipe();
		CHECK_OK(up_listen(sp, root_only, 0400, &sl));
		CHECK_OK(up_listen(sp, not_owner, 0422, &sl2));
		harness_signal_ready(ready[1]);
		CHECK_EQ(read(done[0], &c, 1), 0);
		up_listener_close(sl);
		up_listener_close(sl2);
		up_pipe_release(sp);
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	harness_wait_ready(ready[0]);
	{
		struct up_pipe *q = NULL;

		CHECK_OK(up_connect(root_only, 2000, &q)); /* root: always */
		up_pipe_release(q);
		CHECK_OK(up_connect(not_owner, 2000, &q)); /* root: other, w */
		up_pipe_release(q);
	}
	connect_as_nobody(root_only, (gid_t)-1, -EACCES);
	connect_as_nobody(not_owner, (gid_t)-1, -EACCES);
	close(done[1]);
	harness_reap_ok(srv, 30, "nobody listener");
	close(ready[0]);
}

/* ---------------------------------------------------- names in the way */

/* A listener SIGKILLed leaves its socket file; the next up_listen takes
 * the name back. */
static void stale_socket_reclaimed(void)
{
	struct up_pipe *p, *q = NULL;
	struct up_listener *l;
	char name[128];
	int ready[2], hold[2];
	struct stat st;
	int status = 0;
	pid_t pid;

	mk_name(name, sizeof(name), false, "stale");
	CHECK_SYS(pipe2(ready, O_CLOEXEC));
	CHECK_SYS(pipe2(hold, O_CLOEXEC));
	pid = harness_fork(30);
	if (pid == 0) {
		struct up_pipe *cp = mk_pipe();
		struct up_listener *cl;
		char c;

		CHECK_OK(up_listen(cp, name, 0, &cl));
		harness_signal_ready(ready[1]);
		if (read(hold[0], &c, 1) >= 0) /* until killed */
			_exit(1);
		_exit(1);
	}
	close(ready[1]);
	close(hold[0]);
	harness_wait_ready(ready[0]);
	CHECK_SYS(kill(pid, SIGKILL));
	CHECK_OK(harness_wait_child(pid, 30, &status));
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(ready[0]);
	close(hold[1]);
	CHECK_SYS(lstat(name, &st));
	CHECK(S_ISSOCK(st.st_mode)); /* left behind */
	CHECK_EQ(up_connect(name, 0, &q), -ENOENT); /* nobody there */
	p = mk_pipe();
	CHECK_OK(up_listen(p, name, 0, &l));
	CHECK_OK(up_connect(name, 1000, &q));
	check_same_pipe(p, q);
	up_pipe_release(q);
	up_listener_close(l);
	CHECK(!path_exists(name));
	up_pipe_release(p);
}

/*
 * Two listeners race for a name where a dead listener left its socket:
 * exactly one places its own, the other gets -EADDRINUSE. Both looked at
 * the stale socket; without the directory's lock around the placing, the
 * second could unlink the first's live socket by name and place its own,
 * and both calls returned 0 (a few rounds in a thousand here). Then the
 * same with the directory flock'ed by somebody else for good: the placing
 * does not wait for that lock for ever.
 */
struct stale_racer {
	struct up_pipe *p;
	const char *name;
	pthread_barrier_t *go;
	struct up_listener *l;
	int r;
};

static void *stale_racer_main(void *arg)
{
	struct stale_racer *sr = arg;

	pthread_barrier_wait(sr->go);
	sr->r = up_listen2(sr->p, sr->name, 0600, UP_LISTEN_NOTHREAD, &sr->l);
	return NULL;
}

static void make_stale_socket(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK_SYS(s);
	CHECK(strlen(name) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, name);
	CHECK_SYS(bind(s, (const struct sockaddr *)&sa, sizeof(sa)));
	CHECK_SYS(listen(s, 1));
	close(s); /* the file stays: a stale socket */
}

static void two_listeners_one_stale_name(void)
{
	struct stale_racer sr[2];
	pthread_barrier_t go;
	pthread_t t[2];
	char name[128];
	double until = harness_now() + 3.0;
	int rounds = 0, dirfd;
	uint64_t t0;

	mk_name(name, sizeof(name), false, "race");
	for (int k = 0; k < 2; k++)
		sr[k] = (struct stale_racer){ .p = mk_pipe(), .name = name, .go = &go };
	CHECK_EQ(pthread_barrier_init(&go, NULL, 3), 0);
	while (rounds < 3000 && harness_now() < until) {
		make_stale_socket(name);
		for (int k = 0; k < 2; k++)
			CHECK_EQ(pthread_create(&t[k], NULL, stale_racer_main, &sr[k]), 0);
		pthread_barrier_wait(&go);
		for (int k = 0; k < 2; k++)
			CHECK_EQ(pthread_join(t[k], NULL), 0);
		if (!((sr[0].r == 0 && sr[1].r == -EADDRINUSE) ||
		      (sr[1].r == 0 && sr[0].r == -EADDRINUSE))) {
			fprintf(stderr, "round %d: up_listen2 gave %d and %d\n", rounds, sr[0].r,
				sr[1].r);
			CHECK(false);
		}
		for (int k = 0; k < 2; k++)
			if (sr[k].r == 0)
				up_listener_close(sr[k].l);
		CHECK(!path_exists(name));
		rounds++;
	}
	printf("# %d rounds, one listener placed in each\n", rounds);

	/* Somebody holds the directory's lock and never lets go. */
	dirfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_SYS(dirfd);
	CHECK_SYS(flock(dirfd, LOCK_EX));
	make_stale_socket(name);
	t0 = harness_now_ns();
	CHECK_OK(up_listen2(sr[0].p, name, 0600, UP_LISTEN_NOTHREAD, &sr[0].l));
	printf("# placed in %.1f ms with the directory locked by another\n",
	       (double)(harness_now_ns() - t0) / 1e6);
	CHECK(harness_now_ns() - t0 < 2000000000ull);
	up_listener_close(sr[0].l);
	close(dirfd);
	CHECK_EQ(pthread_barrier_destroy(&go), 0);
	for (int k = 0; k < 2; k++)
		up_pipe_release(sr[k].p);
}

/* A live listener keeps its name, threaded or not, path or abstract. */
static void live_listener_in_use(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;

	for (int i = 0; i < 4; i++) {
		bool abstract = i & 1;
		unsigned flags = (i & 2) ? UP_LISTEN_NOTHREAD : 0;
		struct up_listener *l, *l2 = NULL;
		char name[128];

		mk_name(name, sizeof(name), abstract, "live");
		l = mk_listener(p, name, 0, flags);
		CHECK_EQ(up_listen(p, name, 0, &l2), -EADDRINUSE);
		CHECK(l2 == NULL);
		CHECK_EQ(up_listen2(p, name, 0, UP_LISTEN_NOTHREAD, &l2), -EADDRINUSE);
		if (!flags) {
			CHECK_OK(up_connect(name, 1000, &q)); /* still the first's */
			up_pipe_release(q);
		}
		up_listener_close(l);
	}
	up_pipe_release(p);
}

/* A file that is not a socket is refused and left alone. */
static void non_socket_kept(void)
{
	struct up_pipe *p = mk_pipe();
	struct up_listener *l = NULL;
	char name[128], buf[8];
	int fd;

	mk_name(name, sizeof(name), false, "file");
	fd = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "keep", 4), 4);
	close(fd);
	CHECK_EQ(up_listen(p, name, 0, &l), -EEXIST);
	CHECK(l == NULL);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, buf, sizeof(buf)), 4);
	CHECK(memcmp(buf, "keep", 4) == 0);
	close(fd);
	CHECK_SYS(unlink(name));
	/* A directory, a FIFO: the same. */
	CHECK_SYS(mkdir(name, 0700));
	CHECK_EQ(up_listen(p, name, 0, &l), -EEXIST);
	CHECK_SYS(rmdir(name));
	CHECK_SYS(mkfifo(name, 0600));
	CHECK_EQ(up_listen(p, name, 0, &l), -EEXIST);
	CHECK_SYS(unlink(name));
	up_pipe_release(p);
}

/* up_listener_close removes the name only if it is still its socket: not
 * a file put in its place, nor another listener's socket. */
static void close_keeps_replaced_name(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;
	struct up_listener *l, *l2;
	char name[128];
	struct stat st;
	int fd;

	mk_name(name, sizeof(name), false, "repl");
	CHECK_OK(up_listen(p, name, 0, &l));
	CHECK_SYS(unlink(name));
	fd = open(name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	up_listener_close(l);
	CHECK_SYS(lstat(name, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_SYS(unlink(name));

	CHECK_OK(up_listen(p, name, 0, &l));
	CHECK_SYS(unlink(name));
	CHECK_OK(up_listen(p, name, 0, &l2)); /* a second listener, same name */
	up_listener_close(l);
	CHECK_SYS(lstat(name, &st));
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_OK(up_connect(name, 0, &q)); /* the second one's */
	up_pipe_release(q);
	up_listener_close(l2);
	CHECK(!path_exists(name));
	up_pipe_release(p);
}

static void bad_names(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;
	struct up_listener *l = NULL;
	char name[256], dir[256];

	CHECK_EQ(up_listen(p, NULL, 0, &l), -EINVAL);
	CHECK_EQ(up_listen(p, "", 0, &l), -EINVAL);
	CHECK_EQ(up_listen(p, "@", 0, &l), -EINVAL);
	CHECK_EQ(up_connect(NULL, 0, &q), -EINVAL);
	CHECK_EQ(up_connect("", 0, &q), -EINVAL);
	CHECK_EQ(up_connect("@", 0, &q), -EINVAL);
	CHECK_EQ(up_listen(NULL, "@x", 0, &l), -EINVAL);
	CHECK_EQ(up_listen(p, "@x", 0, NULL), -EINVAL);
	CHECK_EQ(up_connect("@x", 0, NULL), -EINVAL);
	CHECK_EQ(up_connect("@x", -2, &q), -EINVAL);
	CHECK_EQ(up_listen(p, "@x", 01000, &l), -EINVAL);
	CHECK_EQ(up_listen(p, "@x", 04600, &l), -EINVAL);
	CHECK_EQ(up_listen2(p, "@x", 0, 0x2, &l), -EINVAL);
	CHECK_EQ(up_listen2(p, "@x", 0, ~0u, &l), -EINVAL);
	CHECK(l == NULL);

	/* A path of 107 bytes fits (108 with its NUL), 108 does not. */
	snprintf(name, sizeof(name), "%s/", g_dir);
	while (strlen(name) < 107)
		strcat(name, "p");
	CHECK_OK(up_listen(p, name, 0, &l));
	CHECK_OK(up_connect(name, 0, &q));
	up_pipe_release(q);
	up_listener_close(l);
	CHECK(!path_exists(name));
	strcat(name, "p");
	CHECK_EQ(up_listen(p, name, 0, &l), -ENAMETOOLONG);
	CHECK_EQ(up_connect(name, 0, &q), -ENAMETOOLONG);
	/* An abstract name of 107 bytes after the '@' fits, 108 does not. */
	snprintf(name, sizeof(name), "@up-names-%d-", (int)getpid());
	while (strlen(name) < 108)
		strcat(name, "a");
	CHECK_OK(up_listen(p, name, 0, &l));
	CHECK_OK(up_connect(name, 0, &q));
	up_pipe_release(q);
	up_listener_close(l);
	strcat(name, "a");
	CHECK_EQ(up_listen(p, name, 0, &l), -ENAMETOOLONG);
	CHECK_EQ(up_connect(name, 0, &q), -ENAMETOOLONG);

	/* No such directory. */
	snprintf(name, sizeof(name), "%s/no/such", g_dir);
	CHECK_EQ(up_listen(p, name, 0, &l), -ENOENT);
	CHECK_EQ(up_connect(name, 0, &q), -ENOENT);
	snprintf(name, sizeof(name), "%s/", g_dir);
	CHECK_EQ(up_listen(p, name, 0, &l), -EINVAL); /* no file name */

	/* A directory so long that the temporary name would not fit next
	 * to a short final name: it is bound through the directory's fd. */
	snprintf(dir, sizeof(dir), "%s/", g_dir);
	while (strlen(dir) < 100)
		strcat(dir, "d");
	CHECK_SYS(mkdir(dir, 0700));
	memcpy(name, dir, strlen(dir));
	memcpy(name + strlen(dir), "/s", 3);
	CHECK_OK(up_listen(p, name, 0640, &l));
	{
		struct stat st;

		CHECK_SYS(lstat(name, &st));
		CHECK_EQ(st.st_mode & 07777, 0640);
	}
	CHECK_OK(up_connect(name, 0, &q));
	up_pipe_release(q);
	up_listener_close(l);
	CHECK(!path_exists(name));
	CHECK_SYS(rmdir(dir));
	up_pipe_release(p);
}

/* Relative names are resolved at the call, and the listener still removes
 * its own file after the working directory changed. */
static void relative_name(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;
	struct up_listener *l;
	char cwd[PATH_MAX], full[128];

	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK_SYS(chdir(g_dir));
	CHECK_OK(up_listen(p, "rel.sock", 0, &l));
	CHECK_OK(up_connect("rel.sock", 0, &q));
	up_pipe_release(q);
	CHECK_SYS(chdir("/"));
	snprintf(full, sizeof(full), "%s/rel.sock", g_dir);
	CHECK(path_exists(full));
	up_listener_close(l);
	CHECK(!path_exists(full));
	CHECK_SYS(chdir(cwd));
	up_pipe_release(p);
}

/* ------------------------------------------------------ fake listeners */

enum fake {
	FAKE_GARBAGE,      /* 16 random bytes, a good fd */
	FAKE_MAGIC,        /* wrong magic, a good fd */
	FAKE_VERSION,      /* wrong version, a good fd */
	FAKE_SHORT,        /* 5 bytes of a good header, a good fd, then EOF */
	FAKE_NOFD,         /* a good header, status 0, no fd */
	FAKE_PIPEFD,       /* a good header with a pipe(2) fd */
	FAKE_TWOFD,        /* a good header with two good fds */
	FAKE_MANYFD,       /* a good header with 12 fds (more than fit) */
	FAKE_NOTSEG,       /* a sealed memfd that is not a pipe segment */
	FAKE_REFUSED_FD,   /* status EACCES, yet a good fd */
	FAKE_BADSTATUS,    /* status EIO, no fd */
	FAKE_REFUSED,      /* status EACCES, no fd: -EACCES */
	FAKE_CLOSE,        /* accepts and closes: -ECONNRESET */
	FAKE_SILENT,       /* accepts and never answers: -ETIMEDOUT */
	FAKE_SPLIT,        /* a good reply in two sends: success */
	FAKE_TRAILER,      /* a good reply, then another fd: success */
	FAKE_COUNT
};

static const char *const fake_names[FAKE_COUNT] = {
	"garbage", "magic", "version", "short", "nofd", "pipefd", "twofd", "manyfd",
	"notseg", "refused_fd", "badstatus", "refused", "close", "silent", "split",
	"trailer",
};

static void fake_send_x(int c, const void *buf, size_t len, const int *fds, int nfds,
			bool trailer)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	n = sendmsg(c, &m, MSG_NOSIGNAL);
	/* A trailer may find the client gone already. */
	CHECK(n == (ssize_t)len || (trailer && n < 0 && errno == EPIPE));
}

static void fake_send(int c, const void *buf, size_t len, const int *fds, int nfds)
{
	fake_send_x(c, buf, len, fds, nfds, false);
}

static void fake_serve(int c, enum fake v, int good)
{
	struct up__name_hdr h = { .magic = UP_NAME_MAGIC, .version = UP_NAME_VERSION };
	int fds[12], pfd[2], i;

	switch (v) {
	case FAKE_GARBAGE:
		harness_fill(0x6a7b, 0, &h, sizeof(h));
		fake_send(c, &h, sizeof(h), &good, 1);
		break;
	case FAKE_MAGIC:
		h.magic ^= 1;
		fake_send(c, &h, sizeof(h), &good, 1);
		break;
	case FAKE_VERSION:
		h.version = UP_NAME_VERSION + 1;
		fake_send(c, &h, sizeof(h), &good, 1);
		break;
	case FAKE_SHORT:
		fake_send(c, &h, 5, &good, 1);
		break;
	case FAKE_NOFD:
		fake_send(c, &h, sizeof(h), NULL, 0);
		break;
	case FAKE_PIPEFD:
		CHECK_SYS(pipe(pfd));
		fake_send(c, &h, sizeof(h), &pfd[0], 1);
		break;
	case FAKE_TWOFD:
		fds[0] = fds[1] = good;
		fake_send(c, &h, sizeof(h), fds, 2);
		break;
	case FAKE_MANYFD:
		for (i = 0; i < 12; i++)
			fds[i] = good;
		fake_send(c, &h, sizeof(h), fds, 12);
		break;
	case FAKE_NOTSEG:
		fds[0] = memfd_create("not-a-pipe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		CHECK(fds[0] >= 0);
		CHECK_SYS(ftruncate(fds[0], 1 << 20));
		CHECK_SYS(fcntl(fds[0], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
		fake_send(c, &h, sizeof(h), fds, 1);
		break;
	case FAKE_REFUSED_FD:
		h.status = EACCES;
		fake_send(c, &h, sizeof(h), &good, 1);
		break;
	case FAKE_BADSTATUS:
		h.status = EIO;
		fake_send(c, &h, sizeof(h), NULL, 0);
		break;
	case FAKE_REFUSED:
		h.status = EACCES;
		fake_send(c, &h, sizeof(h), NULL, 0);
		break;
	case FAKE_CLOSE:
	case FAKE_SILENT:
		break;
	case FAKE_SPLIT:
		fake_send(c, &h, 6, &good, 1);
		fake_send(c, (const char *)&h + 6, sizeof(h) - 6, NULL, 0);
		break;
	case FAKE_TRAILER:
		fake_send(c, &h, sizeof(h), &good, 1);
		fake_send_x(c, &h, sizeof(h), &good, 1, true);
		break;
	case FAKE_COUNT:
		break;
	}
}

static void fake_one(enum fake v, int want, int timeout_ms)
{
	char name[128];
	int ready[2], done[2], n0, m0, r;
	struct up_pipe *q = NULL;
	double t0, el;
	pid_t srv;

	mk_name(name, sizeof(name), true, fake_names[v]);
	CHECK_SYS(pipe2(ready, O_CLOEXEC));
	CHECK_SYS(pipe2(done, O_CLOEXEC));
	srv = harness_fork(30);
	if (srv == 0) {
		struct up_pipe *sp = mk_pipe();
		struct sockaddr_un sa;
		int s, c;
		char ch;

		close(ready[0]);
		close(done[1]);
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(s >= 0);
		CHECK_SYS(bind(s, (const struct sockaddr *)&sa,
			       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))));
		CHECK_SYS(listen(s, 4));
		harness_signal_ready(ready[1]);
		c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		CHECK(c >= 0);
		fake_serve(c, v, up_pipe_fd(sp));
		if (v != FAKE_SILENT)
			close(c); /* what was sent stays queued for the client */
		CHECK_EQ(read(done[0], &ch, 1), 0); /* the client is done */
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	harness_wait_ready(ready[0]);
	n0 = harness_fds(NULL);
	m0 = harness_fds("/memfd:");
	t0 = harness_now();
	r = up_connect(name, timeout_ms, &q);
	el = harness_now() - t0;
	if (r != want) {
		fprintf(stderr, "fake listener '%s': up_connect gave %d (%s), wanted %d\n",
			fake_names[v], r, strerror(-r), want);
		harness_fail();
	}
	if (want == 0) {
		CHECK(q != NULL);
		CHECK_EQ(harness_fds(NULL), n0 + 1); /* the mapping's own fd, no other */
		up_pipe_release(q);
	} else {
		CHECK(q == NULL);
		CHECK_EQ(harness_fds("/memfd:"), m0);
	}
	CHECK_EQ(harness_fds(NULL), n0);
	if (want == -ETIMEDOUT) {
		CHECK(el >= timeout_ms / 1e3);
		CHECK(el < timeout_ms / 1e3 + 0.5);
	}
	close(done[1]);
	harness_reap_ok(srv, 30, fake_names[v]);
	close(ready[0]);
}

static void fake_listeners(void)
{
	fake_one(FAKE_GARBAGE, -EPROTO, 2000);
	fake_one(FAKE_MAGIC, -EPROTO, 2000);
	fake_one(FAKE_VERSION, -EPROTO, 2000);
	fake_one(FAKE_SHORT, -EPROTO, 2000);
	fake_one(FAKE_NOFD, -EPROTO, 2000);
	fake_one(FAKE_PIPEFD, -EPROTO, 2000);
	fake_one(FAKE_TWOFD, -EPROTO, 2000);
	fake_one(FAKE_MANYFD, -EPROTO, 2000);
	fake_one(FAKE_NOTSEG, -EPROTO, 2000);
	fake_one(FAKE_REFUSED_FD, -EPROTO, 2000);
	fake_one(FAKE_BADSTATUS, -EPROTO, 2000);
	fake_one(FAKE_REFUSED, -EACCES, 2000);
	fake_one(FAKE_CLOSE, -ECONNRESET, 2000);
	fake_one(FAKE_SILENT, -ETIMEDOUT, 300);
	fake_one(FAKE_SPLIT, 0, 2000);
	fake_one(FAKE_TRAILER, 0, 2000);
}

/* ------------------------------------------------------------ timeouts */

static void timeout_zero_and_measured(void)
{
	for (int abstract = 0; abstract < 2; abstract++) {
		struct up_pipe *q = NULL;
		char name[128];
		double t0, el;

		mk_name(name, sizeof(name), abstract, "to");
		t0 = harness_now();
		CHECK_EQ(up_connect(name, 0, &q), -ENOENT);
		el = harness_now() - t0;
		CHECK(el < 0.05);
		t0 = harness_now();
		CHECK_EQ(up_connect(name, 200, &q), -ETIMEDOUT);
		el = harness_now() - t0;
		printf("timeout 200 ms (%s): -ETIMEDOUT after %.2f ms\n",
		       abstract ? "abstract" : "path", el * 1e3);
		CHECK(el >= 0.200);
		CHECK(el < 0.200 + 0.1);
		CHECK(q == NULL);
	}
}

struct late_listener {
	const char *name;
	pid_t waiter;          /* the thread in up_connect(-1) */
	struct up_pipe *p;
	struct up_listener *l;
	uint64_t t_listen;
};

static void *late_listener_main(void *arg)
{
	struct late_listener *ll = arg;

	wait_asleep(ll->waiter);
	harness_nap_ns(10 * 1000000ull); /* pacing: several backoff rounds */
	ll->p = mk_pipe();
	CHECK_OK(up_listen(ll->p, ll->name, 0, &ll->l));
	ll->t_listen = harness_now_ns();
	return NULL;
}

static void timeout_forever_listener_later(void)
{
	for (int abstract = 0; abstract < 2; abstract++) {
		struct late_listener ll = { 0 };
		struct up_pipe *q = NULL;
		char name[128];
		pthread_t t;
		uint64_t t0, t1;

		mk_name(name, sizeof(name), abstract, "late");
		ll.name = name;
		ll.waiter = (pid_t)syscall(SYS_gettid);
		CHECK_EQ(pthread_create(&t, NULL, late_listener_main, &ll), 0);
		t0 = harness_now_ns();
		CHECK_OK(up_connect(name, -1, &q));
		t1 = harness_now_ns();
		CHECK_EQ(pthread_join(t, NULL), 0);
		printf("timeout -1 (%s): waited %.2f ms, through %.3f ms after up_listen\n",
		       abstract ? "abstract" : "path", (double)(t1 - t0) / 1e6,
		       t1 > ll.t_listen ? (double)(t1 - ll.t_listen) / 1e6 : 0.0);
		CHECK(t1 - t0 >= 10 * 1000000ull);
		check_same_pipe(ll.p, q);
		up_pipe_release(q);
		up_listener_close(ll.l);
		up_pipe_release(ll.p);
	}
}

/* ------------------------------------------------------------ no thread */

static void nothread_serve(void)
{
	struct up_pipe *p = mk_pipe();
	struct up_listener *l;
	struct pollfd pf;
	char name[128];
	int lfd, rep;
	pid_t kid;

	mk_name(name, sizeof(name), false, "nt");
	wait_listener_threads(0);
	l = mk_listener(p, name, 0, UP_LISTEN_NOTHREAD);
	CHECK_EQ(listener_threads(NULL, 0), 0); /* no thread */
	lfd = up_listener_fd(l);
	CHECK(lfd >= 0);
	CHECK_EQ(up_listener_fd(NULL), -EINVAL);
	CHECK_EQ(up_listener_serve(NULL), -EINVAL);
	CHECK_EQ(up_listener_serve(l), 0); /* nothing pending */
	pf.fd = lfd;
	pf.events = POLLIN;
	CHECK_EQ(poll(&pf, 1, 0), 0);
	for (int round = 0; round < 2; round++) {
		kid = spawn_peer(name, "conn", 0, 0, 5000, NULL, 0, &rep);
		pf.revents = 0;
		CHECK_EQ(poll(&pf, 1, 10000), 1);
		CHECK(pf.revents & POLLIN);
		CHECK_EQ(up_listener_serve(l), 1);
		harness_reap_ok(kid, 30, "names_peer conn"); /* it connected */
		read_rec(rep, 'S');
		CHECK_EQ(read_rec(rep, 'C').res, 0);
		close(rep);
	}
	up_listener_close(l);
	CHECK(!path_exists(name));
	up_pipe_release(p);
}

/* A client gone before it is served: dropped, no SIGPIPE (the test fails
 * on any), the next one served. */
static void nothread_client_gone(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;
	struct up_listener *l;
	struct sockaddr_un sa;
	char name[128];
	int c;

	mk_name(name, sizeof(name), true, "gone");
	l = mk_listener(p, name, 0, UP_LISTEN_NOTHREAD);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(c >= 0);
	CHECK_SYS(connect(c, (const struct sockaddr *)&sa,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))));
	close(c);
	CHECK_EQ(up_listener_serve(l), 0);
	up_listener_close(l);
	/* Clients still queued when the listener closes: -ECONNRESET. The
	 * client is exec'd: a forked one would hold the listening socket. */
	l = mk_listener(p, name, 0, UP_LISTEN_NOTHREAD);
	{
		struct pollfd pf = { .fd = up_listener_fd(l), .events = POLLIN };
		int rep, status = 0;
		pid_t kid = spawn_peer(name, "conn", 0, 0, 5000, NULL, 0, &rep);

		CHECK_EQ(poll(&pf, 1, 10000), 1); /* its connect is queued */
		up_listener_close(l);
		read_rec(rep, 'S');
		CHECK_EQ(read_rec(rep, 'C').res, -ECONNRESET);
		CHECK_OK(harness_wait_child(kid, 30, &status));
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
		close(rep);
	}
	(void)q;
	up_pipe_release(p);
}

/* --------------------------------------------------- the listener thread */

static uint64_t sigblk_of(const char *tid)
{
	char path[300], line[256];
	uint64_t mask = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	f = fopen(path, "re");
	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %" SCNx64, &mask) == 1)
			break;
	fclose(f);
	return mask;
}

static void thread_blocks_signals(void)
{
	struct up_pipe *p = mk_pipe();
	struct up_listener *l;
	char name[128], tid[16] = "";
	uint64_t m;

	mk_name(name, sizeof(name), true, "sig");
	wait_listener_threads(0);
	CHECK_OK(up_listen(p, name, 0, &l));
	CHECK_EQ(listener_threads(tid, sizeof(tid)), 1);
	/* A new thread runs with every signal blocked until glibc gives it
	 * its creator's mask: look once it waits in poll(). */
	wait_asleep((pid_t)atoi(tid));
	m = sigblk_of(tid);
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			CHECK(m & (1ull << (sig - 1)));
	up_listener_close(l);
	wait_listener_threads(0); /* joined */
	up_pipe_release(p);
}

/* A forked child that closes its copy of the listener leaves the parent's
 * thread and name alone. */
static void fork_child_closes_copy(void)
{
	struct up_pipe *p = mk_pipe(), *q = NULL;
	struct up_listener *l;
	char name[128];
	pid_t kid;

	mk_name(name, sizeof(name), false, "fork");
	CHECK_OK(up_listen(p, name, 0, &l));
	kid = harness_fork(30);
	if (kid == 0) {
		up_listener_close(l);
		up_pipe_release(p);
		_exit(0);
	}
	harness_reap_ok(kid, 30, "child closing its copy");
	CHECK(path_exists(name));
	CHECK_OK(up_connect(name, 1000, &q));
	up_pipe_release(q);
	up_listener_close(l);
	CHECK(!path_exists(name));
	up_pipe_release(p);
}

static void close_null(void)
{
	up_listener_close(NULL);
}

/* ------------------------------------------------------------------ main */

#define RUN_CASE(fn)                                                           \
	do {                                                                   \
		if (harness_filter == NULL || strcmp(harness_filter, #fn) == 0) { \
			int n0_ = harness_fds(NULL);                                  \
			fn();                                                  \
			if (harness_fds(NULL) != n0_) {                               \
				fprintf(stderr, "%s: %d fds before, %d after\n", \
					#fn, n0_, harness_fds(NULL));                 \
				harness_fail();                                \
			}                                                      \
			printf("ok %s\n", #fn);                                \
			fflush(stdout);                                        \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	struct up_pipe *p;
	struct up_end *e;

	harness_init(argc, argv);
	harness_watchdog(240);
	harness_fail_on_sigpipe();
	harness_block_sigchld();
	snprintf(g_dir, sizeof(g_dir), "/tmp/up-names-XXXXXX");
	CHECK(mkdtemp(g_dir) != NULL);
	CHECK_SYS(chmod(g_dir, 0711)); /* nobody may reach names inside */
	/* Whatever the backend sets up once per process, before counting. */
	p = mk_pipe();
	e = mk_end(p, UP_RD);
	up_close(e);
	up_pipe_release(p);

	RUN_CASE(same_process_path);
	RUN_CASE(same_process_abstract);
	RUN_CASE(path_mode_exact);
	RUN_CASE(path_no_window);
	RUN_CASE(pipe_released_before_connect);
	RUN_CASE(connect_latency);
	RUN_CASE(exec_path_peer_reads);
	RUN_CASE(exec_path_peer_writes);
	RUN_CASE(exec_abstract_peer_reads);
	RUN_CASE(exec_abstract_peer_writes);
	RUN_CASE(start_order_path);
	RUN_CASE(start_order_abstract);
	RUN_CASE(concurrent_and_idle_clients);
	RUN_CASE(stale_socket_reclaimed);
	RUN_CASE(two_listeners_one_stale_name);
	RUN_CASE(live_listener_in_use);
	RUN_CASE(non_socket_kept);
	RUN_CASE(close_keeps_replaced_name);
	RUN_CASE(bad_names);
	RUN_CASE(relative_name);
	RUN_CASE(fake_listeners);
	RUN_CASE(timeout_zero_and_measured);
	RUN_CASE(timeout_forever_listener_later);
	RUN_CASE(nothread_serve);
	RUN_CASE(nothread_client_gone);
	RUN_CASE(thread_blocks_signals);
	RUN_CASE(fork_child_closes_copy);
	RUN_CASE(close_null);
	/* Last: they skip (77) without root. */
	RUN_CASE(access_other_class);
	RUN_CASE(access_group_class);
	RUN_CASE(access_owner_and_root);
	CHECK_SYS(rmdir(g_dir));
	return 0;
}
