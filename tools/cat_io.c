/* SPDX-License-Identifier: MIT */
/*
 * cat_io.c - the pump's file I/O: readv/writev through io_uring, or the
 * system calls themselves.
 *
 * Each pump thread owns one small ring and keeps exactly one request in
 * flight: the reader's next read needs pages the previous one filled to be
 * committed first, and the writer's next write needs the previous one's
 * count to consume. So io_uring_submit_and_wait() costs one system call per
 * operation, like readv/writev; what io_uring buys here is that the same
 * ring can later carry registered buffers and linked requests, and that the
 * kernel serves pipe/socket reads by poll-arming instead of parking a thread.
 *
 * Offsets are -1 (IORING_FEAT_RW_CUR_POS, Linux 5.6): the request uses and
 * advances the file position, so `(read x; uringpipe-cat) < file` continues
 * where the shell left off, exactly as cat does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cat.h"

#ifdef UP_CAT_HAVE_URING
#include <liburing.h>
#endif

struct cat_io {
	bool uring;
#ifdef UP_CAT_HAVE_URING
	struct io_uring ring;
#endif
};

static bool env_set(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0") != 0;
}

struct cat_io *cat_io_open(bool no_uring)
{
	struct cat_io *io = calloc(1, sizeof(*io));

	if (!io)
		return NULL;
#ifdef UP_CAT_HAVE_URING
	/* UP_FORCE_FUTEX asks the library for its io_uring-free fallback; the
	 * tool follows so one variable gives a run with no io_uring at all. */
	if (!no_uring && !env_set("UPCAT_NO_URING") && !env_set("UP_FORCE_FUTEX")) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		/* Without RW_CUR_POS an offset of -1 is -EINVAL on regular
		 * files: fall back rather than track positions by hand. */
		if (io_uring_queue_init_params(4, &io->ring, &p) == 0) {
			if (p.features & IORING_FEAT_RW_CUR_POS)
				io->uring = true;
			else
				io_uring_queue_exit(&io->ring);
		}
	}
#else
	(void)no_uring;
	(void)env_set;
#endif
	return io;
}

void cat_io_close(struct cat_io *io)
{
	if (!io)
		return;
#ifdef UP_CAT_HAVE_URING
	if (io->uring)
		io_uring_queue_exit(&io->ring);
#endif
	free(io);
}

const char *cat_io_name(const struct cat_io *io)
{
	return io && io->uring ? "io_uring" : "readv/writev";
}

#ifdef UP_CAT_HAVE_URING
static ssize_t uring_rw(struct cat_io *io, bool wr, int fd, const struct iovec *iov, int cnt)
{
	for (;;) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
		struct io_uring_cqe *cqe;
		int r, res;

		if (!sqe)
			return -EBUSY; /* one request in flight: cannot happen */
		if (wr)
			io_uring_prep_writev(sqe, fd, iov, (unsigned)cnt, (__u64)-1);
		else
			io_uring_prep_readv(sqe, fd, iov, (unsigned)cnt, (__u64)-1);
		r = io_uring_submit_and_wait(&io->ring, 1);
		if (r < 0 && r != -EINTR)
			return r;
		/* A wait that a signal cut short (a stop and continue, as with
		 * Ctrl-Z and fg, or a ptrace attach) still returns the count
		 * submitted, with no completion yet: wait for it here, or the
		 * empty queue's -EAGAIN would end the input midway. */
		do
			r = io_uring_wait_cqe(&io->ring, &cqe);
		while (r == -EINTR);
		if (r < 0)
			return r;
		res = cqe->res;
		io_uring_cqe_seen(&io->ring, cqe);
		/* -EAGAIN (an O_NONBLOCK fd we were given) is returned like
		 * readv would: cat reports it too, and retrying would spin. */
		if (res == -EINTR)
			continue;
		return res;
	}
}
#endif

/* Either direction, at the current file position; EINTR is retried. */
static ssize_t io_rw(struct cat_io *io, bool wr, int fd, const struct iovec *iov, int cnt)
{
#ifdef UP_CAT_HAVE_URING
	if (io->uring)
		return uring_rw(io, wr, fd, iov, cnt);
#else
	(void)io;
#endif
	for (;;) {
		ssize_t r = wr ? writev(fd, iov, cnt) : readv(fd, iov, cnt);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

ssize_t cat_io_readv(struct cat_io *io, int fd, const struct iovec *iov, int cnt)
{
	return io_rw(io, false, fd, iov, cnt);
}

ssize_t cat_io_writev(struct cat_io *io, int fd, const struct iovec *iov, int cnt)
{
	return io_rw(io, true, fd, iov, cnt);
}
