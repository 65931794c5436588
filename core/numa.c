/* SPDX-License-Identifier: MIT */
/*
 * numa.c - bind a segment to a NUMA node, and read back where it lives.
 *
 * The binding happens after mmap and before the first touch, so every page
 * of the segment (header, slot ring, pool, data) is allocated on the node.
 * node -1 leaves the caller's memory policy in charge (numactl --membind or
 * --preferred). Without libnuma, or on a kernel without NUMA, the machine is
 * one node: node 0 is accepted, others are -EINVAL.
 */
#include "up_int.h"

#ifdef UP_HAVE_NUMA
#include <numa.h>
#include <numaif.h>

int up__numa_bind(void *addr, size_t len, int node)
{
	unsigned long mask[16] = { 0 };

	if (node < 0)
		return 0;
	if (numa_available() < 0)
		return node == 0 ? 0 : -EINVAL;
	if (node > numa_max_node() || node >= (int)(sizeof(mask) * 8) ||
	    !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned int)node))
		return -EINVAL;
	mask[node / (8 * (int)sizeof(unsigned long))] |= 1ul << (node % (8 * (int)sizeof(unsigned long)));
	if (mbind(addr, len, MPOL_BIND, mask, sizeof(mask) * 8, 0) < 0)
		return -errno;
	return 0;
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
