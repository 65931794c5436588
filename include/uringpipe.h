/* SPDX-License-Identifier: MIT */
/*
 * uringpipe — a byte-stream pipe in shared memory.
 *
 * A pipe lives in a sealed memfd that every process holding an endpoint maps.
 * Data moves through a ring of pages without system calls; the kernel is used
 * only to sleep and to wake (io_uring FUTEX_WAIT/FUTEX_WAKE, or futex(2)).
 *
 * Conventions, for every call below:
 *  - the return value is 0, a byte count, or a negative errno; errno is never
 *    read or set;
 *  - destructors accept NULL; there is no init call, and no global state
 *    except the per-NUMA-node allocator arenas of up_buf_alloc();
 *  - semantics follow pipe(7): see uringpipe(7) and docs/DESIGN.md.
 *
 * Error codes and what they always mean:
 *   -EINVAL  a bad argument (NULL pointer, unknown flag, impossible size);
 *   -EBADF   the endpoint has the wrong direction for the call;
 *   -EAGAIN  a UP_NONBLOCK endpoint would have to wait;
 *   -EPIPE   no reader is left (writes); SIGPIPE is never raised;
 *   -EPROTO  the shared segment is foreign, of another layout version, or was
 *            corrupted by a peer; the pipe is then broken for this process;
 *   -ENOMEM, -EMFILE, ...  resource exhaustion, passed through from the kernel.
 *
 * Thread-safety classes used in the comments:
 *   "any thread"         may be called concurrently on the same object;
 *   "exclusive on end"   one thread at a time per endpoint (different
 *                        endpoints may be used concurrently).
 */
#ifndef URINGPIPE_H
#define URINGPIPE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "uringpipe/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(UP_BUILDING_LIBRARY) && defined(__GNUC__)
#define UP_API __attribute__((visibility("default")))
#else
#define UP_API
#endif

struct up_pipe; /* one process's mapping of one pipe; thread-safe */
struct up_end;  /* one reader or writer endpoint; one thread at a time */

/* Largest write guaranteed not to be interleaved with other writers'. */
#define UP_PIPE_BUF 4096

/* up_config.flags */
/* Submit wakes through SQPOLL rings (io_uring backend). All endpoints of a
 * process share one SQ thread, made on first use and kept for the life of
 * the process (one fd, and a kernel thread that sleeps while idle). */
#define UP_CFG_SQPOLL 0x1u
#define UP_CFG_ALL    (UP_CFG_SQPOLL)

#define UP_DEFAULT_CAPACITY  (1u << 20)
/* The default page (page_size 0): the capacity / UP_DEFAULT_PAGE_RING,
 * rounded down to a power of two, at least UP_DEFAULT_PAGE_SIZE and at most
 * UP_DEFAULT_PAGE_MAX: 4 KiB up to a 256 KiB pipe, 16 KiB at 1 MiB. */
#define UP_DEFAULT_PAGE_SIZE 4096u
#define UP_DEFAULT_PAGE_MAX  (64u << 10)
#define UP_DEFAULT_PAGE_RING 64u
#define UP_DEFAULT_POOL_MIN  ((size_t)2 << 20)

struct up_config {
	uint32_t size;      /* sizeof(struct up_config): lets the struct grow */
	uint32_t flags;     /* UP_CFG_* bits; unknown bits are -EINVAL */
	size_t   capacity;  /* bytes the pipe can hold; 0 = default (1 MiB) */
	size_t   page_size; /* bytes per ring page; 0 = from the capacity (above) */
	int      numa_node; /* -1 = the caller's memory-policy / local node */
	/* Since 0.1: the memory floor. After a burst, free pages beyond
	 * pool_keep bytes are given back to the kernel (hole-punched) once the
	 * writers have taken few pages for a while, looked at from a reader's
	 * idle points at most once per trim_ms per endpoint. 0 = default
	 * (1/8 of the capacity, at least 64 KiB); >= capacity = never trim. */
	size_t   pool_keep;
	uint32_t trim_ms;   /* 0 = default (100 ms) */
	/* Since 0.1: the pool's pages, in bytes, at the least. Pages come
	 * round again in FIFO order, and a pool larger than the capacity
	 * makes a streaming writer find its pages' lines gone from the
	 * reader's cache: faster small writes, for more memory (the pool is
	 * faulted in as the stream goes round it; a trim gives it back, see
	 * pool_keep). The pool never exceeds twice
	 * the capacity, a capacity under pool_min / 4 gets no spare pages,
	 * and the pipe still holds no more than the capacity. 0 = default
	 * (2 MiB); a value no larger than the capacity adds nothing. */
	size_t   pool_min;
};

