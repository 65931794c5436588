/* SPDX-License-Identifier: MIT */
/*
 * test_stored_claims.c - stores by a departed peer that agree with each
 * other, and what the live ends then owe: the wait they cause ends at the
 * named end's next call (man/uringpipe.7, "Security model"), or at once
 * where the looking end can check what was stored.
 *
 * Each case forks a hostile process that attaches the memfd afresh, makes
 * its stores and exits; then the honest ends make their calls, each bounded
 * by BOUND_MS (a blocked call is run in a thread and joined with that
 * deadline; one that does not come back fails the case):
 *
 *   bias_named_idle  a bias of the writers' lock, the busy word and the
 *                    held word of an idle writer W2 that never took it:
 *                    W, taking it back, holds the lock word and waits for
 *                    W2, whose next write waits for the word. W2's write
 *                    and W's must both return (core/bias.c, bias_revoke()).
 *   word_named_owner the lock word naming the writer the lock is really
 *                    biased to, and the claim in its held word: W waits;
 *                    W2's next write, through its bias, must end that
 *                    (core/bias.h, up__held_check()).
 *   peek_empty_slots two empty slots published behind a drained ring:
 *                    a peek must not go round between a walk that shows
 *                    nothing and a ready check that says data is there
 *                    (core/peek.c): -EPROTO, blocking or not.
 *   pool_own_tag     the pool emptied and every page tagged with W's own
 *                    tag: W, which knows its cache, must find the pages
 *                    lost (core/reclaim.c, pool_lost()): -EPROTO.
 *   handoff_cleared  a reader R2 asleep behind R1's peek, queued for the
 *                    hand-off, and the queue cleared by a peer that goes on
 *                    storing (this case's peer stays until R2 returns):
 *                    R2's timeout must still end its read while R1 holds
 *                    the lock, though it cannot tell the stores from R1's
 *                    claim of it (core/take.c, claimed_wait()).
 *   word_names_self  the readers' lock word naming R2 while R2 is in no
 *                    call, as a claim of R2 whose word came after R2's
 *                    timeout leaves it: R2's next read must take the word
 *                    as its own, not report a protocol error; then R1's
 *                    read must find the lock free again.
 *   claim_stored     the readers' lock word holding a take-back's claim
 *                    (UP_LOCK_CLAIM) of R2, which is in no call, and then
 *                    one of R1 itself: a claim's maker resolves it within
 *                    its take, so one found outside a take is stale, and
 *                    R1's read must take the word back or confirm it, not
 *                    wait for a resolve that never comes; R2's read after.
 *   dead_claimer     a reader R3 of another process dies (SIGKILL) inside a
 *                    take-back of the readers' lock: its claim in the
 *                    word, its held word saying so, and in under[] the
 *                    value the claim replaced, R1's id. With R1 holding
 *                    the lock (a peek), R2's read must not take the word
 *                    over as a dead holder's: it gives R1 its word back
 *                    and waits (-ETIMEDOUT), and after R1's consume reads
 *                    the rest. The same with two dead claims, one over the
 *                    other's. With R1 in no call, R2's read must take the
 *                    word and read. With the dead claim over a claim of R1
 *                    and R1 marked inside a take-back, R2 must leave the
 *                    word to R1 until R1's next call, whose read must then
 *                    return, and R2's after it (core/takeback.c, up__dead_claim(),
 *                    dead_chain()).
 *   attach_unsealed  a memfd sent unsealed, then shrunk and sealed between
 *                    the receiver's checks: up_pipe_attach() must not map
 *                    past the file's end (core/shm.c). fcntl() is wrapped
 *                    (-Wl,--wrap=fcntl) so that the shrink lands in that
 *                    window every time.
 *
 * Run with no argument for every case, or a case's name.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "lock.h"
#include "ring.h"
#include "up_int.h"

#define BOUND_MS 3000u

/* ---- a call in a thread, joined with a deadline */

struct call {
	struct up_end *e;
	bool wr, peek;
	ssize_t ret;
	atomic_int done;
	pthread_t t;
};

static char buf[256];

static void *call_main(void *arg)
{
	struct call *c = arg;

	if (c->peek) {
		struct iovec iov[4];
		int cnt = 4;

		c->ret = up_peek(c->e, iov, &cnt);
	} else {
		c->ret = c->wr ? up_write(c->e, buf, 100) : up_read(c->e, buf, sizeof(buf));
	}
	atomic_store_explicit(&c->done, 1, memory_order_release);
	return NULL;
}

