/* SPDX-License-Identifier: MIT */
/*
 * test_numa.c - placement: the node reported is where the pages are.
 *
 * up_stats().numa_node is read back from the kernel (get_mempolicy with
 * MPOL_F_NODE|MPOL_F_ADDR), so these checks compare the request with the
 * kernel's answer, page by page, using move_pages(2) in query mode on the
 * data pages too, not just the header. Cases needing two nodes skip (77)
 * on a one-node machine; `--expect-node N` is used by the CTest that runs
 * this under `numactl --membind=N` to check that the default (-1) follows
 * the caller's memory policy.
 */
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "up_int.h"

/*
 * Every page of the segment (header, lines, ring, pool, data) on @node?
 * Pages are faulted in by their first touch, so each is read here first (a
 * read fault of a shared memfd page allocates it); the segment's memory
 * policy is the file's, so where they land does not depend on who touches
 * them, or how.
 */
static void check_all_pages_on(struct up_pipe *p, int node)
{
	size_t sys = 4096, n = p->g.off.size / sys, i;
	void **addrs = calloc(n, sizeof(*addrs));
	int *status = calloc(n, sizeof(*status));

	CHECK(addrs && status);
	for (i = 0; i < n; i++)
		(void)*(volatile unsigned char *)(p->base + i * sys);
	for (i = 0; i < n; i++)
		addrs[i] = p->base + i * sys;
	CHECK_SYS(move_pages(0, (unsigned long)n, addrs, NULL, status, 0));
	for (i = 0; i < n; i++) {
		if (status[i] != node) {
			fprintf(stderr, "page %zu of %zu is on node %d, not %d\n", i, n,
				status[i], node);
			exit(1);
		}
	}
	free(addrs);
	free(status);
}

static void node_zero_asked_and_reported(void)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_stats st;

	up_config_init(&cfg);
	cfg.numa_node = 0;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.numa_node, 0);
	if (numa_available() >= 0)
		check_all_pages_on(p, 0);
	up_pipe_release(p);
}

static void impossible_node_rejected(void)
{
	struct up_config cfg;
	struct up_pipe *p = NULL;
	int max = numa_available() >= 0 ? numa_max_node() : 0;

	up_config_init(&cfg);
	cfg.numa_node = max + 1;
	CHECK_EQ(up_pipe_create(&cfg, &p), -EINVAL);
	cfg.numa_node = 4096;
	CHECK_EQ(up_pipe_create(&cfg, &p), -EINVAL);
	cfg.numa_node = -2;
	CHECK_EQ(up_pipe_create(&cfg, &p), -EINVAL);
	CHECK(p == NULL);
}

static void every_node_honoured(void)
{
	int node, max;

	max = numa_max_node();
	for (node = 0; node <= max; node++) {
		struct up_config cfg;
		struct up_pipe *p;
		struct up_stats st;

		if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node))
			continue;
		up_config_init(&cfg);
		cfg.numa_node = node;
		CHECK_OK(up_pipe_create(&cfg, &p));
		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.numa_node, node);
		check_all_pages_on(p, node);
		up_pipe_release(p);
	}
}

/* Under numactl --membind=N: the default follows the caller's policy. */
static int expect_node = -1;

static void default_follows_policy(void)
{
	struct up_pipe *p;
	struct up_stats st;

	if (expect_node < 0)
		return;
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.numa_node, expect_node);
	check_all_pages_on(p, expect_node);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	int i, two_nodes = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--expect-node") == 0 && i + 1 < argc)
			expect_node = atoi(argv[++i]);
		else if (strcmp(argv[i], "--two-nodes") == 0)
			two_nodes = 1;
	}
	harness_watchdog(60);
	if (two_nodes) {
		if (numa_available() < 0 || numa_max_node() < 1) {
			printf("skip: one NUMA node here\n");
			return 77;
		}
		RUN(every_node_honoured);
		return 0;
	}
	RUN(node_zero_asked_and_reported);
	RUN(impossible_node_rejected);
	RUN(default_follows_policy);
	return 0;
}
