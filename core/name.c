/* SPDX-License-Identifier: MIT */
/*
 * name.c - pipes by name, the client's side and what both sides share: a
 * name as a socket address, and up_connect(), which waits for the name,
 * takes the listener's one reply (core/name.h) and attaches the pipe whose
 * memfd it carries. listen.c is the listener.
 *
 * Everything received is untrusted: a reply that is not exactly one header
 * with the right magic and version and, for status 0, exactly one sealed
 * memfd, is -EPROTO, and every fd it carried is closed.
 *
 * Only public calls (up_pipe_attach) and the allocator are used: nothing
 * here is on the data path.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "name.h"
#include "up_int.h"

#include "name.h"
#include "up_int.h"

#define MAX_RECV_FDS   8   /* fds one reply may carry before MSG_CTRUNC */

/* ---------------------------------------------------------------- names */

/* @name as a socket address: a path, or "@x" for the abstract name "x". */
int up__name_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n;

	if (!name || !name[0])
		return -EINVAL;
	n = strnlen(name, SUN_PATH_MAX + 1);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (name[0] == '@') {
		/* Abstract: a NUL, then the name without one. */
		if (n == 1)
			return -EINVAL;
		if (n - 1 > SUN_PATH_MAX - 1)
			return -ENAMETOOLONG;
		memcpy(sa->sun_path + 1, name + 1, n - 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		return 0;
	}
	if (n >= SUN_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, name, n + 1);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

int up__name_socket(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	return s < 0 ? -errno : s;
}

/* ------------------------------------------------------------- client */

/* What a whole reply with @nfds fds (@fd the first) means. */
static int reply_check(const struct up__name_hdr *h, int nfds, bool extra, int fd)
{
	if (h->magic != UP_NAME_MAGIC || h->version != UP_NAME_VERSION)
		return -EPROTO;
	if (h->status == EACCES && nfds == 0 && !extra)
		return -EACCES; /* refused, and rightly sent nothing */
	if (h->status != 0 || nfds != 1 || extra)
		return -EPROTO;
	/* Not a memfd (a pipe, a socket, a file): refused before
	 * up_pipe_attach() looks at it. */
	return fcntl(fd, F_GET_SEALS) < 0 ? -EPROTO : 0;
}

/*
 * Read the reply: the header, whatever fds come with it. Returns 0 and *fd
 * (a sealed memfd), or -errno with every received fd closed.
 */
static int recv_reply(int s, uint64_t until, int *fd)
{
	struct up__name_hdr h = { 0 };
	int fds[MAX_RECV_FDS] = { 0 }, nfds = 0, i, r = 0;
	bool extra = false;
	size_t got = 0;

	while (got < sizeof(h)) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * MAX_RECV_FDS)];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = { .iov_base = (char *)&h + got, .iov_len = sizeof(h) - got };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
		struct pollfd pf = { .fd = s, .events = POLLIN };
		struct cmsghdr *c;
		uint64_t now = up__now_ns();
		ssize_t n;
		int ms;

		if (now >= until) {
			r = -ETIMEDOUT;
			break;
		}
		ms = (int)((until - now + 999999) / 1000000);
		n = poll(&pf, 1, ms);
		if (n < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
		if (n <= 0)
			continue;
		n = recvmsg(s, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			size_t k, cnt;

			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (k = 0; k < cnt; k++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
				if (nfds < MAX_RECV_FDS)
					fds[nfds++] = f;
				else
					close(f), extra = true;
			}
		}
		if (m.msg_flags & MSG_CTRUNC)
			extra = true; /* the kernel closed what did not fit */
		if (n == 0) {
			/* Closed before a whole header: dropped by the
			 * listener, or not one at all. */
			r = got == 0 && nfds == 0 ? -ECONNRESET : -EPROTO;
			break;
		}
		got += (size_t)n;
	}
	if (r == 0)
		r = reply_check(&h, nfds, extra, fds[0]);
	if (r == 0) {
		*fd = fds[0];
		return 0;
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return r;
}

/* Sleep until @t (CLOCK_MONOTONIC, ns), resumed across signals. */
static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
			       .tv_nsec = (long)(t % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

int up_connect(const char *name, int timeout_ms, struct up_pipe **out)
{
	uint64_t start = up__now_ns(), deadline, until, backoff = UP_NAME_BACKOFF_MIN_NS;
	struct sockaddr_un sa;
	socklen_t len;
	int s, r, fd = -1;

	if (!out || timeout_ms < -1)
		return -EINVAL;
	r = up__name_addr(name, &sa, &len);
	if (r < 0)
		return r;
	deadline = start + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	for (;;) {
		uint64_t now, wake;

		s = up__name_socket();
		if (s < 0)
			return s;
		if (connect(s, (const struct sockaddr *)&sa, len) == 0)
			break;
		r = -errno;
		close(s);
		/* Nothing there yet (a path not made, an abstract name not
		 * bound, a stale socket), or a backlog full: wait. */
		if (r != -ENOENT && r != -ECONNREFUSED && r != -EAGAIN && r != -EINTR)
			return r;
		if (timeout_ms == 0)
			return r == -EAGAIN ? -EAGAIN : -ENOENT;
		now = up__now_ns();
		if (timeout_ms > 0 && now >= deadline)
			return -ETIMEDOUT;
		wake = now + backoff;
		if (timeout_ms > 0 && wake > deadline)
			wake = deadline; /* one last try at the deadline */
		sleep_until(wake);
		backoff = backoff * 2 > UP_NAME_BACKOFF_MAX_NS ? UP_NAME_BACKOFF_MAX_NS : backoff * 2;
	}
	until = up__now_ns() + (uint64_t)UP_NAME_REPLY_MS * 1000000ull;
	if (timeout_ms > 0 && deadline < until)
		until = deadline;
	r = recv_reply(s, until, &fd);
	close(s);
	if (r < 0)
		return r;
	r = up_pipe_attach(fd, out); /* validates the segment; dups the fd */
	close(fd);
	return r;
}