/*
 * up_config_init - fill @cfg with the defaults (size set, capacity 1 MiB,
 * page_size 0: chosen from the capacity at creation, numa_node -1). Any
 * thread; never blocks.
 */
UP_API void up_config_init(struct up_config *cfg);

/*
 * up_pipe_create - lay out a new pipe in a fresh sealed memfd.
 * @cfg may be NULL for the defaults. The capacity is rounded up to whole
 * pages; page_size must be a power of two between 4 KiB and 1 MiB; capacity
 * at most 8 TiB (2^31 pages of 4 KiB) and at least two pages. Data pages
 * hold memory only once written, and the metadata (24 to 44 bytes per
 * page) as it is used, but the pool's index (4 bytes per page) is written
 * here: a pipe far beyond the machine's memory fails or invites the OOM
 * killer at creation.
 * Returns 0 and *out, or -EINVAL (bad config, unknown flag, impossible NUMA
 * node), -ENOMEM, -EMFILE, or another -errno from memfd_create/mmap.
 * Any thread; enters the kernel (memfd_create, ftruncate, mmap, fcntl).
 */
UP_API int up_pipe_create(const struct up_config *cfg, struct up_pipe **out);

/*
 * up_pipe_attach - map a pipe made elsewhere (inherited or received fd).
 * Validates the seals, the size, and every field of the header; the fd is
 * duplicated, the caller keeps its own.
 * Returns 0 and *out; -EPROTO if the segment is foreign, of another layout
 * version, or corrupt; -EBADF/-EINVAL for a bad fd; -ENOMEM.
 * Any thread; enters the kernel.
 */
UP_API int up_pipe_attach(int fd, struct up_pipe **out);

/*
 * up_pipe_fd - the memfd, to pass by fork/exec or SCM_RIGHTS. Still owned by
 * @p (close-on-exec is set: dup it for exec). A description of its own,
 * made at the first call: a receiver that keeps it, or a socket that still
 * holds it, never keeps this process's ends alive after it died (where
 * /proc is mounted; without it, the handle's own). Returns the fd, -EINVAL,
 * or -EMFILE/-ENFILE (the first call, out of descriptors).
 * Any thread; never blocks.
 */
UP_API int up_pipe_fd(const struct up_pipe *p);

/*
 * up_pipe_release - drop this handle. Open endpoints keep the mapping alive;
 * the last of them unmaps it. NULL is accepted. Any thread.
 */
UP_API void up_pipe_release(struct up_pipe *p);

/* up_open() flags */
#define UP_RD       0x1
#define UP_WR       0x2
#define UP_NONBLOCK 0x4
/* Since 0.2, readers only, and what a reader does unless it opens with
 * UP_NO_EARLY (so asking for it changes nothing): in poll mode
 * (up_poll_arm), read ahead of data that comes at a steady gap. Once a few
 * gaps agree, the armed fd turns readable a little before the next message
 * is due, and arming again in the short window around it makes the fd
 * readable at once, with nothing announced, so the event loop polls
 * through the window and the writer makes no wake: reading within
 * microseconds of the write instead of a wake's latency, for the window's
 * CPU (the loop's rounds, each yielding). Such readiness comes without
 * data by design, as up_poll_arm() allows: a loop must read until -EAGAIN
 * and arm again, never take readiness for a message. A window that runs
 * out backs off. Both wake backends. A blocking reader does the same (it
 * holds no loop). */
#define UP_EARLY_POLL 0x10
/* Since 0.2, readers only: sleep rather than read ahead of sparse data. A
 * blocking reader whose data comes at a steady gap sleeps until the writer
 * wakes it, as a pipe(7) reader does, instead of waking a little ahead and
 * spinning for the message (a fifth of a core at a 200 us gap, for
 * microseconds of latency where a wake costs tens); and its spin before a
 * sleep stays at the first 20 us, never grown to cover gaps up to 100 us
 * (a whole core at a 50 us gap). In poll mode its fd is never made
 * readable ahead of data. Not with UP_EARLY_POLL. */
#define UP_NO_EARLY 0x20

