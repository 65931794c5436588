/* SPDX-License-Identifier: MIT */
/*
 * test_corrupt.c - a hostile or buggy peer rewrites the shared segment.
 *
 * The rule: everything read from the segment is untrusted; a violation marks
 * the pipe broken and returns -EPROTO; the library never crashes, never reads
 * or writes outside the segment and never spins forever.
 *
 * Method: two real pipes are created and given some history (data written
 * and partly read, so head/tail/pool indices are not at zero). A snapshot of
 * each memfd is taken. Every iteration forks a child which copies a snapshot
 * into a fresh memfd with the original's seals, corrupts it in one of the
 * ways below, and calls up_pipe_attach(). If that succeeds it opens a
 * non-blocking reader and writer and runs a few hundred random read / write /
 * peek / consume / reserve / commit / readv / writev calls, then closes.
 *
 * The child must exit normally. Return codes may be anything in the API's
 * vocabulary (>= 0 within the asked size, or a negative errno), with these
 * exceptions that are checked:
 *  - a corrupted header (any change to the checksummed bytes, or a field
 *    changed with the checksum recomputed so that the geometry or the flags
 *    no longer hold) gives -EPROTO from up_pipe_attach();
 *  - once a data call returned -EPROTO, the pipe is broken for this process
 *    (uringpipe.h) and later data calls return -EPROTO too;
 *  - spans handed out by peek/reserve are touched (read, resp. written), so a
 *    span outside the mapping crashes the child and fails the test.
 * The parent kills a child that runs longer than 10 s (a hang is a failure)
 * and fails on any child killed by a signal.
 *
 * Also: the uncorrupted copy attaches and yields the original's bytes (so
 * the test is not passed by a library that refuses everything), and copies
 * that lack the shrink seal (unsealed, grow-only) are refused with -EPROTO.
 *
 * Options: --seed N (printed as seed=N first), --iters N, --iter K (replay
 * one iteration), --verbose.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "harness.h"
#include "shm_layout.h"
#include "uringpipe.h"

#define KiB ((size_t)1024)

struct source {
	struct up_pipe *p;
	struct up_end *r, *w; /* kept open in the parent: the copies see them */
	uint8_t *snap;
	size_t size;
	int seals;
	uint64_t pat_seed, pat_off; /* the readable bytes are pat(seed, off...) */
	size_t readable;
};

static struct source g_src[2];
static bool g_verbose;

enum mode {
	M_HDR_RANDOM_BYTES,
	M_HDR_BITFLIP,
	M_HDR_FIELD_RAW,   /* one field changed, checksum left stale */
	M_HDR_FIELD_RESUM, /* one field changed, checksum recomputed */
	M_LINES_RANDOM,
	M_LINES_WORD,
	M_ENDS_RANDOM,
	M_SLOTS_RANDOM,
	M_SLOT_FIELD,
	M_POOL_RANDOM,
	M_POOL_ENTRY,
	M_MIXED,
	M_DATA_RANDOM,
	M_COUNT
};

static const char *const mode_name[M_COUNT] = {
	"hdr-random-bytes", "hdr-bitflip", "hdr-field-raw", "hdr-field-resum",
	"lines-random",     "lines-word",  "ends-random",   "slots-random",
	"slot-field",       "pool-random", "pool-entry",    "mixed",
	"data-random",
};

struct field {
	const char *name;
	size_t off, size;
	int resum_must_fail; /* with a fresh checksum the header is still invalid */
};

#define HF(f, must) { #f, offsetof(struct up_shm_hdr, f), sizeof(((struct up_shm_hdr *)0)->f), must }
static const struct field hdr_fields[] = {
	HF(magic, 1),      HF(version, 1),    HF(hdr_size, 1),   HF(seg_size, 1),
	HF(page_size, 1),  HF(page_count, 1), HF(slot_count, 1), HF(max_ends, 1),
	HF(flags, 1),      HF(numa_node, 0),  HF(off_ends, 1),   HF(off_slots, 1),
	HF(off_pool, 1),   HF(off_pages, 1),  HF(spare_pages, 0), HF(resv_, 1),
	HF(checksum, 1),
};
#define N_FIELDS (sizeof(hdr_fields) / sizeof(hdr_fields[0]))

