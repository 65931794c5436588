/* SPDX-License-Identifier: MIT */
/*
 * cat_tcp.c - `uringpipe-cat --to tcp:HOST:PORT [FILE]...` and
 * `--from tcp:[HOST]:PORT`: the two halves of the pump on two machines, the
 * stream carried by the library's bridge (up_bridge_send/up_bridge_recv).
 *
 * --to: the pump's reader thread reads the inputs into a local pipe, a
 * bridge thread sends the pipe's stream over a connection it makes
 * (retrying until --wait runs out), and the stream ends when the inputs
 * are done and the receiver confirmed every byte.
 * --from: listens (127.0.0.1 unless HOST is given; port 0 picks one and
 * says which on stderr), accepts one connection, a bridge thread receives
 * into a local pipe and the pump's writer thread writes it to stdout. An
 * end of stream that the trailer does not confirm is an error: exit 4 and
 * a message, with stdout holding exactly the bytes that arrived.
 * Either side may start first: --to retries while nothing listens.
 *
 * A peer that vanished without a reset is noticed within about
 * --tcp-timeout (tune_socket()). The sockets have TCP_NODELAY (a frame's
 * tail and the trailer go at once). Backpressure is TCP's: a receiver that stops makes
 * the sender's send wait, its pipe fill and its reader thread wait, so the
 * memory of both stays the pipe's capacity and the socket buffers.
 * -L is the pump's (cat_rate_limit()): the sender's reader thread paces the
 * inputs into the pipe, the receiver's writer thread the pipe to stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

#include "cat.h"

bool cat_tcp_wanted(const struct cat_opts *o)
{
	return (o->to && strncmp(o->to, "tcp:", 4) == 0) ||
	       (o->from && strncmp(o->from, "tcp:", 4) == 0);
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" (after "tcp:") into @host
 * (empty: none given) and @port. 0 or -1. */
static int split_addr(const char *s, char *host, size_t hl, char *port, size_t pl)
{
	const char *colon;
	unsigned long v;
	size_t n;

	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || e[1] != ':')
			return -1;
		n = (size_t)(e - s - 1);
		colon = e + 1;
		s++;
	} else {
		colon = strrchr(s, ':');
		n = colon ? (size_t)(colon - s) : 0;
	}
	if (n >= hl)
		return -1;
	memcpy(host, s, n);
	host[n] = 0;
	s = colon ? colon + 1 : s;
	if (!*s || strlen(s) >= pl || strspn(s, "0123456789") != strlen(s))
		return -1;
	/* getaddrinfo() would take 70000 for 4464: a port is 16 bits. */
	v = strlen(s) <= 5 ? strtoul(s, NULL, 10) : ULONG_MAX;
	if (v > 65535)
		return -1;
	snprintf(port, pl, "%lu", v); /* "00" is port 0 too */
	return 0;
}

static void nap_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * A peer that answers nothing for about --tcp-timeout is gone, whichever
 * way the connection stalls: TCP_USER_TIMEOUT ends a wait for the ack of
 * sent bytes (without it the kernel retransmits for 15 minutes or more),
 * keepalive a wait for bytes on an idle connection (idle 2/5 of the
 * timeout, then three probes 1/5 apart). A receiver that is merely slow or
 * stopped still acks the sender's window probes, so backpressure is never
 * taken for a dead peer.
 */