static void call_start(struct call *c, struct up_end *e, bool wr, bool peek)
{
	c->e = e;
	c->wr = wr;
	c->peek = peek;
	c->ret = 0;
	atomic_store(&c->done, 0);
	CHECK_EQ(pthread_create(&c->t, NULL, call_main, c), 0);
}

/* The call's result; fails the case if it is still running after BOUND_MS. */
static ssize_t call_end(struct call *c, const char *what)
{
	if (!harness_wait_flag(&c->done, BOUND_MS / 1000.0)) {
		fprintf(stderr, "FAIL: %s did not return within %u ms\n", what, BOUND_MS);
		_exit(1);
	}
	CHECK_EQ(pthread_join(c->t, NULL), 0);
	printf("#   %s -> %zd\n", what, c->ret);
	return c->ret;
}

static void hostile_begin(struct up_end **ends, int n, struct up_pipe *p, struct up_pipe **q)
{
	harness_close_inherited(ends, n);
	*q = harness_attach(p);
}

static void reap(pid_t pid)
{
	int st;

	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static struct up_pipe *new_pipe(void)
{
	struct up_config cfg;
	struct up_pipe *p;

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	return p;
}

/* ---- the cases */

static void bias_named_idle(void)
{
	struct up_pipe *p = new_pipe(), *q;
	struct up_end *r, *w, *w2;
	struct call cw, cw2;
	uint32_t idx2, id2;
	pid_t pid;

	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_OK(up_open(p, UP_WR, &w2)); /* two writers: no bias is set */
	CHECK(!w->biased && !w2->biased);
	/* The parent's ids: a forked child's copies of the ends are its own. */
	idx2 = w2->idx, id2 = w2->lock_id;
	pid = harness_fork(30);
	if (pid == 0) {
		hostile_begin((struct up_end *[]){ r, w, w2 }, 3, p, &q);
		atomic_store(&q->ends[idx2].held, UP_HELD_BIAS);
		atomic_store(&q->ends[idx2].busy, UP_BUSY_IN);
		atomic_store(&q->ln->wlock.bias, id2);
		_exit(0);
	}
	reap(pid);
	/* W first: it holds the word while it waits for W2 to leave. */
	call_start(&cw, w, true, false);
	CHECK((harness_wait_word(&p->ln->wlock.word, BOUND_MS / 1000.0) & UP_END_ROLE_MASK) ==
	      (w->lock_id & UP_END_ROLE_MASK));
	call_start(&cw2, w2, true, false);
	CHECK_EQ(call_end(&cw2, "W2's write (the named end)"), 100);
	CHECK_EQ(call_end(&cw, "W's write"), 100);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 200);
	up_close(w2);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void word_named_owner(void)
{
	struct up_pipe *p = new_pipe(), *q;
	struct up_end *r, *w, *w2;
	struct call cw;
	uint32_t idx2, id2;
	pid_t pid;

	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_write(w2, "bias", 4), 4); /* alone: the lock is biased to W2 */
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 4);
	if (!w2->biased) {
		printf("# skip word_named_owner: no bias (membarrier refused?)\n");
		goto out;
	}
	CHECK_OK(up_open(p, UP_WR, &w));
	idx2 = w2->idx, id2 = w2->lock_id;
	pid = harness_fork(30);
	if (pid == 0) {
		hostile_begin((struct up_end *[]){ r, w, w2 }, 3, p, &q);
		atomic_store(&q->ln->wlock.word, id2);
		atomic_fetch_or(&q->ends[idx2].held, UP_HELD_WLOCK);
		_exit(0);
	}
	reap(pid);
	call_start(&cw, w, true, false);
	/* W2, still biased, writes through its bias: its next call. */
	CHECK_EQ(up_write(w2, buf, 100), 100);
	CHECK_EQ(call_end(&cw, "W's write"), 100);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 200);
	up_close(w);
out:
	up_close(w2);
	up_close(r);
	up_pipe_release(p);
}