#define HDR_SUMMED ((size_t)offsetof(struct up_shm_hdr, checksum))
#define HDR_CHECKED (HDR_SUMMED + 8) /* the bytes a reader can validate */

/* ------------------------------------------------------------ set-up */

static void make_source(struct source *s, size_t cap, size_t page, uint64_t seed)
{
	struct up_config cfg;
	uint8_t buf[8192];
	size_t off = 0, rd = 0, k;
	struct stat st;

	memset(s, 0, sizeof(*s));
	up_config_init(&cfg);
	cfg.capacity = cap;
	cfg.page_size = page;
	CHECK_OK(up_pipe_create(&cfg, &s->p));
	CHECK_OK(up_open(s->p, UP_RD | UP_NONBLOCK, &s->r));
	CHECK_OK(up_open(s->p, UP_WR | UP_NONBLOCK, &s->w));
	s->pat_seed = seed;
	/* history: fill and drain a few times so the indices have moved */
	for (k = 0; k < 5; k++) {
		size_t want = cap - cap / 4 + k * 777, done = 0;

		while (done < want) {
			size_t n = want - done < sizeof(buf) ? want - done : sizeof(buf);
			ssize_t r;

			harness_fill(seed, off, buf, n);
			r = up_write(s->w, buf, n);
			if (r == -EAGAIN)
				break;
			CHECK_OK(r);
			off += (size_t)r;
			done += (size_t)r;
		}
		while (rd < off - (k == 4 ? 3000 + cap / 8 : 0)) {
			size_t n = sizeof(buf);
			ssize_t r;

			if (n > off - rd)
				n = off - rd;
			r = up_read(s->r, buf, n);
			if (r == -EAGAIN)
				break;
			CHECK_OK(r);
			CHECK(r > 0);
			CHECK_EQ(harness_verify(seed, rd, buf, (size_t)r), (size_t)-1);
			rd += (size_t)r;
		}
	}
	s->pat_off = rd;
	s->readable = off - rd;
	CHECK(s->readable > 0);

	CHECK_SYS(fstat(up_pipe_fd(s->p), &st));
	s->size = (size_t)st.st_size;
	s->snap = malloc(s->size);
	CHECK(s->snap != NULL);
	CHECK_EQ(pread(up_pipe_fd(s->p), s->snap, s->size, 0), (ssize_t)s->size);
	s->seals = fcntl(up_pipe_fd(s->p), F_GET_SEALS);
	CHECK(s->seals >= 0);
	/* the library's own segments are sealed against shrinking and growing */
	CHECK((s->seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW));
}

/* In a forked child: close its copies of the sources' ends (ends of its
 * own since the fork, as pipe(2) fds are); it works on snapshots only. */
static void close_sources(void)
{
	for (int i = 0; i < 2; i++)
		harness_close_inherited((struct up_end *[]){ g_src[i].r, g_src[i].w }, 2);
}

static int memfd_from(const uint8_t *bytes, size_t size, int seals)
{
	int fd = memfd_create("up-corrupt", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t off = 0;

	CHECK(fd >= 0);
	CHECK_SYS(ftruncate(fd, (off_t)size));
	while (off < size) {
		ssize_t r = pwrite(fd, bytes + off, size - off, (off_t)off);

		CHECK(r > 0);
		off += (size_t)r;
	}
	if (seals)
		CHECK_SYS(fcntl(fd, F_ADD_SEALS, seals));
	return fd;
}

static const struct up_shm_hdr *src_hdr(const struct source *s)
{
	return (const struct up_shm_hdr *)s->snap;
}

/* ------------------------------------------------------------ corruption */

static void rand_bytes(struct harness_rng *rng, uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)harness_rng_next(rng);
}

