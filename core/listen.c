/* SPDX-License-Identifier: MIT */
/*
 * listen.c - pipes by name, the listener: a Unix socket that hands the
 * pipe's memfd to every permitted client (SCM_RIGHTS). What
 * examples/scm_rights.c does by hand, with a name both processes know
 * instead of a socket they must share. name.c is the client.
 *
 * The listener never waits for a client: it reads nothing from it, answers
 * with one non-blocking send (core/name.h) and closes it, so a client that
 * sends nothing or never reads holds up nobody; a client the send cannot be
 * made to at once is dropped. Access is decided as for a FIFO of the same
 * mode, from the peer's credentials (SO_PEERCRED, SO_PEERGROUPS), so that
 * abstract names, which have no file mode, are guarded too.
 *
 * A path name gets its mode without a window: the socket is bound to a
 * temporary name in the same directory, chmod'ed, set listening, and only
 * then renamed onto the name (never over a live listener). A socket left at
 * the name by a listener that died refuses connections: it is reclaimed.
 *
 * Only the handle's descriptor, live.c's reopen and the allocator are used:
 * nothing here is on the data path.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "name.h"
#include "thread.h"
#include "up_int.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define PLACE_ATTEMPTS 8   /* rounds of a race for the name with others */
#define BUSY_RETRY_MS  10  /* the thread's pause while out of fds */

struct up_listener {
	int lfd;       /* the listening socket */
	int memfd;     /* our own dup of the pipe's memfd */
	int wakefd;    /* eventfd that stops the thread; -1 without one */
	int dirfd;     /* O_PATH of a path name's directory; -1 if abstract */
	char base[SUN_PATH_MAX]; /* the name's last component in dirfd */
	dev_t dev;     /* the socket file we bound, to remove only that */
	ino_t ino;
	uid_t euid;    /* the owner class: who listens, as for a FIFO */
	gid_t egid;
	unsigned int mode;
	pid_t pid;     /* the process that listens (not a forked child) */
	bool thread;
	pthread_t tid;
};

/* ------------------------------------------------------------- serving */

