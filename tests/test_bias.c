/* SPDX-License-Identifier: MIT */
/*
 * test_bias.c - the writers' lock biased to a lone writer (core/bias.h, core/bias.c):
 * a lone writer enters without the lock word; a second writer takes the
 * bias back and waits for the owner to leave, also when the owner holds a
 * reservation open or died inside; and under churn (a second writer
 * opening, writing and closing again and again beside a streaming one) no
 * record is torn, lost or reordered. The protocol itself is model-checked
 * in tests/model/bias.pml; this checks the code.
 *
 * Skips (77) where membarrier(2) is refused: the lock then never biases.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"
#include "ring.h"

static uint32_t bias_of(struct up_pipe *p)
{
	return atomic_load(&p->ln->wlock.bias);
}

static uint32_t busy_of(struct up_pipe *p, struct up_end *e)
{
	return atomic_load(&p->ends[e->idx].busy);
}

/* A pipe with one reader and one writer end open. */
static struct up_pipe *pipe_rw(struct up_end **r, struct up_end **w)
{
	struct up_pipe *p;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, r));
	CHECK_OK(up_open(p, UP_WR, w));
	return p;
}

static void need_membarrier(void)
{
	uint64_t sc = 0;

	if (!up__membarrier_registered(getpid(), &sc))
		SKIP("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) refused here");
}

static void read_exactly(struct up_end *r, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = up_read(r, buf + got, n - got);

		CHECK(k > 0);
		got += (size_t)k;
	}
}

static void lone_writer_is_biased(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char buf[300], exp[300];

	need_membarrier();
	p = pipe_rw(&r, &w);
	CHECK_EQ(bias_of(p), 0);
	for (int i = 0; i < 3; i++) {
		memset(exp + 100 * i, 'a' + i, 100);
		CHECK_EQ(up_write(w, exp + 100 * i, 100), 100);
		CHECK_EQ(bias_of(p), w->lock_id);
		CHECK(w->biased);
		/* Entered through the bias, the word stays free. */
		CHECK_EQ(atomic_load(&p->ln->wlock.word), 0);
		CHECK_EQ(busy_of(p, w), UP_BUSY_OUT);
	}
	read_exactly(r, buf, sizeof(buf));
	CHECK(memcmp(buf, exp, sizeof(buf)) == 0);
	/* Closing gives the bias up: the next writer pays no barrier. */
	up_close(w);
	CHECK_EQ(bias_of(p), 0);
	up_close(r);
	up_pipe_release(p);
}