static void handoff_cleared(void)
{
	struct up_pipe *p = new_pipe(), *q;
	struct up_end *r1, *r2, *w;
	struct iovec iov[4];
	struct call cr;
	uint64_t t0;
	int cnt = 4;
	pid_t pid;

	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_OK(up_open(p, UP_RD, &r1));
	CHECK_OK(up_open(p, UP_RD, &r2)); /* two readers: no bias is set */
	CHECK_OK(up_set_timeout(r2, 200));
	CHECK_EQ(up_write(w, buf, 100), 100);
	CHECK_EQ(up_peek(r1, iov, &cnt), 100); /* R1 holds the readers' lock */
	call_start(&cr, r2, false, false);
	/* R2 queued for the hand-off: it is about to sleep on the word. */
	CHECK_EQ(harness_wait_word(&p->ln->rlock.handoff, BOUND_MS / 1000.0), r2->lock_id);
	t0 = harness_now_ns();
	pid = harness_fork(30);
	if (pid == 0) {
		/* Cleared over and over, so that R2 finds itself claimed at
		 * its deadline, whenever its last sleep queued it again. */
		hostile_begin((struct up_end *[]){ r1, r2, w }, 3, p, &q);
		for (;;) {
			atomic_store(&q->ln->rlock.handoff, 0);
			sched_yield();
		}
	}
	CHECK_EQ(call_end(&cr, "R2's read, R1 still holding"), -ETIMEDOUT);
	printf("#   returned %.1f ms after the clearing began\n",
	       (double)(harness_now_ns() - t0) / 1e6);
	CHECK_EQ(kill(pid, SIGKILL), 0);
	CHECK_EQ(waitpid(pid, NULL, 0), pid);
	CHECK_OK(up_consume(r1, 40));
	CHECK_EQ(up_read(r2, buf, sizeof(buf)), 60);
	CHECK(!up__is_broken(p));
	up_close(w);
	up_close(r2);
	up_close(r1);
	up_pipe_release(p);
}

static void word_names_self(void)
{
	struct up_pipe *p = new_pipe(), *q;
	struct up_end *r1, *r2, *w;
	uint32_t id2;
	pid_t pid;

	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_OK(up_open(p, UP_RD, &r1));
	CHECK_OK(up_open(p, UP_RD, &r2));
	CHECK_EQ(up_write(w, buf, 100), 100);
	id2 = r2->lock_id;
	pid = harness_fork(30);
	if (pid == 0) {
		hostile_begin((struct up_end *[]){ r1, r2, w }, 3, p, &q);
		/* What a hand-off to R2 stores (core/lock.h, up__lock_drop()). */
		atomic_store(&q->ln->rlock.word, id2 | UP_LOCK_WAITERS);
		_exit(0);
	}
	reap(pid);
	CHECK_EQ(up_read(r2, buf, 60), 60);
	CHECK_EQ(atomic_load(&p->ln->rlock.word) & ~UP_LOCK_WAITERS, 0);
	CHECK_EQ(up_read(r1, buf, sizeof(buf)), 40);
	CHECK(!up__is_broken(p));
	up_close(w);
	up_close(r2);
	up_close(r1);
	up_pipe_release(p);
}

static void claim_stored(void)
{
	for (int self = 0; self < 2; self++) {
		struct up_pipe *p = new_pipe(), *q;
		struct up_end *r1, *r2, *w;
		struct call c;
		uint32_t id;
		pid_t pid;

		CHECK_OK(up_open(p, UP_WR, &w));
		CHECK_OK(up_open(p, UP_RD, &r1));
		CHECK_OK(up_open(p, UP_RD, &r2));
		CHECK_EQ(up_write(w, buf, 100), 100);
		id = (self ? r1 : r2)->lock_id;
		pid = harness_fork(30);
		if (pid == 0) {
			hostile_begin((struct up_end *[]){ r1, r2, w }, 3, p, &q);
			/* What a take-back's claim stores (core/takeback.c). */
			atomic_store(&q->ln->rlock.word, id | UP_LOCK_CLAIM | UP_LOCK_WAITERS);
			_exit(0);
		}
		reap(pid);
		call_start(&c, r1, false, false);
		CHECK_EQ(call_end(&c, self ? "R1's read, its own claim stored"
					   : "R1's read, R2's claim stored"),
			 100);
		CHECK_EQ(up__lock_owner(atomic_load(&p->ln->rlock.word)), 0);
		CHECK_EQ(up_write(w, buf, 50), 50);
		call_start(&c, r2, false, false);
		CHECK_EQ(call_end(&c, "R2's read after it"), 50);
		CHECK(!up__is_broken(p));
		up_close(w);
		up_close(r2);
		up_close(r1);
		up_pipe_release(p);
	}
}

enum dead_case { DC_HOLD, DC_CHAIN, DC_IDLE, DC_COVERED };