/* Random bytes over a random non-empty sub-range of [lo, hi); guarantees at
 * least one byte changed. */
static void smash_range(struct harness_rng *rng, uint8_t *seg, size_t lo, size_t hi)
{
	size_t a = (size_t)harness_rng_range(rng, lo, hi - 1);
	size_t maxlen = hi - a, len;
	uint8_t before;

	/* mostly short runs, sometimes the whole rest of the region */
	if (harness_rng_next(rng) % 4 == 0)
		len = maxlen;
	else
		len = (size_t)harness_rng_range(rng, 1, maxlen < 16 ? maxlen : 16);
	before = seg[a];
	rand_bytes(rng, seg + a, len);
	if (seg[a] == before)
		seg[a] = (uint8_t)~before;
}

static uint64_t special_value(struct harness_rng *rng, uint64_t orig, size_t size)
{
	uint64_t mask = size == 8 ? ~0ull : (1ull << (size * 8)) - 1;
	uint64_t v;

	do {
		switch (harness_rng_next(rng) % 10) {
		case 0: v = 0; break;
		case 1: v = ~0ull; break;
		case 2: v = orig + 1; break;
		case 3: v = orig - 1; break;
		case 4: v = orig * 2; break;
		case 5: v = orig / 2; break;
		case 6: v = 1ull << (size * 8 - 1); break;
		case 7: v = orig + 4096; break;
		case 8: v = orig ^ (1ull << (harness_rng_next(rng) % (size * 8))); break;
		default: v = harness_rng_next(rng); break;
		}
		v &= mask;
	} while (v == (orig & mask));
	return v;
}

static uint64_t get_le(const uint8_t *b, size_t size)
{
	uint64_t v = 0;

	memcpy(&v, b, size); /* little-endian host: Linux x86-64/aarch64 */
	return v;
}

static void put_le(uint8_t *b, size_t size, uint64_t v)
{
	memcpy(b, &v, size);
}

static void resum(uint8_t *seg)
{
	struct up_shm_hdr h;
	uint64_t sum;

	memcpy(&h, seg, sizeof(h));
	sum = up__shm_hdr_sum(&h);
	memcpy(seg + offsetof(struct up_shm_hdr, checksum), &sum, sizeof(sum));
}

/* Special words for 32-bit ring fields (indices, lengths, page numbers). */
static uint32_t special_u32(struct harness_rng *rng, uint32_t orig, const struct up_shm_hdr *h)
{
	switch (harness_rng_next(rng) % 8) {
	case 0: return 0;
	case 1: return ~0u;
	case 2: return h->page_count;
	case 3: return h->slot_count;
	case 4: return h->page_size + 1;
	case 5: return orig + h->slot_count;
	case 6: return orig + 1;
	default: return (uint32_t)harness_rng_next(rng);
	}
}