static void tune_socket(int fd, int timeout_ms)
{
	int one = 1, s = timeout_ms / 1000;
	int idle = s * 2 / 5 > 0 ? s * 2 / 5 : 1, intvl = s / 5 > 0 ? s / 5 : 1, cnt = 3;
	unsigned int uto = (unsigned int)timeout_ms;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* One connect to @a, given up after @ms if nothing answers (a SYN that is
 * dropped gets no reset: a blocking connect would retry it for two
 * minutes). The connected fd, blocking again; -1 with errno (ETIMEDOUT
 * for no answer). */
static int connect_within(const struct addrinfo *a, int ms)
{
	struct pollfd pf;
	socklen_t el = sizeof(int);
	int fd, r, e = 0;

	fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
	if (fd < 0)
		return -1;
	if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
		if (errno != EINPROGRESS)
			goto fail;
		pf.fd = fd;
		pf.events = POLLOUT;
		do
			r = poll(&pf, 1, ms);
		while (r < 0 && errno == EINTR);
		if (r == 0)
			errno = ETIMEDOUT;
		if (r <= 0)
			goto fail;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
			goto fail;
		if (e) {
			errno = e;
			goto fail;
		}
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		goto fail;
	return fd;
fail:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* --to: a connected socket, retried (1 ms doubling to 100 ms) while nothing
 * listens, until --wait has passed. An attempt that nothing answers ends
 * it at once: the peer is gone after --tcp-timeout, or --wait ran out
 * meanwhile. The fd, or -1 after a message. */
/* Worth another try within --wait: nobody listens yet (the peer may start
 * later), or the attempt itself was cut short. A network or host that
 * cannot be reached, or an address that is not ours to use, stays so. */
static bool retry_connect(int err)
{
	return err == ECONNREFUSED || err == EINTR || err == EAGAIN;
}

static int tcp_connect(const struct cat_opts *o, const char *addr)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	double deadline = cat_mono() + (double)o->wait_ms / 1000.0;
	int delay = 1, err = 0, r;
	bool by_wait = false; /* the last attempt was cut to what --wait left */

	if (split_addr(addr, host, sizeof(host), port, sizeof(port)) < 0 || !host[0]) {
		fprintf(stderr, CAT_PROG ": --to tcp:%s: not HOST:PORT (a port of 0 to 65535)\n",
			addr);
		return -2;
	}
	r = getaddrinfo(host, port, &hints, &ai);
	if (r != 0) {
		fprintf(stderr, CAT_PROG ": --to tcp:%s: %s\n", addr, gai_strerror(r));
		return -1;
	}
	for (;;) {
		/* An address that refused: worth another round within --wait
		 * (the error reported is then the refusal, not the last
		 * address's). Every address is tried each round, whatever the
		 * one before it said (::1 where IPv6 is off, say). */
		int refused = 0;

		for (struct addrinfo *a = ai; a; a = a->ai_next) {
			int ms = o->tcp_timeout_ms, fd;

			by_wait = false;
			if (o->wait_ms > 0) {
				double left = ceil((deadline - cat_mono()) * 1000.0);

				if (left < (double)ms) {
					ms = left < 1.0 ? 1 : (int)left;
					by_wait = true;
				}
			}
			fd = connect_within(a, ms);
			if (fd >= 0) {
				freeaddrinfo(ai);
				tune_socket(fd, o->tcp_timeout_ms);
				return fd;
			}
			err = errno;
			if (err == ETIMEDOUT)
				break;
			if (retry_connect(err))
				refused = err;
		}
		if (err != ETIMEDOUT && refused)
			err = refused;
		if (err == ETIMEDOUT) {
			freeaddrinfo(ai);
			if (by_wait)
				fprintf(stderr, CAT_PROG ": --to tcp:%s: no answer in %.3g s (--wait)\n",
					addr, (double)o->wait_ms / 1000.0);
			else
				fprintf(stderr,
					CAT_PROG ": --to tcp:%s: no answer in %.3g s (--tcp-timeout)\n",
					addr, (double)o->tcp_timeout_ms / 1000.0);
			return -1;
		}
		if (!retry_connect(err) || o->wait_ms == 0 ||
		    (o->wait_ms > 0 && cat_mono() >= deadline))
			break;
		nap_ms(delay);
		delay = delay * 2 < 100 ? delay * 2 : 100;
	}
	freeaddrinfo(ai);
	if (o->wait_ms > 0 && retry_connect(err))
		fprintf(stderr, CAT_PROG ": --to tcp:%s: nobody listening after %.3g s (--wait):"
			" %s\n", addr, (double)o->wait_ms / 1000.0, strerror(err));
	else
		fprintf(stderr, CAT_PROG ": --to tcp:%s: cannot connect: %s\n", addr, strerror(err));
	return -1;
}

/* --from: listen, accept one connection (within --wait when it is > 0),
 * stop listening. The fd, or -1 (-2: a usage error) after a message. */
static int tcp_accept(const struct cat_opts *o, const char *addr)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
	int one = 1, l, fd, r;

	if (split_addr(addr, host, sizeof(host), port, sizeof(port)) < 0) {
		fprintf(stderr, CAT_PROG ": --from tcp:%s: not [HOST]:PORT (a port of 0 to 65535)\n",
			addr);
		return -2;
	}
	r = getaddrinfo(host[0] ? host : "127.0.0.1", port, &hints, &ai);
	if (r != 0) {
		fprintf(stderr, CAT_PROG ": --from tcp:%s: %s\n", addr, gai_strerror(r));
		return -1;
	}
	l = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, ai->ai_addr, ai->ai_addrlen) < 0 || listen(l, 1) < 0) {
		fprintf(stderr, CAT_PROG ": --from tcp:%s: cannot listen: %s\n", addr,
			strerror(errno));
		freeaddrinfo(ai);
		if (l >= 0)
			close(l);
		return -1;
	}
	freeaddrinfo(ai);
	if (strcmp(port, "0") == 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char h[64], p[16];

		/* The port the kernel picked, for the caller to give --to. */
		if (getsockname(l, (struct sockaddr *)&ss, &sl) == 0 &&
		    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), p, sizeof(p),
				NI_NUMERICHOST | NI_NUMERICSERV) == 0)
			fprintf(stderr, CAT_PROG ": --from tcp:%s: listening on port %s\n", addr, p);
	}
	if (o->wait_ms >= 0) { /* 0: a single look */
		struct pollfd pf = {.fd = l, .events = POLLIN};

		do
			r = poll(&pf, 1, o->wait_ms);
		while (r < 0 && errno == EINTR);
		if (r == 0) {
			fprintf(stderr, CAT_PROG ": --from tcp:%s: nobody connected within %.3g s"
				" (--wait)\n", addr, (double)o->wait_ms / 1000.0);
			close(l);
			return -1;
		}
	}
	do
		fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		fprintf(stderr, CAT_PROG ": --from tcp:%s: accept: %s\n", addr, strerror(errno));
	close(l);
	if (fd >= 0)
		tune_socket(fd, o->tcp_timeout_ms);
	return fd;
}

