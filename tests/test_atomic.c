/* SPDX-License-Identifier: MIT */
/*
 * test_atomic.c - writes of at most PIPE_BUF bytes are atomic: four writer
 * threads send framed records (fixed 4096-byte or variable sizes, with 4 KiB
 * and 64 KiB pages) and one reader, reading arbitrary sizes, must find every
 * record whole, never interleaved with another, each writer's in order
 * (tests/rec_harness.h; each record carries its writer's id and sequence
 * number).
 */
#include "sem_common.h"
#include "rec_harness.h"

/* ---- atomicity: 4 writers, records that must never be interleaved ---- */

#define AT_WRITERS 4
#define AT_RECORDS 1500

/* record: u32 id, u32 seq, u32 len (whole record), body = pattern; the
 * mode's arg says whether lengths vary (12 .. PIPE_BUF) or are PIPE_BUF */
static size_t at_len(uint32_t id, uint32_t seq, int varsize)
{
	if (!varsize)
		return UP_PIPE_BUF;
	return 12 + (size_t)(harness_mix64(((uint64_t)id << 32) | seq) % (UP_PIPE_BUF - 12 + 1));
}

static size_t at_make(const struct rec_mode *m, uint8_t *rec, uint32_t id, uint32_t seq)
{
	uint32_t len = (uint32_t)at_len(id, seq, (int)m->arg);

	memcpy(rec, &id, 4);
	memcpy(rec + 4, &seq, 4);
	memcpy(rec + 8, &len, 4);
	harness_fill(((uint64_t)id << 32) | seq, 0, rec + 12, len - 12);
	return len;
}

static void at_head(const uint8_t *rec, uint32_t *id, size_t *len)
{
	uint32_t l;

	memcpy(id, rec, 4);
	memcpy(&l, rec + 8, 4);
	*len = l;
}

/* A record of at most PIPE_BUF bytes in one blocking write, all of it. */
static bool at_send(struct rec_writer *rw, const uint8_t *rec, size_t len, uint32_t seq)
{
	(void)seq;
	CHECK_EQ(up_write(rw->w, rec, len), (ssize_t)len);
	return true;
}

/* arbitrary read sizes: the reader must not rely on boundaries */
static size_t at_ask(struct harness_rng *rng, size_t room)
{
	return (size_t)harness_rng_range(rng, 1, room);
}

static void atomic_case(size_t page, int varsize)
{
	struct up_pipe *p = mk_pipe(256 * KiB, page);
	struct rec_writer ws[AT_WRITERS];
	struct rec_mode m = {
		.name = "atomic", .writers = AT_WRITERS, .records = AT_RECORDS,
		.hdr_len = 12, .max_len = UP_PIPE_BUF, .arg = varsize,
		.make = at_make, .head = at_head, .send = at_send, .ask = at_ask,
		.seed = page * 3 + (size_t)varsize,
	};

	memset(ws, 0, sizeof(ws));
	rec_run(&m, p, ws);
	up_pipe_release(p);
}

static void atomic_4_writers_4k_records_4k_pages(void)
{
	atomic_case(4096, 0);
}

static void atomic_4_writers_4k_records_64k_pages(void)
{
	atomic_case(64 * KiB, 0);
}

static void atomic_4_writers_var_records_4k_pages(void)
{
	atomic_case(4096, 1);
}

static void atomic_4_writers_var_records_64k_pages(void)
{
	atomic_case(64 * KiB, 1);
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(atomic_4_writers_4k_records_4k_pages);
	RUN(atomic_4_writers_4k_records_64k_pages);
	RUN(atomic_4_writers_var_records_4k_pages);
	RUN(atomic_4_writers_var_records_64k_pages);
	return 0;
}
