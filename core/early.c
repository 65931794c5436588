/* SPDX-License-Identifier: MIT */
/*
 * early.c - the early wake's learning and planning (docs/DESIGN.md,
 * section 5, "The early wake"): when a reader's waits for data end, the
 * gap between them, and when its next wait should be up before the data.
 * wait.c sleeps and spins by these plans; poll.c opens the window of a
 * poll-mode reader's event loop by them (unless UP_NO_EARLY).
 */
#include <sched.h>

#include "ring.h"

/*
 * The early wake. A reader whose data comes at a regular gap longer than
 * any spin sleeps until a lead before the next is due, then spins for it:
 * the writer, finding no sleeper, makes no wake, and the reader's core is
 * already up when the data comes rather than woken by it. What must stay
 * true:
 * - the early sleep is an ordinary announced sleep with a shorter slice,
 *   so data that comes sooner wakes it as any other; the spin after it is
 *   unannounced and re-checks, so the handshake is the one wait.c has;
 * - the spin is bounded (three leads at most) and made only after
 *   UP_EARLY_HITS gaps in a row agreed; one that runs out unlearns the gap
 *   and lets the next 2^misses waits pass (but for one in a long run,
 *   up__early_miss()), so traffic that is not regular pays a spin on a
 *   vanishing share of its waits.
 */
#define UP_EARLY_HITS 2u
#define UP_EARLY_FORGIVE_HITS 16u
#define UP_EARLY_SKIP_SHIFT_MAX 10u
/* Shorter early sleeps are not worth their system call: spin instead. */
#define UP_EARLY_SLEEP_MIN_NS 20000u

/* The lateness assumed before any is seen, and the most that is learnt:
 * a sleep that ends later than that was preempted, not a timer's. */
#define UP_EARLY_LAT_INIT_NS 30000u
#define UP_EARLY_LAT_MAX_NS  150000u
/* Over the learnt lateness, for the spread of the next one. */
#define UP_EARLY_MARGIN_NS   5000u

/* How far apart two gaps may be and still agree, and how long a spin
 * waits past the due time: the writer's own jitter. */
static uint64_t early_window(uint32_t gap)
{
	uint64_t l = gap / 8;

	return l < UP_EARLY_WINDOW_MIN_NS ? UP_EARLY_WINDOW_MIN_NS
	       : l > UP_EARLY_WINDOW_MAX_NS ? UP_EARLY_WINDOW_MAX_NS : l;
}

/* How long before the due time a timed sleep should end: how late such
 * sleeps have ended here (an idle vCPU's wake on a VM: 25-30 us; a few on
 * bare metal), a quarter more, and a margin. */
static uint64_t early_lead(const struct up_end *e)
{
	uint64_t lat = e->early_lat ? e->early_lat : UP_EARLY_LAT_INIT_NS;

	return lat + lat / 4 + UP_EARLY_MARGIN_NS;
}

/* A timed early sleep ended @late_ns after its time: learn it, up at once
 * (the lead must cover the late ones) and down by a sixteenth a sleep.
 * Where the sleep overran by the thread's timer slack (@slack), that is
 * not learnt: up__early_due() plans it in apart, and a lead that held it
 * too would take it off twice, leaving a 200 us gap no room to sleep. */
static uint64_t lateness_of(uint64_t late_ns, bool slack)
{
	if (slack) {
		uint64_t s = up__timer_slack_ns();

		late_ns = late_ns > s ? late_ns - s : 0;
	}
	return late_ns > UP_EARLY_LAT_MAX_NS ? UP_EARLY_LAT_MAX_NS : late_ns;
}

void up__early_lateness(struct up_end *e, uint64_t late_ns, bool slack)
{
	late_ns = lateness_of(late_ns, slack);
	if (late_ns >= e->early_lat)
		e->early_lat = (uint32_t)late_ns;
	else
		e->early_lat -= (uint32_t)((e->early_lat - late_ns) / 16);
}

/* A wait planned to end early was ended by data @late_ns past its early
 * wake, the timed end not yet seen: that end is at least so late. Only a
 * bound, so it raises the lateness and never lowers it. Without it a timer
 * always later than the lead (a loaded machine, a slow helper thread)
 * lost every race to the data, was never seen late, and the lead never
 * grew to let it win: no message was ever caught. */
