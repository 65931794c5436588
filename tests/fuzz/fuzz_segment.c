/* SPDX-License-Identifier: MIT */
/*
 * fuzz_segment.c - a segment whose bytes come from the fuzzer.
 *
 * Each input builds a real 16 KiB pipe (4 KiB pages) with up_pipe_create,
 * streams a little through it, closes it, and copies the whole segment into
 * a NEW memfd. The fuzzer's patches are applied to that copy (header, the
 * shared lines, the endpoint table, the slot ring, the pool ring, or
 * anywhere), the copy is sealed, and up_pipe_attach() gets it. If it
 * attaches, a reader and a writer are opened (UP_NONBLOCK) and a bounded,
 * fuzzer-chosen sequence of write/read/peek/consume/reserve/commit runs,
 * with "scribble" steps that apply more patches while the ends are open (a
 * hostile peer at run time). Every return value is acceptable; crashes,
 * sanitizer reports and hangs are bugs (the segment is untrusted input: a
 * peer may have written anything there).
 *
 * Input layout (all of it optional; missing bytes read as 0):
 *   byte 0     mode bits, see M_* below
 *   byte 1     bytes pre-written into the source pipe, in units of 80
 *   byte 2     bytes pre-read from it, in units of 80
 *   byte 3     number of operation bytes that follow (& 31)
 *   ops        one byte each: low 3 bits the call, high 5 bits its size
 *   patches    to the end: [where:1][off:2 LE][len:1][bytes:len]
 *              where & 7: 0 header, 1 lines, 2 endpoint table, 3 slots,
 *              4 pool ring, 5 data pages, 6/7 anywhere in the segment;
 *              where & 0x80: deferred, applied by the next scribble op.
 * Offsets wrap modulo the region's size; a patch is clipped at its end.
 *
 * The same file builds three ways: with libFuzzer (tests/CMakeLists.txt,
 * clang, -fsanitize=fuzzer), with replay_main.c for CTest (any compiler),
 * and by hand. See tests/fuzz/README.md.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uringpipe.h"
#include "shm_layout.h"

#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW   0x0004
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

enum {
	M_FIX_SUM    = 0x01, /* recompute the header checksum after patching */
	M_KEEP_HDR   = 0x02, /* restore the original header (geometry stays valid) */
	M_NO_SEAL    = 0x04, /* leave the copy unsealed (attach must refuse) */
	M_BAD_SIZE   = 0x08, /* make the copy one page larger than the header says */
	M_NO_WRITER  = 0x10, /* open no writer on the attached copy */
	M_NO_READER  = 0x20, /* open no reader on the attached copy */
	M_CLOSE_RD1  = 0x40, /* close the reader before the last op */
	M_SRC_LEAVE  = 0x80, /* keep the source's writer open while copying (a
				ghost writer entry of this process) */
};

#define FZ_CAP      (16u * 1024u)
#define FZ_PAGE     4096u
#define FZ_MAX_OPS  31u
#define FZ_BUF      (20u * 1024u)

static unsigned char g_buf[FZ_BUF];
static unsigned char g_out[FZ_BUF];

struct input {
	const uint8_t *p;
	size_t n;
};

static unsigned in_byte(struct input *in)
{
	unsigned b;

	if (in->n == 0)
		return 0;
	b = in->p[0];
	in->p++;
	in->n--;
	return b;
}

static const size_t op_sizes[32] = {
	1, 2, 7, 63, 100, 511, 512, 1000, 2047, 2048, 3000, 4095, 4096, 4097,
	5000, 8191, 8192, 8193, 12288, 16383, 16384, 16385, 20000, 0, 1, 3,
	64, 256, 4000, 4100, 9000, 15000,
};

struct region {
	uint64_t off, len;
};

static void regions(const struct up_shm_offsets *o, struct region r[8])
{
	r[0] = (struct region){0, sizeof(struct up_shm_hdr)};
	r[1] = (struct region){UP_SHM_LINES_OFF, sizeof(struct up_shm_lines)};
	r[2] = (struct region){o->ends, o->slots - o->ends};
	r[3] = (struct region){o->slots, o->pool - o->slots};
	r[4] = (struct region){o->pool, o->pages - o->pool};
	r[5] = (struct region){o->pages, o->size - o->pages};
	r[6] = (struct region){0, o->size};
	r[7] = (struct region){0, o->pages}; /* everything but the data */
}