/*
 * up_open - open a reader (UP_RD) or a writer (UP_WR) endpoint on @p,
 * optionally UP_NONBLOCK, and a reader UP_EARLY_POLL or UP_NO_EARLY.
 * Exactly one of UP_RD/UP_WR.
 * Returns 0 and *out, -EINVAL (bad flags), -EMFILE (endpoint table of the
 * segment full), -EPROTO (pipe broken), -ENOMEM.
 * Any thread; never waits for the pipe or its peers. A process's first
 * writer end registers the process for membarrier(2), a system call that
 * can take milliseconds (an RCU grace period), once, here rather than in
 * the first write.
 */
UP_API int up_open(struct up_pipe *p, int flags, struct up_end **out);

/*
 * up_close - close an endpoint. Closing the last writer ends the stream for
 * the readers (they read 0 once drained) and wakes every sleeping reader;
 * closing the last reader makes writes fail with -EPIPE and wakes every
 * sleeping writer. Pages reserved but not committed go back to the pool.
 * Returns 0; NULL is accepted (returns 0). Exclusive on end; may enter the
 * kernel (a wake, munmap when this was the last reference).
 */
UP_API int up_close(struct up_end *e);

/*
 * up_pipe2 - like pipe(2): a new pipe with ends[0] the reader and ends[1]
 * the writer. @cfg may be NULL. The pipe handle is released; the ends keep
 * it alive. Returns 0 or the errors of up_pipe_create/up_open.
 */
UP_API int up_pipe2(struct up_end *ends[2], const struct up_config *cfg);

/*
 * up_write - append @len bytes to the stream.
 * Blocks while the pipe is full (unless UP_NONBLOCK). A write of at most
 * UP_PIPE_BUF bytes is atomic: all of it lands contiguously or, on a
 * non-blocking end, nothing (-EAGAIN). A larger write may be split and, with
 * several writers, interleaved at page boundaries; a non-blocking one may be
 * partial. A write of 0 bytes returns 0.
 * Returns the bytes written (short only after partial progress, the error is
 * then reported by the next call), -EPIPE (no reader), -EAGAIN, -EBADF
 * (reader end), -EINVAL, -EPROTO.
 * Exclusive on end (several writer ends may write concurrently). Enters the
 * kernel only to sleep while full, or to wake a sleeping reader.
 */
UP_API ssize_t up_write(struct up_end *w, const void *buf, size_t len);

/*
 * up_read - take up to @len bytes from the stream, in order.
 * Returns what is there (at least 1 byte), blocking while empty (unless
 * UP_NONBLOCK); 0 at end of stream (every writer closed or died and the pipe
 * is drained); -EAGAIN, -EBADF (writer end), -EINVAL, -EPROTO. @len 0
 * returns 0 at once.
 * Exclusive on end. Enters the kernel only to sleep while empty, or to wake
 * a sleeping writer.
 */
UP_API ssize_t up_read(struct up_end *r, void *buf, size_t len);

/* Gather/scatter forms of up_write/up_read; same rules (atomicity counts the
 * total). At most 1024 (IOV_MAX) entries, else -EINVAL. */
UP_API ssize_t up_writev(struct up_end *w, const struct iovec *iov, int iovcnt);
UP_API ssize_t up_readv(struct up_end *r, const struct iovec *iov, int iovcnt);