/* The bridge thread: one up_bridge_send/recv, then the end it used closed
 * (--to: the pump's writes fail with -EPIPE and it stops reading inputs;
 * --from: the pump's writer sees end of stream). */
struct bridge_job {
	struct cat_pump *pm;
	struct up_end *e;
	int fd;
	bool send;
	struct up_bridge_opts bo;
	struct up_bridge_stats st;
	int res;
};

static void *bridge_thread(void *arg)
{
	struct bridge_job *j = arg;

	if (j->send)
		j->res = up_bridge_send(j->e, j->fd, &j->bo, &j->st);
	else
		j->res = up_bridge_recv(j->e, j->fd, &j->bo, &j->st);
	up_close(j->e);
	j->e = NULL;
	return NULL;
}

/* What went wrong with the stream, in the words of the side that saw it. */
static const char *why(const struct bridge_job *j, char *b, size_t bl)
{
	int r = j->res;

	if (j->send) {
		if (r == -ECONNABORTED)
			return "the receiver closed without confirming the stream";
		if (r == -ECONNRESET || r == -EPIPE)
			return "the receiver went away (connection reset)";
		if (r == -EBADMSG)
			return "the receiver got other bytes than were sent";
		if (r == -EPROTO)
			return "the receiver refused the stream (not a uringpipe-cat --from of"
			       " this version?)";
		if (r == -EREMOTEIO)
			return "the receiver could not write the stream out (see its own message)";
	} else {
		if (r == -ECONNABORTED || r == -ECONNRESET) {
			snprintf(b, bl, "the stream ended before its trailer after %" PRIu64
				 " bytes (the sender died or closed early): output truncated",
				 j->st.bytes);
			return b;
		}
		if (r == -EBADMSG)
			return "the trailer's byte count or CRC32C does not match what arrived";
		if (r == -EPROTONOSUPPORT)
			return "the sender speaks another version of the stream framing";
		if (r == -EPROTO)
			return "not a uringpipe stream (wrong magic or a bad frame)";
	}
	if (r == -ETIMEDOUT)
		return "the peer stopped answering (timed out)";
	snprintf(b, bl, "%s", up_strerror(r));
	return b;
}

static uint64_t moved(const struct cat_pump *pm)
{
	/* relaxed: display counters. */
	return atomic_load_explicit(pm->side == CAT_TO ? &pm->in_bytes : &pm->out_bytes,
				    memory_order_relaxed);
}

static void print_json(const struct cat_pump *pm, const struct bridge_job *j, double secs,
		       int status, const char *addr, size_t capacity)
{
	uint64_t b = moved(pm);

	fprintf(stderr, "{\"tool\":\"" CAT_PROG "\",\"version\":\"%s\",\"role\":\"%s\","
		"\"address\":\"tcp:%s\",\"capacity\":%zu,\"bytes\":%" PRIu64 ",\"stream_bytes\":%" PRIu64
		",\"seconds\":%.6f,\"mb_per_s\":%.3f,\"exit\":%d,\"input_errors\":%d,"
		"\"socket_io\":\"%s\",\"frames\":%" PRIu64 ",\"socket_syscalls\":%" PRIu64
		",\"zc_sends\":%" PRIu64 ",\"zc_copied\":%" PRIu64 ",\"crc32c\":\"%08x\","
		"\"stream_error\":%d}\n",
		UP_VERSION_STRING, pm->side == CAT_TO ? "to" : "from", addr, capacity, b, j->st.bytes, secs,
		secs > 0 ? (double)b / secs / 1e6 : 0.0, status, pm->input_errors,
		j->st.path[0] ? j->st.path : "none", j->st.frames, j->st.syscalls, j->st.zc_sends,
		j->st.zc_copied, j->st.crc32c, -j->res);
}