/* Returns true when up_pipe_attach() must fail with -EPROTO. */
static bool corrupt(struct harness_rng *rng, enum mode m, uint8_t *seg, size_t size,
		    const struct up_shm_hdr *h, char *what, size_t whatlen)
{
	size_t lines_lo = (size_t)UP_SHM_LINES_OFF;
	size_t lines_hi = lines_lo + sizeof(struct up_shm_lines);
	size_t ends_lo = (size_t)h->off_ends;
	size_t ends_hi = ends_lo + (size_t)h->max_ends * sizeof(struct up_shm_end);
	size_t slots_lo = (size_t)h->off_slots;
	size_t slots_hi = slots_lo + (size_t)h->slot_count * sizeof(struct up_shm_slot);
	size_t pool_lo = (size_t)h->off_pool;
	size_t pool_hi = pool_lo + (size_t)h->slot_count * sizeof(uint32_t);
	size_t pages_lo = (size_t)h->off_pages;

	CHECK(lines_hi <= ends_lo && ends_hi <= slots_lo && slots_hi <= pool_lo &&
	      pool_hi <= pages_lo && pages_lo < size);
	snprintf(what, whatlen, "%s", mode_name[m]);

	switch (m) {
	case M_HDR_RANDOM_BYTES:
		smash_range(rng, seg, 0, HDR_CHECKED);
		return true;
	case M_HDR_BITFLIP: {
		size_t bit = (size_t)harness_rng_range(rng, 0, HDR_CHECKED * 8 - 1);

		seg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		snprintf(what, whatlen, "%s bit %zu", mode_name[m], bit);
		return true;
	}
	case M_HDR_FIELD_RAW:
	case M_HDR_FIELD_RESUM: {
		const struct field *f = &hdr_fields[harness_rng_next(rng) % N_FIELDS];
		uint64_t orig = get_le(seg + f->off, f->size), v;
		bool must;

		if (m == M_HDR_FIELD_RESUM && strcmp(f->name, "checksum") == 0)
			f = &hdr_fields[0]; /* recomputing would undo it */
		orig = get_le(seg + f->off, f->size);
		v = special_value(rng, orig, f->size);
		if (m == M_HDR_FIELD_RESUM && strcmp(f->name, "flags") == 0 &&
		    (v & ~(uint64_t)UP_CFG_ALL) == 0)
			v |= 0x100; /* an unknown flag bit: must be refused */
		put_le(seg + f->off, f->size, v);
		must = true;
		if (m == M_HDR_FIELD_RESUM) {
			resum(seg);
			must = f->resum_must_fail != 0;
		}
		snprintf(what, whatlen, "%s %s %#llx -> %#llx", mode_name[m], f->name,
			 (unsigned long long)orig, (unsigned long long)v);
		return must;
	}
	case M_LINES_RANDOM:
		smash_range(rng, seg, lines_lo, lines_hi);
		return false;
	case M_LINES_WORD: {
		size_t w = lines_lo + 4 * (size_t)harness_rng_range(rng, 0, (lines_hi - lines_lo) / 4 - 1);
		uint32_t orig = (uint32_t)get_le(seg + w, 4);
		uint32_t v = special_u32(rng, orig, h);

		put_le(seg + w, 4, v);
		snprintf(what, whatlen, "%s +%zu %#x -> %#x", mode_name[m], w - lines_lo, orig, v);
		return false;
	}
	case M_ENDS_RANDOM:
		smash_range(rng, seg, ends_lo, ends_hi);
		return false;
	case M_SLOTS_RANDOM:
		smash_range(rng, seg, slots_lo, slots_hi);
		return false;
	case M_SLOT_FIELD: {
		size_t w = slots_lo + 4 * (size_t)harness_rng_range(rng, 0, (slots_hi - slots_lo) / 4 - 1);
		uint32_t orig = (uint32_t)get_le(seg + w, 4);
		uint32_t v = special_u32(rng, orig, h);

		put_le(seg + w, 4, v);
		snprintf(what, whatlen, "%s +%zu %#x -> %#x", mode_name[m], w - slots_lo, orig, v);
		return false;
	}
	case M_POOL_RANDOM:
		smash_range(rng, seg, pool_lo, pool_hi);
		return false;
	case M_POOL_ENTRY: {
		size_t w = pool_lo + 4 * (size_t)harness_rng_range(rng, 0, h->slot_count - 1);
		uint32_t orig = (uint32_t)get_le(seg + w, 4);
		uint32_t v = special_u32(rng, orig, h);

		put_le(seg + w, 4, v);
		snprintf(what, whatlen, "%s entry %zu %#x -> %#x", mode_name[m],
			 (w - pool_lo) / 4, orig, v);
		return false;
	}
	case M_MIXED: {
		int k, n = (int)harness_rng_range(rng, 2, 6);

		for (k = 0; k < n; k++) {
			switch (harness_rng_next(rng) % 4) {
			case 0: smash_range(rng, seg, lines_lo, lines_hi); break;
			case 1: smash_range(rng, seg, ends_lo, ends_hi); break;
			case 2: smash_range(rng, seg, slots_lo, slots_hi); break;
			default: smash_range(rng, seg, pool_lo, pool_hi); break;
			}
		}
		return false;
	}
	case M_DATA_RANDOM:
		smash_range(rng, seg, pages_lo, size);
		return false;
	case M_COUNT:
		break;
	}
	CHECK(0);
	return false;
}