/*
 * Zero copy, writer side.
 * up_reserve - hand out up to *iovcnt spans of free pipe pages, totalling at
 * most @len bytes, for the caller to fill in place. Blocks like up_write
 * until at least one page is free. On return *iovcnt is the spans used.
 * Returns the bytes reserved (> 0), or -EPIPE, -EAGAIN, -EBADF, -EINVAL,
 * -EPROTO. A second reserve without a commit replaces the first: it hands
 * out the same spans again (extended if more were asked) when they still
 * fit, but a small reservation may move between the end of the last page
 * and a page of its own (the size changed, or another writer published).
 * One reservation takes at most a quarter of the capacity (a page at the
 * least), so the reader drains the rest while the caller fills.
 * A reservation of at most a page is never split: it returns @len or an
 * error. One smaller than a page goes at the end of the last page when it
 * fits, as small writes do, and holds the writers' lock until its commit:
 * the only writer always, and with several writers one of at most half a
 * page when the lock is free at once (else it takes a page of its own and
 * does not wait). Other writers' publishes wait for that commit, so fill and
 * commit promptly, and do not write through another end of this pipe from
 * the same thread in between.
 * up_commit - publish the first @n reserved bytes (0 <= n <= reserved) as
 * stream data; the rest of the reservation is dropped. Returns 0, -EINVAL
 * (n larger than reserved), -EPIPE, -EPROTO, or -EAGAIN: a non-blocking end
 * found the writers' lock held by another writer; the reservation stays,
 * commit again.
 * up_commit_reserve - up_commit(@n), then a reservation of @len as
 * up_reserve() makes it, but only where it needs neither a wait nor a new
 * page: the room left at the end of the last page, for the pipe's only
 * writer. One call per message for a writer that builds messages in place,
 * where up_commit() and up_reserve() are two. Returns the bytes reserved
 * (@len, in one span); 0 when the commit was made but the next reservation
 * is up_reserve()'s to make (the page is full, @len is 0 or over what a
 * page has left, the pipe has other writers, or there is an error to
 * report); or the commit's error, as up_commit() returns it, with nothing
 * new reserved. -EINVAL and -EBADF come before the commit. The reservation
 * holds the writers' lock as up_reserve()'s does.
 * Exclusive on end; never interleaved with other writers inside one page.
 */
UP_API ssize_t up_reserve(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt);
UP_API int up_commit(struct up_end *w, size_t n);
UP_API ssize_t up_commit_reserve(struct up_end *w, size_t n, size_t len, struct iovec *iov,
				 int *iovcnt);

/*
 * Zero copy, reader side.
 * up_peek - hand out up to *iovcnt spans of readable bytes in place, blocking
 * like up_read while empty. Returns the bytes visible (> 0), 0 at end of
 * stream, or -EAGAIN, -EBADF, -EINVAL, -EPROTO. The spans stay valid until
 * the next up_consume/up_read/up_close on this end. A peek may show fewer
 * bytes than are readable: after an up_consume() it shows at least what that
 * consume took, and twice what the peek before it showed when the consume
 * took all of that, where so much is readable. After up_consume(0),
 * and on a peek again before consuming, it shows every readable span, up to
 * *iovcnt.
 * up_consume - release the first @n bytes of the stream (n may exceed what the
 * last peek showed only up to what is readable). Returns 0, -EINVAL
 * (n > readable), -EPROTO.
 * up_consume_peek - up_consume(@n), then up_peek() in the same call: one
 * call per message for a reader that uses messages in place, where
 * up_consume() and up_peek() are two. Returns what the peek returns (the
 * bytes visible, 0 at end of stream, -EAGAIN, -ETIMEDOUT, -ECANCELED,
 * -EPROTO), after the consume was made; or -EINVAL (a NULL pointer, a bad
 * *iovcnt, or @n past what is readable) or -EBADF, with nothing consumed.
 * Exclusive on end. With several reader ends, peek holds the readers' lock
 * until the matching consume: other readers wait meanwhile.
 */
UP_API ssize_t up_peek(struct up_end *r, struct iovec *iov, int *iovcnt);
UP_API int up_consume(struct up_end *r, size_t n);
UP_API ssize_t up_consume_peek(struct up_end *r, size_t n, struct iovec *iov, int *iovcnt);

struct up_stats {
	uint64_t bytes_written, bytes_read;
	uint64_t writes, reads;
	uint64_t waits;    /* times a caller went to sleep */
	uint64_t wakes;    /* wake-ups issued */
	uint64_t syscalls; /* system calls the library made on the data path */
	uint32_t readers, writers;
	int      numa_node;   /* where the segment actually lives */
	char     backend[16]; /* "io_uring", "io_uring-sqpoll" or "futex" */
};

/*
 * up_stats - sum the counters of this process's endpoints on @p (open and
 * already closed), with the current reader/writer counts of the pipe (all
 * processes). Returns 0 or -EINVAL. Any thread; counters are read without
 * stopping writers, so a running sum is approximate. Never blocks.
 */
UP_API int up_stats(const struct up_pipe *p, struct up_stats *st);

/* Beyond the contract. */

