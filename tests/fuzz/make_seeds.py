#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the hand-made seeds of tests/fuzz/corpus/ (see fuzz_segment.c for
the input layout). Run from anywhere; existing files of the same name are
overwritten, others (e.g. added by the fuzzer) are left alone."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SEG = os.path.join(HERE, "corpus", "segment")
SIZE = os.path.join(HERE, "corpus", "size")

M_FIX_SUM, M_KEEP_HDR, M_NO_SEAL, M_BAD_SIZE = 1, 2, 4, 8
M_NO_WRITER, M_NO_READER, M_CLOSE_RD1, M_SRC_LEAVE = 16, 32, 64, 128
HDR, LINES, ENDS, SLOTS, POOL, PAGES, ANY = 0, 1, 2, 3, 4, 5, 6
DEFER = 0x80
# offsets inside struct up_shm_lines
READERS, WRITERS, BROKEN = 0, 4, 8
HEAD, POS, WLOCK, RLOCK, PGET, PPUT = 64, 128, 192, 256, 320, 384
RD_WAIT, WR_WAIT = 448, 512


def op(kind, size_idx=0):
    return (size_idx << 3) | kind


W, R, PEEK, CONS, RESV, COMMIT, SCRIB, WRV = range(8)
# every op kind, sizes from small to larger than the pipe
MIX = [op(W, 4), op(R, 2), op(W, 12), op(PEEK, 3), op(CONS, 1), op(RESV, 13),
       op(COMMIT, 7), op(W, 20), op(R, 22), op(WRV, 14), op(PEEK, 0), op(CONS, 11),
       op(SCRIB), op(W, 0), op(R, 22)]


def patch(where, off, data):
    return bytes([where]) + struct.pack("<H", off) + bytes([len(data)]) + data


def u32(v):
    return struct.pack("<I", v & 0xffffffff)


def seed(mode, wr, rd, ops, patches=b""):
    return bytes([mode, wr, rd, len(ops)]) + bytes(ops) + patches


def main():
    os.makedirs(SEG, exist_ok=True)
    os.makedirs(SIZE, exist_ok=True)
    segs = {
        "empty": b"",
        "clean_mix": seed(0, 60, 10, MIX),
        "clean_full": seed(0, 250, 0, MIX),
        "hdr_magic": seed(0, 10, 0, MIX, patch(HDR, 0, b"X")),
        "hdr_pagecount_sum": seed(M_FIX_SUM, 10, 0, MIX, patch(HDR, 28, u32(5))),
        "hdr_pagesize_sum": seed(M_FIX_SUM, 10, 0, MIX, patch(HDR, 24, u32(8192))),
        "hdr_keep_sum": seed(M_FIX_SUM, 10, 0, MIX, patch(HDR, 48, u32(99))),
        "no_seal": seed(M_NO_SEAL | M_KEEP_HDR, 10, 0, MIX),
        "bad_size": seed(M_BAD_SIZE | M_KEEP_HDR, 10, 0, MIX),
        "head_far": seed(M_KEEP_HDR, 60, 0, MIX, patch(LINES, HEAD, u32(1000))),
        "head_back": seed(M_KEEP_HDR, 120, 0, MIX, patch(LINES, HEAD, u32(0xffffffff))),
        "pos_off": seed(M_KEEP_HDR, 60, 0, MIX, patch(LINES, POS + 4, u32(5000))),
        "pos_tail": seed(M_KEEP_HDR, 60, 0, MIX, patch(LINES, POS, u32(7))),
        "slot_page": seed(M_KEEP_HDR, 60, 0, MIX, patch(SLOTS, 0, u32(77))),
        "slot_len": seed(M_KEEP_HDR, 60, 0, MIX, patch(SLOTS, 4, u32(4097))),
        "sentinel_len": seed(M_KEEP_HDR, 0, 0, MIX, patch(SLOTS, 3 * 16 + 4, u32(1))),
        "pool_entry": seed(M_KEEP_HDR, 0, 0, MIX, patch(POOL, 0, u32(9))),
        "pool_dup": seed(M_KEEP_HDR, 0, 0, MIX, patch(POOL, 4, u32(0))),
        "pool_put": seed(M_KEEP_HDR, 0, 0, MIX, patch(LINES, PPUT, u32(100))),
        "pool_get": seed(M_KEEP_HDR, 0, 0, MIX, patch(LINES, PGET, u32(3))),
        "wlock_ghost": seed(M_KEEP_HDR, 10, 0, MIX, patch(LINES, WLOCK, u32(5))),
        "rlock_range": seed(M_KEEP_HDR, 10, 0, MIX, patch(LINES, RLOCK, u32(65))),
        "broken": seed(M_KEEP_HDR, 10, 0, MIX, patch(LINES, BROKEN, u32(1))),
        "counts": seed(M_KEEP_HDR, 10, 0, MIX, patch(LINES, READERS, u32(0xffffffff))
                       + patch(LINES, WRITERS, u32(0))),
        "nwait": seed(M_KEEP_HDR, 10, 0, MIX, patch(LINES, RD_WAIT + 4, u32(3))
                      + patch(LINES, WR_WAIT + 4, u32(1))),
        "ends_dead": seed(M_KEEP_HDR | M_SRC_LEAVE, 10, 0, MIX,
                          patch(ENDS, 16, u32(2 | 1 << 8) + u32(0x7ffffff0))),
        "scribble_head": seed(M_KEEP_HDR, 40, 0,
                              [op(W, 4), op(SCRIB), op(R, 22), op(W, 12), op(SCRIB),
                               op(PEEK, 3), op(CONS, 4), op(R, 22)],
                              patch(DEFER | LINES, HEAD, u32(50))
                              + patch(DEFER | SLOTS, 16, u32(1234) + u32(99999))),
        "reader_only": seed(M_KEEP_HDR | M_NO_WRITER, 60, 0, MIX),
        "writer_only": seed(M_KEEP_HDR | M_NO_READER, 60, 0, MIX),
        "close_rd": seed(M_KEEP_HDR | M_CLOSE_RD1, 60, 0, MIX),
    }
    for name, data in segs.items():
        with open(os.path.join(SEG, "seed_" + name), "wb") as f:
            f.write(data)
    sizes = ["0", "1", "4096", "4K", "4k", "4KiB", "4KB", "1M", "1MB", "2G", "1T",
             "1TB", "100B", "18446744073709551615", "18446744073709551616",
             "16777215T", "16777216T", "", "-1", "+1", " 1", "4Kb", "4kib",
             "0x10", "1.5M", "12Q", "0777", "4KiBB", "K"]
    for i, s in enumerate(sizes):
        with open(os.path.join(SIZE, "seed_%02d" % i), "wb") as f:
            f.write(s.encode())


if __name__ == "__main__":
    main()