static void bias_can_be_switched_off(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char buf[100];

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	w->bias_off = true; /* the plain lock, as tests of that path need */
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < 10; i++)
		CHECK_EQ(up_write(w, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	CHECK_EQ(bias_of(p), 0);
	CHECK(!w->biased);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void second_writer_takes_bias_back(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	char buf[400], exp[400];

	need_membarrier();
	p = pipe_rw(&r, &w1);
	memset(exp, 'A', 100);
	memset(exp + 100, 'B', 100);
	memset(exp + 200, 'C', 100);
	memset(exp + 300, 'D', 100);
	CHECK_EQ(up_write(w1, exp, 100), 100);
	CHECK_EQ(bias_of(p), w1->lock_id);

	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_write(w2, exp + 100, 100), 100);
	CHECK_EQ(w2->c.revokes, 1);
	CHECK_EQ(bias_of(p), 0); /* two writers: nobody takes it */
	CHECK(!w2->biased);
	/* w1 still believes in its bias; its next entry must find it gone. */
	CHECK(w1->biased);
	CHECK_EQ(up_write(w1, exp + 200, 100), 100);
	CHECK(!w1->biased);
	CHECK_EQ(bias_of(p), 0);
	CHECK_EQ(busy_of(p, w1), UP_BUSY_ACK);

	/* Alone again: the next write biases to w1 once more. */
	up_close(w2);
	CHECK_EQ(up_write(w1, exp + 300, 100), 100);
	CHECK_EQ(bias_of(p), w1->lock_id);

	read_exactly(r, buf, sizeof(buf));
	CHECK(memcmp(buf, exp, sizeof(buf)) == 0);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

struct try_arg {
	struct up_end *w;
	atomic_int done;
	ssize_t got;
	uintptr_t page_off;
	int commit_r;
};

static void *former_owner_reserve(void *arg)
{
	struct try_arg *a = arg;
	struct iovec iov[2];
	int cnt = 2;

	a->got = up_reserve(a->w, 20, iov, &cnt);
	if (a->got == 20) {
		a->page_off = (uintptr_t)iov[0].iov_base & 4095;
		memset(iov[0].iov_base, 'E', 20);
	}
	atomic_store(&a->done, 1);
	return NULL;
}

/* An owner whose bias was taken back, reserving while the other writer's
 * small reservation holds the lock, takes a page of its own at once: its
 * failed biased entry must not fall into waiting for the word (found by a
 * review). */
static void former_owner_does_not_wait_for_a_reservation(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct try_arg a;
	struct iovec iov[2];
	char buf[240], exp[240];
	pthread_t th;
	int cnt = 2;

	need_membarrier();
	p = pipe_rw(&r, &w1);
	memset(exp, 'A', 100);
	memset(exp + 100, 'B', 100);
	memset(exp + 200, 'C', 20);
	memset(exp + 220, 'E', 20);
	CHECK_EQ(up_write(w1, exp, 100), 100);
	CHECK(w1->biased);
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_write(w2, exp + 100, 100), 100);
	CHECK(w1->biased); /* not told yet */
	/* w2's small reservation merges and holds the lock */
	CHECK_EQ(up_reserve(w2, 20, iov, &cnt), 20);
	CHECK(((uintptr_t)iov[0].iov_base & 4095) != 0);
	memset(iov[0].iov_base, 'C', 20);

	memset(&a, 0, sizeof(a));
	a.w = w1;
	CHECK_EQ(pthread_create(&th, NULL, former_owner_reserve, &a), 0);
	CHECK(harness_wait_flag(&a.done, 10.0));
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(a.got, 20);
	CHECK_EQ(a.page_off, 0);
	CHECK(!w1->biased);
	CHECK_OK(up_commit(w2, 20));
	CHECK_OK(up_commit(w1, 20));
	read_exactly(r, buf, sizeof(buf));
	CHECK(memcmp(buf, exp, sizeof(buf)) == 0);
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* The short way's commit leaves resv_merge set (a store saved on every
 * message): resv_bytes alone says whether a reservation is held. A former
 * owner whose last reservation was committed that way, writing while the
 * other writer's small reservation holds the word, must not let go of a lock
 * it does not hold: its non-blocking write gets -EAGAIN and the word stays
 * taken until the holder commits. */
static void committed_short_reservation_holds_no_lock(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov[8];
	size_t ps, k = 0;
	char *buf;
	uint32_t word;
	int cnt = 8;

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	ps = up_page_size(p);
	CHECK((buf = malloc(ps + 24)) != NULL);
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w1));
	CHECK_EQ(up_write(w1, "0123456789", 10), 10);
	CHECK_EQ(up_reserve(w1, 90, iov, &cnt), 90);
	memset(iov[0].iov_base, 'a', 90);
	CHECK_OK(up_commit(w1, 90));
	CHECK_EQ(w1->resv_bytes, 0);
	CHECK(w1->biased);

	/* w2 publishes a page of its own, with room left, taking the bias
	 * back but leaving w1's last slot as w1 saw it; its small reservation
	 * then merges into that page and holds the word. */
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_reserve(w2, ps - 100, iov, &cnt), (ssize_t)(ps - 100));
	CHECK(!w2->resv_merge);
	for (int i = 0; i < cnt; i++)
		memset(iov[i].iov_base, 'P', iov[i].iov_len);
	CHECK_OK(up_commit(w2, ps - 100));
	cnt = 8;
	CHECK_EQ(up_reserve(w2, 20, iov, &cnt), 20);
	CHECK(w2->resv_merge);
	memset(iov[0].iov_base, 'b', 20);
	word = atomic_load(&p->ln->wlock.word);
	CHECK(word != 0);
	CHECK(w1->biased); /* not told yet */

	CHECK_EQ(up_write(w1, "late", 4), -EAGAIN);
	CHECK(!w1->biased);
	CHECK_EQ(atomic_load(&p->ln->wlock.word), word);
	CHECK_OK(up_commit(w2, 20));
	CHECK_EQ(up_write(w1, "late", 4), 4);

	read_exactly(r, buf, ps + 24);
	CHECK(memcmp(buf, "0123456789", 10) == 0);
	for (k = 10; k < 100; k++)
		CHECK_EQ(buf[k], 'a');
	for (; k < ps; k++)
		CHECK_EQ(buf[k], 'P');
	for (; k < ps + 20; k++)
		CHECK_EQ(buf[k], 'b');
	CHECK(memcmp(buf + k, "late", 4) == 0);
	free(buf);
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* A merged reservation's commit checks that its room is still the one it
 * was handed: a peer that grew the last slot meanwhile (only a hostile or
 * broken one can, the lock being ours) gets -EPROTO, not a len covering
 * bytes nobody wrote (found by a review). */