/*
 * Event-loop integration.
 *
 * up_pollfd - a file descriptor to hand to epoll, poll or libuv: it turns
 * readable (POLLIN) when @e, after up_poll_arm() returned 0, may be able to
 * make progress (data or end of stream for a reader; room, no reader left
 * or the writers' lock let go, for a writer; a peer process died). It is
 * owned by @e and closed by up_close(); never read it yourself. On the
 * futex(2) backend a helper thread of the process (futex_waitv(2), Linux
 * 5.16+) makes it readable. Returns the fd, or -EOPNOTSUPP where neither
 * io_uring nor futex_waitv is available, -ENOMEM, -EMFILE. Exclusive on
 * end; enters the kernel the first time.
 *
 * up_poll_arm - call after a UP_NONBLOCK call returned -EAGAIN and before
 * waiting for up_pollfd(). Returns 1 if progress is possible now (retry at
 * once, nothing was armed), 0 once armed (wait for the fd, then retry the
 * call, which disarms), -EOPNOTSUPP, -EPROTO, or on the futex backend
 * -ENOMEM or -EMFILE (no helper thread). Readiness may be spurious:
 * retrying can give -EAGAIN again; arm again then. A reader's fd turns
 * readable ahead of data that comes at a steady gap, on purpose, unless
 * it opened with UP_NO_EARLY (UP_EARLY_POLL says how). (On io_uring a wait
 * ended by a same-process writer's poke may stay in the kernel for the
 * next arm to take up without a system call; the fd can then turn
 * readable once more, and the next call that returns -EAGAIN resets it.)
 * A stream that never runs dry never arms, so it stays free of system
 * calls. Exclusive on end.
 * A writer's -EAGAIN can also mean that another writer holds the writers'
 * lock, over its open small reservation (up_reserve) say: arming then
 * waits for that writer to let go (or die), as a blocking writer would,
 * the last reader leaving included (the retry after it gives -EPIPE).
 * Known limit: where membarrier(2) is refused to this process, a writer
 * joining a lone writer that holds a reservation open finds arming return
 * 1 until that commit. Commit small reservations promptly.
 */
UP_API int up_pollfd(struct up_end *e);
UP_API int up_poll_arm(struct up_end *e);

/* up_end_pipe - the pipe an endpoint belongs to (borrowed: not a new
 * reference). Any thread. */
UP_API struct up_pipe *up_end_pipe(const struct up_end *e);

/* up_capacity - the pipe's capacity in bytes (whole pages): what it holds
 * at most, not the size of its page pool (see pool_min). Any thread. */
UP_API size_t up_capacity(const struct up_pipe *p);

/* up_page_size - bytes per ring page. Any thread. */
UP_API size_t up_page_size(const struct up_pipe *p);

/* up_strerror - a static description of a uringpipe return code. */
UP_API const char *up_strerror(int err);

/*
 * Process-private buffers on a NUMA node: for the bytes a writer copies
 * into a pipe, or a reader copies out, kept next to the pipe's own pages.
 *
 * up_buf_alloc - allocate @size bytes whose pages live on NUMA node @node.
 * @node -1 binds nothing: the pages follow the calling thread's memory
 * policy when first touched (the local node by default), as
 * up_config.numa_node -1 does; memory that an earlier -1 buffer used stays
 * where it was. Any other node binds every page of the buffer to that node
 * (MPOL_BIND) before it is first touched. A machine without NUMA has one
 * node, 0. The buffer starts at a page boundary (at least 4096-aligned),
 * is rounded up to whole pages that no other allocation shares, and is not
 * zeroed. With jemalloc each node has an arena of its own, created the
 * first time the node is asked for and kept until the process exits; else
 * (and should the arena be unavailable) the buffer is a private mapping.
 * Returns 0 and *out; -EINVAL (@size 0, @out NULL, or a node that
 * up_pipe_create() would refuse: below -1, above the highest node, not
 * online, or not allowed to this process), -ENOMEM.
 * Any thread. May enter the kernel (mmap, mbind); the first use of a node
 * takes a process-wide lock while its arena is created; never waits for
 * a peer.
 */
UP_API int up_buf_alloc(size_t size, int node, void **out);

/*
 * up_buf_free - give back a buffer from up_buf_alloc(). @size must be the
 * size it was allocated with. NULL is accepted. Any thread, not only the
 * one that allocated it; may enter the kernel (munmap, madvise).
 */
UP_API void up_buf_free(void *buf, size_t size);

