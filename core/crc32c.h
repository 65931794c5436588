/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h - the running CRC32C of a byte stream (crc32c.c).
 */
#ifndef UP_CORE_CRC32C_H
#define UP_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Fold @n bytes at @p into the running state @c; the caller inverts the
 * state before the first call and after the last, as CRC32C defines. Any
 * thread; the tables are made on the first call. */
uint32_t up__crc32c_update(uint32_t c, const void *p, size_t n);

#endif /* UP_CORE_CRC32C_H */
