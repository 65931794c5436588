/* SPDX-License-Identifier: MIT */
/*
 * numa.c - bind a segment to a NUMA node, and read back where it lives.
 *
 * The binding happens after mmap and before the first touch, so every page
 * of the segment (header, slot ring, pool, data) is allocated on the node.
 * node -1 leaves the caller's memory policy in charge (numactl --membind or
 * --preferred). Without libnuma, or on a kernel without NUMA, the machine is
 * one node: node 0 is accepted, others are -EINVAL.
 *
 * up__numa_check() is the one place that decides which nodes are possible:
 * the segment (up__numa_bind) and the private buffers (up_buf_alloc, in
 * alloc_node.c) both use it, so the two accept and refuse the same nodes.
 */
#include "up_int.h"

#ifdef UP_HAVE_NUMA
#include <numa.h>
#include <numaif.h>

/* Nodes an mbind() mask can name; larger numbers are -EINVAL. */
#define UP_NUMA_MASK_LONGS 16
#define UP_NUMA_MASK_NODES ((int)(sizeof(unsigned long) * 8 * UP_NUMA_MASK_LONGS))

int up__numa_check(int node)
{
	if (node < -1)
		return -EINVAL;
	if (node == -1)
		return 0;
	if (numa_available() < 0)
		return node == 0 ? 0 : -EINVAL;
	if (node > numa_max_node() || node >= UP_NUMA_MASK_NODES ||
	    !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned int)node))
		return -EINVAL;
	return 1;
}

int up__numa_mbind(void *addr, size_t len, int node, unsigned int flags)
{
	unsigned long mask[UP_NUMA_MASK_LONGS] = { 0 };
	const int bits = 8 * (int)sizeof(unsigned long);

	if (node < 0 || node >= UP_NUMA_MASK_NODES)
		return -EINVAL;
	mask[node / bits] |= 1ul << (node % bits);
	if (mbind(addr, len, MPOL_BIND, mask, sizeof(mask) * 8, flags) < 0)
		return -errno;
	return 0;
}

int up__numa_bind(void *addr, size_t len, int node)
{
	int r;

	if (node < 0)
		return 0;
	r = up__numa_check(node);
	if (r <= 0)
		return r;
	return up__numa_mbind(addr, len, node, 0);
}

int up__numa_node_of(const void *addr)
{
	int node = -1;

	if (numa_available() < 0)
		return 0;
	/* MPOL_F_NODE|MPOL_F_ADDR: the node the page at addr is on now. */
	if (get_mempolicy(&node, NULL, 0, (void *)(uintptr_t)addr,
			  MPOL_F_NODE | MPOL_F_ADDR) < 0)
		return -1;
	return node;
}
#else
int up__numa_check(int node)
{
	return node == -1 || node == 0 ? 0 : -EINVAL;
}

int up__numa_mbind(void *addr, size_t len, int node, unsigned int flags)
{
	(void)addr;
	(void)len;
	(void)node;
	(void)flags;
	return -ENOSYS;
}

int up__numa_bind(void *addr, size_t len, int node)
{
	(void)addr;
	(void)len;
	return node <= 0 ? 0 : -EINVAL;
}

int up__numa_node_of(const void *addr)
{
	(void)addr;
	return 0;
}
#endif
