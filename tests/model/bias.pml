/* SPDX-License-Identifier: MIT */
/*
 * bias.pml - the writers' lock biased to a lone writer (core/wlock.h, "the
 * writers' lock, biased to a lone writer"): the owner enters with a relaxed
 * store of busy = IN and a load of bias, with no fence between; a writer
 * that takes the lock word and finds a bias marks it REVOKE, calls
 * membarrier(), waits while the owner's busy is IN, and clears it.
 *
 * The owner's missing fence is the whole point, so the model is x86-TSO
 * where it matters: every writer has a FIFO store buffer for its busy
 * stores (the only plain stores of the protocol that are not followed by a
 * locked instruction before anyone reads them), drained into memory one
 * entry at a time by a Drain process at any moment. A locked instruction
 * (CAS or xchg of the word, the seq_cst store of the REVOKE mark) waits for
 * its own buffer to be empty, as on x86. membarrier() drains every
 * writer's buffer at once: every other CPU runs a full barrier.
 *
 * Both writers run the same code: each may take the word, take back a
 * bias it finds, and bias the lock to itself while it holds the word (the
 * library does so when it counts one writer; the count is only a hint, so
 * the model lets a holder choose either way at any time). A writer that
 * finishes gives its bias up as up__bias_give_up() does at close (busy = ACK).
 *
 * Checked (pan -DSAFETY): the assertion that at most one writer is in the
 * critical section, and no invalid end state (a revoker waiting for ever).
 *
 *   spin -a bias.pml                 the protocol of wlock.h/wlock.c
 *   spin -DMUTANT=1 -a bias.pml      no membarrier(): must fail
 *   spin -DMUTANT=2 -a bias.pml      no wait for busy != IN: must fail
 *   spin -DNOFENCE -a bias.pml       membarrier refused: the revoker waits
 *                                    for the owner's ACK, or for the owner
 *                                    out with its buffer drained (the grace
 *                                    period, UP_BIAS_GRACE_NS) (passes)
 *   spin -DNOFENCE -DIDLE ...        the same with owners that stay open and
 *                                    idle, never acknowledging (passes)
 *   spin -DNOFENCE -DMUTANT=3 ...    ...but accepts busy != IN at once: must
 *                                    fail
 *   spin -DNOFENCE -DIDLE -DMUTANT=4 ... waits for the ACK only: an idle owner
 *                                    never gives it, the revoker waits for
 *                                    ever (invalid end state): must fail
 */

#ifndef N
#define N 2          /* critical sections per writer */
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define OUT 0
#define IN  1
#define ACK 2
#define REV 128      /* UP_BIAS_REVOKE */

byte word;           /* wlock.word: 0 or the holder's id */
byte bias;           /* wlock.bias: 0, id, or id | REV */
byte busy[3];        /* ends[id].busy, as memory holds it */
chan sb[3] = [3] of { byte };   /* each writer's store buffer of busy stores */
byte incs;           /* ghost: writers inside the critical section */

inline flush_all()
{
	byte v_;
	/* membarrier(): a full barrier on every CPU running a writer */
	do
	:: nempty(sb[1]) -> sb[1]?v_; busy[1] = v_
	:: nempty(sb[2]) -> sb[2]?v_; busy[2] = v_
	:: empty(sb[1]) && empty(sb[2]) -> break
	od
}

inline critical()
{
	incs++;
	assert(incs == 1);
	incs--
}

proctype Drain(byte id)
{
	byte v;
end:	do
	:: atomic { nempty(sb[id]) -> sb[id]?v; busy[id] = v }
	od
}

proctype Writer(byte id)
{
	byte done = 0, b, o;
	bit biased = 0;

	do
	:: done == N -> break
	:: done < N ->
		if
		:: biased ->
			/* wlock_take(), fast path */
			sb[id]!IN;
			if
			:: bias == id ->
				critical();
				sb[id]!OUT;          /* wlock_drop() */
				done++;
				goto next
			:: else ->
				sb[id]!ACK;
				biased = 0
			fi
		:: else -> skip
		fi;
		/* lock_take(): CAS, a locked instruction */
		atomic { empty(sb[id]) && word == 0 -> word = id };
		b = bias;
		if
		:: b != 0 ->
			o = b & ~REV;
			if
			:: o == id -> skip       /* our own, from before */
			:: else ->
				atomic { empty(sb[id]) -> bias = o | REV };
#if MUTANT != 1 && !defined(NOFENCE)
				d_step { flush_all() };
#endif
#if MUTANT == 2
				skip;
#elif defined(NOFENCE) && MUTANT == 3
				(busy[o] != IN);
#elif defined(NOFENCE) && MUTANT == 4
				(busy[o] == ACK);    /* no grace period */
#elif defined(NOFENCE)
				/* the owner's ACK, or the grace period: the owner is
				 * out and whatever it stored before has drained
				 * (UP_BIAS_GRACE_NS: stores do not stay buffered
				 * for milliseconds) */
				(busy[o] == ACK || (busy[o] != IN && empty(sb[o])));
#else
				(busy[o] != IN);
#endif
			fi;
			bias = 0
		:: else -> skip
		fi;
		if
		:: true ->                   /* bias to ourselves */
			sb[id]!IN;
			bias = id;
			biased = 1;
			atomic { empty(sb[id]) -> word = 0 };   /* xchg */
			critical();
			sb[id]!OUT
		:: true ->
			critical();
			atomic { empty(sb[id]) -> word = 0 }
		fi;
		done++;
next:		skip
	od;
#ifndef IDLE
	/* up__bias_give_up(): out for good */
	if
	:: biased -> sb[id]!ACK
	:: else -> skip
	fi
#endif
	/* (IDLE: the writer stays open and never enters again, so never
	 * acknowledges a mark; a revoker must not wait for it for ever.) */
}

init
{
	atomic {
		run Drain(1);
		run Drain(2);
		run Writer(1);
		run Writer(2)
	}
}