/* ------------------------------------------------------------ the child */

static bool is_errno(long long r)
{
	return r < 0 && r >= -4095;
}

/*
 * Return-code discipline: >= 0 within @max, or -errno. Once -EPROTO was seen
 * the pipe is broken for this process: the transfer calls (read, write, peek,
 * reserve and their vector forms: @transfer) then return -EPROTO only.
 * commit/consume may still answer an argument error (-EINVAL) or a no-op 0.
 */
static void check_rc(long long r, long long max, bool *broken, bool transfer, const char *call)
{
	if (r >= 0) {
		if (r > max) {
			fprintf(stderr, "%s returned %lld, more than the %lld asked\n", call, r, max);
			harness_fail();
		}
		if (*broken && transfer) {
			fprintf(stderr, "%s returned %lld after the pipe reported -EPROTO\n", call, r);
			harness_fail();
		}
		return;
	}
	if (!is_errno(r)) {
		fprintf(stderr, "%s returned %lld, not a negative errno\n", call, r);
		harness_fail();
	}
	if (*broken && r != -EPROTO && (transfer || r != -EINVAL)) {
		fprintf(stderr, "%s returned %lld (%s) after the pipe reported -EPROTO\n", call, r,
			strerror((int)-r));
		harness_fail();
	}
	if (r == -EPROTO)
		*broken = true;
}

static volatile uint8_t g_sink;

static void touch_read(const struct iovec *iov, int cnt, long long total)
{
	uint8_t x = 0;
	long long seen = 0;
	int i;

	for (i = 0; i < cnt; i++) {
		const uint8_t *b = iov[i].iov_base;
		size_t k;

		for (k = 0; k < iov[i].iov_len; k++)
			x ^= b[k];
		seen += (long long)iov[i].iov_len;
	}
	g_sink = x;
	if (seen != total) {
		fprintf(stderr, "spans total %lld, call returned %lld\n", seen, total);
		harness_fail();
	}
}

static void touch_write(const struct iovec *iov, int cnt, long long total)
{
	long long seen = 0;
	int i;

	for (i = 0; i < cnt; i++) {
		memset(iov[i].iov_base, 0xA5, iov[i].iov_len);
		seen += (long long)iov[i].iov_len;
	}
	if (seen != total) {
		fprintf(stderr, "spans total %lld, call returned %lld\n", seen, total);
		harness_fail();
	}
}

static const char *const op_name[10] = {
	"read", "write", "peek+consume", "consume", "reserve+commit", "commit",
	"readv", "writev", "stats", "reserve+commit_reserve",
};