/*
 * Since 0.2: pipes by name. Two unrelated processes meet at a name, as at a
 * FIFO: one listens with a pipe, the other connects and gets the pipe.
 *
 * A name is a filesystem path ("/run/app/events"; relative paths are
 * resolved against the working directory at the call) or "@name" for the
 * Linux abstract socket namespace. It fits a sockaddr_un: a path of at most
 * 107 bytes, an abstract name of 1 to 107 bytes after the '@'.
 * The listener is an AF_UNIX stream socket that hands the pipe's memfd to
 * each client it accepts (SCM_RIGHTS, one reply with a small header), then
 * closes the connection; it reads nothing from clients and never waits for
 * one: a client it cannot answer at once is dropped.
 * Access is that of a FIFO of the given mode, checked on every client from
 * its credentials (SO_PEERCRED, SO_PEERGROUPS) and, for a path, by the
 * kernel from the socket file's mode too: root always passes; otherwise the
 * owner class (the client's uid is the listener's euid), the group class
 * (the listener's egid is the client's gid or one of its groups) or the
 * other class decides, and connecting needs that class's write bit.
 */
struct up_listener; /* a name being served; see up_listener_close() */

/* up_listen2() flags */
/* No thread: the caller serves connects itself (up_listener_fd(),
 * up_listener_serve()). */
#define UP_LISTEN_NOTHREAD 0x1u
#define UP_LISTEN_ALL      (UP_LISTEN_NOTHREAD)

/*
 * up_listen - serve pipe @p at @name until up_listener_close(), from a
 * thread of the library's (made with every signal blocked) that answers
 * connects concurrently with the caller's I/O. The memfd is duplicated:
 * @p may be released meanwhile. @mode: the permission bits (0 = 0600);
 * a path's socket file gets exactly those, never more, not even briefly
 * (bound under a temporary name in the same directory, chmod'ed, then
 * renamed onto @name). A socket left at the path by a listener that died
 * (nobody accepts on it) is replaced; a live listener or any other file is
 * left alone.
 * Returns 0 and *out; -EINVAL (NULL @p/@out, NULL or empty name, "@" alone,
 * a path ending in '/', mode bits outside 0777); -ENAMETOOLONG (the name
 * does not fit); -EADDRINUSE (a listener is live at @name); -EEXIST (a file
 * at the path that is not a socket); -ENOENT/-ENOTDIR/-EACCES (the path's
 * directory); -EMFILE, -ENOMEM, -EAGAIN (no thread), or another -errno of
 * socket/bind/rename.
 * Any thread; enters the kernel, never waits for a peer. Needs 3 fds (4
 * for a path), and a thread.
 */
UP_API int up_listen(struct up_pipe *p, const char *name, unsigned int mode,
		     struct up_listener **out);

/*
 * up_listen2 - up_listen() with @flags: UP_LISTEN_NOTHREAD makes no thread
 * (and no eventfd); connects then wait until the caller serves them with
 * up_listener_serve(), typically when up_listener_fd() polls readable.
 * Unknown flag bits: -EINVAL. Otherwise as up_listen().
 */
UP_API int up_listen2(struct up_pipe *p, const char *name, unsigned int mode,
		      unsigned int flags, struct up_listener **out);

/*
 * up_listener_fd - the listening socket, for epoll/poll: POLLIN means
 * connects are pending (serve them with up_listener_serve()). Owned by @l:
 * do not read, accept on or close it. Returns the fd or -EINVAL.
 * Any thread; never blocks.
 */
UP_API int up_listener_fd(const struct up_listener *l);

/*
 * up_listener_serve - answer every connect pending on @l, without blocking:
 * each client is given the pipe, or refused (it then gets -EACCES), or
 * dropped if the reply cannot be sent at once.
 * Returns how many were answered (0 when none was pending), or, when none
 * was, the -errno that stopped accept(2) (-EMFILE, -ENFILE, -ENOBUFS,
 * -ENOMEM: the connects stay queued, try again later); -EINVAL for NULL.
 * Any thread, also alongside the listener's own thread; enters the kernel,
 * never blocks.
 */
UP_API int up_listener_serve(struct up_listener *l);

/*
 * up_listener_close - stop serving: stop and join the thread, remove the
 * path if it is still the socket this listener bound (an abstract name
 * vanishes with the socket), close every fd, free @l. Clients already
 * queued and not yet answered see their connect fail (-ECONNRESET).
 * Pipes handed out are not affected. NULL is accepted. In a child forked
 * from the listening process, only the child's copies are closed: the
 * parent's thread and name are left alone.
 * Exclusive on @l (no other call on it may run at the same time or after);
 * enters the kernel, waits for the thread to finish its round (it never
 * blocks on a client).
 */
