/* SPDX-License-Identifier: MIT */
/*
 * publish.pml - the slot ring's publish protocol (core/writer.c, core/reader.c):
 * head/len with merging into the last live slot, against a reader that
 * retires the last live slot only once its page is full. Invariant: no
 * byte is lost, read twice or read out of order.
 *
 * One writer (writers hold the writers' lock for the whole publish) and one
 * reader (readers hold the readers' lock for the whole up__read_locked()), so
 * the only concurrency is writer against reader, which is what the
 * protocol is about. Every shared access is its own step, in the order of
 * writer.c and reader.c; all are modelled as sequentially consistent (the C
 * code uses the release/acquire pairs [head], [len] and [tail], whose happens-before edges give
 * the same outcomes for this message-passing pattern).
 *
 * Bounds: S slots, P pages of C bytes, B bytes written in chunks of 1..C
 * (a chunk smaller than a page tries to merge first, as up__ring_write).
 * Byte i of the stream carries the value i, so the reader checks order,
 * loss and duplication with one counter. The reader blocks (rd_ready) until
 * something is readable or the writer is done; a byte that never becomes
 * readable shows as an invalid end state, a wrong byte as an assertion.
 *
 *   spin -a publish.pml                         the protocol of writer.c/reader.c
 *   spin -DBROKEN_RETIRE -a publish.pml         the reader also retires a
 *                                               last slot that has room
 *   spin -DBROKEN_REREAD -a publish.pml         the reader reloads head but
 *                                               does not re-read len after it
 */

#ifndef S
#define S 2
#endif
#ifndef P
#define P 2
#endif
#ifndef C
#define C 2
#endif
#ifndef B
#define B 5
#endif

byte head, tail, off;          /* prod.head; cons.pos = (tail, off), one word */
byte slot_page[S], slot_len[S];
byte data[P * C];              /* the pool's pages */
byte pool[S];                  /* free page ring */
byte pget, pput;
bit  wdone;                    /* state.writers == 0 */

#define SL(i) ((i) % S)
/* rd_ready(): a byte in some live slot */
#define READABLE (head - tail >= 2 || (head - tail == 1 && off < slot_len[SL(tail)]))

proctype Writer()
{
	byte next = 0;             /* bytes written so far; byte i holds i+1 */
	byte k, h, ln, pg, j;

	do
	:: next == B -> break
	:: next < B ->
		if
		:: k = 1
		:: C > 1 && B - next >= 2 -> k = 2
		fi;
		if
		:: k < C ->
			/* try_merge(): the last live slot, without loading tail */
			h = head;
			ln = slot_len[SL(h + S - 1)];
			pg = slot_page[SL(h + S - 1)];
			if
			:: C - ln >= k ->
				j = 0;
				do
				:: j < k -> data[pg * C + ln + j] = next + j + 1; j++
				:: else -> break
				od;
				slot_len[SL(h + S - 1)] = ln + k;   /* R2 */
				next = next + k;
				goto more
			:: else -> skip
			fi
		:: else -> skip
		fi;
		/* cache_fill(): a page from the pool (sleep while empty) */
		pput != pget;
		pg = pool[pget % S];
		pget++;
		j = 0;
		do
		:: j < k -> data[pg * C + j] = next + j + 1; j++
		:: else -> break
		od;
		/* publish() */
		h = head;
		assert(h - tail < S);          /* pages <= slots: a free slot */
		slot_page[SL(h)] = pg;
		slot_len[SL(h)] = k;
		head = h + 1;                   /* [head] rel */
		next = next + k;
more:		skip
	od;
	wdone = 1
}

proctype Reader()
{
	byte expect = 1;           /* value of the next byte */
	byte t, o, h, ln, pg, max, got, k, nfree, j;
	byte freed[P];
	bit eof;

	do
	:: atomic {                /* rd_ready(), or end of stream */
		(READABLE || wdone) -> eof = !READABLE
	   } ->
		if
		:: eof ->                   /* wdone: nothing more will come */
			assert(expect == B + 1);
			break
		:: else -> skip
		fi;
		/* up__read_locked() with a buffer of 1..C+1 bytes */
		if
		:: max = 1
		:: max = 2
		:: max = C + 1
		fi;
		t = tail; o = off; got = 0; nfree = 0;
		h = head;                       /* [head] acq */
		do
		:: t == h || got >= max -> break
		:: else ->
			pg = slot_page[SL(t)];
			do
			:: ln = slot_len[SL(t)];          /* A2 */
				if
				:: ln > o ->
					k = (ln - o < max - got -> ln - o : max - got);
					j = 0;
					do
					:: j < k ->
						assert(data[pg * C + o + j] == expect);
						expect++; j++
					:: else -> break
					od;
					o = o + k;
					got = got + k;
					if
					:: o < ln -> break
					:: else -> skip
					fi
				:: else -> skip
				fi;
#ifdef BROKEN_REREAD
				h = head;                  /* moved on, but len stays stale */
				break;
#else
				if
				:: t + 1 != h -> break
				:: else -> skip
				fi;
				h = head;                  /* a later slot appeared? */
				if
				:: t + 1 == h -> break
				:: else -> skip            /* re-read ln */
				fi
#endif
			od;
			if
			:: o < ln -> break
			:: else -> skip
			fi;
#ifndef BROKEN_RETIRE
			if
			:: t + 1 == h && ln < C -> break  /* the writer may append */
			:: else -> skip
			fi;
#endif
			freed[nfree] = pg; nfree++;
			t++; o = 0
		od;
		atomic { tail = t; off = o }       /* [tail] rel: one word */
		j = 0;
		do                                  /* up__pool_put() */
		:: j < nfree -> pool[(pput + j) % S] = freed[j]; j++
		:: else -> break
		od;
		pput = pput + nfree
	od
}

init
{
	atomic {
		byte i = 0;
		do
		:: i < P -> pool[i] = i; i++
		:: else -> break
		od;
		pput = P;
		/* ring_init() in shm.c: slot head-1 of the empty ring looks full */
		slot_len[SL(S - 1)] = C;
		run Writer();
		run Reader()
	}
}
