/* SPDX-License-Identifier: MIT */
/*
 * test_short_read.c - the reader's final-slot copy and up_read()'s short way
 * (core/reader.c, up__ring_read_small()).
 *
 * A read cut short inside a slot keeps the slot's page and len; the next
 * small read of that end takes its bytes from there without loading the
 * slot, head or anything the writer writes, up to the end less a byte of a
 * final slot, or up to the len seen of the last one, which may still grow.
 * These checks show that the short way gives the bytes of the stream in
 * order and only while it may: after another reader moved the position,
 * across the end of the slot, past what was seen of the last slot, and after
 * a peer rewrote the position.
 *
 * A fresh peek walks only as far as the last consume suggests (core/peek.c):
 * the checks below show what it shows, that it grows for a consumer that
 * takes all it sees, that a peek again shows everything, and, by slots a
 * peer spoiled beyond that bound, that the bounded walk never loads them.
 */
#include <stdatomic.h>
#include <string.h>

#include "harness.h"
#include "ring.h"

#define PAGE 4096u
#define SEED 0x5407u

static void make(struct up_end **w, struct up_end **r1, struct up_end **r2, struct up_pipe **pp)
{
	struct up_config cfg;
	struct up_pipe *p;

	up_config_init(&cfg);
	cfg.capacity = 16 * PAGE;
	cfg.page_size = PAGE;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_WR, w));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, r1));
	if (r2)
		CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, r2));
	*pp = p;
}

/* Write @n bytes of the pattern from stream offset @off. */
static void put(struct up_end *w, uint64_t off, size_t n)
{
	static unsigned char buf[4 * PAGE];

	harness_fill(SEED, off, buf, n);
	CHECK_EQ(up_write(w, buf, n), (ssize_t)n);
}

/* Read exactly @n bytes and check they are the stream's from @off. */
static void get(struct up_end *r, uint64_t off, size_t n)
{
	static unsigned char buf[4 * PAGE];

	memset(buf, 0, sizeof(buf));
	CHECK_EQ(up_read(r, buf, n), (ssize_t)n);
	CHECK_EQ(harness_verify(SEED, off, buf, n), (size_t)-1);
}

/* Small reads of whole pages behind the writer: all but each page's first
 * and last go the short way, and every byte arrives once, in order. */
static void small_reads_in_order(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	struct up_stats st;
	uint64_t off = 0;

	make(&w, &r, NULL, &p);
	put(w, 0, 3 * PAGE);
	put(w, 3 * PAGE, 100); /* a fourth slot: the third is final */
	for (; off + 100 <= 3 * PAGE; off += 100) {
		get(r, off, 100);
		/* Left inside a full page with a later slot: kept. */
		if ((off + 100) % PAGE != 0)
			CHECK(r->fin_valid);
	}
	get(r, off, 3 * PAGE + 100 - off);
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.bytes_read, 3 * PAGE + 100);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* Take @n bytes by peek and consume and check they are the stream's. */
static void take(struct up_end *r, uint64_t off, size_t n)
{
	struct iovec iov[8];
	int cnt = 8;
	size_t got = 0;
	ssize_t k = up_peek(r, iov, &cnt);

	CHECK(k >= (ssize_t)n);
	for (int i = 0; i < cnt && got < n; i++) {
		size_t m = iov[i].iov_len < n - got ? iov[i].iov_len : n - got;

		CHECK_EQ(harness_verify(SEED, off + got, iov[i].iov_base, m), (size_t)-1);
		got += m;
	}
	CHECK_EQ(got, n);
	CHECK_OK(up_consume(r, n));
}

/* The zero-copy reader of messages: peek, take 100 bytes, consume them.
 * Inside a kept slot the peek takes the slot from the copy and the consume
 * moves the position there; every byte arrives once, in order. */
