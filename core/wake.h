/* SPDX-License-Identifier: MIT */
/*
 * wake.h - the sleep/wake interface between core/ and its backends.
 *
 * core/ knows nothing of io_uring. When a side has nothing to do it sleeps on
 * a 32-bit word in the shared segment through this ops table; uring/ fills in
 * an io_uring implementation (IORING_OP_FUTEX_WAIT/WAKE on the shared, not
 * private, futex) and core/wake_futex.c is the plain futex(2) fallback. Both
 * operate on the same words with the same protocol, so a process on one
 * backend and its peer on the other interoperate (a FUTEX_WAIT armed through
 * io_uring is woken by a futex(2) wake and vice versa).
 *
 * THE HANDSHAKE. docs/DESIGN.md, section 5, draws it as two columns, with
 * the argument for why no wakeup is lost; wait.c is the sleeper's column,
 * wake.c the waker's. Each direction has a wait line in the segment: seq
 * (the futex word, bumped by a waker that finds a sleeper), nwait (sleepers
 * announced), pending (a wake in flight: later wakers skip the system
 * call), npoll (poll-mode ends armed). What must stay true: the sleeper's
 * nwait increment and re-check, and the waker's progress store and nwait
 * load, are seq_cst ([wait] in the code), so one of the two sees the other;
 * a release progress store reopens the store-buffer window, and
 * tests/model/wake.pml finds the lost wake that follows.
 *
 * Data wakes one sleeper, as the kernel's pipe_write wakes one exclusive
 * reader; state changes (end of stream, no reader left, broken, free pages)
 * wake every one, and so does data while a poll-mode end is armed. A reader
 * that leaves data behind while others sleep wakes the next one
 * (up__chain_wake()).
 *
 * Waits are bounded by a timeout (up__wake_ops.wait's @timeout_ns) so that a
 * sleeper also notices a dead peer and a broken segment; a timeout is not an
 * error, the caller just re-checks.
 */
#ifndef UP_CORE_WAKE_H
#define UP_CORE_WAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define UP_WAKE_ALL 0x7fffffffu

/*
 * Futex bitsets (FUTEX_WAIT_BITSET / FUTEX_WAKE_BITSET, and the mask of
 * io_uring's futex opcodes). Every wait is FUTEX_BITSET_MATCH_ANY except a
 * poll ring's wait on a line, which is UP_FUTEX_BIT_POLL: such a wait may
 * stay in the kernel, parked, after its end has let the arm go
 * (uring/poll_ring.c). A wake of a line that no unpoked poll-mode end
 * needs is UP_FUTEX_BIT_SLEEP, so a wake for one is never spent on a parked
 * wait while a blocked sleeper stays asleep.
 */
#define UP_FUTEX_BIT_SLEEP 0x1u
#define UP_FUTEX_BIT_POLL  0x2u
#define UP_FUTEX_BITS_ANY  0xffffffffu

struct up__waker;
struct up_shm_wait;

struct up__wake_ops {
	const char *name; /* "io_uring", "io_uring-sqpoll", "futex" */
	/* wait() returns when a peer fd turns readable; false: it cannot
	 * poll them, and the caller gets the death some other way. */
	bool polls_fds;
	/* A timed wait() ends up to the calling thread's timer slack after
	 * its time (futex(2) applies it; io_uring's timeouts do not). */
	bool slack;
	/*
	 * Sleep while *word == expect, at most @timeout_ns (0 = no limit).
	 * @peer_pidfds/@npeer: pidfds of peer processes to watch while asleep
	 * (the call returns early when one becomes readable, i.e. that process
	 * died); backends that cannot watch them rely on the timeout.
	 * Returns 0 (woken, or the value changed), 1 (a peer pidfd became
	 * readable: the caller should look for dead peers), -ETIMEDOUT,
	 * -EINTR, or another -errno. Adds the system calls it made to
	 * *syscalls.
	 * core/ changes *word with a seq_cst (or release) store or RMW before
	 * it calls wake(); a backend that loads *word itself to return early
	 * loads it with acquire (tag [u-wait-word] in uring/wake_uring.c), so
	 * what was published before the change is visible on return.
	 */
	int (*wait)(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		    uint64_t timeout_ns, const int *peer_pidfds, int npeer,
		    uint64_t *syscalls);
	/* Wake up to @nr sleepers on @word (UP_WAKE_ALL: every one). @line
	 * is the wait line whose seq @word is, or NULL for any other word:
	 * with it the wake chooses its futex bits (up__wake_bits()) and may
	 * leave the futex alone (up__wake_covered()). Returns 0 or -errno;
	 * counts syscalls. */
	int (*wake)(struct up__waker *w, _Atomic uint32_t *word, uint32_t nr,
		    const struct up_shm_wait *line, uint64_t *syscalls);
	/* Free the per-endpoint state (a thread's ring stays the thread's). */
	void (*destroy)(struct up__waker *w);

