/* SPDX-License-Identifier: MIT */
/*
 * test_bitflip.c - one flipped bit in the shared segment, mid-stream, and
 * what the honest writer and reader make of it.
 *
 * Method. For each bit chosen, a forked child creates a fresh pipe of 32
 * pages of 4 KiB (128 KiB, 32 slots, no spare pages) and brings it, with
 * one non-blocking reader and one non-blocking writer, to the same known
 * state mid-stream: indices that have gone round the ring, several live
 * slots, the tail slot partly read (cons.pos has an offset), the last slot
 * partly filled, one page in the writer's cache (tagged in owner[]), the
 * rest in the pool. The child checks that state, flips one bit of the
 * segment's first BF_SPAN bytes through its own mapping of the memfd, then
 * writes and reads, alternately from one thread, the rest of a known stream
 * (harness_pat(): position-dependent bytes), mixing up_write/up_reserve and
 * up_read/up_peek, and verifies every byte it reads. Its exit status says
 * what happened:
 *
 *   intact   the whole stream, then end of stream, no error
 *   error    an error other than -EAGAIN (-EPROTO, -EPIPE, ...) from either
 *            side, and every byte read before it was right
 *   early    end of stream before the last byte, the bytes read a prefix
 *   late     more bytes than were written after a correct stream
 *   silent   wrong bytes, and no call reported anything
 *   wrongerr wrong bytes delivered, an error only later
 *   hang     neither side moved for BF_STALL rounds, or over the time bound
 *            (SIGALRM, BF_BOUND_S)
 *   crash    killed by any other signal
 *
 * BF_SPAN is 4096: for this geometry every byte in front of the data pages
 * (header, the nine lines, the endpoint table, slots, pool, owner tags and
 * the padding to the first page, which starts at 4096) is in it. The header
 * is copied into private memory at attach and never read again, so its
 * flips come out intact; test_corrupt covers its checksum at attach. Flips
 * in the data pages are stream data: without checksums of the data nothing
 * can tell them, so they are out of scope here.
 *
 * Options: --all (every bit of BF_SPAN; prints counts per region), --sample
 * N --seed S (N bits drawn at random), --bit K (one bit, verbose), --regions
 * a,b (only bits in those regions), --max-silent N (fail on any crash, on
 * any silent or wrongerr outcome outside the slots, or on more than N in
 * them; default 0), -j N (children at once).
 * Without options: the CI variant, a fixed sample of bits weighted to the
 * regions the data path reads, for about ten seconds. What no cheap check
 * sees (docs/DESIGN.md, "Corruption checks"): the len of a live slot that is
 * not the last (its page holds that many bytes, or fewer, or more: any value
 * up to a page is one a writer could have stored), and a slot's page number
 * changed to another live slot's page. The CI run allows exactly that many
 * (--max-silent in tests/CMakeLists.txt).
 */
#include <sys/mman.h>
#include <sys/resource.h>

#include "harness.h"
#include "shm_layout.h"
#include "uringpipe.h"

#define BF_PAGES     32u
#define BF_PAGE      4096u
#define BF_SPAN      4096u
#define BF_TOTAL     (600u * 1024u) /* stream bytes after the flip */
#define BF_STALL     20000u
#define BF_BOUND_S   5u

enum outcome {
	O_INTACT, O_ERROR, O_EARLY, O_LATE, O_SILENT, O_WRONGERR, O_HANG, O_CRASH, O_COUNT
};
static const char *const o_name[O_COUNT] = {
	"intact", "error", "early", "late", "silent", "wrongerr", "hang", "crash",
};
#define X_SETUP 20
/* The tag of a page in a live slot (core/pagepool.c), not an end's. */
#define UP_OWNER_RING_TAG 0xffffff00u /* the child could not reach the known state */

static const uint64_t g_seed_stream = 0x5eed;
static bool g_verbose;

/* ------------------------------------------------------------ regions */

struct region {
	const char *name;
	uint64_t lo, hi;
};

static struct region g_reg[32];
static int g_nreg;