int cat_tcp_main(const struct cat_opts *o)
{
	const bool to = o->to != NULL;
	const char *addr = (to ? o->to : o->from) + 4;
	struct up_config cfg;
	struct up_pipe *p = NULL;
	struct up_end *rd = NULL, *wr = NULL;
	struct cat_pump pm;
	struct bridge_job j;
	struct cat_progress pg;
	double t0;
	pthread_t bt;
	double secs;
	int fd, r, status = CAT_EXIT_OK;
	bool show;

	cat_pump_init(&pm, o); /* SIGPIPE ignored from here on */
	fd = to ? tcp_connect(o, addr) : tcp_accept(o, addr);
	if (fd < 0)
		return fd == -2 ? CAT_EXIT_USAGE : CAT_EXIT_PIPE;
	up_config_init(&cfg);
	cfg.capacity = (size_t)o->capacity;
	cfg.page_size = (size_t)o->page_size;
	cfg.numa_node = o->node;
	r = up_pipe_create(&cfg, &p);
	if (r == 0)
		r = up_open(p, UP_RD, &rd);
	if (r == 0)
		r = up_open(p, UP_WR, &wr);
	if (r < 0) {
		fprintf(stderr, CAT_PROG ": cannot create the pipe: %s\n", up_strerror(r));
		close(fd);
		return r == -EINVAL ? CAT_EXIT_USAGE : CAT_EXIT_PIPE;
	}
	memset(&j, 0, sizeof(j));
	j.pm = &pm;
	j.fd = fd;
	j.send = to;
	j.e = to ? rd : wr;
	up_bridge_opts_init(&j.bo);
	if (o->no_uring)
		j.bo.flags |= UP_BRIDGE_NO_URING;
	/* --from confirms the stream once it is written out, not once it is
	 * in the pipe: the sender's 0 is then a delivery. */
	if (!to)
		j.bo.flags |= UP_BRIDGE_ANSWER_LATER;
	/* For measuring the cut-over (docs/DESIGN-NOTES.md): sends of at
	 * least this many bytes go zero-copy. */
	if (getenv("UPCAT_TCP_ZC_MIN"))
		j.bo.zc_min = (size_t)strtoull(getenv("UPCAT_TCP_ZC_MIN"), NULL, 0);
	if (to)
		pm.wr = wr;
	else
		pm.rd = rd;

	cat_progress_init(&pg, o, &pm);
	show = pg.show;
	t0 = cat_mono();
	r = pthread_create(&bt, NULL, bridge_thread, &j);
	if (r == 0 && (r = cat_pump_start(&pm)) != 0) {
		/* The bridge is waiting on a pipe nobody else will use. */
		shutdown(fd, SHUT_RDWR);
		if (to)
			up_close(wr);
		pthread_join(bt, NULL);
	}
	if (r != 0) {
		fprintf(stderr, CAT_PROG ": pthread_create: %s\n", strerror(r));
		close(fd);
		return CAT_EXIT_PIPE;
	}
	cat_pump_wait(&pm, show ? cat_progress_tick : NULL, &pg);
	if (to) {
		up_close(pm.wr); /* the inputs are done: the stream's end */
		pm.wr = NULL;
	}
	pthread_join(bt, NULL);
	if (!to && j.res == 0) {
		/* The pump has written all there was, or failed to. */
		(void)up_bridge_answer(fd, pm.out_err || pm.pipe_err ? -EIO : 0, &j.bo, &j.st);
	}
	secs = cat_mono() - t0;
	cat_progress_end(&pg);
	close(fd);

	if (pm.input_errors)
		status = CAT_EXIT_INPUT;
	if (pm.pipe_err) {
		fprintf(stderr, CAT_PROG ": %s: %s\n", pm.pipe_err_where, up_strerror(pm.pipe_err));
		status = CAT_EXIT_PIPE;
	}
	if (j.res < 0 && !(j.res == -EPIPE && !to && pm.out_err)) {
		char b[160];

		fprintf(stderr, CAT_PROG ": %s tcp:%s: %s\n", to ? "--to" : "--from", addr,
			why(&j, b, sizeof(b)));
		status = CAT_EXIT_PIPE;
	}
	if (pm.out_err) {
		fprintf(stderr, CAT_PROG ": write error: %s\n", strerror(-pm.out_err));
		status = CAT_EXIT_OUTPUT;
	}
	if (o->json)
		print_json(&pm, &j, secs, status, addr, cfg.capacity);
	up_pipe_release(p);
	cat_pump_destroy(&pm);
	return status;
}