static void merge_commit_checks_its_room(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct up_shm_slot *s;
	struct iovec iov[2];
	int cnt = 2;
	uint32_t h;

	p = pipe_rw(&r, &w);
	CHECK_EQ(up_write(w, "0123456789", 10), 10);
	CHECK_EQ(up_reserve(w, 50, iov, &cnt), 50);
	CHECK_EQ(((uintptr_t)iov[0].iov_base & 4095), 10);
	h = atomic_load(&p->ln->prod.head);
	s = &p->slots[(h - 1) & p->g.slot_mask];
	CHECK_EQ(atomic_load(&s->len), 10);
	atomic_store(&s->len, 15); /* the hostile part */
	CHECK_EQ(up_commit(w, 50), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A forked child's copy of a writer end takes an entry of its own
 * (fork.c), and each end keeps a pointer to its entry's busy word. Once the
 * child is the lone writer and biased, its entry, not the parent's, must
 * say it is inside: a second writer revoking the bias reads the owner's
 * entry and would take the lock from a child inside a reservation. */
static void forked_writer_marks_its_own_entry(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	uint32_t parent_idx;
	int go[2], status;
	char c = 1, buf[32];
	pid_t pid;

	need_membarrier();
	p = pipe_rw(&r, &w);
	CHECK_EQ(up_write(w, "parent", 6), 6);
	parent_idx = w->idx;
	CHECK_SYS(pipe2(go, O_CLOEXEC));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct iovec iov[2];
		int cnt = 2;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		/* The parent's copy is closed: the lock biases to us. */
		if (up_write(w, "child", 5) != 5)
			_exit(2);
		if (w->idx == parent_idx || !w->biased)
			_exit(3);
		if (up_reserve(w, 10, iov, &cnt) != 10)
			_exit(4);
		memcpy(iov[0].iov_base, "0123456789", 10);
		if (atomic_load(&p->ends[w->idx].busy) != UP_BUSY_IN ||
		    atomic_load(&p->ends[parent_idx].busy) == UP_BUSY_IN)
			_exit(5);
		if (up_commit(w, 10) != 0)
			_exit(6);
		if (atomic_load(&p->ends[w->idx].busy) != UP_BUSY_OUT)
			_exit(7);
		up_close(w);
		up_close(r);
		_exit(0);
	}
	close(go[0]);
	CHECK_OK(up_close(w));
	CHECK_EQ(write(go[1], &c, 1), 1);
	close(go[1]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	read_exactly(r, buf, 21);
	CHECK(memcmp(buf, "parentchild0123456789", 21) == 0);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	up_close(r);
	up_pipe_release(p);
}

/*
 * The lone writer's short way for small writes (up__ring_write_small) with
 * room in the last page must keep every rule of the long way: a write ends
 * an open page reservation, a broken segment gives -EPROTO, no reader left
 * gives -EPIPE. Each case first checks that the short way is open.
 */
static void short_way_keeps_the_rules(void)
{
	size_t ps;
	struct up_pipe *p;
	struct up_end *r, *w;
	struct iovec iov[4];
	int cnt = 4;
	char buf[16];

	need_membarrier();
	p = pipe_rw(&r, &w);
	ps = up_page_size(p);
	CHECK_EQ(up_write(w, "0123456789", 10), 10);
	CHECK(w->biased && w->last_ok);
	CHECK_EQ(up_reserve(w, 2 * ps, iov, &cnt), (ssize_t)(2 * ps));
	CHECK(!w->resv_merge);
	CHECK_EQ(up_write(w, "abc", 3), 3);
	CHECK_EQ(up_commit(w, 2 * ps), -EINVAL); /* the write ended it */
	read_exactly(r, buf, 13);
	CHECK(memcmp(buf, "0123456789abc", 13) == 0);
	CHECK(w->last_ok);
	up__mark_broken(p);
	CHECK_EQ(up_write(w, "def", 3), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);

	p = pipe_rw(&r, &w);
	CHECK_EQ(up_write(w, "0123456789", 10), 10);
	CHECK(w->last_ok);
	up_close(r);
	CHECK_EQ(up_write(w, "abc", 3), -EPIPE);
	up_close(w);
	up_pipe_release(p);
}

/* A writer has joined but not yet taken the bias back: the owner's
 * reservation over half a page takes a page of its own, as with several
 * writers, and does not hold the lock across its fill; half a page or less
 * still merges. */
static void joined_writer_keeps_big_reservations_apart(void)
{
	size_t ps;
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov[4];
	int cnt = 4;

	need_membarrier();
	p = pipe_rw(&r, &w1);
	ps = up_page_size(p);
	CHECK_EQ(up_write(w1, "x", 1), 1);
	CHECK(w1->last_ok);
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_reserve(w1, ps / 2 + 1, iov, &cnt), (ssize_t)(ps / 2 + 1));
	CHECK(!w1->resv_merge);
	CHECK_OK(up_commit(w1, 0));
	cnt = 4;
	CHECK_EQ(up_reserve(w1, ps / 2, iov, &cnt), (ssize_t)(ps / 2));
	CHECK(w1->resv_merge);
	CHECK_OK(up_commit(w1, 0));
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* The owner holds a small reservation (merged into the last page, inside
 * the critical section): a non-blocking second writer gets -EAGAIN, then
 * goes through once the owner commits, after the committed bytes. */
static void second_writer_waits_for_reservation(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov[2];
	int cnt = 2;
	char buf[300];

	need_membarrier();
	p = pipe_rw(&r, &w1);
	CHECK_EQ(up_write(w1, "0123456789", 10), 10);
	CHECK_EQ(up_reserve(w1, 90, iov, &cnt), 90);
	CHECK(w1->resv_merge);
	CHECK_EQ(busy_of(p, w1), UP_BUSY_IN);

	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w2));
	CHECK_EQ(up_write(w2, "late", 4), -EAGAIN);
	/* The mark stays: the owner cannot enter again through the bias. */
	CHECK_EQ(bias_of(p), w1->lock_id | UP_BIAS_REVOKE);
	CHECK_EQ(w2->c.revokes, 1);
	/* Trying again costs no second barrier (the first one was after the
	 * mark) and no round of sched_yield: a few system calls at most. */
	{
		uint64_t sc = atomic_load(&w2->c.syscalls);

		for (int i = 0; i < 10; i++)
			CHECK_EQ(up_write(w2, "late", 4), -EAGAIN);
		CHECK_EQ(w2->c.revokes, 1);
		CHECK(atomic_load(&w2->c.syscalls) - sc < 10);
	}
	memset(iov[0].iov_base, 'r', 90);
	CHECK_OK(up_commit(w1, 90));
	CHECK_EQ(busy_of(p, w1), UP_BUSY_OUT);
	CHECK_EQ(up_write(w2, "late", 4), 4);
	CHECK_EQ(bias_of(p), 0);

	read_exactly(r, buf, 104);
	CHECK(memcmp(buf, "0123456789", 10) == 0);
	for (int i = 10; i < 100; i++)
		CHECK_EQ(buf[i], 'r');
	CHECK(memcmp(buf + 100, "late", 4) == 0);
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* The same with a blocking second writer: it sleeps on the owner's busy
 * word, and the owner, leaving with the mark set, wakes it. */
static void blocking_second_writer_is_woken_at_commit(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1;
	struct harness_writer lw = { .buf = "late" };
	struct iovec iov[2];
	int cnt = 2;
	pthread_t t;
	pid_t tid;
	uint64_t wakes;
	char buf[104];

	need_membarrier();
	p = pipe_rw(&r, &w1);
	CHECK_EQ(up_write(w1, "0123456789", 10), 10);
	CHECK_EQ(up_reserve(w1, 90, iov, &cnt), 90);
	CHECK_EQ(busy_of(p, w1), UP_BUSY_IN);
	CHECK_OK(up_open(p, UP_WR, &lw.w));
	CHECK(pthread_create(&t, NULL, harness_writer_main, &lw) == 0);
	/* Wait until it is asleep in the kernel, on our busy word. */
	while ((tid = atomic_load(&lw.tid)) == 0 || harness_tid_state(tid) != 'S')
		sched_yield();
	CHECK_EQ(bias_of(p), w1->lock_id | UP_BIAS_REVOKE);
	wakes = atomic_load(&w1->c.wakes);
	memset(iov[0].iov_base, 'r', 90);
	CHECK_OK(up_commit(w1, 90));
	CHECK_EQ(atomic_load(&w1->c.wakes), wakes + 1); /* the owner woke it */
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(lw.res, 4);
	CHECK(atomic_load(&lw.w->c.waits) >= 1);
	read_exactly(r, buf, sizeof(buf));
	CHECK(memcmp(buf + 100, "late", 4) == 0);
	up_close(lw.w);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* The owner closes while a non-blocking taker's mark is on its bias: the
 * close clears it, so the next writer pays no barrier. */
static void owner_close_clears_a_mark(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2, *w3;
	struct iovec iov[2];
	int cnt = 2;

	need_membarrier();
	p = pipe_rw(&r, &w1);
	CHECK_EQ(up_write(w1, "0123456789", 10), 10);
	CHECK_EQ(up_reserve(w1, 10, iov, &cnt), 10);
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w2));
	CHECK_EQ(up_write(w2, "late", 4), -EAGAIN);
	CHECK_EQ(bias_of(p), w1->lock_id | UP_BIAS_REVOKE);
	up_close(w1); /* cancels the reservation, gives the bias up */
	CHECK_EQ(bias_of(p), 0);
	CHECK_OK(up_open(p, UP_WR, &w3));
	CHECK_EQ(up_write(w3, "x", 1), 1);
	CHECK_EQ(w3->c.revokes, 0);
	up_close(w3);
	up_close(w2);
	up_close(r);
	up_pipe_release(p);
}