	/*
	 * Poll mode (up_pollfd/up_poll_arm), NULL where unsupported: an fd
	 * that turns readable when an armed wait on @word would have ended.
	 * pollfd creates it (idempotent, returns the fd or -errno); arm
	 * queues the wait (and pidfd polls) without sleeping, the caller has
	 * announced itself as for wait(); disarm cancels what is left and
	 * resets the fd, returning 1 when a peer's pidfd fired, 0, or -errno;
	 * or 2: the wait stays in the kernel, parked, for the next arm to take
	 * up, and the fd may still turn readable (spuriously) until a later
	 * disarm returns something else. Disarm is called again on a parked
	 * end, and lets the parked wait go once anything of it completed.
	 */
	int (*pollfd)(struct up__waker *w, uint64_t *syscalls);
	int (*arm)(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		   const int *peer_pidfds, int npeer, uint64_t *syscalls);
	int (*disarm)(struct up__waker *w, uint64_t *syscalls);
	/* Optional: make the fd readable at once with nothing armed (undone
	 * by disarm). A backend that has it also ends an arm's wait after
	 * waker.early_ns when that is set. */
	int (*arm_now)(struct up__waker *w, uint64_t *syscalls);
};

/*
 * A waker is per endpoint (endpoints are used by one thread at a time, so a
 * waker never needs a lock). The backend allocates a larger struct that
 * begins with this one. What it sleeps and wakes with may be the calling
 * thread's, not the endpoint's: the io_uring backend waits and wakes on a
 * ring of the calling thread (uring/tring.c), so a waker holds no fd
 * until pollfd() makes the endpoint's one.
 */
struct up__waker {
	const struct up__wake_ops *ops;
	/* Set before an arm (poll.c): some peer's death would reach no pidfd
	 * of the arm, so the armed fd must also turn readable every
	 * UP_WAIT_SLICE_NS or so, for the next call to look (up__peers_blind()). */
	bool blind;
	/* Set before an arm (poll.c): the armed wait also ends this many ns
	 * from now, a planned early wake (early.c); 0: none. Only where the
	 * backend has arm_now. */
	uint64_t early_ns;
	/* Set before an arm (poll.c): the arm waits on a wait line's seq, not
	 * on a lock or busy word, so its wait may stay parked after a disarm
	 * (the backend's disarm then returns 2, until it is taken up again
	 * or let go). */
	bool on_line;
	/* Set before an arm (poll.c): a reader's wait on a line, which the
	 * backend may park. A writer's is not parked: an idle writer makes no
	 * call that would reap what a parked wait posts later. */
	bool may_park;
};

/* The plain futex(2) backend (core/wake_futex.c). Returns NULL on ENOMEM. */
struct up__waker *up__waker_futex_new(void);

/*
 * The shared-futex calls behind that backend, for any backend that has to
 * fall back to them (uring/ does when its ring fails). Same results as
 * up__wake_ops.wait/wake: 0 (woken, or *word != expect), -ETIMEDOUT, -EINTR
 * or another -errno; each counts its one system call in *syscalls.
 */
int up__futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t timeout_ns,
		   uint64_t *syscalls);
int up__futex_wake(_Atomic uint32_t *word, uint32_t nr, uint64_t *syscalls);
/* The same with a bitset: wakes only waits whose mask shares a bit. */
int up__futex_wake_bits(_Atomic uint32_t *word, uint32_t nr, uint32_t bits,
			uint64_t *syscalls);

/*
 * A wake of @line's seq (wake.c). @found: the line's poll-mode ends this
 * wake reached some other way (a poke into each, uring/poll_ring.c), counted
 * where none can leave the line meanwhile. up__wake_bits() is the bitset
 * its futex wake needs: UP_FUTEX_BIT_SLEEP when every announced poll-mode
 * end is among @found, else every bit. up__wake_covered() is true when every
 * announced sleeper is among @found, so that no futex wake is needed.
 */
uint32_t up__wake_bits(const struct up_shm_wait *line, uint32_t found);
bool up__wake_covered(const struct up_shm_wait *line, uint32_t found);

/* A line's wake of every bit can end a poll-mode end's wait, whose event
 * loop may not read for a while: it is then for every sleeper, whatever
 * npoll said when the caller chose @nr (tests/model/wake.pml, PMUTANT 5). */
static inline uint32_t up__wake_nr(uint32_t nr, uint32_t bits)
{
	return bits == UP_FUTEX_BITS_ANY ? UP_WAKE_ALL : nr;
}
/* The calling thread's timer slack in ns (prctl(2), asked once a thread;
 * the kernel's default where refused). */
uint64_t up__timer_slack_ns(void);

/* CLOCK_MONOTONIC in nanoseconds; served by the vDSO, no system call. */
static inline uint64_t up__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC_COARSE in nanoseconds (a tick's resolution, a few ms):
 * cheaper than up__now_ns(), for intervals of tens of milliseconds. */
static inline uint64_t up__coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Backend selection (core/wake_select.c): tries io_uring (with SQPOLL when
 * @sqpoll) when the build has it and the environment does not force the
 * fallback (UP_FORCE_FUTEX=1), else futex. Never fails except on ENOMEM.
 */
struct up__waker *up__waker_new(int sqpoll);

/* Implemented in uring/ when the build has liburing; NULL when io_uring or
 * its futex opcodes are refused here (the caller then falls back). */
struct up__waker *up__waker_uring_new(int sqpoll);

/*
 * A waker that becomes a real one (up__waker_new()) at its first use and
 * stores that in *@slot: for a forked child's ends, which must not use the
 * parent's rings and may never sleep (a child that execs at once). Its
 * name is NULL until then. NULL on ENOMEM.
 */
struct up__waker *up__waker_lazy(struct up__waker **slot, int sqpoll);

/* Name of the backend a new endpoint of this process would get. */
const char *up__waker_probe_name(int sqpoll);

#endif /* UP_CORE_WAKE_H */