static void add_reg(const char *name, uint64_t lo, uint64_t hi)
{
	g_reg[g_nreg].name = name;
	g_reg[g_nreg].lo = lo;
	g_reg[g_nreg].hi = hi;
	g_nreg++;
}

static void regions_init(void)
{
	struct up_shm_offsets o;
	uint64_t l = UP_SHM_LINES_OFF;

	CHECK(up__shm_offsets(BF_PAGE, BF_PAGES, BF_PAGES, UP_SHM_MAX_ENDS, &o) == 0);
	CHECK(o.pages == BF_SPAN);
	add_reg("header", 0, l);
#define LINE(f) add_reg(#f, l + offsetof(struct up_shm_lines, f), \
			l + offsetof(struct up_shm_lines, f) + UP_CACHELINE)
	LINE(state);
	LINE(prod);
	LINE(cons);
	LINE(wlock);
	LINE(rlock);
	LINE(pget);
	LINE(pput);
	LINE(rd_wait);
	LINE(wr_wait);
#undef LINE
	/* The lines of entries 0 and 2, the pair's (even entries are claimed
	 * first: peer.c); entries 1 and 3 in them are free. */
	add_reg("ends-used", o.ends, o.ends + 4 * sizeof(struct up_shm_end));
	add_reg("ends-free", o.ends + 4 * sizeof(struct up_shm_end), o.slots);
	add_reg("slots", o.slots, o.pool);
	add_reg("pool", o.pool, o.owner);
	add_reg("owner", o.owner, o.owner + BF_PAGES * 4u);
	add_reg("pad", o.owner + BF_PAGES * 4u, BF_SPAN);
}

static int reg_of(uint64_t byte)
{
	int i;

	for (i = 0; i < g_nreg; i++)
		if (byte >= g_reg[i].lo && byte < g_reg[i].hi)
			return i;
	return -1;
}

static int reg_by_name(const char *n, size_t len)
{
	int i;

	for (i = 0; i < g_nreg; i++)
		if (strlen(g_reg[i].name) == len && strncmp(g_reg[i].name, n, len) == 0)
			return i;
	return -1;
}

/* ------------------------------------------------------------ the child */

struct stream {
	struct up_end *r, *w;
	uint64_t wpos, rpos;
	unsigned wi, ri;
	bool wdone, eof, wrong, err;
	long long werr, rerr;
	uint64_t wrong_at;
	uint8_t buf[64 * 1024];
};

static const size_t w_sizes[] = { 100, 3000, 5000, 700, 20000, 4096, 1, 9000, 300 };
static const size_t r_sizes[] = { 1000, 7000, 300, 16384, 4096, 50, 12000 };
#define NW (sizeof(w_sizes) / sizeof(w_sizes[0]))
#define NR (sizeof(r_sizes) / sizeof(r_sizes[0]))

static void note_werr(struct stream *s, long long k)
{
	s->werr = k;
	s->err = true;
}

/* One write step: up_write, or every fourth a reserve + fill + commit. */
static bool write_step(struct stream *s, uint64_t total, bool close_at_end)
{
	size_t n = w_sizes[s->wi % NW];
	ssize_t k;

	if (s->wdone)
		return false;
	if (n > total - s->wpos)
		n = (size_t)(total - s->wpos);
	if (s->wi % 4 == 3) {
		struct iovec iov[8];
		int cnt = 8, i, r;
		size_t got = 0;

		k = up_reserve(s->w, n, iov, &cnt);
		if (k > 0) {
			if (k > (ssize_t)n || cnt < 1 || cnt > 8) {
				note_werr(s, -EFAULT); /* a library bug, not a clean error */
				s->wrong = true;
				s->wdone = true;
				return false;
			}
			for (i = 0; i < cnt; i++) {
				harness_fill(g_seed_stream, s->wpos + got, iov[i].iov_base,
					     iov[i].iov_len);
				got += iov[i].iov_len;
			}
			if (got != (size_t)k) {
				note_werr(s, -EFAULT);
				s->wrong = true;
				s->wdone = true;
				return false;
			}
			r = up_commit(s->w, (size_t)k);
			if (r == -EAGAIN) /* nothing published: drop it, write again */
				up_commit(s->w, 0);
			if (r < 0)
				k = r;
		}
	} else {
		harness_fill(g_seed_stream, s->wpos, s->buf, n);
		k = up_write(s->w, s->buf, n);
	}
	s->wi++;
	if (k > 0) {
		s->wpos += (uint64_t)k;
	} else if (k != -EAGAIN) {
		note_werr(s, k);
		s->wdone = true;
	}
	if (close_at_end && (s->wdone || s->wpos >= total)) {
		s->wdone = true;
		up_close(s->w);
		s->w = NULL;
	}
	return k > 0;
}