UP_API void up_listener_close(struct up_listener *l);

/*
 * up_connect - connect to the listener at @name and map its pipe.
 * Waits up to @timeout_ms for the name to appear (-1: forever; 0: a single
 * try): while nothing listens there (no such path, an abstract name not
 * bound, a stale socket, a full backlog), connect is retried every 0.1 ms,
 * doubling to 5 ms, until the deadline (CLOCK_MONOTONIC) has passed; one
 * last try is made at the deadline. Once connected, the reply is awaited
 * for at most 5 s, and never past the deadline when @timeout_ms > 0.
 * Extra received fds are closed; so is every fd on any error.
 * Returns 0 and *out (as up_pipe_attach() gives it; open ends on it);
 * -ETIMEDOUT (nothing listened within @timeout_ms > 0, or no reply in
 * time); -ENOENT (@timeout_ms 0 and nobody listens); -EAGAIN (@timeout_ms
 * 0 and the backlog is full); -EACCES (refused: the mode does not let this
 * process in); -ECONNRESET (the listener closed or dropped the connection
 * without a reply); -EPROTO (a reply that is not uringpipe's: wrong magic
 * or version, short, no fd or more than one, an fd that is not a sealed
 * memfd, or a segment up_pipe_attach() refuses); -EINVAL (NULL @out, NULL
 * or empty name, @timeout_ms < -1); -ENAMETOOLONG; -EMFILE, -ENOMEM, or
 * another -errno of socket/connect (-ENOTDIR, -ELOOP...).
 * Any thread; blocks up to the timeout; enters the kernel.
 */
UP_API int up_connect(const char *name, int timeout_ms, struct up_pipe **out);

/*
 * Since 0.2: timeouts and wakeup, as SO_RCVTIMEO/SO_SNDTIMEO and a
 * shutdown signal for a worker.
 *
 * up_set_timeout - blocking calls on @e (read, write, reserve, commit,
 * peek, consume) give up with -ETIMEDOUT once they have waited
 * @timeout_ms (-1: no timeout, the default; 0: at the first wait). The
 * time runs from the call's first sleep; a call that moved data first
 * returns the bytes it moved, as with pipe(7). A commit that times out
 * keeps its reservation: commit again. Returns 0, or -EINVAL (NULL @e,
 * @timeout_ms < -1). Exclusive on end; never blocks, no system call.
 *
 * up_wakeup - make a call blocked on @e return -ECANCELED at once, or, if
 * none is blocked, the next call on @e that would block (one wakeup, one
 * -ECANCELED). Non-blocking calls never consume it. A call waiting for
 * another end's lock (a peer holding a reservation open) returns within
 * 50 ms. Returns 0, or -EBADF (@e is not an open end of this process),
 * -EINVAL (NULL). Any thread; enters the kernel once when @e sleeps.
 */
UP_API int up_set_timeout(struct up_end *e, int timeout_ms);
UP_API int up_wakeup(struct up_end *e);

/*
 * Since 0.3: a stream carried over a connected socket (TCP, or any
 * SOCK_STREAM socket), so that a pipe's writer on one machine feeds a pipe's
 * readers on another. up_bridge_send() takes the stream out of a reader end
 * and sends it, up_bridge_recv() receives it into a writer end; the bytes
 * go page -> socket and socket -> page (up_peek/up_reserve), never through
 * a buffer of the library's. The stream is framed (a header with a magic
 * and a version, frames with a length, a trailer with the byte count and
 * its CRC32C), and the receiver confirms the trailer, so that both sides
 * tell a complete stream from a truncated one. See up_bridge_send(3).
 */

/* up_bridge_opts.flags */
#define UP_BRIDGE_NO_URING 0x1u /* send/recv even where io_uring is allowed */
#define UP_BRIDGE_NO_ZC    0x2u /* never IORING_OP_SENDMSG_ZC */
/* up_bridge_recv() leaves the confirmation of a good stream to the caller,
 * who sends it with up_bridge_answer() once the bytes are where they go
 * (written out, say): the sender's 0 then means that. */
#define UP_BRIDGE_ANSWER_LATER 0x4u
#define UP_BRIDGE_ALL      (UP_BRIDGE_NO_URING | UP_BRIDGE_NO_ZC | UP_BRIDGE_ANSWER_LATER)