/*
 * Apply the next patch of @in to @seg. Returns 1 if applied, 0 if the
 * patch is deferred and @now is false (left in @in), -1 at the end of input.
 * Header patches with M_KEEP_HDR are dropped.
 */
static int apply_patch(struct input *in, unsigned char *seg, const struct region *rg,
		       unsigned mode, int now)
{
	unsigned where, off, len;
	const struct region *r;

	if (in->n < 4)
		return -1;
	where = in->p[0];
	if ((where & 0x80) && !now)
		return 0;
	in_byte(in);
	off = in_byte(in);
	off |= in_byte(in) << 8;
	len = in_byte(in);
	if (len > in->n)
		len = (unsigned)in->n;
	r = &rg[where & 7];
	if ((where & 7) != 0 || !(mode & M_KEEP_HDR)) {
		uint64_t o = off % r->len;
		uint64_t k = len < r->len - o ? len : r->len - o;

		memcpy(seg + r->off + o, in->p, (size_t)k);
	}
	in->p += len;
	in->n -= len;
	return 1;
}

/* The source pipe: a real one, with a little history. Returns its memfd
 * contents in a malloc'd buffer of *size bytes, or NULL. */
static unsigned char *source_segment(unsigned wr, unsigned rd, unsigned mode, size_t *size,
				     struct up_end **ghost)
{
	struct up_config cfg;
	struct up_pipe *p = NULL;
	struct up_end *r = NULL, *w = NULL;
	unsigned char *seg = NULL;
	struct stat st;
	size_t left;
	int fd;

	up_config_init(&cfg);
	cfg.capacity = FZ_CAP;
	cfg.page_size = FZ_PAGE;
	if (up_pipe_create(&cfg, &p) < 0)
		return NULL;
	if (up_open(p, UP_RD | UP_NONBLOCK, &r) < 0 || up_open(p, UP_WR | UP_NONBLOCK, &w) < 0)
		goto out;
	/* Writes of varied sizes, so that some slots are merged into. */
	left = (size_t)wr * 80u;
	while (left) {
		size_t k = left < 300 ? left : (left % 7 == 0 ? 4096 : 300);

		memset(g_buf, (int)(left & 0xff), k);
		if (up_write(w, g_buf, k) <= 0)
			break;
		left -= k;
	}
	if (rd)
		(void)up_read(r, g_out, (size_t)rd * 80u);
	up_close(r);
	r = NULL;
	if (!(mode & M_SRC_LEAVE)) {
		up_close(w);
		w = NULL;
	}
	fd = up_pipe_fd(p);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0)
		goto out;
	seg = malloc((size_t)st.st_size);
	if (!seg)
		goto out;
	if (pread(fd, seg, (size_t)st.st_size, 0) != (ssize_t)st.st_size) {
		free(seg);
		seg = NULL;
		goto out;
	}
	*size = (size_t)st.st_size;
out:
	if (r)
		up_close(r);
	*ghost = w; /* closed by the caller after the run */
	up_pipe_release(p);
	return seg;
}

static void run_ops(struct up_end *r, struct up_end *w, const uint8_t *ops, unsigned nops,
		    struct input *in, unsigned char *map, const struct region *rg, unsigned mode)
{
	struct iovec iov[4];
	unsigned i;
	int cnt;