/*
 * A writer in a process where membarrier() is refused (a seccomp filter the
 * owner's process does not have) cannot fence the owner. With the owner
 * open and idle, it used to wait for an acknowledgment that never came; it
 * now takes the bias once the mark is UP_BIAS_GRACE_NS old and the owner
 * is out. Blocking and non-blocking alike.
 */
static int deny_membarrier(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static void unfenced_writer_passes_an_idle_owner(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	uint32_t owner;
	pid_t pid;
	int status;
	char buf[32];

	need_membarrier();
	p = pipe_rw(&r, &w);
	CHECK_EQ(up_write(w, "owner", 5), 5);
	CHECK_EQ(bias_of(p), w->lock_id); /* and now idle, for good */
	/* The owner's lock value, as the parent's end has it: the child's
	 * copy of w is an end of its own, with a lock value of its own. */
	owner = w->lock_id;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *b, *nb;
		uint64_t sc = 0;
		int tries = 0;
		ssize_t k;

		/* The owner is the parent's w alone: our copies go first. */
		harness_close_inherited((struct up_end *[]){ r, w }, 2);
		if (deny_membarrier() != 0 || up__membarrier(UP_FENCE_ANY, &sc) == 0)
			_exit(10); /* could not set the test up */
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_WR, &b) < 0 ||
		    up_open(q, UP_WR | UP_NONBLOCK, &nb) < 0)
			_exit(1);
		if (up_write(b, "blocking", 8) != 8)
			_exit(2);
		/* Bias gone: the owner saw nothing, it never ran. */
		if (bias_of(q) != 0)
			_exit(3);
		up_close(b);
		up_close(nb);
		/* The owner is alone again but idle: bias it to itself? No, it
		 * only biases when it takes the lock. Mark it by hand as the
		 * owner would have, to run the non-blocking taker too. */
		if (up_open(q, UP_WR | UP_NONBLOCK, &nb) < 0)
			_exit(4);
		atomic_store(&q->ln->wlock.bias, owner);
		while ((k = up_write(nb, "nonblock", 8)) == -EAGAIN)
			tries++;
		if (k != 8 || bias_of(q) != 0)
			_exit(5);
		up_close(nb);
		_exit(tries > 0 ? 0 : 6);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	if (WEXITSTATUS(status) == 10)
		SKIP("cannot install a seccomp filter here");
	CHECK_EQ(WEXITSTATUS(status), 0);
	read_exactly(r, buf, 21);
	CHECK(memcmp(buf, "ownerblockingnonblock", 21) == 0);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