static void exercise(struct up_pipe *q, struct harness_rng *rng, int ops)
{
	static uint8_t buf[3 * 8192];
	struct up_end *r = NULL, *w = NULL;
	bool broken = false;
	int i, rc;

	rc = up_open(q, UP_RD | UP_NONBLOCK, &r);
	CHECK(rc == 0 || is_errno(rc));
	if (rc < 0)
		r = NULL;
	rc = up_open(q, UP_WR | UP_NONBLOCK, &w);
	CHECK(rc == 0 || is_errno(rc));
	if (rc < 0)
		w = NULL;

	for (i = 0; i < ops && (r || w); i++) {
		size_t len = (size_t)harness_rng_range(rng, 1, 8192);
		struct iovec iov[8];
		int cnt = 8;
		long long n;

		int op = (int)(harness_rng_next(rng) % 10);

		if (g_verbose)
			fprintf(stderr, "  op %d: %s len %zu\n", i, op_name[op], len);
		switch (op) {
		case 0:
			if (!r)
				break;
			n = up_read(r, buf, len);
			check_rc(n, (long long)len, &broken, true, "up_read");
			break;
		case 1:
			if (!w)
				break;
			n = up_write(w, buf, len);
			check_rc(n, (long long)len, &broken, true, "up_write");
			break;
		case 2:
			if (!r)
				break;
			n = up_peek(r, iov, &cnt);
			check_rc(n, 1ll << 40, &broken, true, "up_peek");
			/* Now and then a message at a time: the spans a consume
			 * and peek in one call shows are touched as well. */
			for (int k = 0; n > 0 && k < 4 && (harness_rng_next(rng) & 1); k++) {
				CHECK(cnt >= 1 && cnt <= 8);
				touch_read(iov, cnt, n);
				cnt = 8;
				n = up_consume_peek(r, (size_t)harness_rng_range(rng, 0, (uint64_t)n + 1),
						    iov, &cnt);
				CHECK(!(n > 0 && broken));
				check_rc(n, 1ll << 40, &broken, false, "up_consume_peek");
			}
			if (n > 0) {
				CHECK(cnt >= 1 && cnt <= 8);
				touch_read(iov, cnt, n);
				n = up_consume(r, (size_t)harness_rng_range(rng, 0, (uint64_t)n + 1));
				check_rc(n, 0, &broken, false, "up_consume");
			}
			break;
		case 3:
			if (!r)
				break;
			n = up_consume(r, (size_t)harness_rng_range(rng, 0, 3));
			check_rc(n, 0, &broken, false, "up_consume");
			break;
		case 4:
			if (!w)
				break;
			n = up_reserve(w, len, iov, &cnt);
			check_rc(n, (long long)len, &broken, true, "up_reserve");
			if (n > 0) {
				CHECK(cnt >= 1 && cnt <= 8);
				touch_write(iov, cnt, n);
				n = up_commit(w, (size_t)harness_rng_range(rng, 0, (uint64_t)n));
				check_rc(n, 0, &broken, false, "up_commit");
			}
			break;
		case 5:
			if (!w)
				break;
			n = up_commit(w, (size_t)harness_rng_range(rng, 0, 2));
			/* -EINVAL without a reservation is fine */
			check_rc(n, 0, &broken, false, "up_commit");
			break;
		case 6:
			if (!r)
				break;
			iov[0].iov_base = buf;
			iov[0].iov_len = len / 2;
			iov[1].iov_base = buf + 8192;
			iov[1].iov_len = len - len / 2;
			n = up_readv(r, iov, 2);
			check_rc(n, (long long)len, &broken, true, "up_readv");
			break;
		case 7:
			if (!w)
				break;
			iov[0].iov_base = buf;
			iov[0].iov_len = len / 3;
			iov[1].iov_base = buf + 8192;
			iov[1].iov_len = len - len / 3;
			n = up_writev(w, iov, 2);
			check_rc(n, (long long)len, &broken, true, "up_writev");
			break;
		case 9:
			if (!w)
				break;
			n = up_reserve(w, len, iov, &cnt);
			check_rc(n, (long long)len, &broken, true, "up_reserve");
			/* Messages one call each; >0 is a reservation, which a
			 * broken pipe never hands out (0 and errors as a
			 * commit's). */
			for (int k = 0; k < 4 && n > 0; k++) {
				size_t next = (size_t)harness_rng_range(rng, 1, 512);

				CHECK(cnt >= 1 && cnt <= 8);
				touch_write(iov, cnt, n);
				cnt = 8;
				n = up_commit_reserve(w, (size_t)harness_rng_range(rng, 0, (uint64_t)n),
						      next, iov, &cnt);
				CHECK(!(n > 0 && broken));
				check_rc(n, (long long)next, &broken, false, "up_commit_reserve");
			}
			if (n > 0) {
				touch_write(iov, cnt, n);
				n = up_commit(w, (size_t)n);
				check_rc(n, 0, &broken, false, "up_commit");
			}
			break;
		default: {
			struct up_stats st;

			rc = up_stats(q, &st);
			CHECK(rc == 0 || is_errno(rc));
			if (rc == 0)
				CHECK(memchr(st.backend, '\0', sizeof(st.backend)) != NULL);
			break;
		}
		}
	}
	if (g_verbose)
		fprintf(stderr, "  close\n");
	rc = up_close(r);
	CHECK(rc == 0 || is_errno(rc));
	rc = up_close(w);
	CHECK(rc == 0 || is_errno(rc));
}