static void check_bytes(struct stream *s, const uint8_t *b, size_t n, uint64_t total)
{
	size_t in = n, bad;

	if (s->rpos >= total)
		in = 0;
	else if (n > total - s->rpos)
		in = (size_t)(total - s->rpos);
	bad = harness_verify(g_seed_stream, s->rpos, b, in);
	if (bad != (size_t)-1 && !s->wrong) {
		s->wrong = true;
		s->wrong_at = s->rpos + bad;
	}
	s->rpos += n;
}

/* One read step: up_read, or every third a peek + verify in place + consume. */
static bool read_step(struct stream *s, uint64_t total)
{
	size_t n = r_sizes[s->ri % NR];
	ssize_t k;

	if (s->ri % 3 == 2) {
		struct iovec iov[4];
		int cnt = 4, i;
		size_t seen = 0;

		k = up_peek(s->r, iov, &cnt);
		if (k > 0) {
			for (i = 0; i < cnt; i++) {
				check_bytes(s, iov[i].iov_base, iov[i].iov_len, total);
				seen += iov[i].iov_len;
			}
			if (seen != (size_t)k)
				s->wrong = true;
			if (up_consume(s->r, (size_t)k) < 0) {
				s->rerr = -EPROTO;
				s->err = true;
				s->ri++;
				return false;
			}
		}
	} else {
		k = up_read(s->r, s->buf, n);
		if (k > 0)
			check_bytes(s, s->buf, (size_t)k, total);
	}
	s->ri++;
	if (k == 0)
		s->eof = true;
	else if (k < 0 && k != -EAGAIN) {
		s->rerr = k;
		s->err = true;
	}
	return k > 0;
}

/* Run the stream to @total bytes: 0 done, -1 stalled. */
static int run_stream(struct stream *s, uint64_t total)
{
	unsigned idle = 0;

	while (!s->eof && !s->err) {
		bool moved = write_step(s, total, true);

		moved |= read_step(s, total);
		idle = moved ? 0 : idle + 1;
		if (idle > BF_STALL)
			return -1;
	}
	return 0;
}

static int setup_fail(int line)
{
	if (g_verbose)
		fprintf(stderr, "known state not reached (line %d)\n", line);
	return X_SETUP;
}

