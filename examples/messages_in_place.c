/* SPDX-License-Identifier: MIT */
/*
 * messages_in_place.c - length-prefixed records built and used in place:
 * zero copy, one library call per record on each side.
 *
 * The writer reserves room for its first record with up_reserve(), writes
 * the record straight into the pipe page, and from then on publishes each
 * record and reserves the next with one up_commit_reserve(); where that
 * returns 0 (the page is full), up_reserve() takes a fresh page. The reader
 * peeks once, then uses each record where it lies and consumes it with the
 * next peek in one up_consume_peek(). A record the first span does not
 * hold whole (never the case for records up_reserve() placed, which stay
 * in one page, but a reader must not assume it) is gathered from the
 * spans into a buffer of its own.
 *
 * Records: a 4-byte little-endian length, then that many bytes of a
 * pattern of the record's number. Exit 0 when all RECORDS arrived intact.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <uringpipe.h>

#define RECORDS 200000u
#define MAX_BODY 200u

static uint32_t body_len(uint32_t i)
{
	return 1 + (i * 2654435761u >> 7) % MAX_BODY;
}

static void make_record(unsigned char *dst, uint32_t i)
{
	uint32_t n = body_len(i);

	dst[0] = (unsigned char)n;
	dst[1] = (unsigned char)(n >> 8);
	dst[2] = (unsigned char)(n >> 16);
	dst[3] = (unsigned char)(n >> 24);
	memset(dst + 4, (int)(i & 0xff), n);
}

/* Checks record @i at @rec (its header and body); 0 when intact. */
static int check_record(const unsigned char *rec, uint32_t i)
{
	uint32_t n = (uint32_t)rec[0] | (uint32_t)rec[1] << 8 | (uint32_t)rec[2] << 16 |
		     (uint32_t)rec[3] << 24;

	if (n != body_len(i))
		return -1;
	for (uint32_t k = 0; k < n; k++)
		if (rec[4 + k] != (unsigned char)(i & 0xff))
			return -1;
	return 0;
}

static void *writer_main(void *arg)
{
	struct up_end *w = arg;
	struct iovec iov[4];
	int cnt = 4;
	uint32_t i = 0;
	ssize_t room = up_reserve(w, 4 + body_len(0), iov, &cnt);

	while (room > 0) {
		make_record(iov[0].iov_base, i); /* a record is one span */
		i++;
		cnt = 4;
		if (i == RECORDS) {
			room = up_commit(w, 4 + body_len(i - 1));
			break;
		}
		/* Publish record i - 1, reserve room for record i. */
		room = up_commit_reserve(w, 4 + body_len(i - 1), 4 + body_len(i), iov, &cnt);
		if (room == 0) { /* committed; the next needs a fresh page */
			cnt = 4;
			room = up_reserve(w, 4 + body_len(i), iov, &cnt);
		}
	}
	if (room < 0)
		fprintf(stderr, "writer: %s after %u records\n", up_strerror((int)room), i);
	up_close(w); /* end of stream once the reader has drained */
	return NULL;
}

int main(void)
{
	struct up_end *ends[2]; /* [0] reads, [1] writes */
	unsigned char copy[4 + MAX_BODY];
	struct iovec iov[8];
	int cnt = 8, r;
	uint32_t i = 0, inplace = 0;
	pthread_t t;
	ssize_t n;

	r = up_pipe2(ends, NULL);
	if (r < 0) {
		fprintf(stderr, "up_pipe2: %s\n", up_strerror(r));
		return 1;
	}
	if (pthread_create(&t, NULL, writer_main, ends[1]) != 0)
		return 1;
	n = up_peek(ends[0], iov, &cnt);
	while (n > 0) {
		const unsigned char *rec = iov[0].iov_base;
		size_t len = 4 + body_len(i), got = 0;

		if (iov[0].iov_len >= len) {
			inplace++; /* whole in the first span: used where it lies */
		} else {
			/* Split across spans: gather it (the peek shows whole
			 * commits, so all of it is there). */
			for (int k = 0; k < cnt && got < len; k++) {
				size_t take = iov[k].iov_len < len - got ? iov[k].iov_len : len - got;

				memcpy(copy + got, iov[k].iov_base, take);
				got += take;
			}
			if (got < len)
				break;
			rec = copy;
		}
		if (check_record(rec, i) != 0)
			break;
		i++;
		cnt = 8;
		n = up_consume_peek(ends[0], len, iov, &cnt);
	}
	pthread_join(t, NULL);
	if (n < 0)
		fprintf(stderr, "reader: %s\n", up_strerror((int)n));
	up_close(ends[0]);
	printf("%u records, %u used in place\n", i, inplace);
	return i == RECORDS && n == 0 ? 0 : 1;
}