struct sleeper {
	struct up_end *r;
	char buf[16];
	ssize_t got;
	_Atomic pid_t tid;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *sl = arg;

	atomic_store(&sl->tid, (pid_t)syscall(SYS_gettid));
	sl->got = up_read(sl->r, sl->buf, sizeof(sl->buf));
	return NULL;
}

/*
 * The lone writer grows len with a release store and no fence before its
 * load of nwait; a reader about to sleep supplies the fence with one
 * membarrier() (wait.c, up__wait_fence(); tests/model/wake.pml -DFENCED
 * checks the handshake). Here: the fence is run while the writers' lock is
 * biased, and only then (not for the writers' line, not once the writer
 * has gone); and a reader asleep before the writer's merge is woken by it.
 */
static void sleeping_reader_fences_the_lone_writer(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct sleeper sl = { 0 };
	pthread_t t;
	uint64_t sc;
	char buf[16];

	need_membarrier();
	p = pipe_rw(&r, &w);
	CHECK_EQ(up_write(w, "0123456789", 10), 10);
	CHECK_EQ(bias_of(p), w->lock_id);
	read_exactly(r, buf, 10);
	sc = r->c.syscalls;
	CHECK_EQ(up__wait_fence(r, &p->ln->rd_wait), UINT64_MAX);
	CHECK_EQ(r->c.syscalls, sc + 1); /* the barrier */
	sc = w->c.syscalls;
	CHECK_EQ(up__wait_fence(w, &p->ln->wr_wait), UINT64_MAX);
	CHECK_EQ(w->c.syscalls, sc); /* writers' line: nothing to fence */

	/* Asleep first, then the merge: the merge's wake finds it, not the
	 * end of its slice. */
	sl.r = r;
	sc = r->c.timeouts;
	CHECK(pthread_create(&t, NULL, sleeper_main, &sl) == 0);
	harness_wait_asleep(&sl.tid);
	CHECK(w->biased && w->last_ok); /* the short way, the release store */
	CHECK_EQ(up_write(w, "abcdef", 6), 6);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(sl.got, 6);
	CHECK(memcmp(sl.buf, "abcdef", 6) == 0);
	CHECK_EQ(r->c.timeouts, sc);

	/* Asleep first, then a publish of a new page (head, stored with
	 * release as well): woken by it, not by the end of its slice. */
	{
		size_t room = up_page_size(p) - 16;
		char *fill = calloc(1, room);
		uint64_t slices;

		CHECK(fill != NULL);
		CHECK_EQ(up_write(w, fill, room), (ssize_t)room); /* the page is full */
		read_exactly(r, fill, room);
		free(fill);
		memset(&sl, 0, sizeof(sl));
		sl.r = r;
		slices = r->c.timeouts;
		CHECK(pthread_create(&t, NULL, sleeper_main, &sl) == 0);
		harness_wait_asleep(&sl.tid);
		CHECK(w->biased && w->last_ok && w->last_len == up_page_size(p));
		CHECK_EQ(up_write(w, "ghijkl", 6), 6);
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(sl.got, 6);
		CHECK(memcmp(sl.buf, "ghijkl", 6) == 0);
		CHECK_EQ(r->c.timeouts, slices);
	}

	/* No bias, no fence: nobody publishes without one. */
	up_close(w);
	CHECK_EQ(bias_of(p), 0);
	sc = r->c.syscalls;
	CHECK_EQ(up__wait_fence(r, &p->ln->rd_wait), UINT64_MAX);
	CHECK_EQ(r->c.syscalls, sc);
	up_close(r);
	up_pipe_release(p);
}

/*
 * A reader whose process may not call membarrier() cannot fence the lone
 * writer, so it says so at open (rd_wait.nofence, sticky), and writers
 * then fence every len store; its sleeps for the next UP_FENCE_GRACE_NS
 * (20 ms) are bounded, for a store issued before a writer saw the flag.
 */
static void reader_refused_membarrier_makes_writers_fence(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	pid_t pid;
	int status;

	need_membarrier();
	p = pipe_rw(&r, &w);
	CHECK_EQ(up_write(w, "x", 1), 1);
	CHECK_EQ(bias_of(p), w->lock_id);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nofence), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *cr;
		uint64_t sc = 0, b;

		harness_close_inherited((struct up_end *[]){ r, w }, 2);
		if (deny_membarrier() != 0 || up__membarrier(UP_FENCE_ANY, &sc) == 0)
			_exit(10);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_RD, &cr) < 0)
			_exit(1);
		if (atomic_load(&q->ln->rd_wait.nofence) != 1)
			_exit(2); /* said at open */
		b = up__wait_fence(cr, &q->ln->rd_wait);
		if (b == 0 || b > 20000000ull)
			_exit(3); /* bounded by the grace */
		up_close(cr);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	if (WEXITSTATUS(status) == 10)
		SKIP("cannot install a seccomp filter here");
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nofence), 1); /* sticky */
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A writer process dies inside the critical section it entered through
 * the bias (a reservation left open): the next writer must not wait for
 * it for ever. */