/* The known state (see the top). 0, or X_SETUP when it was not reached. */
static int reach_state(struct stream *s, uint8_t *seg)
{
	struct up_shm_offsets o;
	struct up_shm_lines *ln = (struct up_shm_lines *)(seg + UP_SHM_LINES_OFF);
	struct up_shm_slot *slots;
	uint32_t *owner, h, t, off, last_len, i, tagged = 0;
	uint64_t pos;
	int round;

	CHECK(up__shm_offsets(BF_PAGE, BF_PAGES, BF_PAGES, UP_SHM_MAX_ENDS, &o) == 0);
	slots = (struct up_shm_slot *)(seg + o.slots);
	owner = (uint32_t *)(seg + o.owner);
	/* History: go round the ring a few times. */
	for (round = 0; round < 3; round++) {
		uint64_t to = s->wpos + 100 * 1024;

		unsigned idle = 0;

		while (s->wpos < to || s->rpos < s->wpos) {
			bool moved = s->wpos < to && write_step(s, to, false);

			moved |= s->rpos < s->wpos && read_step(s, s->wpos);
			if (s->err || s->wrong || (idle = moved ? 0 : idle + 1) > 100)
				return setup_fail(__LINE__);
		}
	}
	/* Four pages published, the last partial; the tail slot half read;
	 * a write that does not fit the last page's room takes a batch of two
	 * (take_batch) and keeps one. */
	harness_fill(g_seed_stream, s->wpos, s->buf, 3 * 4096 + 1000);
	if (up_write(s->w, s->buf, 3 * 4096 + 1000) != 3 * 4096 + 1000)
		return setup_fail(__LINE__);
	s->wpos += 3 * 4096 + 1000;
	if (up_read(s->r, s->buf, 5000) != 5000)
		return setup_fail(__LINE__);
	check_bytes(s, s->buf, 5000, s->wpos);
	harness_fill(g_seed_stream, s->wpos, s->buf, 3500);
	if (up_write(s->w, s->buf, 3500) != 3500)
		return setup_fail(__LINE__);
	s->wpos += 3500;
	if (s->wrong)
		return setup_fail(__LINE__);

	h = atomic_load(&ln->prod.head);
	pos = atomic_load(&ln->cons.pos);
	t = up__pos_tail(pos);
	off = up__pos_off(pos);
	last_len = atomic_load(&slots[(h - 1) & (BF_PAGES - 1)].len);
	for (i = 0; i < BF_PAGES; i++)
		tagged += owner[i] != 0 && owner[i] != UP_OWNER_RING_TAG;
	if (g_verbose)
		fprintf(stderr, "state: head %u tail %u off %u last len %u tagged %u get %u put %u\n",
			h, t, off, last_len, tagged, atomic_load(&ln->pget.get),
			atomic_load(&ln->pput.put));
	if (h - t < 3 || off == 0 || last_len >= BF_PAGE || last_len == 0 || tagged != 1 ||
	    h < BF_PAGES || atomic_load(&ln->pput.put) - atomic_load(&ln->pget.get) < 8)
		return setup_fail(__LINE__);
	return 0;
}

static int child_main(int64_t bit)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct stream *s;
	uint8_t *seg;
	int r;

	alarm(BF_BOUND_S); /* default action: killed by SIGALRM = hang */
	s = calloc(1, sizeof(*s));
	CHECK(s != NULL);
	up_config_init(&cfg);
	cfg.capacity = BF_PAGES * BF_PAGE;
	cfg.page_size = BF_PAGE;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &s->r));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &s->w));
	seg = mmap(NULL, BF_SPAN, PROT_READ | PROT_WRITE, MAP_SHARED, up_pipe_fd(p), 0);
	CHECK(seg != MAP_FAILED);
	r = reach_state(s, seg);
	if (r)
		_exit(r);
	if (bit >= 0)
		seg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	r = run_stream(s, s->wpos + BF_TOTAL);
	if (g_verbose)
		fprintf(stderr, "bit %lld: wpos %llu rpos %llu werr %lld rerr %lld wrong %d at %llu "
			"eof %d stall %d\n", (long long)bit, (unsigned long long)s->wpos,
			(unsigned long long)s->rpos, s->werr, s->rerr, s->wrong,
			(unsigned long long)s->wrong_at, s->eof, r < 0);
	if (s->wrong)
		_exit(s->err ? O_WRONGERR : O_SILENT);
	if (r < 0)
		_exit(O_HANG);
	if (s->err)
		_exit(O_ERROR);
	if (s->rpos < s->wpos)
		_exit(O_EARLY);
	if (s->rpos > s->wpos)
		_exit(O_LATE);
	_exit(O_INTACT);
}

/* ------------------------------------------------------------ the parent */

struct tally {
	unsigned n[O_COUNT];
};

static struct tally g_by_reg[32], g_all;