static void child_iteration(uint64_t seed, int iter)
{
	struct harness_rng rng;
	struct source *s;
	uint8_t *seg;
	enum mode m;
	bool must_fail;
	char what[160];
	struct up_pipe *q = NULL;
	int fd, r;

	harness_rng_seed(&rng, seed * 1000003u + (uint64_t)iter);
	s = &g_src[harness_rng_next(&rng) % 2];
	m = (enum mode)(harness_rng_next(&rng) % M_COUNT);
	seg = malloc(s->size);
	CHECK(seg != NULL);
	memcpy(seg, s->snap, s->size);
	must_fail = corrupt(&rng, m, seg, s->size, src_hdr(s), what, sizeof(what));
	if (g_verbose)
		fprintf(stderr, "iter %d: page %u: %s\n", iter, src_hdr(s)->page_size, what);
	fd = memfd_from(seg, s->size, s->seals);
	free(seg);
	r = up_pipe_attach(fd, &q);
	close(fd);
	if (must_fail) {
		if (r != -EPROTO) {
			fprintf(stderr, "iter %d (%s): up_pipe_attach = %d, want -EPROTO\n", iter,
				what, r);
			if (r == 0)
				up_pipe_release(q);
			harness_fail();
		}
		_exit(0);
	}
	if (!(r == 0 || is_errno(r))) {
		fprintf(stderr, "iter %d (%s): up_pipe_attach = %d\n", iter, what, r);
		harness_fail();
	}
	if (r == 0) {
		CHECK(q != NULL);
		exercise(q, &rng, 300);
		up_pipe_release(q);
	}
	_exit(0);
}

static void run_iteration(uint64_t seed, int iter)
{
	int status = 0, r;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		harness_watchdog(20); /* the parent's 10 s deadline comes first */
		close_sources();
		child_iteration(seed, iter);
		_exit(0);
	}
	r = harness_wait_child(pid, 10.0, &status);
	if (r == -ETIMEDOUT) {
		fprintf(stderr, "iteration %d hung (killed after 10 s); replay: --seed %llu --iter %d --verbose\n",
			iter, (unsigned long long)seed, iter);
		harness_fail();
	}
	CHECK_EQ(r, 0);
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "iteration %d: child killed by signal %d (%s); replay: --seed %llu --iter %d --verbose\n",
			iter, WTERMSIG(status), strsignal(WTERMSIG(status)),
			(unsigned long long)seed, iter);
		harness_fail();
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "iteration %d: child exit status %d; replay: --seed %llu --iter %d --verbose\n",
			iter, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
			(unsigned long long)seed, iter);
		harness_fail();
	}
}

/* ------------------------------------------------------------ fixed cases */