static void owner_dead_inside_is_passed(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	pid_t pid;
	int status;
	char buf[16];

	need_membarrier();
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *cw;
		struct iovec iov[2];
		int cnt = 2;

		harness_close_inherited(&r, 1);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_WR, &cw) < 0)
			_exit(1);
		if (up_write(cw, "child", 5) != 5 || bias_of(q) != cw->lock_id)
			_exit(2);
		if (up_reserve(cw, 50, iov, &cnt) != 50 || busy_of(q, cw) != UP_BUSY_IN)
			_exit(3);
		_exit(0); /* inside, for good */
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(up_write(w, "parent", 6), 6);
	read_exactly(r, buf, 11);
	CHECK(memcmp(buf, "childparent", 11) == 0);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * Churn: writer A streams 64-byte records; writer B opens an end, writes a
 * few records and closes, again and again, so the bias is taken back and
 * re-entered hundreds of times while A writes. Each record carries its
 * writer, a sequence number and a checksum; writes of 64 bytes are atomic,
 * so the stream must be whole records, each writer's in order, none lost.
 * Without the revoker's barrier or its wait (see bias.pml's mutants) two
 * writers append at the same offset and records tear or vanish.
 */
#define REC 64
#define A_RECS 1000000u
#define B_ROUNDS 4000u
#define B_PER 3u
#define B_MIN 20u

struct rec {
	uint32_t who, seq;
	uint64_t sum;
	unsigned char fill[REC - 16];
};

static void rec_make(struct rec *x, uint32_t who, uint32_t seq)
{
	x->who = who;
	x->seq = seq;
	for (size_t i = 0; i < sizeof(x->fill); i++)
		x->fill[i] = harness_pat(who * 1000003ull + seq, i);
	x->sum = harness_mix64(((uint64_t)who << 32 | seq) ^ x->fill[0] ^ x->fill[47]);
}

static bool rec_ok(const struct rec *x)
{
	struct rec y;

	if (x->who != 1 && x->who != 2)
		return false;
	rec_make(&y, x->who, x->seq);
	return memcmp(x, &y, sizeof(y)) == 0;
}

/* Between B's rounds: give A the chance to bias the lock to itself again,
 * so B's next round has one to take back (bounded: A may be done). */
static void wait_rebias(struct up_pipe *p)
{
	for (int i = 0; i < 2000 && bias_of(p) == 0; i++)
		sched_yield();
}

/* The reader's side of a churn: bytes as read, parsed into records; each
 * must be whole and next in its writer's sequence. */
struct rec_stream {
	unsigned char buf[1 << 16];
	size_t have;
	uint32_t next[3];
	uint64_t recs;
};

/* Room for the next read: odd sizes, so records straddle reads. */
static size_t rec_room(const struct rec_stream *rs)
{
	return sizeof(rs->buf) - rs->have - (rs->recs % 7) * 9;
}

/* @k more bytes arrived at buf + have: check and drop the whole records. */
static void rec_take(struct rec_stream *rs, size_t k)
{
	size_t off = 0;

	rs->have += k;
	for (; rs->have - off >= REC; off += REC) {
		struct rec x;

		memcpy(&x, rs->buf + off, REC);
		if (!rec_ok(&x)) {
			fprintf(stderr, "record %llu is torn or foreign\n",
				(unsigned long long)rs->recs);
			CHECK(false);
		}
		if (x.seq != rs->next[x.who])
			/* Which writer, and where: a record of A lost beside B's
			 * joins is two writers at one offset. */
			fprintf(stderr, "record %llu: writer %u's seq %u, expected %u (%s)\n",
				(unsigned long long)rs->recs, x.who, x.seq, rs->next[x.who],
				x.seq > rs->next[x.who] ? "one or more lost" : "seen twice");
		CHECK_EQ(x.seq, rs->next[x.who]);
		rs->next[x.who]++;
		rs->recs++;
	}
	memmove(rs->buf, rs->buf + off, rs->have - off);
	rs->have -= off;
}

struct churn {
	struct up_pipe *p;
	struct up_end *a;
	pthread_t ta, tb;
	void *bret; /* B's records written, once joined */
	_Atomic uint64_t revokes;
	_Atomic uint32_t b_rounds; /* B's rounds done */
	_Atomic uint32_t a_recs;   /* A's records, once a_done */
	_Atomic bool a_done;
};

/* A writes A_RECS records at the least, and on until B has had B_MIN
 * rounds beside it: a compiler or a machine that makes A fast must not
 * leave B too few joins to take the bias back (the check in churn_pass()). */
static void *writer_a(void *arg)
{
	struct churn *c = arg;
	struct rec x;
	uint32_t i;

	for (i = 0; i < A_RECS || atomic_load(&c->b_rounds) < B_MIN; i++) {
		rec_make(&x, 1, i);
		CHECK_EQ(up_write(c->a, &x, sizeof(x)), (ssize_t)sizeof(x));
	}
	atomic_store(&c->a_recs, i);
	atomic_store(&c->a_done, true);
	return NULL;
}