static enum outcome decode(int status)
{
	if (WIFSIGNALED(status))
		return WTERMSIG(status) == SIGALRM ? O_HANG : O_CRASH;
	if (WIFEXITED(status) && WEXITSTATUS(status) < O_COUNT)
		return (enum outcome)WEXITSTATUS(status);
	fprintf(stderr, "child: exit status %d (%s)\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		WIFEXITED(status) && WEXITSTATUS(status) == X_SETUP ? "known state not reached"
								     : "failed check");
	harness_fail();
}

struct running {
	pid_t pid;
	int64_t bit;
};

static void record(int64_t bit, int status, bool print_bad)
{
	enum outcome o = decode(status);
	int rg = reg_of((uint64_t)bit / 8);

	g_all.n[o]++;
	if (rg >= 0)
		g_by_reg[rg].n[o]++;
	if (print_bad && (o == O_SILENT || o == O_WRONGERR || o == O_CRASH || o == O_HANG))
		printf("# bit %lld (byte %lld, %s +%lld, bit %lld): %s\n", (long long)bit,
		       (long long)bit / 8, rg >= 0 ? g_reg[rg].name : "?",
		       rg >= 0 ? (long long)(bit / 8 - (int64_t)g_reg[rg].lo) : 0LL,
		       (long long)bit % 8, o_name[o]);
}

static void run_bits(const int64_t *bits, size_t n, int jobs)
{
	struct running run[64] = { { 0, 0 } };
	size_t next = 0, live = 0;
	int i;

	if (jobs > 64)
		jobs = 64;
	while (next < n || live > 0) {
		int status;
		pid_t pid;

		while (next < n && live < (size_t)jobs) {
			fflush(stdout);
			fflush(stderr);
			pid = fork();
			CHECK(pid >= 0);
			if (pid == 0)
				child_main(bits[next]);
			for (i = 0; i < jobs; i++)
				if (run[i].pid == 0)
					break;
			run[i].pid = pid;
			run[i].bit = bits[next++];
			live++;
		}
		pid = waitpid(-1, &status, 0);
		if (pid < 0 && errno == EINTR)
			continue;
		CHECK(pid > 0);
		for (i = 0; i < jobs; i++)
			if (run[i].pid == pid)
				break;
		CHECK(i < jobs);
		run[i].pid = 0;
		live--;
		record(run[i].bit, status, true);
	}
}

static void print_counts(void)
{
	int i, o;

	printf("# %-10s %6s", "region", "bits");
	for (o = 0; o < O_COUNT; o++)
		printf(" %8s", o_name[o]);
	printf("\n");
	for (i = 0; i < g_nreg; i++) {
		unsigned tot = 0;

		for (o = 0; o < O_COUNT; o++)
			tot += g_by_reg[i].n[o];
		if (!tot)
			continue;
		printf("# %-10s %6u", g_reg[i].name, tot);
		for (o = 0; o < O_COUNT; o++)
			printf(" %8u", g_by_reg[i].n[o]);
		printf("\n");
	}
	{
		unsigned tot = 0;

		for (o = 0; o < O_COUNT; o++)
			tot += g_all.n[o];
		printf("# %-10s %6u", "total", tot);
		for (o = 0; o < O_COUNT; o++)
			printf(" %8u", g_all.n[o]);
		printf("\n");
	}
}

/*
 * The CI variant: every bit of the words the data path reads on each call
 * (head, cons.pos, pool get/put, the live slots, the pool entries), and a
 * random sample of the rest.
 */
static size_t ci_bits(int64_t *bits, uint64_t seed)
{
	static const char *const full[] = { "prod", "cons", "pget", "pput", "slots", "pool" };
	struct harness_rng rng;
	size_t n = 0, i;
	int k;

	for (i = 0; i < sizeof(full) / sizeof(full[0]); i++) {
		int rg = reg_by_name(full[i], strlen(full[i]));
		uint64_t b, lo, hi;

		CHECK(rg >= 0);
		lo = g_reg[rg].lo;
		hi = g_reg[rg].hi;
		/* The lines: their first word or two is all there is. The
		 * slots: the live ones are 1..4 (reach_state()); 0..7. */
		if (hi - lo == UP_CACHELINE)
			hi = lo + 8;
		if (strcmp(full[i], "slots") == 0)
			hi = lo + 8 * sizeof(struct up_shm_slot);
		for (b = lo * 8; b < hi * 8; b++)
			bits[n++] = (int64_t)b;
	}
	harness_rng_seed(&rng, seed);
	for (k = 0; k < 300; k++)
		bits[n++] = (int64_t)harness_rng_range(&rng, 0, BF_SPAN * 8 - 1);
	return n;
}