void up__early_late_bound(struct up_end *e, uint64_t late_ns, bool slack)
{
	late_ns = lateness_of(late_ns, slack);
	if (late_ns > e->early_lat)
		e->early_lat = (uint32_t)late_ns;
}

/* How far the time @d between two ends is from the gap @gap. */
static uint64_t gap_off(uint64_t d, uint32_t gap)
{
	return d > gap ? d - gap : gap - d;
}

/* How far the time between two ends may be from the gap @gap and still
 * agree with it: a window, or the lateness @lat if that is more, but no
 * more than half the gap (or traffic that is not regular would look so).
 * A writer paced by its own timer wakes about as late as our timers do,
 * and by a different amount each time: on a VM its gaps move by 25-60 us,
 * more than a 200 us gap's window, and every gap that disagreed twice in
 * a row cost the next waits their plans. */
static uint64_t early_agree(uint32_t gap, uint64_t lat)
{
	uint64_t w = early_window(gap);

	if (lat > gap / 2)
		lat = gap / 2;
	return w > lat ? w : lat;
}

/*
 * A wait for data ended with data at @now, seen by a spin (on time) or
 * after a wake (@late): learn the gap between such ends.
 *
 * A gap learnt (UP_EARLY_HITS in a row) is not thrown away for one
 * measurement that disagrees, because every one that is thrown away costs
 * the next UP_EARLY_HITS waits a wake, and on a VM a paced writer's own
 * wake moves its gaps by more than a window now and then. So:
 * - an end after a wake, later than the gap by more than early_agree()
 *   but up to a window and the learnt lateness, keeps the gap and the run:
 *   the wake's latency says nothing about the gap. Its time is taken back
 *   by the lateness, but never to before the gap was up (the data came
 *   about then; dated at the wake, the next plan would start that late as
 *   well, and be woken again; dated before it, the next gap would look
 *   long);
 * - after a run longer than UP_EARLY_HITS, one gap outside early_agree()
 *   leaves the gap as it is and the run at UP_EARLY_HITS: a second in a
 *   row is a new gap. Not followed: a message between two regular ones
 *   would pull the gap a quarter of the way to its own.
 * A gap that really changed is unlearnt either way: at the second
 * disagreement, or by the early wake's miss (up__early_miss()) when the
 * data stops coming in the window.
 */
void up__early_note(struct up_end *e, uint64_t now, bool late)
{
	uint64_t d = now - e->early_seen,
		 lat = e->early_lat ? e->early_lat : UP_EARLY_LAT_INIT_NS;

	if (e->early_seen == 0 || d >= UP_EARLY_GAP_MAX_NS) {
		e->early_gap = 0;
		e->early_hits = 0;
	} else if (e->early_gap != 0 && gap_off(d, e->early_gap) <= early_agree(e->early_gap, lat)) {
		/* Follow a drifting gap by a quarter of each difference. */
		e->early_gap = (uint32_t)(d > e->early_gap ? e->early_gap + (d - e->early_gap) / 4
						       : e->early_gap - (e->early_gap - d) / 4);
		if (e->early_hits < UINT8_MAX)
			e->early_hits++;
	} else if (late && e->early_hits >= UP_EARLY_HITS && d > e->early_gap &&
		   d - e->early_gap <= early_window(e->early_gap) + lat) {
		/* d > early_gap > 0 here (a run has a gap); d - early_gap can
		 * be under lat where early_agree() stopped at half the gap. */
		now -= lat < d - e->early_gap ? lat : d - e->early_gap;
	} else if (e->early_gap != 0 && e->early_hits > UP_EARLY_HITS) {
		e->early_hits = UP_EARLY_HITS;
	} else {
		e->early_gap = (uint32_t)d;
		e->early_hits = 0;
	}
	e->early_seen = now;
	e->early_late = late;
}

/* When a wait for data that begins at @now should end its first sleep (0:
 * sleep as usual), and in *@until when the spin after it gives up. After
 * a late end the data came up to a wake's latency before it (its date an
 * estimate, where up__early_note() took the lateness back): wake a
 * window earlier; where the sleep overruns by the thread's timer slack
 * (@slack), that much earlier again. */
