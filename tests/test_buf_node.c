/* SPDX-License-Identifier: MIT */
/*
 * test_buf_node.c - up_buf_alloc/up_buf_free: private buffers on a node.
 *
 * Placement is read back from the kernel, not from the library: move_pages(2)
 * in query mode gives the node of every page, and get_mempolicy(2) with
 * MPOL_F_ADDR the policy of the mapping under every page. The second check
 * is what can fail on a one-node machine, where every page is on node 0
 * anyway: a buffer asked for on node N must be MPOL_BIND to exactly {N},
 * and a -1 buffer must carry no policy of its own (the caller's applies).
 *
 * Arguments: a case name runs that case only; --two-nodes runs the cases
 * that need a second node (77 on a one-node machine); --expect-node N says
 * which node the caller's policy puts -1 buffers on (for the CTest run under
 * numactl --membind=N). The CTest test_buf_node_mmap runs it all again with
 * UP_BUF_FORCE_MMAP=1: the jemalloc build's mmap fallback.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "uringpipe.h"

#ifdef UP_TEST_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

static const size_t sizes[] = {1, 4 * KIB, MIB + 1, 8 * MIB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t page;       /* the system page size */
static int expect_node = -1;

static size_t whole_pages(size_t n)
{
	return (n + page - 1) / page * page;
}

static int have_numa(void)
{
#ifdef UP_TEST_HAVE_NUMA
	return numa_available() >= 0;
#else
	return 0;
#endif
}

static int max_node(void)
{
#ifdef UP_TEST_HAVE_NUMA
	if (numa_available() >= 0)
		return numa_max_node();
#endif
	return 0;
}

/*
 * Where -1 buffers land: the node of the caller's policy if it names one
 * (numactl --membind/--preferred with one node), else the local node of the
 * CPU this thread is pinned to. -2: cannot tell (interleave, several nodes).
 */
static int node_for_default(void)
{
#ifdef UP_TEST_HAVE_NUMA
	unsigned long mask[16] = {0};
	int mode = 0, cpu, n, found = -1, count = 0;
	cpu_set_t set;

	if (expect_node >= 0)
		return expect_node;
	CHECK_SYS(get_mempolicy(&mode, mask, sizeof(mask) * 8, NULL, 0));
	if (mode == MPOL_BIND || mode == MPOL_PREFERRED) {
		for (n = 0; n < (int)(sizeof(mask) * 8); n++) {
			if (mask[n / 64] & (1ul << (n % 64))) {
				found = n;
				count++;
			}
		}
		return count == 1 ? found : -2;
	}
	if (mode != MPOL_DEFAULT)
		return -2;
	cpu = sched_getcpu();
	CHECK(cpu >= 0);
	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	CHECK_SYS(sched_setaffinity(0, sizeof(set), &set));
	return numa_node_of_cpu(cpu);
#else
	return 0;
#endif
}

/* Every page of [p, p + len) on @node (move_pages), and the mapping under
 * each bound to exactly {node} (@node >= 0 asked) or unbound (-1 asked). */