int main(int argc, char **argv)
{
	static int64_t bits[BF_SPAN * 8 + 1024];
	uint64_t seed = 1;
	long max_bad = 0;
	int64_t one = -2;
	size_t n = 0, sample = 0;
	const char *only = NULL;
	bool all = false;
	int jobs = 2, i;
	struct rlimit rl = { 0, 0 };

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--all") == 0)
			all = true;
		else if (strcmp(argv[i], "--sample") == 0 && i + 1 < argc)
			sample = strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--bit") == 0 && i + 1 < argc)
			one = strtoll(argv[++i], NULL, 0), g_verbose = true;
		else if (strcmp(argv[i], "--regions") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--max-silent") == 0 && i + 1 < argc)
			max_bad = strtol(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc)
			jobs = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--all | --sample N [--seed S] | --bit K] "
				"[--regions a,b] [--max-silent N] [-j N]\n", argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	setrlimit(RLIMIT_CORE, &rl); /* crashes are counted, not dumped */
	regions_init();
	if (jobs < 1)
		jobs = 1;

	/* Control: with no flip the stream comes out intact. */
	{
		int64_t none = -1;

		run_bits(&none, 1, 1);
		CHECK_EQ(g_all.n[O_INTACT], 1);
		memset(&g_all, 0, sizeof(g_all));
	}
	if (one >= -1) {
		bits[n++] = one;
	} else if (all || sample) {
		struct harness_rng rng;
		uint64_t b;

		harness_rng_seed(&rng, seed);
		for (b = 0; b < BF_SPAN * 8 && !sample; b++)
			bits[n++] = (int64_t)b;
		for (; sample && n < sample && n < BF_SPAN * 8; )
			bits[n++] = (int64_t)harness_rng_range(&rng, 0, BF_SPAN * 8 - 1);
	} else {
		n = ci_bits(bits, seed);
	}
	if (only) {
		size_t j, m = 0;

		for (j = 0; j < n; j++) {
			int rg = reg_of((uint64_t)bits[j] / 8);
			const char *q = only;
			bool in = false;

			while (rg >= 0 && *q) {
				size_t l = strcspn(q, ",");

				in |= reg_by_name(q, l) == rg;
				q += l + (q[l] == ',');
			}
			if (in)
				bits[m++] = bits[j];
		}
		n = m;
	}
	printf("# %zu flips of the first %u bytes (32 pages of 4 KiB, 32 slots), %u stream bytes "
	       "after each\n", n, BF_SPAN, BF_TOTAL);
	run_bits(bits, n, jobs);
	print_counts();
	/* Wrong bytes and crashes: none outside the slots, at most
	 * --max-silent in them (see the top). */
	{
		int sl = reg_by_name("slots", 5);
		unsigned in_slots = g_by_reg[sl].n[O_SILENT] + g_by_reg[sl].n[O_WRONGERR];
		unsigned bad = g_all.n[O_SILENT] + g_all.n[O_WRONGERR] - in_slots;

		if (bad > 0 || in_slots > (unsigned long)max_bad || g_all.n[O_CRASH] > 0) {
			printf("FAIL: %u silent, %u wrong-then-error (%u in the slots, at most %ld "
			       "allowed there, none elsewhere), %u crashes\n", g_all.n[O_SILENT],
			       g_all.n[O_WRONGERR], in_slots, max_bad, g_all.n[O_CRASH]);
			return 1;
		}
	}
	printf("ok bitflip\n");
	return 0;
}
