/* SPDX-License-Identifier: MIT */
/*
 * up_ceiling - how fast any pipe could be on this machine at message sizes:
 * a bare single-producer single-consumer byte ring beside the kernel pipe
 * and uringpipe, in the same alternating rounds.
 *
 * Usage: uringpipe-ceiling [--sizes LIST] [--rounds N] [--mib M]
 *
 * One writer thread on cpu0 writes SIZE bytes per call, one reader thread on
 * cpu1 reads SIZE bytes per call into its own buffer and sums every byte,
 * as uringpipe-cat --bench's readers do. Modes:
 *   pipe       a kernel pipe of 1 MiB (F_SETPIPE_SZ), write(2)/read(2);
 *   bare       a 1 MiB byte ring in private memory with the cached-index
 *              scheme of FastForward/MCRingBuffer-style queues: the writer
 *              publishes its position after every write (a reader may be
 *              waiting for that message), the reader publishes its own
 *              every 4 KiB, and each side loads the other's position only
 *              when the copy it keeps says the ring is full or empty. No
 *              sleeping, no locks, no checks of what the other side stored:
 *              what is left is the copy in, the copy out and the line
 *              transfers between the cores;
 *   bare-page  the same, but a reader that has caught up waits (spinning,
 *              at most 20 us) until a whole 4 KiB page is there, as
 *              uringpipe's coalescing reader does;
 *   +sc        bare-page with the writer's publish a sequentially
 *              consistent store followed by a load of a waiters word, the
 *              Dekker half a writer that may have to wake a sleeping
 *              reader pays (xchg on x86);
 *   +lock      +sc with every read inside a lock word taken by CAS and let
 *              go by an exchange, as a pipe with several readers needs;
 *   uringpipe  up_write()/up_read() on a pipe of 1 MiB.
 * Each round runs every mode once, in turn; a line per round and the
 * medians, in MB/s and as ratios to the kernel pipe of the same round.
 * The figures move between runs on a VM; compare the ratios of one run.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uringpipe.h>

#include "byte_sum.h"

#define CAP (1u << 20)
#define PUB (4096u)
#define MAX_SIZE (64u << 10)
#define MAX_ROUNDS 15
#define MAX_SIZES 8

enum mode { M_PIPE, M_BARE, M_BARE_PAGE, M_BARE_SC, M_BARE_LOCK, M_UP, M_COUNT };
static const char *const mode_name[M_COUNT] = { "pipe", "bare", "bare-page", "+sc", "+lock",
						"uringpipe" };

struct bare {
	_Alignas(64) _Atomic uint64_t head; /* bytes written, stored by the writer */
	_Alignas(64) _Atomic uint64_t tail; /* bytes read, stored by the reader */
	_Alignas(64) _Atomic uint32_t nwait; /* sleeping readers: never any here */
	_Alignas(64) _Atomic uint32_t lock;  /* the readers' lock of +lock */
	_Alignas(64) unsigned char ring[CAP];
};