static void dead_claimer_case(enum dead_case dc)
{
	static const char *const names[] = { "over R1's hold", "over a dead claim over R1's hold",
					     "over R1 idle", "over R1's claim" };
	struct up_pipe *p = new_pipe(), *q;
	struct up_end *r1, *r2, *r3, *r4, *w;
	struct iovec iov[4];
	struct call c;
	uint32_t id1, idx1;
	int cnt = 4, st;
	char what[96];
	pid_t pid;

	printf("#  a dead claim %s\n", names[dc]);
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_OK(up_open(p, UP_RD, &r1));
	CHECK_OK(up_open(p, UP_RD, &r2)); /* two readers: no bias is set */
	CHECK_OK(up_set_timeout(r2, 200));
	CHECK_EQ(up_write(w, buf, 100), 100);
	if (dc == DC_HOLD || dc == DC_CHAIN)
		CHECK_EQ(up_peek(r1, iov, &cnt), 100); /* R1 holds the word */
	/* The parent's: a forked child's copies of the ends are its own. */
	id1 = r1->lock_id, idx1 = r1->idx;
	pid = harness_fork(30);
	if (pid == 0) {
		uint32_t below = id1;

		hostile_begin((struct up_end *[]){ r1, r2, w }, 3, p, &q);
		CHECK_OK(up_open(q, UP_RD, &r3));
		if (dc == DC_CHAIN) {
			/* R4 claimed over R1's word and R3 over R4's claim
			 * (an ABA of R3's); both die. */
			CHECK_OK(up_open(q, UP_RD, &r4));
			atomic_store(&q->ends[r4->idx].held, UP_HELD_RLOCK | UP_HELD_CLAIM);
			atomic_store(&q->under[r4->idx], id1);
			below = r4->lock_id | UP_LOCK_CLAIM;
		} else if (dc == DC_COVERED) {
			/* R1 inside a take-back, its claim under R3's. */
			atomic_store(&q->ends[idx1].held, UP_HELD_RLOCK | UP_HELD_CLAIM);
			below = id1 | UP_LOCK_CLAIM;
		}
		/* What up__take_back() has stored when it claims (core/takeback.c):
		 * its held bits, what its claim replaces, the claim. */
		atomic_store(&q->ends[r3->idx].held, UP_HELD_RLOCK | UP_HELD_CLAIM);
		atomic_store(&q->under[r3->idx], below);
		atomic_store(&q->ln->rlock.word, r3->lock_id | UP_LOCK_CLAIM);
		raise(SIGKILL);
		_exit(1);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	snprintf(what, sizeof(what), "R2's read, a dead claim %s", names[dc]);
	call_start(&c, r2, false, false);
	switch (dc) {
	case DC_HOLD:
	case DC_CHAIN:
		/* R1's word given back, and R2 waits for R1's drop. */
		CHECK_EQ(call_end(&c, what), -ETIMEDOUT);
		CHECK_EQ(atomic_load(&p->ln->rlock.word) & ~UP_LOCK_WAITERS, id1);
		CHECK_OK(up_consume(r1, 40));
		call_start(&c, r2, false, false);
		CHECK_EQ(call_end(&c, "R2's read after R1's consume"), 60);
		break;
	case DC_IDLE:
		CHECK_EQ(call_end(&c, what), 100);
		break;
	case DC_COVERED:
		/* R2 leaves the word to R1, which says it is inside its
		 * claim, until R1's next call. */
		CHECK_EQ(call_end(&c, what), -ETIMEDOUT);
		call_start(&c, r1, false, false);
		CHECK_EQ(call_end(&c, "R1's read after it"), 100);
		CHECK_EQ(up_write(w, buf, 50), 50);
		call_start(&c, r2, false, false);
		CHECK_EQ(call_end(&c, "R2's read after R1's"), 50);
		break;
	}
	CHECK_EQ(up__lock_owner(atomic_load(&p->ln->rlock.word)), 0);
	CHECK(!up__is_broken(p));
	up_close(w);
	up_close(r2);
	up_close(r1);
	up_pipe_release(p);
}

static void dead_claimer(void)
{
	dead_claimer_case(DC_HOLD);
	dead_claimer_case(DC_CHAIN);
	dead_claimer_case(DC_IDLE);
	dead_claimer_case(DC_COVERED);
}

static void peek_empty_slots(void)
{
	for (int blocking = 0; blocking < 2; blocking++) {
		struct up_pipe *p = new_pipe(), *q;
		struct up_end *r, *rn, *w;
		struct call cr;
		pid_t pid;
		ssize_t n;

		CHECK_OK(up_open(p, UP_RD, &r));
		CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &rn));
		CHECK_OK(up_open(p, UP_WR, &w));
		/* One slot, read to its len: the ring is drained, the slot
		 * live (the readers keep the last one while it has room). */
		CHECK_EQ(up_write(w, "0123456789", 10), 10);
		CHECK_EQ(up_read(r, buf, sizeof(buf)), 10);
		pid = harness_fork(30);
		if (pid == 0) {
			uint32_t h, pg;

			hostile_begin((struct up_end *[]){ r, rn, w }, 3, p, &q);
			h = atomic_load(&q->ln->prod.head);
			pg = atomic_load(&q->slots[(h - 1) & q->g.slot_mask].page);
			for (uint32_t i = 0; i < 2; i++) {
				atomic_store(&q->slots[(h + i) & q->g.slot_mask].page, pg);
				atomic_store(&q->slots[(h + i) & q->g.slot_mask].len, 0);
			}
			atomic_store(&q->ln->prod.head, h + 2);
			_exit(0);
		}
		reap(pid);
		if (blocking) {
			call_start(&cr, r, false, true);
			n = call_end(&cr, "blocking peek");
		} else {
			uint64_t t0 = harness_now_ns();
			struct iovec iov[4];
			int cnt;

			do {
				cnt = 4;
				n = up_peek(rn, iov, &cnt);
			} while (n == -EAGAIN && harness_now_ns() - t0 < BOUND_MS * 1000000ull);
			printf("#   non-blocking peek -> %zd\n", n);
		}
		CHECK_EQ(n, -EPROTO);
		up_close(w);
		up_close(rn);
		up_close(r);
		up_pipe_release(p);
	}
}

