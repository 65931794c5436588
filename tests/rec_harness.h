/* SPDX-License-Identifier: MIT */
/*
 * rec_harness.h - one producer/consumer skeleton for several writers'
 * records, instantiated per mode (struct rec_mode): the record format, the
 * number of writers and records, how a writer sends a record (blocking
 * write, poll-mode write, reserve+commit, ...) and the read sizes.
 * test_atomic and test_poll instantiate it.
 *
 * Every writer is a thread with an end of its own and sends m->records
 * records, each carrying its writer's id and sequence number and wholly
 * determined by them (m->make). One reader, on the calling thread, reads
 * the byte stream in the mode's sizes until end of stream and reassembles
 * the records whatever the read boundaries: as soon as a record's header is
 * in, it must be the header of the next record of a known writer (a torn,
 * interleaved, lost, repeated or reordered record shows here or in the
 * record's bytes, which must then be exactly that record). At end of stream
 * no partial record may be left, every writer's records must all have
 * arrived, and nothing else.
 */
#ifndef UP_TESTS_REC_HARNESS_H
#define UP_TESTS_REC_HARNESS_H

#include "harness.h"
#include "uringpipe.h"

#define REC_MAX_WRITERS 16
#define REC_BUF (64 * 1024) /* the reader's buffer */

struct rec_mode;

/* One writer thread; ctx is the mode's own per-writer state. */
struct rec_writer {
	const struct rec_mode *m;
	struct up_end *w;
	uint32_t id;
	void *ctx;
	pthread_t th;
};

struct rec_mode {
	const char *name;         /* in failure messages */
	int writers;              /* 1 .. REC_MAX_WRITERS */
	uint32_t records;         /* per writer */
	size_t hdr_len;           /* bytes that name a record's writer and length */
	size_t max_len;           /* the longest record, <= REC_BUF */
	long arg;                 /* the mode's parameter, for its callbacks */
	/* Builds record @seq of writer @id into @buf; returns its length. */
	size_t (*make)(const struct rec_mode *m, uint8_t *buf, uint32_t id, uint32_t seq);
	/* The writer and the whole length named by the header at @buf. */
	void (*head)(const uint8_t *buf, uint32_t *id, size_t *len);
	/* Open flags of writer @id's end; NULL: UP_WR. */
	int (*flags)(uint32_t id);
	/* Optional: called on this thread once the end is open, before any
	 * writer starts. */
	void (*setup)(struct rec_writer *rw);
	/* Sends record @seq, whole; false stops this writer (the mode's done()
	 * says why that fails the test). */
	bool (*send)(struct rec_writer *rw, const uint8_t *rec, size_t len, uint32_t seq);
	/* Optional: the mode's checks of a writer, after its thread is joined. */
	void (*done)(struct rec_writer *rw);
	/* The next read's size, 1 .. @room; NULL: @room. */
	size_t (*ask)(struct harness_rng *rng, size_t room);
	uint64_t seed;            /* of the reader's rng */
};

static HARNESS_UNUSED void *rec_writer_main(void *arg)
{
	struct rec_writer *rw = arg;
	const struct rec_mode *m = rw->m;
	uint8_t *rec = malloc(m->max_len);
	uint32_t seq;

	CHECK(rec != NULL);
	for (seq = 0; seq < m->records; seq++) {
		size_t len = m->make(m, rec, rw->id, seq);

		CHECK(len >= m->hdr_len && len <= m->max_len);
		if (!m->send(rw, rec, len, seq))
			break;
	}
	CHECK_OK(up_close(rw->w));
	free(rec);
	return NULL;
}

/*
 * Runs @m on the pipe @p (the caller's, which it releases afterwards):
 * opens the reader's end, then writer i's end with m->flags(i) into @ws[i]
 * (the caller's array of m->writers, ctx set as the mode needs), starts the
 * writers once every end is open, reads and checks everything, joins.
 */
static HARNESS_UNUSED void rec_run(const struct rec_mode *m, struct up_pipe *p,
				   struct rec_writer *ws)
{
	uint32_t next[REC_MAX_WRITERS] = { 0 };
	uint8_t *buf = malloc(REC_BUF), *exp = malloc(m->max_len);
	uint32_t exp_id = UINT32_MAX, exp_seq = 0;
	size_t fill = 0, done = 0, exp_len = 0;
	struct harness_rng rng;
	struct up_end *r = NULL;
	int i;

	CHECK(buf != NULL && exp != NULL);
	CHECK(m->writers >= 1 && m->writers <= REC_MAX_WRITERS);
	CHECK(m->hdr_len >= 1 && m->hdr_len <= m->max_len && m->max_len <= REC_BUF);
	harness_rng_seed(&rng, m->seed);
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK(r != NULL);
	for (i = 0; i < m->writers; i++) {
		ws[i].m = m;
		ws[i].id = (uint32_t)i;
		CHECK_OK(up_open(p, m->flags ? m->flags((uint32_t)i) : UP_WR, &ws[i].w));
		CHECK(ws[i].w != NULL);
		if (m->setup)
			m->setup(&ws[i]);
	}
	for (i = 0; i < m->writers; i++)
		CHECK(pthread_create(&ws[i].th, NULL, rec_writer_main, &ws[i]) == 0);
	for (;;) {
		/* the mode's read sizes: the reader must not rely on boundaries */
		size_t room = REC_BUF - fill;
		size_t ask = m->ask ? m->ask(&rng, room) : room;
		ssize_t n = up_read(r, buf + fill, ask);
		size_t pos = 0;

		CHECK_OK(n);
		if (n == 0)
			break;
		fill += (size_t)n;
		while (fill - pos >= m->hdr_len) {
			uint32_t id;
			size_t len;

			m->head(buf + pos, &id, &len);
			if (id >= (uint32_t)m->writers) {
				fprintf(stderr, "%s: record %zu names writer %u of %d\n", m->name,
					done, id, m->writers);
				CHECK(0);
			}
			if (id != exp_id || next[id] != exp_seq) {
				exp_id = id;
				exp_seq = next[id];
				exp_len = m->make(m, exp, id, exp_seq);
			}
			if (len != exp_len || memcmp(buf + pos, exp, m->hdr_len) != 0) {
				fprintf(stderr,
					"%s: record %zu: bad header for writer %u (length %zu, expected seq %u of length %zu)\n",
					m->name, done, id, len, exp_seq, exp_len);
				CHECK(0);
			}
			if (fill - pos < len)
				break;
			if (memcmp(buf + pos, exp, len) != 0) {
				fprintf(stderr, "%s: record %zu (writer %u seq %u) interleaved/corrupt\n",
					m->name, done, id, exp_seq);
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
	for (i = 0; i < m->writers; i++) {
		CHECK(pthread_join(ws[i].th, NULL) == 0);
		if (m->done)
			m->done(&ws[i]);
		CHECK_EQ(next[i], m->records);
	}
	CHECK_EQ(done, (size_t)m->writers * m->records);
	CHECK_OK(up_close(r));
	free(exp);
	free(buf);
}

#endif /* UP_TESTS_REC_HARNESS_H */
