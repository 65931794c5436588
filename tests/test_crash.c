/* SPDX-License-Identifier: MIT */
/*
 * test_crash.c - kill -9 a writer process at random points, over and over.
 *
 * Each iteration forks a writer process that attaches the pipe and writes
 * framed records (up_write, or up_reserve + fill + up_commit), while the
 * parent kills it with SIGKILL after a random delay: mid-reserve, mid-copy,
 * mid-publish, holding the writers' lock, holding a page batch. The parent
 * holds a writer end itself (so the reader never sees end of stream) and a
 * reader thread checks every record:
 *   - intact (checksum over header and payload): nothing half-visible;
 *   - per writer generation, sequence numbers 0, 1, 2, ... with no gap and
 *     no repeat: delivered exactly once, in order;
 *   - every record whose write returned before the kill (the child bumps a
 *     shared counter after each) was delivered.
 * The survivors must never deadlock: the next child must be able to write
 * (a dead lock holder is taken over, its pages recovered) and the whole run
 * is bounded by a watchdog. Prints seed=N; --seed, --iters to replay.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "uringpipe.h"

#define REC_MAGIC 0x43524153u /* "CRAS" */
#define MAX_GEN   100000

struct rec_hdr {
	uint32_t magic;
	uint32_t gen;
	uint32_t seq;
	uint32_t len;      /* whole record, header included */
	uint64_t sum;      /* FNV-1a of the payload, seeded with gen/seq */
};

struct shared {
	_Atomic uint32_t committed[MAX_GEN / 64]; /* indexed by gen % size */
	_Atomic uint32_t ready;
};

static struct shared *sh;

static uint64_t fnv(uint64_t s, const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		s ^= p[i];
		s *= 0x100000001b3ull;
	}
	return s;
}

static size_t make_record(unsigned char *buf, uint32_t gen, uint32_t seq, uint64_t *rng)
{
	struct rec_hdr h;
	size_t len, i;

	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	len = sizeof(h) + (size_t)(*rng % (UP_PIPE_BUF - sizeof(h) + 1));
	for (i = sizeof(h); i < len; i++)
		buf[i] = (unsigned char)(seq * 31 + i * 7 + gen);
	h.magic = REC_MAGIC;
	h.gen = gen;
	h.seq = seq;
	h.len = (uint32_t)len;
	h.sum = fnv(((uint64_t)gen << 32) | seq, buf + sizeof(h), len - sizeof(h));
	memcpy(buf, &h, sizeof(h));
	return len;
}

/* The victim: closes its copies of the parent's ends (@inh: the reader and
 * the holding writer, ends of its own since the fork; the writer's would
 * hold the stream open after the parent's closed), then writes until
 * killed. */
static void child_main(int fd, uint32_t gen, uint64_t seed, struct up_end **inh)
{
	static unsigned char buf[UP_PIPE_BUF];
	struct up_pipe *p;
	struct up_end *w;
	uint64_t rng = seed | 1;
	uint32_t seq;

	harness_close_inherited(inh, 2);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (up_pipe_attach(fd, &p) < 0 || up_open(p, UP_WR, &w) < 0)
		_exit(3);
	atomic_store(&sh->ready, gen);
	for (seq = 0;; seq++) {
		size_t len = make_record(buf, gen, seq, &rng);

		if (rng & 1) {
			ssize_t n = up_write(w, buf, len);

			if (n != (ssize_t)len)
				_exit(4);
		} else {
			struct iovec iov[2];
			int cnt = 2;
			ssize_t n = up_reserve(w, len, iov, &cnt);
			size_t off = 0;
			int i;

			/* A record must land in one page to stay atomic. */
			if (n < (ssize_t)len || cnt != 1) {
				if (up_commit(w, 0) < 0 || up_write(w, buf, len) != (ssize_t)len)
					_exit(5);
			} else {
				for (i = 0; i < cnt; i++) {
					memcpy(iov[i].iov_base, buf + off, iov[i].iov_len);
					off += iov[i].iov_len;
				}
				if (up_commit(w, len) < 0)
					_exit(6);
			}
		}
		atomic_store(&sh->committed[gen % (MAX_GEN / 64)], seq + 1);
	}
}

struct reader_state {
	struct up_end *r;
	uint32_t cur_gen;    /* generation being received */
	uint32_t next_seq;   /* expected next seq of cur_gen */
	uint64_t records;
	uint32_t gens_seen;
	_Atomic int failed; /* read by the main thread while the reader runs */
};

static void gen_done(struct reader_state *st, uint32_t gen, uint32_t got)
{
	uint32_t committed = atomic_load(&sh->committed[gen % (MAX_GEN / 64)]);

	/* Everything whose write returned before the kill arrived; at most
	 * the one record in flight at the kill may have arrived beyond it. */
	if (got < committed || got > committed + 1) {
		fprintf(stderr, "gen %u: %u records delivered, %u committed\n", gen, got,
			committed);
		st->failed = 1;
	}
}