/* The intact copy attaches and carries the original's unread bytes. */
static void intact_copy_attaches(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct source *s = &g_src[i];
		pid_t pid;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			struct up_pipe *q = NULL;
			struct up_end *r = NULL, *w = NULL;
			uint8_t buf[8192];
			size_t got = 0;
			int fd;

			harness_watchdog(20);
			close_sources();
			fd = memfd_from(s->snap, s->size, s->seals);
			CHECK_OK(up_pipe_attach(fd, &q));
			close(fd);
			CHECK_OK(up_open(q, UP_RD | UP_NONBLOCK, &r));
			CHECK_OK(up_open(q, UP_WR | UP_NONBLOCK, &w));
			for (;;) {
				ssize_t n = up_read(r, buf, sizeof(buf));

				if (n == -EAGAIN)
					break;
				CHECK_OK(n);
				CHECK(n > 0);
				CHECK_EQ(harness_verify(s->pat_seed, s->pat_off + got, buf, (size_t)n),
					 (size_t)-1);
				got += (size_t)n;
			}
			CHECK_EQ(got, s->readable);
			CHECK_EQ(up_write(w, "ok", 2), 2);
			CHECK_EQ(up_read(r, buf, sizeof(buf)), 2);
			CHECK_OK(up_close(r));
			CHECK_OK(up_close(w));
			up_pipe_release(q);
			_exit(0);
		}
		harness_reap_ok(pid, 10, "intact_copy_attaches");
	}
}

static void attach_expect(const struct source *s, int seals, int want, const char *what)
{
	struct up_pipe *q = NULL;
	int fd = memfd_from(s->snap, s->size, seals);
	int r = up_pipe_attach(fd, &q);

	if (r != want) {
		fprintf(stderr, "%s: up_pipe_attach = %d, want %d\n", what, r, want);
		harness_fail();
	}
	if (r == 0)
		up_pipe_release(q);
	close(fd);
}

static void unsealed_copy_refused(void)
{
	attach_expect(&g_src[0], 0, -EPROTO, "unsealed memfd");
	attach_expect(&g_src[0], F_SEAL_GROW, -EPROTO, "memfd sealed against growing only");
	attach_expect(&g_src[1], 0, -EPROTO, "unsealed memfd (64 KiB pages)");
	/* and with the library's seals it is accepted (control) */
	attach_expect(&g_src[0], F_SEAL_SHRINK | F_SEAL_GROW, 0, "sealed memfd");
}

static void random_corruptions(uint64_t seed, int iters, int only)
{
	int i, counts[M_COUNT] = { 0 };

	if (only >= 0) {
		run_iteration(seed, only);
		return;
	}
	for (i = 0; i < iters; i++) {
		struct harness_rng rng;

		/* same derivation as child_iteration(), for the summary only */
		harness_rng_seed(&rng, seed * 1000003u + (uint64_t)i);
		(void)harness_rng_next(&rng);
		counts[harness_rng_next(&rng) % M_COUNT]++;
		run_iteration(seed, i);
	}
	printf("# %d corruptions:", iters);
	for (i = 0; i < M_COUNT; i++)
		printf(" %s=%d", mode_name[i], counts[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	int iters = 400, only = -1, i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (strcmp(argv[i], "--iter") == 0 && i + 1 < argc)
			only = atoi(argv[++i]);
		else if (strcmp(argv[i], "--verbose") == 0)
			g_verbose = true;
		else {
			fprintf(stderr, "usage: %s [--seed N] [--iters N] [--iter K] [--verbose]\n",
				argv[0]);
			return 2;
		}
	}
	printf("seed=%llu\n", (unsigned long long)seed);
	fflush(stdout);
	harness_init(1, argv);
	harness_watchdog(170);
	harness_fail_on_sigpipe();
	harness_block_sigchld();

	make_source(&g_src[0], 64 * KiB, 4096, seed ^ 1);
	make_source(&g_src[1], 256 * KiB, 64 * KiB, seed ^ 2);

	RUN(intact_copy_attaches);
	RUN(unsealed_copy_refused);
	random_corruptions(seed, iters, only);
	printf("ok random_corruptions\n");

	for (i = 0; i < 2; i++) {
		CHECK_OK(up_close(g_src[i].r));
		CHECK_OK(up_close(g_src[i].w));
		up_pipe_release(g_src[i].p);
		free(g_src[i].snap);
	}
	return 0;
}