static void check_placement(const void *p, size_t len, int asked, int node)
{
#ifdef UP_TEST_HAVE_NUMA
	size_t n = len / page, i;
	void **addrs;
	int *status;

	if (!have_numa())
		return;
	addrs = calloc(n, sizeof(*addrs));
	status = calloc(n, sizeof(*status));
	CHECK(addrs && status);
	for (i = 0; i < n; i++)
		addrs[i] = (char *)(uintptr_t)p + i * page;
	CHECK_SYS(move_pages(0, (unsigned long)n, addrs, NULL, status, 0));
	for (i = 0; i < n; i++) {
		unsigned long mask[16] = {0};
		int mode = -1, b, bits = 0;

		if (node >= 0 && status[i] != node) {
			fprintf(stderr, "page %zu of %zu (buffer %p) is on node %d, not %d\n", i,
				n, p, status[i], node);
			harness_fail();
		}
		CHECK(status[i] >= 0);
		CHECK_SYS(get_mempolicy(&mode, mask, sizeof(mask) * 8, addrs[i], MPOL_F_ADDR));
		for (b = 0; b < (int)(sizeof(mask) * 8); b++)
			bits += (int)((mask[b / 64] >> (b % 64)) & 1);
		if (asked >= 0) {
			if (mode != MPOL_BIND || bits != 1 ||
			    !(mask[asked / 64] & (1ul << (asked % 64)))) {
				fprintf(stderr, "page %zu of %zu (buffer %p): policy %d with %d "
					"nodes, not MPOL_BIND to node %d\n", i, n, p, mode, bits,
					asked);
				harness_fail();
			}
		} else if (mode != MPOL_DEFAULT) {
			fprintf(stderr, "page %zu of %zu (buffer %p, node -1): policy %d, not "
				"the default\n", i, n, p, mode);
			harness_fail();
		}
	}
	free(addrs);
	free(status);
#else
	(void)p;
	(void)len;
	(void)asked;
	(void)node;
#endif
}

/* Allocate every size at once on @asked, fill every byte, check the
 * pattern survived (no overlap), the alignment, the ranges and placement. */
static void sizes_on(int asked, int node, uint64_t seed)
{
	void *b[NSIZES];
	size_t i, j;

	for (i = 0; i < NSIZES; i++) {
		b[i] = (void *)&b; /* must be overwritten */
		CHECK_EQ(up_buf_alloc(sizes[i], asked, &b[i]), 0);
		CHECK(b[i] != NULL && b[i] != (void *)&b);
		CHECK_EQ((uintptr_t)b[i] % 4096, 0);
		CHECK_EQ((uintptr_t)b[i] % page, 0);
		harness_fill(seed + i, 0, b[i], sizes[i]);
	}
	for (i = 0; i < NSIZES; i++) {
		uintptr_t a0 = (uintptr_t)b[i], a1 = a0 + whole_pages(sizes[i]);

		CHECK_EQ(harness_verify(seed + i, 0, b[i], sizes[i]), (size_t)-1);
		for (j = 0; j < NSIZES; j++) {
			uintptr_t c0 = (uintptr_t)b[j], c1 = c0 + whole_pages(sizes[j]);

			if (i != j && a0 < c1 && c0 < a1) {
				fprintf(stderr, "buffers %zu [%#lx, %#lx) and %zu [%#lx, %#lx) "
					"share pages\n", i, (unsigned long)a0, (unsigned long)a1, j,
					(unsigned long)c0, (unsigned long)c1);
				harness_fail();
			}
		}
		check_placement(b[i], whole_pages(sizes[i]), asked, node);
	}
	for (i = 0; i < NSIZES; i++)
		up_buf_free(b[i], sizes[i]);
}

/* Before any other case: threads race to create node 0's arena. */
#define RACERS 4

struct racer {
	pthread_barrier_t *bar;
	void *buf;
	size_t size;
	int r;
};

static void *racer_main(void *arg)
{
	struct racer *rc = arg;

	pthread_barrier_wait(rc->bar);
	rc->r = up_buf_alloc(rc->size, 0, &rc->buf);
	if (rc->r == 0)
		memset(rc->buf, 0x5a, rc->size);
	return NULL;
}

static void first_use_race(void)
{
	struct racer rc[RACERS];
	pthread_t tid[RACERS];
	pthread_barrier_t bar;
	int i;

	CHECK_EQ(pthread_barrier_init(&bar, NULL, RACERS), 0);
	memset(rc, 0, sizeof(rc));
	for (i = 0; i < RACERS; i++) {
		rc[i].bar = &bar;
		rc[i].size = (size_t)(i + 1) * 40 * KIB;
		CHECK_EQ(pthread_create(&tid[i], NULL, racer_main, &rc[i]), 0);
	}
	for (i = 0; i < RACERS; i++)
		CHECK_EQ(pthread_join(tid[i], NULL), 0);
	for (i = 0; i < RACERS; i++) {
		CHECK_EQ(rc[i].r, 0);
		check_placement(rc[i].buf, whole_pages(rc[i].size), 0, 0);
	}
	/* Freed by this thread, not the ones that allocated. */
	for (i = 0; i < RACERS; i++)
		up_buf_free(rc[i].buf, rc[i].size);
	CHECK_EQ(pthread_barrier_destroy(&bar), 0);
}