static void *reader_main(void *arg)
{
	struct reader_state *st = arg;
	static unsigned char buf[1 << 16];
	size_t have = 0;

	for (;;) {
		ssize_t n = up_read(st->r, buf + have, sizeof(buf) - have);
		size_t off = 0;

		if (n <= 0) {
			if (n < 0) {
				fprintf(stderr, "reader: %s\n", up_strerror((int)n));
				st->failed = 1;
			}
			break;
		}
		have += (size_t)n;
		while (have - off >= sizeof(struct rec_hdr)) {
			struct rec_hdr h;

			memcpy(&h, buf + off, sizeof(h));
			if (h.magic != REC_MAGIC || h.len < sizeof(h) || h.len > UP_PIPE_BUF) {
				fprintf(stderr, "torn or corrupt record header after %llu records\n",
					(unsigned long long)st->records);
				st->failed = 1;
				return NULL;
			}
			if (have - off < h.len)
				break;
			if (fnv(((uint64_t)h.gen << 32) | h.seq, buf + off + sizeof(h),
				h.len - sizeof(h)) != h.sum) {
				fprintf(stderr, "record gen %u seq %u: payload corrupt\n", h.gen, h.seq);
				st->failed = 1;
				return NULL;
			}
			if (h.gen != st->cur_gen) {
				if (h.gen < st->cur_gen || h.seq != 0) {
					fprintf(stderr, "gen %u seq %u after gen %u: order broken\n",
						h.gen, h.seq, st->cur_gen);
					st->failed = 1;
					return NULL;
				}
				if (st->cur_gen)
					gen_done(st, st->cur_gen, st->next_seq);
				/* Victims killed before any record: none may
				 * have had one committed. */
				for (uint32_t g = st->cur_gen + 1; g < h.gen; g++)
					gen_done(st, g, 0);
				st->cur_gen = h.gen;
				st->next_seq = 0;
				st->gens_seen++;
			}
			if (h.seq != st->next_seq) {
				fprintf(stderr, "gen %u: seq %u, expected %u (lost or repeated)\n",
					h.gen, h.seq, st->next_seq);
				st->failed = 1;
				return NULL;
			}
			st->next_seq++;
			st->records++;
			off += h.len;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	if (have) {
		fprintf(stderr, "%zu bytes of a partial record at the end\n", have);
		st->failed = 1;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL), rng;
	unsigned iters = 200, i;
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *hold;
	struct reader_state st = { 0 };
	pthread_t t;

	for (i = 1; (int)i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && (int)i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iters") && (int)i + 1 < argc)
			iters = (unsigned)atoi(argv[++i]);
	}
	printf("seed=%llu iters=%u\n", (unsigned long long)seed, iters);
	fflush(stdout);
	if (iters >= MAX_GEN)
		iters = MAX_GEN - 1;
	harness_watchdog(60 + iters / 5);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	rng = seed | 1;

	up_config_init(&cfg);
	cfg.capacity = 256 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD, &st.r));
	CHECK_OK(up_open(p, UP_WR, &hold)); /* no end of stream between victims */
	CHECK_EQ(pthread_create(&t, NULL, reader_main, &st), 0);

	for (i = 1; i <= iters && !st.failed; i++) {
		struct timespec d;
		pid_t pid;
		int status;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		atomic_store(&sh->committed[i % (MAX_GEN / 64)], 0);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			child_main(up_pipe_fd(p), i, rng, (struct up_end *[]){ st.r, hold });
		/* Let it get going, then kill it at a random point: up to 3 ms
		 * after it announced itself (load shaping, not synchronisation:
		 * any kill point must be survivable). */
		while (atomic_load(&sh->ready) != (uint32_t)i) {
			if (waitpid(pid, &status, WNOHANG) == pid) {
				fprintf(stderr, "victim %u exited before starting (status %d)\n", i,
					status);
				st.failed = 1;
				break;
			}
			sched_yield();
		}
		if (st.failed)
			break;
		d.tv_sec = 0;
		d.tv_nsec = (long)(rng % 3000000);
		nanosleep(&d, NULL);
		CHECK_SYS(kill(pid, SIGKILL));
		CHECK(waitpid(pid, &status, 0) == pid);
		if (!WIFSIGNALED(status)) {
			fprintf(stderr, "victim %u exited by itself (code %d): a write failed\n", i,
				WEXITSTATUS(status));
			st.failed = 1;
		}
	}
	CHECK_OK(up_close(hold));
	CHECK_EQ(pthread_join(t, NULL), 0);
	if (st.cur_gen)
		gen_done(&st, st.cur_gen, st.next_seq);
	printf("# %u victims killed, %u generations delivered, %llu records checked\n",
	       i - 1, st.gens_seen, (unsigned long long)st.records);
	CHECK(!st.failed);
	CHECK_OK(up_close(st.r));
	up_pipe_release(p);
	printf("ok crash_loop\n");
	return 0;
}
