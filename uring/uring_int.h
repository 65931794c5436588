/* SPDX-License-Identifier: MIT */
/*
 * uring_int.h - what uring/ files share: the futex opcodes that Debian 12's
 * liburing 2.3 does not know, and how their SQEs are laid out.
 */
#ifndef UP_URING_INT_H
#define UP_URING_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <liburing.h>

/* Opcode numbers from the kernel's enum io_uring_op (uapi io_uring.h). */
#define UP__IORING_OP_FUTEX_WAIT 51
#define UP__IORING_OP_FUTEX_WAKE 52
/* futex2 flags (uapi futex.h, v6.7+): size only. FUTEX2_PRIVATE (128) is
 * deliberately absent: the peer may be another process. */
#define UP__FUTEX2_SIZE_U32 0x02u
#ifndef FUTEX_BITSET_MATCH_ANY
#define FUTEX_BITSET_MATCH_ANY 0xffffffffu
#endif

/* The installed header predates the futex opcodes; make sure its enum still
 * lines up with the numbers above (SENDMSG_ZC, READ_MULTISHOT, WAITID, ...). */
_Static_assert(IORING_OP_SENDMSG_ZC == 48, "io_uring opcode numbering changed");

/*
 * IORING_OP_FUTEX_WAIT/WAKE as the kernel's io_futex_prep() reads them:
 *   addr  = futex address,   addr2 (the 'off' union) = value to compare
 *   (wait) or number to wake (wake),  addr3 = bitset mask,  fd = futex2
 *   flags; len, the op-flags union (futex_flags), buf_index and file_index
 *   must be 0 or the kernel returns -EINVAL. Zeroing the whole SQE first
 *   also clears ioprio/personality, which io_init_req() checks.
 */
static inline void up__prep_futex(struct io_uring_sqe *sqe, uint8_t op,
				  _Atomic uint32_t *word, uint64_t val)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = op;
	sqe->fd = (int)UP__FUTEX2_SIZE_U32;
	sqe->addr = (uint64_t)(uintptr_t)word;
	sqe->addr2 = val;
	sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
}

#endif /* UP_URING_INT_H */
