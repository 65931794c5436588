/* SPDX-License-Identifier: MIT */
/*
 * test_atomic.c - writes of at most PIPE_BUF bytes are atomic: four writer
 * threads send framed records (fixed 4096-byte or variable sizes, with 4 KiB
 * and 64 KiB pages) and one reader, reading arbitrary sizes, must find every
 * record whole, never interleaved with another, each writer's in order.
 */
#include "sem_common.h"

/* ---- atomicity: 4 writers, records that must never be interleaved ---- */

#define AT_WRITERS 4
#define AT_RECORDS 1500

struct at_writer {
	struct up_end *w;
	uint32_t id;
	int varsize;
};

/* record: u32 id, u32 seq, u32 len (whole record), body = pattern */
static size_t at_len(uint32_t id, uint32_t seq, int varsize)
{
	if (!varsize)
		return UP_PIPE_BUF;
	return 12 + (size_t)(harness_mix64(((uint64_t)id << 32) | seq) % (UP_PIPE_BUF - 12 + 1));
}

static void *at_writer_fn(void *arg)
{
	struct at_writer *a = arg;
	uint8_t rec[UP_PIPE_BUF];
	uint32_t seq;

	for (seq = 0; seq < AT_RECORDS; seq++) {
		uint32_t len = (uint32_t)at_len(a->id, seq, a->varsize);

		memcpy(rec, &a->id, 4);
		memcpy(rec + 4, &seq, 4);
		memcpy(rec + 8, &len, 4);
		harness_fill(((uint64_t)a->id << 32) | seq, 0, rec + 12, len - 12);
		CHECK_EQ(up_write(a->w, rec, len), (ssize_t)len);
	}
	CHECK_OK(up_close(a->w));
	return NULL;
}

static void atomic_case(size_t page, int varsize)
{
	struct up_pipe *p = mk_pipe(256 * KiB, page);
	struct up_end *r = mk_end(p, UP_RD);
	struct at_writer wa[AT_WRITERS];
	pthread_t t[AT_WRITERS];
	uint32_t next[AT_WRITERS] = { 0 };
	uint8_t *buf = malloc(64 * KiB);
	size_t fill = 0, done = 0;
	struct harness_rng rng;
	int i;

	CHECK(buf != NULL);
	harness_rng_seed(&rng, page * 3 + (size_t)varsize);
	for (i = 0; i < AT_WRITERS; i++) {
		wa[i].w = mk_end(p, UP_WR);
		wa[i].id = (uint32_t)i;
		wa[i].varsize = varsize;
	}
	for (i = 0; i < AT_WRITERS; i++)
		CHECK(pthread_create(&t[i], NULL, at_writer_fn, &wa[i]) == 0);
	for (;;) {
		/* arbitrary read sizes: the reader must not rely on boundaries */
		size_t room = 64 * KiB - fill;
		size_t ask = (size_t)harness_rng_range(&rng, 1, room);
		ssize_t n = up_read(r, buf + fill, ask);
		size_t pos = 0;

		CHECK_OK(n);
		if (n == 0)
			break;
		fill += (size_t)n;
		while (fill - pos >= 12) {
			uint32_t id, seq, len;

			memcpy(&id, buf + pos, 4);
			memcpy(&seq, buf + pos + 4, 4);
			memcpy(&len, buf + pos + 8, 4);
			if (id >= AT_WRITERS || seq != next[id] ||
			    len != at_len(id, seq, varsize)) {
				fprintf(stderr,
					"record %zu: bad header id=%u seq=%u len=%u (expected seq %u)\n",
					done, id, seq, len, id < AT_WRITERS ? next[id] : 0);
				CHECK(0);
			}
			if (fill - pos < len)
				break;
			if (harness_verify(((uint64_t)id << 32) | seq, 0, buf + pos + 12, len - 12) !=
			    (size_t)-1) {
				fprintf(stderr, "record %zu (writer %u seq %u) interleaved/corrupt\n",
					done, id, seq);
				CHECK(0);
			}
			next[id]++;
			done++;
			pos += len;
		}
		memmove(buf, buf + pos, fill - pos);
		fill -= pos;
	}
	CHECK_EQ(fill, 0);
	for (i = 0; i < AT_WRITERS; i++) {
		CHECK(pthread_join(t[i], NULL) == 0);
		CHECK_EQ(next[i], AT_RECORDS);
	}
	CHECK_EQ(done, (size_t)AT_WRITERS * AT_RECORDS);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
	free(buf);
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