static void default_node(void)
{
	sizes_on(-1, node_for_default(), 11);
}

static void node_zero(void)
{
	sizes_on(0, 0, 23);
}

/* Freed memory comes back from the node's arena: still on the node. */
static void reuse_stays_on_node(void)
{
	int round;

	for (round = 0; round < 8; round++) {
		size_t n = (size_t)(round + 1) * 3 * KIB + (size_t)round;
		void *p = NULL, *q = NULL;

		CHECK_EQ(up_buf_alloc(n, 0, &p), 0);
		CHECK_EQ(up_buf_alloc(n, -1, &q), 0);
		harness_fill((uint64_t)round, 0, p, n);
		harness_fill((uint64_t)round + 100, 0, q, n);
		CHECK_EQ(harness_verify((uint64_t)round, 0, p, n), (size_t)-1);
		check_placement(p, whole_pages(n), 0, 0);
		check_placement(q, whole_pages(n), -1, -1);
		up_buf_free(p, n);
		up_buf_free(q, n);
	}
}

/* Allocated in one thread, freed in another. */
static void *free_other(void *arg)
{
	up_buf_free(arg, 3 * MIB);
	return NULL;
}

static void free_in_other_thread(void)
{
	pthread_t t;
	void *p = NULL;

	CHECK_EQ(up_buf_alloc(3 * MIB, 0, &p), 0);
	memset(p, 1, 3 * MIB);
	CHECK_EQ(pthread_create(&t, NULL, free_other, p), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
}

/* Under UP_BUF_FORCE_MMAP=1 a bound buffer is a mapping of its own: freeing
 * it must unmap exactly it (found in the library's list, not given to
 * jemalloc), and nothing else. Without NUMA nothing is bound, so node 0
 * buffers are ordinary ones and this does not apply. */
static void forced_mmap_unmaps(void)
{
	const char *v = getenv("UP_BUF_FORCE_MMAP");
	void *p = NULL, *q = NULL;
	size_t n = 5 * page + 3;

	if (!v || strcmp(v, "1") != 0 || !have_numa())
		return;
	CHECK_EQ(up_buf_alloc(n, 0, &p), 0);
	CHECK_EQ(up_buf_alloc(n, 0, &q), 0);
	memset(p, 7, n);
	memset(q, 8, n);
	check_placement(p, whole_pages(n), 0, 0);
	up_buf_free(p, n);
	/* msync fails with ENOMEM on an unmapped range. */
	CHECK_EQ(msync(p, whole_pages(n), MS_ASYNC), -1);
	CHECK_EQ(errno, ENOMEM);
	CHECK_EQ(msync(q, whole_pages(n), MS_ASYNC), 0);
	CHECK_EQ(((unsigned char *)q)[n - 1], 8);
	up_buf_free(q, n);
}

/* A child of fork() allocates and frees too (the library's lock is taken
 * around fork, so the child never inherits it held). */
static void after_fork(void)
{
	void *p = NULL;
	pid_t pid;

	CHECK_EQ(up_buf_alloc(100 * KIB, 0, &p), 0);
	memset(p, 3, 100 * KIB);
	harness_block_sigchld();
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		void *c = NULL, *d = NULL;

		harness_watchdog(30);
		CHECK_EQ(((unsigned char *)p)[100 * KIB - 1], 3);
		CHECK_EQ(up_buf_alloc(200 * KIB, 0, &c), 0);
		CHECK_EQ(up_buf_alloc(200 * KIB, -1, &d), 0);
		memset(c, 4, 200 * KIB);
		memset(d, 5, 200 * KIB);
		check_placement(c, whole_pages(200 * KIB), 0, 0);
		up_buf_free(c, 200 * KIB);
		up_buf_free(d, 200 * KIB);
		up_buf_free(p, 100 * KIB);
		_exit(0);
	}
	harness_reap_ok(pid, 30, "after_fork");
	up_buf_free(p, 100 * KIB);
}