/* Whether the peer's supplementary groups hold @gid (SO_PEERGROUPS). */
static bool peer_in_groups(int cfd, gid_t gid)
{
#ifdef SO_PEERGROUPS
	gid_t small[64], *g = small;
	socklen_t len = sizeof(small);
	bool found = false;
	size_t i, n;

	if (getsockopt(cfd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
		/* ERANGE: len now says how much is needed. ENOPROTOOPT
		 * (before Linux 4.13): the primary group alone decides. */
		if (errno != ERANGE || len <= sizeof(small) ||
		    len > (socklen_t)(65536 * sizeof(gid_t)))
			return false;
		g = up__calloc(len / sizeof(gid_t), sizeof(gid_t));
		if (!g || getsockopt(cfd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
			up__free(g);
			return false;
		}
	}
	n = len / sizeof(gid_t);
	for (i = 0; i < n && !found; i++)
		found = g[i] == gid;
	if (g != small)
		up__free(g);
	return found;
#else
	(void)cfd;
	(void)gid;
	return false;
#endif
}

/*
 * The FIFO rule: root always (as CAP_DAC_OVERRIDE would let it open a
 * FIFO); otherwise the one class the peer falls in decides, owner before
 * group before other, and connecting is writing.
 */
static bool peer_allowed(const struct up_listener *l, int cfd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	unsigned int bits;

	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || len != sizeof(cr))
		return false;
	if (cr.uid == 0)
		return true;
	if (cr.uid == l->euid)
		bits = l->mode >> 6;
	else if (cr.gid == l->egid || peer_in_groups(cfd, l->egid))
		bits = l->mode >> 3;
	else
		bits = l->mode;
	return (bits & 02) != 0;
}

/* One reply, sent without waiting; 0 once sent, else -errno. */
static int send_reply(int cfd, int status, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct up__name_hdr h = {
		.magic = UP_NAME_MAGIC, .version = UP_NAME_VERSION, .status = status,
	};
	struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	n = sendmsg(cfd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(h) ? 0 : -EAGAIN;
}

/*
 * Accept and answer every pending connection. Returns how many were
 * answered (given the pipe, or refused); *err is the accept error that
 * ended the round (0 when the queue simply ran dry).
 */
static int serve_pending(struct up_listener *l, int *err)
{
	int served = 0;

	*err = 0;
	for (;;) {
		int cfd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
		bool ok;

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				*err = -errno;
			return served;
		}
		ok = peer_allowed(l, cfd);
		/* A client the reply cannot go to at once is dropped: closing
		 * it is all the answer it gets. */
		if (send_reply(cfd, ok ? 0 : EACCES, ok ? l->memfd : -1) == 0)
			served++;
		close(cfd);
	}
}

static void *listener_main(void *arg)
{
	struct up_listener *l = arg;
	struct pollfd pf[2] = {
		{ .fd = l->lfd, .events = POLLIN },
		{ .fd = l->wakefd, .events = POLLIN },
	};
	int wait_ms = -1;

	for (;;) {
		int err, r = poll(pf, 2, wait_ms);

		if (r < 0) {
			/* EINTR cannot happen (every signal is blocked);
			 * ENOMEM: try again a little later. */
			wait_ms = BUSY_RETRY_MS;
			continue;
		}
		if (pf[1].revents)
			break;
		pf[0].fd = l->lfd;
		wait_ms = -1;
		if (r == 0 || !pf[0].revents)
			continue;
		(void)serve_pending(l, &err);
		if (err < 0) {
			/* Out of fds or memory (EMFILE, ENOBUFS...): the
			 * connection stays queued and the socket readable, so
			 * look only at the stop signal for a while. */
			pf[0].fd = -1;
			wait_ms = BUSY_RETRY_MS;
		}
	}
	return NULL;
}

/* ------------------------------------------------------------ binding */

/* rename() that fails with EEXIST instead of replacing a file. */
static int rename_noreplace(int dirfd, const char *from, const char *to)
{
	if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* A filesystem without RENAME_NOREPLACE: link() never replaces. */
	if (linkat(dirfd, from, dirfd, to, 0) < 0)
		return -errno;
	(void)unlinkat(dirfd, from, 0);
	return 0;
}

/*
 * Bind @s to a fresh name next to the final one: in @dir (the name up to
 * its last '/' included, "" for the working directory), or through
 * l->dirfd if that path would not fit; @tmp gets its name there.
 */
static int bind_temp(struct up_listener *l, int s, const char *dir, char *tmp, size_t tmpsz)
{
	static _Atomic unsigned int seq;
	struct sockaddr_un sa;
	int attempt;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	for (attempt = 0; attempt < 16; attempt++) {
		/* relaxed: only uniqueness within this process matters. */
		unsigned int k = atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
		int n;

		n = snprintf(tmp, tmpsz, ".up%x.%x.%llx", (unsigned int)getpid(), k,
			     (unsigned long long)(up__now_ns() & 0xffffff));
		if (n < 0 || (size_t)n >= tmpsz)
			return -ENAMETOOLONG;
		/* The directory's own path when it fits, else its fd. */
		n = snprintf(sa.sun_path, SUN_PATH_MAX, "%s%s", dir, tmp);
		if (n < 0 || (size_t)n >= SUN_PATH_MAX)
			n = snprintf(sa.sun_path, SUN_PATH_MAX, "/proc/self/fd/%d/%s", l->dirfd, tmp);
		if (n < 0 || (size_t)n >= SUN_PATH_MAX)
			return -ENAMETOOLONG;
		if (bind(s, (const struct sockaddr *)&sa,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1)) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -errno;
	}
	return -EADDRINUSE;
}

/*
 * What is at the name: 0 nothing (or a stale socket, now removed: try to
 * place ours), -EADDRINUSE a live listener, -EEXIST something that is not a
 * socket, or another -errno.
 */
static int clear_stale(struct up_listener *l, const char *name)
{
	struct sockaddr_un sa;
	struct stat st, again;
	socklen_t len;
	int s, r;

	if (fstatat(l->dirfd, l->base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	r = up__name_addr(name, &sa, &len);
	if (r < 0)
		return r;
	s = up__name_socket();
	if (s < 0)
		return s;
	r = connect(s, (const struct sockaddr *)&sa, len) == 0 ? 0 : -errno;
	close(s);
	if (r == 0 || r == -EAGAIN) /* accepted, or its backlog is full */
		return -EADDRINUSE;
	if (r == -ENOENT)
		return 0;
	if (r != -ECONNREFUSED)
		return r;
	/* Nobody listens there: a listener died. Remove that socket only,
	 * not one that another listener placed meanwhile. */
	if (fstatat(l->dirfd, l->base, &again, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (again.st_dev != st.st_dev || again.st_ino != st.st_ino)
		return -EAGAIN; /* look again */
	if (unlinkat(l->dirfd, l->base, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/*
 * The placing (look at the name, remove a stale socket, rename ours onto it)
 * under an exclusive flock(2) of the directory. Without it, two listeners
 * that found the same stale socket could both place theirs: the second's
 * look came before the first's unlink, so it unlinked the first's live
 * socket by name and renamed its own there, and both calls succeeded. A
 * placing holds the lock for a few system calls; anyone may flock a
 * directory they can read, so a lock held longer than PLACE_LOCK_TRIES
 * milliseconds is not waited for, nor is one on a directory this process
 * cannot open for reading: the placing goes on without it (the race is back
 * there, never a hang or a failure). Returns the fd to close, or -1.
 */
#define PLACE_LOCK_TRIES 250

static int place_lock(int dirfd)
{
	const struct timespec ms = { 0, 1000000 };
	/* The directory the name is placed in, not one renamed there since. */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int i;

	if (fd < 0)
		return -1;
	for (i = 0; i < PLACE_LOCK_TRIES; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		nanosleep(&ms, NULL);
	}
	close(fd);
	return -1;
}

static int listen_path(struct up_listener *l, int s, const char *name)
{
	char dir[SUN_PATH_MAX], tmp[64];
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	size_t dlen = (size_t)(base - name);
	struct stat st;
	int r, attempt, lk;

	if (!base[0])
		return -EINVAL; /* "dir/": no file name */
	/* dir: the name up to its last '/' included ("" for none). */
	memcpy(dir, name, dlen);
	dir[dlen] = 0;
	memcpy(l->base, base, strlen(base) + 1);
	l->dirfd = open(dlen ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (l->dirfd < 0)
		return -errno;
	r = bind_temp(l, s, dir, tmp, sizeof(tmp));
	if (r < 0)
		return r;
	/* The mode before anyone can connect; listening before the name
	 * exists, so a prober never takes a placed socket for a stale one. */
	if (fchmodat(l->dirfd, tmp, l->mode, 0) < 0 ||
	    fstatat(l->dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    listen(s, SOMAXCONN) < 0) {
		r = -errno;
		goto out_tmp;
	}
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	lk = place_lock(l->dirfd);
	r = -EADDRINUSE; /* others keep taking the name as we look */
	for (attempt = 0; attempt < PLACE_ATTEMPTS; attempt++) {
		int c = clear_stale(l, name);

		if (c == -EAGAIN)
			continue;
		if (c < 0) {
			r = c;
			break;
		}
		c = rename_noreplace(l->dirfd, tmp, l->base);
		if (c != -EEXIST) {
			r = c;
			break;
		}
	}
	if (lk >= 0)
		close(lk);
	if (r == 0)
		return 0;
out_tmp:
	(void)unlinkat(l->dirfd, tmp, 0);
	return r;
}

/* ---------------------------------------------------------- public API */

int up_listen2(struct up_pipe *p, const char *name, unsigned int mode, unsigned int flags,
	       struct up_listener **out)
{
	struct up_listener *l;
	struct sockaddr_un sa;
	socklen_t salen;
	int r, fd;

	if (!p || !out || (flags & ~UP_LISTEN_ALL) || (mode & ~0777u))
		return -EINVAL;
	r = up__name_addr(name, &sa, &salen);
	if (r < 0)
		return r;
	fd = p->fd;
	if (fd < 0)
		return -EINVAL;
	l = up__calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->lfd = l->wakefd = l->dirfd = -1;
	l->mode = mode ? mode : 0600u;
	l->euid = geteuid();
	l->egid = getegid();
	l->pid = getpid();
	/* A description of the memfd of its own, holding no liveness lock
	 * (live.c): a client that keeps the descriptor it was sent must not
	 * keep this process's ends alive after it has died. */
	l->memfd = up__live_reopen(fd);
	if (l->memfd < 0) {
		r = l->memfd;
		goto err;
	}
	l->lfd = up__name_socket();
	if (l->lfd < 0) {
		r = l->lfd;
		goto err;
	}
	if (name[0] == '@') {
		if (bind(l->lfd, (const struct sockaddr *)&sa, salen) < 0 ||
		    listen(l->lfd, SOMAXCONN) < 0) {
			r = -errno;
			goto err;
		}
	} else {
		r = listen_path(l, l->lfd, name);
		if (r < 0)
			goto err;
	}
	if (!(flags & UP_LISTEN_NOTHREAD)) {
		l->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (l->wakefd < 0) {
			r = -errno;
			goto err_placed;
		}
		/* Signals stay the application's threads' business. */
		r = up__thread_start(&l->tid, 0, listener_main, l, "up-listen");
		if (r < 0)
			goto err_placed;
		l->thread = true;
	}
	*out = l;
	return 0;

err_placed:
	l->thread = false;
	up_listener_close(l);
	return r;
err:
	if (l->memfd >= 0)
		close(l->memfd);
	if (l->lfd >= 0)
		close(l->lfd);
	if (l->dirfd >= 0)
		close(l->dirfd);
	up__free(l);
	return r;
}

int up_listen(struct up_pipe *p, const char *name, unsigned int mode, struct up_listener **out)
{
	return up_listen2(p, name, mode, 0, out);
}

int up_listener_fd(const struct up_listener *l)
{
	return l ? l->lfd : -EINVAL;
}

int up_listener_serve(struct up_listener *l)
{
	int err, n;

	if (!l)
		return -EINVAL;
	n = serve_pending(l, &err);
	return n > 0 ? n : err;
}

void up_listener_close(struct up_listener *l)
{
	struct stat st;
	bool owner;

	if (!l)
		return;
	/* A forked child's copy: the thread and the name are the parent's. */
	owner = l->pid == getpid();
	if (owner && l->thread) {
		uint64_t one = 1;

		/* Cannot fail: the counter is only ever 0 or 1. */
		while (write(l->wakefd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		pthread_join(l->tid, NULL);
	}
	/* The name goes first, so that nobody finds it without a listener;
	 * only if it is still the socket we bound. */
	if (owner && l->dirfd >= 0 &&
	    fstatat(l->dirfd, l->base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISSOCK(st.st_mode) && st.st_dev == l->dev && st.st_ino == l->ino)
		(void)unlinkat(l->dirfd, l->base, 0);
	close(l->lfd);
	close(l->memfd);
	if (l->wakefd >= 0)
		close(l->wakefd);
	if (l->dirfd >= 0)
		close(l->dirfd);
	up__free(l);
}