static void *writer_b(void *arg)
{
	struct churn *c = arg;
	uint32_t seq = 0;
	struct rec x;

	for (uint32_t round = 0; round < B_ROUNDS && !atomic_load(&c->a_done); round++) {
		struct up_end *b;

		CHECK_OK(up_open(c->p, UP_WR, &b));
		for (uint32_t k = 0; k < B_PER; k++) {
			rec_make(&x, 2, seq++);
			CHECK_EQ(up_write(b, &x, sizeof(x)), (ssize_t)sizeof(x));
		}
		atomic_fetch_add(&c->revokes, atomic_load(&b->c.revokes));
		up_close(b);
		wait_rebias(c->p);
		atomic_fetch_add(&c->b_rounds, 1);
	}
	return (void *)(uintptr_t)seq;
}

/* A's end closes once both writers are done, not before: B has no end open
 * between its rounds, and A's close then would end the stream early. The
 * close is the reader's end of stream, whatever it is doing when it comes. */
static void *closer(void *arg)
{
	struct churn *c = arg;

	CHECK(pthread_join(c->ta, NULL) == 0);
	CHECK(pthread_join(c->tb, &c->bret) == 0);
	up_close(c->a);
	return NULL;
}

static void churn_pass(void)
{
	struct churn c = { 0 };
	struct up_config cfg;
	struct up_end *r;
	pthread_t tc;
	static struct rec_stream rs;

	need_membarrier();
	memset(&rs, 0, sizeof(rs));
	up_config_init(&cfg);
	cfg.capacity = 256 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &c.p));
	CHECK_OK(up_open(c.p, UP_RD, &r));
	CHECK_OK(up_open(c.p, UP_WR, &c.a));
	CHECK(pthread_create(&c.ta, NULL, writer_a, &c) == 0);
	CHECK(pthread_create(&c.tb, NULL, writer_b, &c) == 0);
	CHECK(pthread_create(&tc, NULL, closer, &c) == 0);
	/* Read to end of stream, in odd sizes: records straddle reads. */
	for (;;) {
		ssize_t k = up_read(r, rs.buf + rs.have, rec_room(&rs));

		if (k == 0)
			break;
		CHECK(k > 0);
		rec_take(&rs, (size_t)k);
	}
	CHECK(pthread_join(tc, NULL) == 0);
	CHECK_EQ(rs.have, 0);
	CHECK_EQ(rs.next[1], atomic_load(&c.a_recs));
	CHECK_EQ(rs.next[2], (uint32_t)(uintptr_t)c.bret);
	printf("# %u records of B in %u rounds beside %u of A; %llu biases taken back\n",
	       rs.next[2], rs.next[2] / B_PER, rs.next[1], (unsigned long long)atomic_load(&c.revokes));
	/* The test is about the bias changing hands: it must have. */
	CHECK(atomic_load(&c.revokes) >= 10);
	up_close(r);
	up_pipe_release(c.p);
}

/* One pass catches a broken revoker about two times in three here (checked
 * with the wait of step 3 taken out); three passes, about 26 in 27. */
static void exclusion_under_churn(void)
{
	for (int i = 0; i < 3; i++)
		churn_pass();
}

/*
 * The same churn with writer B in another process: its barrier must reach
 * the owner's process (MEMBARRIER_CMD_GLOBAL_EXPEDITED; the private command
 * would not), and its endpoint table entries come and go in another
 * address space. The reader counts records instead of waiting for end of
 * stream, which comes and goes with B's ends.
 *
 * Each side has a process of its own, single-threaded: A in this one, B
 * and the reader in children. TSan sees only one process at a time, so a
 * page that went from the reader through B's process to A (freed, taken,
 * merged into) looked like a race between two threads of one process when
 * A and the reader were threads side by side.
 */
#define BP_ROUNDS 1000u

static void b_child(struct up_pipe *p, int go, int res, _Atomic uint32_t *rounds)
{
	struct up_pipe *q;
	uint32_t seq = 0;
	uint64_t rv = 0;
	struct rec x;
	char t;

	if (read(go, &t, 1) != 1 || up_pipe_attach(up_pipe_fd(p), &q) < 0)
		_exit(1);
	for (uint32_t round = 0; round < BP_ROUNDS; round++) {
		struct up_end *b;

		if (up_open(q, UP_WR, &b) < 0)
			_exit(2);
		for (uint32_t k = 0; k < B_PER; k++) {
			rec_make(&x, 2, seq++);
			if (up_write(b, &x, sizeof(x)) != (ssize_t)sizeof(x))
				_exit(3);
		}
		rv += atomic_load(&b->c.revokes);
		up_close(b);
		wait_rebias(q);
		atomic_fetch_add(rounds, 1);
	}
	_exit(write(res, &rv, sizeof(rv)) == (ssize_t)sizeof(rv) ? 0 : 4);
}

/* What the reader child found, sent back whole. */
struct rd_result {
	uint32_t next[3];
	size_t have;
};

static void reader_child(struct up_pipe *p, int ready, int go, int res)
{
	static struct rec_stream rs;
	struct rd_result out;
	struct up_pipe *q;
	struct up_end *r;
	char t;

	memset(&rs, 0, sizeof(rs));
	/* Open, then read only once A is open too (or: end of stream). */
	if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_RD, &r) < 0 ||
	    write(ready, "r", 1) != 1 || read(go, &t, 1) != 1)
		_exit(1);
	/* rec_take() fails the child on a torn, foreign or reordered record.
	 * A's close, after B's child has gone, ends the stream. */
	for (;;) {
		ssize_t k = up_read(r, rs.buf + rs.have, rec_room(&rs));

		if (k == 0)
			break;
		if (k < 0)
			_exit(2);
		rec_take(&rs, (size_t)k);
	}
	memcpy(out.next, rs.next, sizeof(out.next));
	out.have = rs.have;
	_exit(write(res, &out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 4);
}