static void small_peeks_in_order(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	uint64_t off = 0;

	make(&w, &r, NULL, &p);
	put(w, 0, 3 * PAGE);
	put(w, 3 * PAGE, 100);
	for (; off + 100 <= 3 * PAGE; off += 100) {
		take(r, off, 100);
		if ((off + 100) % PAGE != 0)
			CHECK(r->fin_valid);
	}
	take(r, off, 3 * PAGE + 100 - off);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A read that reaches the end of the slot, or passes it, takes the general
 * path and goes on into the next slot. */
static void across_the_slot_end(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;

	make(&w, &r, NULL, &p);
	put(w, 0, 2 * PAGE);
	put(w, 2 * PAGE, 100);
	get(r, 0, 1000);
	CHECK(r->fin_valid);
	get(r, 1000, PAGE - 1000); /* exactly to the end */
	get(r, PAGE, 1000);
	CHECK(r->fin_valid);
	get(r, PAGE + 1000, PAGE - 1000 + 100); /* across into the last slot */
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* Two readers take turns inside one slot: each sees the other's bytes gone,
 * never a byte twice. */
static void two_readers_take_turns(void)
{
	struct up_end *w, *r1, *r2;
	struct up_pipe *p;
	uint64_t off = 0;

	make(&w, &r1, &r2, &p);
	put(w, 0, 2 * PAGE);
	put(w, 2 * PAGE, 100);
	get(r1, off, 100), off += 100;
	CHECK(r1->fin_valid);
	get(r2, off, 100), off += 100;
	CHECK(r2->fin_valid);
	get(r1, off, 100), off += 100; /* r1's copy is stale: r2 moved pos */
	get(r1, off, 100), off += 100;
	get(r2, off, 100), off += 100;
	up_close(w);
	up_close(r1);
	up_close(r2);
	up_pipe_release(p);
}

/* The same with a peek and a consume after the rewrite. */
static void rewritten_position_peek(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	struct iovec iov[2];
	int cnt = 2;
	uint64_t pos;

	make(&w, &r, NULL, &p);
	put(w, 0, 2 * PAGE);
	put(w, 2 * PAGE, 100);
	take(r, 0, 100);
	CHECK(r->fin_valid);
	pos = atomic_load(&p->ln->cons.pos);
	atomic_store(&p->ln->cons.pos, up__pos(up__pos_tail(pos), 50));
	CHECK_EQ(up_peek(r, iov, &cnt), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A peer rewrites the position behind the reader's back: the short way
 * does not trust its copy, and the general path finds the violation. */
static void rewritten_position(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	unsigned char buf[100];
	uint64_t pos;

	make(&w, &r, NULL, &p);
	put(w, 0, 2 * PAGE);
	put(w, 2 * PAGE, 100);
	get(r, 0, 100);
	CHECK(r->fin_valid);
	pos = atomic_load(&p->ln->cons.pos);
	atomic_store(&p->ln->cons.pos, up__pos(up__pos_tail(pos), 50));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* Peek all there is, and check the spans are the stream's from @off. */
static ssize_t peek_check(struct up_end *r, uint64_t off)
{
	struct iovec iov[32];
	int cnt = 32;
	ssize_t k = up_peek(r, iov, &cnt);
	size_t got = 0;

	for (int i = 0; k > 0 && i < cnt; i++) {
		CHECK_EQ(harness_verify(SEED, off + got, iov[i].iov_base, iov[i].iov_len),
			 (size_t)-1);
		got += iov[i].iov_len;
	}
	if (k > 0)
		CHECK_EQ(got, (size_t)k);
	return k;
}

/* A fresh peek shows what the last consume took (rounded up to whole
 * slots), twice as much after a consume of all it showed, and a peek again
 * before consuming shows all there is. */
static void peek_shows_what_is_used(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;

	make(&w, &r, NULL, &p);
	for (uint64_t off = 0; off < 12 * PAGE; off += 4 * PAGE)
		put(w, off, 4 * PAGE);
	CHECK_EQ(peek_check(r, 0), (ssize_t)(12 * PAGE)); /* the first: all */
	CHECK_OK(up_consume(r, PAGE));
	CHECK_EQ(peek_check(r, PAGE), (ssize_t)PAGE);
	CHECK_EQ(peek_check(r, PAGE), (ssize_t)(11 * PAGE)); /* again: all */
	CHECK_OK(up_consume(r, PAGE));
	CHECK_EQ(peek_check(r, 2 * PAGE), (ssize_t)PAGE);
	CHECK_OK(up_consume(r, PAGE)); /* all it showed: twice as much next */
	CHECK_EQ(peek_check(r, 3 * PAGE), (ssize_t)(2 * PAGE));
	CHECK_OK(up_consume(r, 2 * PAGE));
	CHECK_EQ(peek_check(r, 5 * PAGE), (ssize_t)(4 * PAGE));
	CHECK_OK(up_consume(r, 100)); /* less: that much, so the kept slot */
	CHECK_EQ(peek_check(r, 5 * PAGE + 100), (ssize_t)(PAGE - 100));
	CHECK(r->fin_valid);
	CHECK_OK(up_consume(r, PAGE - 100)); /* all shown: 2 * (PAGE - 100) */
	CHECK_EQ(peek_check(r, 6 * PAGE), (ssize_t)(2 * PAGE));
	CHECK_OK(up_consume(r, 6 * PAGE)); /* more than shown is allowed */
	CHECK_EQ(up_consume(r, 1), -EINVAL);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* After up_consume(0) a fresh peek shows everything; after a consume of
 * more than the peek showed, at least that much. */
static void peek_after_let_go_and_a_big_consume(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;

	make(&w, &r, NULL, &p);
	for (uint64_t off = 0; off < 12 * PAGE; off += 4 * PAGE)
		put(w, off, 4 * PAGE);
	put(w, 12 * PAGE, 100);
	CHECK_EQ(peek_check(r, 0), (ssize_t)(12 * PAGE + 100));
	CHECK_OK(up_consume(r, 100));
	CHECK_EQ(peek_check(r, 100), (ssize_t)(PAGE - 100)); /* the kept slot */
	CHECK_OK(up_consume(r, 0)); /* too little: let go */
	CHECK_EQ(peek_check(r, 100), (ssize_t)(12 * PAGE));
	CHECK_OK(up_consume(r, 100));
	CHECK_EQ(peek_check(r, 200), (ssize_t)(PAGE - 200));
	CHECK_OK(up_consume(r, 3 * PAGE)); /* more than shown */
	/* At least 3 pages from 3 * PAGE + 200: the walk ends on the slot
	 * that reaches them. */
	CHECK_EQ(peek_check(r, 3 * PAGE + 200), (ssize_t)(4 * PAGE - 200));
	/* A refused consume leaves the bound as it was. */
	CHECK_EQ(up_consume(r, 13 * PAGE), -EINVAL);
	CHECK_EQ(peek_check(r, 3 * PAGE + 200), (ssize_t)(4 * PAGE - 200));
	/* Less than it showed, if more than half: that much next. */
	CHECK_OK(up_consume(r, 2 * PAGE));
	CHECK_EQ(peek_check(r, 5 * PAGE + 200), (ssize_t)(3 * PAGE - 200));
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A peek that finds little because the reader caught up, all of it used,
 * does not shrink the bound the consumer had grown. */
static void a_catch_up_keeps_the_bound(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;

	make(&w, &r, NULL, &p);
	put(w, 0, 4 * PAGE);
	CHECK_EQ(peek_check(r, 0), (ssize_t)(4 * PAGE));
	CHECK_OK(up_consume(r, 100));
	CHECK_EQ(peek_check(r, 100), (ssize_t)(PAGE - 100));
	CHECK_OK(up_consume(r, PAGE - 100)); /* next: 2 * (PAGE - 100) */
	CHECK_EQ(peek_check(r, PAGE), (ssize_t)(2 * PAGE));
	CHECK_OK(up_consume(r, 2 * PAGE)); /* next: 4 pages */
	CHECK_EQ(peek_check(r, 3 * PAGE), (ssize_t)PAGE); /* all there is */
	CHECK_OK(up_consume(r, PAGE)); /* still 4 pages, not 2 */
	put(w, 4 * PAGE, 4 * PAGE);
	put(w, 8 * PAGE, 4 * PAGE);
	CHECK_EQ(peek_check(r, 4 * PAGE), (ssize_t)(4 * PAGE));
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A peer spoils head and a later slot's len: a bounded peek inside the kept
 * slot shows its rest without loading either, so it succeeds; the peek again,
 * which walks everything, finds the damage. */
static void bounded_peek_loads_nothing_beyond(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	uint32_t t;

	make(&w, &r, NULL, &p);
	put(w, 0, 4 * PAGE);
	put(w, 4 * PAGE, 100);
	CHECK_EQ(peek_check(r, 0), (ssize_t)(4 * PAGE + 100));
	CHECK_OK(up_consume(r, 100));
	CHECK(r->fin_valid);
	t = up__pos_tail(atomic_load(&p->ln->cons.pos));
	atomic_store(&up__slot_at(p, t + 2)->len, PAGE + 1);
	atomic_store(&p->ln->prod.head, t + p->g.slot_count + 1);
	CHECK_EQ(peek_check(r, 100), (ssize_t)(PAGE - 100));
	CHECK_EQ(peek_check(r, 100), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* The last slot grows while the writer appends to it: a read cut short
 * there keeps the len it saw, and a read past that loads len again, so the
 * bytes appended later are read and the slot, which the writer may still
 * append to, is not retired. */
static void last_slot_kept_while_it_grows(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;

	make(&w, &r, NULL, &p);
	put(w, 0, 100);
	get(r, 0, 50);
	CHECK(r->fin_valid && r->fin_last);
	CHECK_EQ(r->fin_len, 100);
	put(w, 100, 100); /* merged into the same slot */
	get(r, 50, 150);
	put(w, 200, 100); /* still the live last slot */
	get(r, 200, 100);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A peer spoils the last slot's len after the reader saw it: reads up to
 * the len seen take the short way and load nothing, so they succeed; the
 * read past it loads the len and finds the damage. */
static void last_slot_short_way_loads_nothing(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	unsigned char c;
	uint32_t t;

	make(&w, &r, NULL, &p);
	put(w, 0, 300);
	get(r, 0, 100);
	t = up__pos_tail(atomic_load(&p->ln->cons.pos));
	atomic_store(&up__slot_at(p, t)->len, PAGE + 1);
	get(r, 100, 100);
	get(r, 200, 100); /* exactly to the len seen: the slot stays */
	CHECK_EQ(up_read(r, &c, 1), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* The same for the zero-copy reader: a peek inside the last slot shows the
 * rest of what was seen, and a consume of all of it leaves the slot live. */
static void last_slot_peeks(void)
{
	struct up_end *w, *r;
	struct up_pipe *p;
	uint32_t t;

	make(&w, &r, NULL, &p);
	put(w, 0, 300);
	take(r, 0, 100);
	CHECK(r->fin_valid && r->fin_last);
	t = up__pos_tail(atomic_load(&p->ln->cons.pos));
	atomic_store(&up__slot_at(p, t)->len, PAGE + 1);
	take(r, 100, 200);
	CHECK_EQ(peek_check(r, 300), -EPROTO);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

int main(void)
{
	RUN(small_reads_in_order);
	RUN(small_peeks_in_order);
	RUN(across_the_slot_end);
	RUN(two_readers_take_turns);
	RUN(last_slot_kept_while_it_grows);
	RUN(last_slot_short_way_loads_nothing);
	RUN(last_slot_peeks);
	RUN(rewritten_position);
	RUN(rewritten_position_peek);
	RUN(peek_shows_what_is_used);
	RUN(bounded_peek_loads_nothing_beyond);
	RUN(peek_after_let_go_and_a_big_consume);
	RUN(a_catch_up_keeps_the_bound);
	return 0;
}