	for (i = 0; i < nops; i++) {
		unsigned op = ops[i] & 7;
		size_t n = op_sizes[ops[i] >> 3];

		if ((mode & M_CLOSE_RD1) && r && i + 1 == nops) {
			up_close(r);
			r = NULL;
		}
		switch (op) {
		case 0:
			if (w) {
				memset(g_buf, (int)i, n);
				(void)up_write(w, g_buf, n);
			}
			break;
		case 1:
			if (r)
				(void)up_read(r, g_out, n);
			break;
		case 2:
			if (r) {
				cnt = (int)(ops[i] >> 3) % 4 + 1;
				if (up_peek(r, iov, &cnt) > 0) {
					/* Touch every byte the peek handed out:
					 * ASan checks they lie inside the map. */
					int j;
					unsigned sum = 0;

					for (j = 0; j < cnt; j++)
						for (size_t k = 0; k < iov[j].iov_len; k++)
							sum += ((unsigned char *)iov[j].iov_base)[k];
					g_out[0] = (unsigned char)sum;
				}
			}
			break;
		case 3:
			if (r)
				(void)up_consume(r, n);
			break;
		case 4:
			if (w) {
				cnt = (int)(ops[i] >> 3) % 4 + 1;
				ssize_t got = up_reserve(w, n ? n : 1, iov, &cnt);

				if (got > 0)
					for (int j = 0; j < cnt; j++)
						memset(iov[j].iov_base, 0x5a, iov[j].iov_len);
			}
			break;
		case 5:
			if (w)
				(void)up_commit(w, n);
			break;
		case 6:
			/* A hostile peer at run time: apply the next deferred
			 * patch (or the next patch at all) now. */
			(void)apply_patch(in, map, rg, mode & ~(unsigned)M_KEEP_HDR, 1);
			break;
		case 7:
			if (w) {
				struct iovec wv[3] = {
					{g_buf, n / 3}, {g_buf + n / 3, 0}, {g_buf, n - n / 3},
				};
				(void)up_writev(w, wv, 3);
			}
			if (r) {
				struct iovec rv[2] = {{g_out, 1}, {g_out + 1, n}};
				(void)up_readv(r, rv, 2);
			}
			break;
		}
	}
	if (r)
		up_close(r);
	if (w)
		up_close(w);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* One io_uring per endpoint would dominate the cost of an input; the
	 * wake path is the same either way. FUZZ_URING=1 keeps io_uring. */
	if (!getenv("FUZZ_URING"))
		setenv("UP_FORCE_FUTEX", "1", 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	struct input in = {data, size};
	struct up_shm_hdr orig_hdr;
	struct up_shm_offsets o;
	struct region rg[8];
	struct up_pipe *p = NULL;
	struct up_end *r = NULL, *w = NULL, *ghost = NULL;
	unsigned char *src, *map = MAP_FAILED;
	uint8_t ops[FZ_MAX_OPS];
	unsigned mode, wr, rd, nops, i;
	size_t seg_size = 0, file_size;
	int fd = -1;

	if (!inited) {
		/* The replay driver does not call LLVMFuzzerInitialize. */
		LLVMFuzzerInitialize(NULL, NULL);
		inited = 1;
	}
	mode = in_byte(&in);
	wr = in_byte(&in);
	rd = in_byte(&in);
	nops = in_byte(&in) & FZ_MAX_OPS;
	for (i = 0; i < nops; i++)
		ops[i] = (uint8_t)in_byte(&in);

	src = source_segment(wr, rd, mode, &seg_size, &ghost);
	if (!src)
		goto out;
	memcpy(&orig_hdr, src, sizeof(orig_hdr));
	if (up__shm_offsets(orig_hdr.page_size, orig_hdr.page_count, orig_hdr.slot_count,
			    orig_hdr.max_ends, &o) < 0 || o.size != seg_size)
		abort(); /* our own pipe must be valid */
	regions(&o, rg);

	fd = memfd_create("fuzz_segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		goto out;
	file_size = seg_size + ((mode & M_BAD_SIZE) ? FZ_PAGE : 0);
	if (ftruncate(fd, (off_t)file_size) < 0)
		goto out;
	map = mmap(NULL, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto out;
	memcpy(map, src, seg_size);
	while (apply_patch(&in, map, rg, mode, 0) == 1)
		;
	if (mode & M_KEEP_HDR)
		memcpy(map, &orig_hdr, sizeof(orig_hdr));
	else if (mode & M_FIX_SUM) {
		struct up_shm_hdr h;

		memcpy(&h, map, sizeof(h));
		h.checksum = up__shm_hdr_sum(&h);
		memcpy(map, &h, sizeof(h));
	}
	if (!(mode & M_NO_SEAL) && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		goto out;

	if (up_pipe_attach(fd, &p) < 0)
		goto out;
	if (!(mode & M_NO_READER))
		(void)up_open(p, UP_RD | UP_NONBLOCK, &r);
	if (!(mode & M_NO_WRITER))
		(void)up_open(p, UP_WR | UP_NONBLOCK, &w);
	{
		struct up_stats st;

		(void)up_stats(p, &st);
	}
	run_ops(r, w, ops, nops, &in, map, rg, mode);
	up_pipe_release(p);
out:
	if (ghost)
		up_close(ghost);
	if (map != MAP_FAILED)
		munmap(map, seg_size + ((mode & M_BAD_SIZE) ? FZ_PAGE : 0));
	if (fd >= 0)
		close(fd);
	free(src);
	return 0;
}
