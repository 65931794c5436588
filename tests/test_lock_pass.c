/* SPDX-License-Identifier: MIT */
/*
 * test_lock_pass.c - a lock drop hands the word to the queued sleeper
 * (core/lock.c, up__lock_pass()), so that a holder that takes the lock
 * again at once cannot shut a sleeping end out.
 *
 * Two readers of one stream, each holding the readers' lock across a
 * write(2) between peek and consume (uringpipe-cat --from does), once ran
 * so that one read all 8 MB and the other nothing: the sleeper the drop
 * woke found the lock taken again every time. Here the sleeper is a child
 * process, stopped (SIGSTOP) once it has queued, so that what the drop did
 * can be read off the word before the sleeper runs. Also: a sleeper that
 * times out leaves the queue, and what a peer stores into handoff neither
 * crashes a drop nor wedges the lock.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"
#include "ring.h"
#include "lock.h"

#define MSG 100

/* Wait (bounded: 10 s, then fail) until the readers' lock's handoff is not
 * 0; returns what it holds. */
static uint32_t wait_queued(struct up_pipe *p)
{
	uint32_t h = harness_wait_word(&p->ln->rlock.handoff, 10.0);

	CHECK(h != 0);
	return h;
}

/* A reader of its own in a child, blocked on the lock @holder holds; the
 * child exits 0 once it has read the MSG bytes written before. */
static pid_t reader_child(struct up_pipe *p, struct up_end **inh, int ninh)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *e;
		char buf[MSG], want[MSG];

		harness_close_inherited(inh, ninh);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_RD, &e) < 0)
			_exit(1);
		harness_fill(7, 0, want, sizeof(want));
		_exit(up_read(e, buf, sizeof(buf)) == MSG && memcmp(buf, want, MSG) == 0 ? 0 : 2);
	}
	return pid;
}

static void the_drop_hands_the_word_to_the_queued_sleeper(void)
{
	struct up_pipe *p;
	struct up_end *holder, *w;
	_Atomic uint32_t *word;
	char buf[MSG];
	uint32_t h;
	pid_t pid;
	int status;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &holder));
	CHECK_OK(up_open(p, UP_WR, &w));
	harness_fill(7, 0, buf, sizeof(buf));
	CHECK_EQ(up_write(w, buf, MSG), MSG);
	word = &p->ln->rlock.word;
	CHECK_OK(up__lock_take(holder, word, false));
	pid = reader_child(p, (struct up_end *[]){ holder, w }, 2);
	h = wait_queued(p);
	CHECK(kill(pid, SIGSTOP) == 0);
	CHECK_EQ(waitpid(pid, &status, WUNTRACED), pid);
	CHECK(WIFSTOPPED(status));

	/* The drop gives the word to the stopped child: a take right after it
	 * (the barging holder) finds the lock held. */
	up__lock_drop(holder, word);
	CHECK_EQ(atomic_load(word), h | UP_LOCK_WAITERS);
	CHECK_EQ(atomic_load(&p->ln->rlock.handoff), 0);
	CHECK(!up__lock_try(holder, word));

	CHECK(kill(pid, SIGCONT) == 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Its drop woke nobody left: the word is free for us. */
	CHECK_EQ(atomic_load(word) & ~UP_LOCK_WAITERS, 0);
	CHECK(up__lock_try(holder, word));
	up__lock_drop(holder, word);
	up_close(w);
	up_close(holder);
	up_pipe_release(p);
}

struct timed {
	struct up_end *e;
	ssize_t ret;
};

static void *timed_read(void *arg)
{
	struct timed *t = arg;
	char buf[MSG];

	t->ret = up_read(t->e, buf, sizeof(buf));
	return NULL;
}

/* A sleeper whose timeout ends takes its id back out of handoff: the next
 * drop must not hand the word to an end that left. */
static void a_sleeper_that_times_out_leaves_the_queue(void)
{
	struct up_pipe *p;
	struct up_end *holder, *w;
	struct timed t;
	pthread_t th;
	char buf[MSG];
	_Atomic uint32_t *word;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &holder));
	CHECK_OK(up_open(p, UP_RD, &t.e));
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(up_write(w, "x", 1), 1);
	CHECK_OK(up_set_timeout(t.e, 100));
	word = &p->ln->rlock.word;
	CHECK_OK(up__lock_take(holder, word, false));
	CHECK_EQ(pthread_create(&th, NULL, timed_read, &t), 0);
	CHECK_EQ(wait_queued(p), t.e->lock_id);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(t.ret, -ETIMEDOUT);
	CHECK_EQ(atomic_load(&p->ln->rlock.handoff), 0);

	up__lock_drop(holder, word);
	CHECK_EQ(atomic_load(word), 0);
	/* The byte is still there for the end that timed out. */
	CHECK_OK(up_set_timeout(t.e, -1));
	CHECK_EQ(up_read(t.e, buf, sizeof(buf)), 1);
	up_close(w);
	up_close(t.e);
	up_close(holder);
	up_pipe_release(p);
}

/*
 * What a peer may store into handoff: a value naming no endpoint, the
 * dropper's own id (both cleared, nothing handed), or the id of a live end
 * that is not waiting. That last one is handed the word, and the lock is
 * then a stored id (lock.h): the next taker takes it back, so a reader
 * still reads and nothing is lost.
 */
static void what_a_peer_stores_in_handoff(void)
{
	static const uint32_t junk[] = { UP_END_ROLE_MASK, 0xffffffffu, UP_LOCK_WAITERS | 1u };
	struct up_pipe *p;
	struct up_end *holder, *idle, *w;
	_Atomic uint32_t *word, *ho;
	char buf[MSG];
	size_t i;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &holder));
	CHECK_OK(up_open(p, UP_RD, &idle));
	CHECK_OK(up_open(p, UP_WR, &w));
	word = &p->ln->rlock.word;
	ho = &p->ln->rlock.handoff;
	for (i = 0; i <= sizeof(junk) / sizeof(junk[0]); i++) {
		CHECK_OK(up__lock_take(holder, word, false));
		atomic_store(ho, i < sizeof(junk) / sizeof(junk[0]) ? junk[i] : holder->lock_id);
		up__lock_drop(holder, word);
		CHECK_EQ(atomic_load(word), 0);
		CHECK_EQ(atomic_load(ho), 0);
	}

	CHECK_EQ(up_write(w, "hello", 5), 5);
	CHECK_OK(up__lock_take(holder, word, false));
	atomic_store(ho, idle->lock_id);
	up__lock_drop(holder, word);
	CHECK_EQ(atomic_load(word) & ~UP_LOCK_WAITERS, idle->lock_id);
	CHECK_EQ(up_read(holder, buf, sizeof(buf)), 5);
	CHECK(memcmp(buf, "hello", 5) == 0);
	CHECK_EQ(up_write(w, "more", 4), 4);
	CHECK_EQ(up_read(idle, buf, sizeof(buf)), 4);
	CHECK(!up__is_broken(p));
	up_close(w);
	up_close(idle);
	up_close(holder);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	RUN(the_drop_hands_the_word_to_the_queued_sleeper);
	RUN(a_sleeper_that_times_out_leaves_the_queue);
	RUN(what_a_peer_stores_in_handoff);
	return 0;
}