struct up_bridge_opts {
	uint32_t size;      /* sizeof(struct up_bridge_opts): lets the struct grow */
	uint32_t flags;     /* UP_BRIDGE_* bits; unknown bits are -EINVAL */
	/* A wait on the socket that sees no progress for this long fails
	 * with -ETIMEDOUT (a stopped or vanished peer); -1 = never (default). */
	int      timeout_ms;
	/* Sends of at least this many bytes go zero-copy (SENDMSG_ZC) where
	 * io_uring has it; 0 = the default cut-over; SIZE_MAX = never. */
	size_t   zc_min;
	/* The largest frame sent, in bytes: 0 = default (1 MiB); at most
	 * 16 MiB, the largest a receiver takes. */
	size_t   frame_max;
};

struct up_bridge_stats {
	uint64_t bytes;     /* payload bytes sent, or received and committed */
	uint64_t frames;    /* data frames */
	uint64_t syscalls;  /* system calls on the socket (io_uring_enter included) */
	uint64_t zc_sends;  /* sends that went zero-copy */
	uint64_t zc_copied; /* of those, the ones the kernel copied after all */
	uint32_t crc32c;    /* CRC32C of the payload so far */
	char     path[16];  /* "io_uring" or "send/recv" */
};

/* up_bridge_opts_init - fill @o with the defaults. Any thread. */
UP_API void up_bridge_opts_init(struct up_bridge_opts *o);

/*
 * up_bridge_send - send the stream read from @rd (a reader end) over the
 * connected socket @sockfd until the pipe's end of stream, then the
 * trailer, and wait for the receiver to confirm it. @o and @st may be NULL.
 * Returns 0 once the receiver confirmed every byte; -ECONNABORTED (the
 * receiver closed without confirming), -ECONNRESET, -EPIPE (the socket's
 * peer went; SIGPIPE is never raised), -ETIMEDOUT (@o->timeout_ms),
 * -EBADMSG (the receiver counted other bytes than were sent), -EPROTO (the
 * receiver refused the stream or answered something that is not
 * uringpipe's), -EREMOTEIO (the receiver took the stream but could not pass
 * it on: no reader on its pipe, or its up_bridge_answer() said so),
 * -EINVAL, -EBADF, another -errno of the socket, or an error of up_peek().
 * *st says how far it got in every case.
 * Exclusive on @rd; blocks; enters the kernel for every frame.
 */
UP_API int up_bridge_send(struct up_end *rd, int sockfd, const struct up_bridge_opts *o,
			  struct up_bridge_stats *st);

/*
 * up_bridge_recv - receive a stream sent by up_bridge_send() over @sockfd
 * into @wr (a writer end), confirm its trailer to the sender (unless
 * UP_BRIDGE_ANSWER_LATER), return. The writer end stays open: closing it is
 * the caller's end of stream.
 * Returns 0 when every byte arrived and matched the trailer (count and
 * CRC32C); -ECONNABORTED (the stream ended before its trailer: the sender
 * died or closed early; what arrived is in the pipe, an exact prefix),
 * -EBADMSG (the trailer's count or CRC32C does not match what arrived),
 * -EPROTO (not a uringpipe stream: wrong magic, a bad frame),
 * -EPROTONOSUPPORT (another version of the framing), -ECONNRESET,
 * -ETIMEDOUT, -EPIPE (no reader left on @wr's pipe), -EINVAL, -EBADF, or an
 * error of up_reserve()/up_commit(). A refusal is told to the sender first.
 * Exclusive on @wr; blocks; enters the kernel for every receive.
 */
UP_API int up_bridge_recv(struct up_end *wr, int sockfd, const struct up_bridge_opts *o,
			  struct up_bridge_stats *st);

/*
 * up_bridge_answer - after up_bridge_recv() with UP_BRIDGE_ANSWER_LATER
 * returned 0: confirm the stream to the sender (@err 0), whose
 * up_bridge_send() then returns 0, or tell it the stream was not passed on
 * (@err a negative errno; the sender gets -EREMOTEIO). @st is the receive's
 * (its byte count goes into the answer); @o's timeout_ms bounds the send.
 * Returns 0, -EINVAL, or the socket's -errno (the sender went away).
 * Blocks at most @o->timeout_ms; enters the kernel.
 */
UP_API int up_bridge_answer(int sockfd, int err, const struct up_bridge_opts *o,
			    const struct up_bridge_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* URINGPIPE_H */