static void churn_procs_pass(void)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *a;
	struct rd_result got;
	struct rec x;
	uint64_t revokes = 0;
	_Atomic uint32_t *brounds;
	uint32_t na;
	int go[2], bres[2], ready[2], rres[2], status;
	pid_t bpid, rpid;
	char t;

	need_membarrier();
	/* B's rounds done, seen by A across the fork. */
	brounds = mmap(NULL, sizeof(*brounds), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	CHECK(brounds != MAP_FAILED);
	atomic_store(brounds, 0);
	up_config_init(&cfg);
	cfg.capacity = 256 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_SYS(pipe(go));
	CHECK_SYS(pipe(bres));
	CHECK_SYS(pipe(ready));
	CHECK_SYS(pipe(rres));
	rpid = fork();
	CHECK(rpid >= 0);
	if (rpid == 0)
		reader_child(p, ready[1], go[0], rres[1]);
	bpid = fork();
	CHECK(bpid >= 0);
	if (bpid == 0)
		b_child(p, go[0], bres[1], brounds);
	/* The reader is open before A writes (no -EPIPE), A before the
	 * reader reads (no end of stream); then B and the reader start. */
	CHECK_EQ(read(ready[0], &t, 1), 1);
	CHECK_OK(up_open(p, UP_WR, &a));
	CHECK_EQ(write(go[1], "gg", 2), 2);
	/* A writes A_RECS records at the least, and on until B_MIN rounds of
	 * B have joined beside it, however fast A is here (the check on
	 * revokes below), or B's child has gone. */
	for (na = 0;; na++) {
		if (na >= A_RECS && na % 1024 == 0) {
			pid_t w;

			if (atomic_load(brounds) >= B_MIN)
				break;
			w = waitpid(bpid, &status, WNOHANG);
			CHECK(w == 0 || w == bpid);
			if (w == bpid) {
				bpid = 0;
				break;
			}
		}
		rec_make(&x, 1, na);
		CHECK_EQ(up_write(a, &x, sizeof(x)), (ssize_t)sizeof(x));
	}
	if (bpid)
		CHECK_EQ(waitpid(bpid, &status, 0), bpid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	up_close(a); /* the reader's end of stream */
	CHECK_EQ(waitpid(rpid, &status, 0), rpid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_EQ(read(bres[0], &revokes, sizeof(revokes)), (ssize_t)sizeof(revokes));
	CHECK_EQ(read(rres[0], &got, sizeof(got)), (ssize_t)sizeof(got));
	CHECK_EQ(got.have, 0);
	CHECK_EQ(got.next[1], na);
	CHECK_EQ(got.next[2], BP_ROUNDS * B_PER);
	printf("# %u records of B (another process) beside %u of A; %llu biases taken back\n",
	       got.next[2], na, (unsigned long long)revokes);
	CHECK(revokes >= 10);
	for (int i = 0; i < 2; i++) {
		close(go[i]);
		close(bres[i]);
		close(ready[i]);
		close(rres[i]);
	}
	munmap((void *)brounds, sizeof(*brounds));
	up_pipe_release(p);
}

static void exclusion_under_churn_across_processes(void)
{
	for (int i = 0; i < 3; i++)
		churn_procs_pass();
}

/*
 * A process's first writer end registers it for membarrier(2) when it opens,
 * not in its first write: the registration waits for an RCU grace period
 * (milliseconds), and paid inside the first write it was that message's
 * latency. In a forked child (another pid, so the library asks again, and
 * the old code asked in the first write) the first write of an end opened
 * there makes no system call and still biases the lock.
 */
static void registers_at_open_not_in_the_first_write(void)
{
	pid_t pid;
	int status;

	need_membarrier();
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_stats s0, s1;
		struct up_pipe *p;
		struct up_end *r, *w;
		char buf[64] = {0};

		p = pipe_rw(&r, &w);
		CHECK_OK(up_stats(p, &s0));
		if (up_write(w, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			_exit(2);
		CHECK_OK(up_stats(p, &s1));
		if (s1.syscalls != s0.syscalls)
			_exit(3);
		if (bias_of(p) != w->lock_id)
			_exit(4);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(120);
	RUN(lone_writer_is_biased);
	RUN(bias_can_be_switched_off);
	RUN(second_writer_takes_bias_back);
	RUN(second_writer_waits_for_reservation);
	RUN(blocking_second_writer_is_woken_at_commit);
	RUN(former_owner_does_not_wait_for_a_reservation);
	RUN(merge_commit_checks_its_room);
	RUN(committed_short_reservation_holds_no_lock);
	RUN(forked_writer_marks_its_own_entry);
	RUN(short_way_keeps_the_rules);
	RUN(joined_writer_keeps_big_reservations_apart);
	RUN(owner_close_clears_a_mark);
	RUN(owner_dead_inside_is_passed);
	RUN(unfenced_writer_passes_an_idle_owner);
	RUN(exclusion_under_churn);
	RUN(exclusion_under_churn_across_processes);
	RUN(registers_at_open_not_in_the_first_write);
	RUN(sleeping_reader_fences_the_lone_writer);
	RUN(reader_refused_membarrier_makes_writers_fence);
	return 0;
}