struct run {
	enum mode m;
	size_t size;
	uint64_t total;
	int fd[2];
	struct up_end *up[2];
	struct bare *b;
	pthread_barrier_t bar;
	uint64_t sum_w, sum_r;
	int err;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static inline void relax(unsigned *spins)
{
	if (++*spins < 256)
		__builtin_ia32_pause();
	else
		sched_yield(); /* more threads than cores: let the other side run */
}

static bool is_bare(enum mode m)
{
	return m == M_BARE || m == M_BARE_PAGE || m == M_BARE_SC || m == M_BARE_LOCK;
}

static void bare_write(struct run *r, const unsigned char *src)
{
	struct bare *b = r->b;
	const bool sc = r->m == M_BARE_SC || r->m == M_BARE_LOCK;
	uint64_t head = 0, tail_seen = 0;

	while (head < r->total) {
		size_t n = r->size, at = head % CAP, first = n < CAP - at ? n : CAP - at;
		unsigned spins = 0;

		while (head + n - tail_seen > CAP) {
			tail_seen = atomic_load_explicit(&b->tail, memory_order_acquire);
			if (head + n - tail_seen > CAP)
				relax(&spins);
		}
		memcpy(b->ring + at, src, first);
		memcpy(b->ring, src + first, n - first);
		head += n;
		if (sc) {
			atomic_store_explicit(&b->head, head, memory_order_seq_cst);
			if (atomic_load_explicit(&b->nwait, memory_order_seq_cst) != 0)
				abort(); /* nobody sleeps in this probe */
		} else {
			atomic_store_explicit(&b->head, head, memory_order_release);
		}
	}
}

static void bare_read(struct run *r, unsigned char *dst)
{
	struct bare *b = r->b;
	const bool page = r->m != M_BARE, lock = r->m == M_BARE_LOCK;
	uint64_t pos = 0, head_seen = 0, pub = 0, sum = 0;

	while (pos < r->total) {
		size_t n = r->size, at = pos % CAP, first = n < CAP - at ? n : CAP - at;
		unsigned spins = 0;

		if (head_seen - pos < n) {
			uint64_t t0 = 0;

			for (;;) {
				head_seen = atomic_load_explicit(&b->head, memory_order_acquire);
				if (head_seen - pos >= n &&
				    (!page || head_seen - pos >= PUB || head_seen == r->total))
					break;
				if (head_seen - pos >= n) {
					if (t0 == 0)
						t0 = now_ns();
					else if (now_ns() - t0 > 20000)
						break;
				}
				relax(&spins);
			}
		}
		if (lock) {
			uint32_t free_word = 0;

			if (!atomic_compare_exchange_strong_explicit(&b->lock, &free_word, 1,
								     memory_order_acq_rel,
								     memory_order_relaxed))
				abort(); /* one reader: never busy */
		}
		memcpy(dst, b->ring + at, first);
		memcpy(dst + first, b->ring, n - first);
		if (lock)
			(void)atomic_exchange_explicit(&b->lock, 0, memory_order_seq_cst);
		sum += bench_byte_sum(dst, n);
		pos += n;
		if (pos - pub >= PUB || pos == r->total) {
			atomic_store_explicit(&b->tail, pos, memory_order_release);
			pub = pos;
		}
	}
	r->sum_r = sum;
}

static void *writer(void *arg)
{
	struct run *r = arg;
	static unsigned char src[MAX_SIZE];
	uint64_t done = 0;

	pin(0);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + 1);
	for (uint64_t o = 0; o < r->total; o += r->size)
		r->sum_w += bench_byte_sum(src, r->size);
	pthread_barrier_wait(&r->bar);
	if (is_bare(r->m)) {
		bare_write(r, src);
		return NULL;
	}
	while (done < r->total) {
		ssize_t k = r->m == M_PIPE ? write(r->fd[1], src, r->size)
					   : up_write(r->up[1], src, r->size);
		if (k <= 0) {
			r->err = k < 0 && r->m == M_UP ? (int)-k : errno;
			return NULL;
		}
		done += (uint64_t)k; /* writes of at most 64 KiB are whole on both */
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct run *r = arg;
	static unsigned char dst[MAX_SIZE];
	uint64_t got = 0, sum = 0;

	pin(1);
	pthread_barrier_wait(&r->bar);
	if (is_bare(r->m)) {
		bare_read(r, dst);
		return NULL;
	}
	while (got < r->total) {
		ssize_t k = r->m == M_PIPE ? read(r->fd[0], dst, r->size)
					   : up_read(r->up[0], dst, r->size);
		if (k <= 0) {
			r->err = k < 0 && r->m == M_UP ? (int)-k : (k == 0 ? EPIPE : errno);
			return NULL;
		}
		sum += bench_byte_sum(dst, (size_t)k);
		got += (uint64_t)k;
	}
	r->sum_r = sum;
	return NULL;
}

/* One timed run: MB/s, or a negative errno. */
static double run_once(enum mode m, size_t size, uint64_t total)
{
	struct run r = { .m = m, .size = size, .total = total / size * size };
	pthread_t tw, tr;
	struct up_config cfg;
	uint64_t t0, t1;

	if (m == M_PIPE) {
		if (pipe2(r.fd, O_CLOEXEC) < 0 || fcntl(r.fd[1], F_SETPIPE_SZ, (int)CAP) < 0)
			return -errno;
	} else if (m == M_UP) {
		up_config_init(&cfg);
		cfg.capacity = CAP;
		int e = up_pipe2(r.up, &cfg);
		if (e < 0)
			return e;
	} else {
		r.b = aligned_alloc(64, sizeof(*r.b));
		if (!r.b)
			return -ENOMEM;
		memset(r.b, 0, sizeof(*r.b));
	}
	pthread_barrier_init(&r.bar, NULL, 3);
	pthread_create(&tw, NULL, writer, &r);
	pthread_create(&tr, NULL, reader, &r);
	pthread_barrier_wait(&r.bar);
	t0 = now_ns();
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	t1 = now_ns();
	pthread_barrier_destroy(&r.bar);
	if (m == M_PIPE) {
		close(r.fd[0]);
		close(r.fd[1]);
	} else if (m == M_UP) {
		up_close(r.up[0]);
		up_close(r.up[1]);
	} else {
		free(r.b);
	}
	if (r.err)
		return -r.err;
	if (r.sum_r != r.sum_w)
		return -EIO;
	return (double)r.total / 1e6 / ((double)(t1 - t0) / 1e9);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	if (*end != '\0' || v == 0 || v > MAX_SIZE)
		return 0;
	return (size_t)v;
}

static void usage(void)
{
	fprintf(stderr, "usage: uringpipe-ceiling [--sizes LIST] [--rounds N] [--mib M]\n"
			"  sizes up to 64K (default 100,4K), rounds up to %d (default 5),\n"
			"  M MiB per run for the ring modes (default 1024; the kernel\n"
			"  pipe moves an eighth of that at sizes under 4K)\n",
		MAX_ROUNDS);
	exit(2);
}

int main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES] = { 100, 4096 };
	int nsizes = 2, rounds = 5;
	uint64_t mib = 1024;
	static double mbs[MAX_SIZES][M_COUNT][MAX_ROUNDS];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
			char *list = argv[++i], *tok, *save = NULL;

			nsizes = 0;
			for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (nsizes == MAX_SIZES || (sizes[nsizes] = parse_size(tok)) == 0)
					usage();
				nsizes++;
			}
			if (nsizes == 0)
				usage();
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
			if (rounds < 1 || rounds > MAX_ROUNDS)
				usage();
		} else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
			mib = strtoull(argv[++i], NULL, 10);
			if (mib == 0 || mib > (1u << 20))
				usage();
		} else {
			usage();
		}
	}
	printf("size  round");
	for (int m = 0; m < M_COUNT; m++)
		printf(" %12s", mode_name[m]);
	printf("   (MB/s, x the kernel pipe)\n");
	for (int s = 0; s < nsizes; s++) {
		for (int k = 0; k < rounds; k++) {
			printf("%-5zu %5d", sizes[s], k + 1);
			for (int m = 0; m < M_COUNT; m++) {
				uint64_t total = (mib << 20) / (m == M_PIPE && sizes[s] < 4096 ? 8 : 1);
				double v = run_once((enum mode)m, sizes[s], total);

				if (v < 0) {
					fprintf(stderr, "\n%s at %zu bytes: %s\n", mode_name[m], sizes[s],
						strerror((int)-v));
					return 1;
				}
				mbs[s][m][k] = v;
				printf(" %7.0f %4.1f", v, v / mbs[s][M_PIPE][k]);
			}
			printf("\n");
			fflush(stdout);
		}
	}
	printf("medians\n");
	for (int s = 0; s < nsizes; s++) {
		double med[M_COUNT];

		for (int m = 0; m < M_COUNT; m++) {
			qsort(mbs[s][m], (size_t)rounds, sizeof(double), cmp_double);
			med[m] = mbs[s][m][rounds / 2];
		}
		printf("%-5zu %5s", sizes[s], "");
		for (int m = 0; m < M_COUNT; m++)
			printf(" %7.0f %4.1f", med[m], med[m] / med[M_PIPE]);
		printf("\n");
	}
	return 0;
}