static void bad_arguments(void)
{
	void *sentinel = (void *)&sentinel, *p = sentinel;
	int max = max_node();

	CHECK_EQ(up_buf_alloc(0, -1, &p), -EINVAL);
	CHECK_EQ(up_buf_alloc(0, 0, &p), -EINVAL);
	CHECK_EQ(up_buf_alloc(4096, -1, NULL), -EINVAL);
	CHECK_EQ(up_buf_alloc(4096, max + 1, &p), -EINVAL);
	CHECK_EQ(up_buf_alloc(4096, 4096, &p), -EINVAL);
	CHECK_EQ(up_buf_alloc(4096, INT_MAX, &p), -EINVAL);
	CHECK_EQ(up_buf_alloc(4096, -2, &p), -EINVAL);
	CHECK_EQ(up_buf_alloc(4096, INT_MIN, &p), -EINVAL);
	CHECK(p == sentinel); /* untouched on error */
	/* Too large to exist: refused, not crashed. */
	CHECK_EQ(up_buf_alloc(SIZE_MAX, -1, &p), -ENOMEM);
	CHECK_EQ(up_buf_alloc(SIZE_MAX, 0, &p), -ENOMEM);
	CHECK_EQ(up_buf_alloc(SIZE_MAX / 2, 0, &p), -ENOMEM);
	CHECK_EQ(up_buf_alloc((size_t)1 << 50, 0, &p), -ENOMEM);
	CHECK_EQ(up_buf_alloc((size_t)1 << 50, -1, &p), -ENOMEM);
	CHECK(p == sentinel);
	up_buf_free(NULL, 0);
	up_buf_free(NULL, 4096);
}

/* The same nodes as up_pipe_create accepts and refuses. */
static void same_nodes_as_pipes(void)
{
	int node;

	for (node = -3; node <= max_node() + 2; node++) {
		struct up_config cfg;
		struct up_pipe *pp = NULL;
		void *b = NULL;
		int rp, rb;

		up_config_init(&cfg);
		cfg.numa_node = node;
		rp = up_pipe_create(&cfg, &pp);
		rb = up_buf_alloc(100, node, &b);
		if (rp != rb) {
			fprintf(stderr, "node %d: up_pipe_create %d, up_buf_alloc %d\n", node, rp,
				rb);
			harness_fail();
		}
		up_pipe_release(pp);
		up_buf_free(b, 100);
	}
}

static void every_node(void)
{
	int node;

	for (node = 0; node <= max_node(); node++) {
#ifdef UP_TEST_HAVE_NUMA
		if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned int)node))
			continue;
#endif
		sizes_on(node, node, 1000 + (uint64_t)node);
	}
}

int main(int argc, char **argv)
{
	int i, two_nodes = 0;

	harness_init(argc, argv);
	harness_watchdog(60);
	page = (size_t)sysconf(_SC_PAGESIZE);
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--expect-node") == 0 && i + 1 < argc)
			expect_node = atoi(argv[++i]);
		else if (strcmp(argv[i], "--two-nodes") == 0)
			two_nodes = 1;
	}
	if (two_nodes) {
		if (!have_numa() || max_node() < 1)
			SKIP("one NUMA node here");
		RUN(every_node);
		return 0;
	}
	RUN(first_use_race);
	RUN(default_node);
	RUN(node_zero);
	RUN(reuse_stays_on_node);
	RUN(free_in_other_thread);
	RUN(forced_mmap_unmaps);
	RUN(after_fork);
	RUN(bad_arguments);
	RUN(same_nodes_as_pipes);
	return 0;
}