uint64_t up__early_due(struct up_end *e, uint64_t now, bool slack, uint64_t *until)
{
	uint64_t win, lead, due, wake;

	if (e->early_skip != 0) {
		e->early_skip--;
		return 0;
	}
	/* Gaps that short are the spin's (wait.c, spin_learn()). */
	if (e->early_hits < UP_EARLY_HITS || e->early_gap <= UP_SPIN_MAX_NS)
		return 0;
	win = early_window(e->early_gap);
	lead = early_lead(e);
	due = e->early_seen + e->early_gap;
	wake = due - lead - (e->early_late ? win : 0);
	if (slack)
		wake -= up__timer_slack_ns();
	if (wake < now + e->spin_ns + UP_EARLY_SLEEP_MIN_NS) {
		/* The lead leaves the gap no room for a sleep. The lateness is
		 * learnt from timed early sleeps only, so a large one (a sleep
		 * preempted once) would keep every plan off for good: let it
		 * go down by a sixteenth, as an early sleep on time would. */
		e->early_lat -= e->early_lat / 16;
		return 0;
	}
	/* A writer paced by its own timer is as late as ours are. */
	*until = due + (win > lead ? win : lead);
	return wake;
}

/* An early wake ran out before the data: unlearn the gap, and let the
 * next 2^misses waits pass without one. After UP_EARLY_FORGIVE_HITS gaps
 * in a row agreed, one miss is the writer's own lateness, not a new gap:
 * the gap stays and the run goes back to just over a plan's, so that the
 * late end that follows keeps it (up__early_note()) and a second miss
 * before the run is that long again unlearns it. Unlearnt, it would cost
 * the next waits their plans while two gaps agreed again, each of them a
 * wake. */
void up__early_miss(struct up_end *e)
{
	up__count(&e->c.early_misses, 1);
	if (e->early_hits >= UP_EARLY_FORGIVE_HITS) {
		e->early_hits = UP_EARLY_HITS + 1;
		return;
	}
	e->early_gap = 0;
	e->early_hits = 0;
	e->early_skip = (uint16_t)(1u << e->early_misses);
	if (e->early_misses < UP_EARLY_SKIP_SHIFT_MAX)
		e->early_misses++;
}

/*
 * Poll mode: the caller's event loop sleeps, not us. Before an arm of a
 * reader: 1 when the end is in its early window (the caller should make
 * the fd readable at once, unannounced, so that its loop polls through
 * the window: the loop is never held, only woken again), else 0 with
 * *@early_ns the planned early wake from now, or 0 for none. Every call in
 * the window yields, as the blocking spin does.
 *
 * Gaps a blocking reader spins through (up to UP_SPIN_MAX_NS) open the
 * window at once: the loop polls through them as that spin would.
 */
int up__early_arm(struct up_end *e, uint64_t *early_ns)
{
	uint64_t now = up__now_ns(), until;

	*early_ns = 0;
	if (!e->waker->ops->arm_now)
		return 0;
	if (e->early_until == 0) {
		if (e->early_skip == 0 && e->early_hits >= UP_EARLY_HITS &&
		    e->early_gap <= UP_SPIN_MAX_NS) {
			uint64_t win = early_window(e->early_gap), lead = early_lead(e);

			/* Past the due time as a timed plan's window is: a
			 * writer paced by its own timer is as late as ours. */
			until = e->early_seen + e->early_gap + (win > lead ? win : lead);
			/* Armed after such a window (a tick, a loop that came
			 * late): none opened, so none missed. */
			if (until <= now)
				return 0;
			e->early_wake = now;
			e->early_timed = false;
		} else {
			/* The arm's timed end is the backend's own: an
			 * io_uring timeout, or the futex helper's wait, whose
			 * thread asks for no slack (pollfd_futex.c). */
			e->early_wake = up__early_due(e, now, false, &until);
			e->early_timed = true;
		}
		if (e->early_wake == 0)
			return 0;
		e->early_until = until;
	}
	if (now >= e->early_until) {
		up__count(&e->c.early_spin_ns, e->early_until - e->early_wake);
		e->early_until = 0;
		up__early_miss(e);
		return 0;
	}
	if (now >= e->early_wake) {
		/* The first look in the window: as late as the timeout's
		 * completion reached the loop and the loop the arm. */
		if (e->early_timed) {
			up__early_lateness(e, now - e->early_wake, false);
			e->early_timed = false;
		}
		sched_yield();
		up__count(&e->c.syscalls, 1);
		return 1;
	}
	*early_ns = e->early_wake - now;
	return 0;
}