static void pool_own_tag(void)
{
	struct up_pipe *p = new_pipe(), *q;
	struct up_end *r, *w;
	struct call cw;
	uint32_t tag;
	pid_t pid;

	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	tag = w->tag;
	pid = harness_fork(30);
	if (pid == 0) {
		hostile_begin((struct up_end *[]){ r, w }, 2, p, &q);
		atomic_store(&q->ln->pget.get, atomic_load(&q->ln->pput.put));
		for (uint32_t pg = 0; pg < q->g.page_count; pg++)
			atomic_store(&q->owner[pg], tag);
		_exit(0);
	}
	reap(pid);
	call_start(&cw, w, true, false);
	CHECK_EQ(call_end(&cw, "W's write, the pool's pages all tagged W's"), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* The sender's side of attach_unsealed, run inside the receiver's
 * F_GET_SEALS: the file shrinks to a page and is sealed. */
static int race_fd = -1;
int __real_fcntl(int fd, int cmd, ...);
int __wrap_fcntl(int fd, int cmd, ...);
int __wrap_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	if (cmd == F_GET_SEALS && fd == race_fd) {
		race_fd = -1;
		CHECK_SYS(ftruncate(fd, 4096));
		CHECK_SYS(__real_fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	}
	return __real_fcntl(fd, cmd, arg);
}

static void attach_unsealed(void)
{
	struct up_pipe *good = new_pipe(), *victim = NULL;
	size_t size = good->g.off.size;
	int fd = memfd_create("unsealed", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	int r;

	CHECK_SYS(fd);
	CHECK_SYS(ftruncate(fd, (off_t)size));
	CHECK_EQ(pwrite(fd, good->base, size, 0), (ssize_t)size);
	race_fd = fd;
	r = up_pipe_attach(fd, &victim);
	printf("#   up_pipe_attach of a file shrunk to 4096 of %zu bytes -> %d\n", size, r);
	CHECK(race_fd == -1); /* the shrink ran */
	CHECK_EQ(r, -EPROTO);
	close(fd);
	up_pipe_release(good);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "bias_named_idle", bias_named_idle },	  { "word_named_owner", word_named_owner },
	{ "peek_empty_slots", peek_empty_slots }, { "pool_own_tag", pool_own_tag },
	{ "handoff_cleared", handoff_cleared },	  { "word_names_self", word_names_self },
	{ "attach_unsealed", attach_unsealed },	  { "claim_stored", claim_stored },
	{ "dead_claimer", dead_claimer },
};

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	int ran = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	memset(buf, 'x', sizeof(buf));
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		if (only && strcmp(only, cases[k].name))
			continue;
		printf("# %s\n", cases[k].name);
		cases[k].fn();
		printf("ok %s\n", cases[k].name);
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "no case %s\n", only);
		return 2;
	}
	return 0;
}
