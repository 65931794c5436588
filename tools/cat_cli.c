/* SPDX-License-Identifier: MIT */
/*
 * cat_cli.c - uringpipe-cat's command line: --help, --version, and the
 * options of the pump. --bench has its own parser (bench_opts.c).
 *
 * The messages are our own (opterr = 0), so that they can name the option,
 * the offending argument and what it should be.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uringpipe.h"

#include "cat.h"

#define CAT_DEFAULT_CAPACITY (8 * MiB)
/* A TCP sender's pipe only feeds the socket, whose own buffer holds more:
 * a ring that fits in a core's L2 keeps the bytes the reading thread copied
 * in cache until the send copies them out (docs/DESIGN-NOTES.md). */
#define CAT_TCP_SEND_CAPACITY (1 * MiB)
#define CAT_DEFAULT_PAGE (64 * KiB)
/* --tcp-timeout's default: a vanished peer seen within half a minute. */
#define CAT_TCP_TIMEOUT_MS 25000
/* The library's bound, which up_pipe_create() enforces (-EINVAL): 2^31 pages
 * of 4 KiB, what the ring's 32-bit slot indices allow at every page size.
 * On top of it, -B is held to the machine's memory (machine_memory()). */
#define CAT_MAX_CAPACITY (8 * TiB)

static void usage(FILE *f)
{
	fputs(
"usage: " CAT_PROG " [OPTION]... [FILE]...\n"
"       " CAT_PROG " --to NAME [OPTION]... [FILE]...\n"
"       " CAT_PROG " --from NAME [OPTION]...\n"
"       " CAT_PROG " --bench [BENCH OPTION]...   (see " CAT_PROG " --bench --help)\n"
"Concatenate FILEs (or standard input; '-' is standard input) to standard\n"
"output through a uringpipe shared-memory pipe between a reading thread and\n"
"a writing thread; file I/O goes through io_uring where the kernel allows.\n"
"With --to the pipe is served at NAME instead, for --from in another\n"
"process to read, as a FIFO is between `cat FILE > FIFO` and `cat FIFO`.\n"
"\n"
"  -B, --buffer SIZE     pipe capacity (default 8M, 1M for --to tcp:; 8K ..\n"
"                        this machine's memory, 8T at most). Memory is taken\n"
"                        as pages are first written, not up front, and given\n"
"                        back as the traffic falls: about what is buffered,\n"
"                        plus what the stream goes round in 0.2 s; an idle\n"
"                        pipe keeps SIZE/8 at most. The ring's bookkeeping\n"
"                        (24 to 44 bytes per page) is taken as it is used,\n"
"                        4 bytes up front\n"
"      --page-size SIZE  bytes per pipe page (default 64K; power of two,\n"
"                        4K .. 1M)\n"
"      --node N          place the pipe on NUMA node N (default: local)\n"
"  -s, --size SIZE       expected total size, for the percentage and ETA\n"
"                        (default: the sum of the inputs if all are regular\n"
"                        files; a number of lines with -l)\n"
"  -L, --rate-limit SIZE at most SIZE bytes per second\n"
"  -u                    ignored, as by POSIX cat (output is never buffered)\n"
"\n"
"The meter, as pv(1) draws it: on stderr, only when stderr is a terminal\n"
"unless forced; its rate is the current one (over the last interval).\n"
"  -p, --progress        the bar; also shows the meter when stderr is not a\n"
"                        terminal\n"
"  -t, --timer           the elapsed time\n"
"  -e, --eta             the time left (the size known)\n"
"  -r, --rate            the current rate\n"
"  -a, --average-rate    the average rate\n"
"  -b, --bytes           the bytes moved (lines with -l)\n"
"                        (none of -t -e -r -a -b -p: all of them)\n"
"  -n, --numeric         numbers, one line per update: the percentage (the\n"
"                        size known) or the bytes; -t adds the seconds first,\n"
"                        -b the bytes, -r the rate. Shown even off a terminal\n"
"  -f, --force           show the meter when stderr is not a terminal\n"
"  -q, --quiet           no meter at all\n"
"  -i, --interval SEC    seconds between updates (default 0.5; fractions,\n"
"                        at least 0.001)\n"
"  -N, --name NAME       put NAME: before the meter\n"
"  -W                    nothing until the first byte; the timer starts there\n"
"  -c, --cursor          several meters on one terminal, a row each (ANSI\n"
"                        cursor positioning)\n"
"  -l, --line-mode       count lines, not bytes\n"
"      --json            print a JSON summary on stderr at the end\n"
"      --to NAME         write the inputs into a pipe served at NAME (a path,\n"
"                        or @NAME in the abstract namespace); stays until the\n"
"                        inputs are written, a reader came and no reader is\n"
"                        left (see " CAT_PROG "(1))\n"
"      --mode OCTAL      --to: who may connect, as a FIFO's mode (default 600)\n"
"      --from NAME       read the pipe served at NAME to standard output, until\n"
"                        end of stream; several readers share the stream\n"
"      --wait SECONDS    --from: wait at most SECONDS for NAME (default: for\n"
"                        ever; 0: a single try; fractions allowed)\n"
"      --to tcp:HOST:PORT   send the inputs over TCP, connecting until --wait\n"
"      --from tcp:[HOST]:PORT  accept one TCP connection (default host\n"
"                        127.0.0.1; port 0: any, printed) and write the stream\n"
"                        to standard output; a stream cut short, or with a bad\n"
"                        count or CRC32C, exits 4 with a message; -B sizes its\n"
"                        pipe\n"
"      --tcp-timeout SECONDS  a TCP peer that answers nothing for about\n"
"                        SECONDS (sent bytes not acknowledged, keepalive probes\n"
"                        unanswered) is gone: exit 4 (default 25)\n"
"      --no-uring        use readv/writev for file I/O (also UPCAT_NO_URING=1;\n"
"                        UP_FORCE_FUTEX=1 also disables the io_uring waker)\n"
"      --bench           compare uringpipe with kernel pipes instead\n"
"  -h, --help            this text\n"
"  -V, --version         version, wake backend and file I/O backend\n"
"\n"
"SIZE is a number of bytes with an optional suffix: K M G T (binary, also\n"
"KiB MiB GiB TiB) or KB MB GB TB (decimal).\n"
"\n"
"Exit status: 0 all inputs copied; 1 some input could not be opened or read\n"
"(the others were still copied); 2 bad usage; 3 writing standard output\n"
"failed; 4 the uringpipe failed, or (--from) nothing listened at NAME within\n"
"--wait, or (--to) NAME is taken. When the reader of standard output (with\n"
"--to: every reader of NAME) goes away the tool ends like cat, killed by\n"
"SIGPIPE (status 141 in the shell), unless SIGPIPE was ignored by the caller:\n"
"then it is a write error (status 3).\n",
	      f);
}

static void bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad_usage(const char *fmt, ...)
{
	va_list ap;

	fputs(CAT_PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" CAT_PROG " --help' for more information.\n", stderr);
	exit(CAT_EXIT_USAGE);
}

/* -i: decimal seconds, fractions allowed, > 0 and at most a day. */
/* Seconds as the manual says them: decimal digits with at most one point
 * (strtod() alone would take hex, exponents, "inf"). -1 when not. */
static double seconds_arg(const char *arg)
{
	size_t n = strspn(arg, "0123456789.");
	const char *dot = strchr(arg, '.');
	char *end;
	double v;

	if (!*arg || arg[n] != '\0' || (dot && strchr(dot + 1, '.')) || strcmp(arg, ".") == 0)
		return -1.0;
	errno = 0;
	v = strtod(arg, &end);
	return errno || *end != '\0' || !isfinite(v) ? -1.0 : v;
}

/* -i: at least a millisecond, so that the meter's deadline moves. */
static double interval_arg(const char *arg)
{
	double v = seconds_arg(arg);

	if (v < 0.001 || v > 86400)
		bad_usage("--interval: '%s' is not a number of seconds (at least 0.001, at most"
			  " 86400)", arg);
	return v;
}

/* -N: printed before every update, so no control characters (an escape
 * sequence would move the cursor). */
static const char *meter_name_arg(const char *arg)
{
	for (const char *c = arg; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			bad_usage("--name: the name has a control character");
	return arg;
}

static uint64_t size_arg(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
	uint64_t v;
	char a[32], b[32];
	int r = cat_parse_size(arg, &v);

	if (r == -ERANGE)
		bad_usage("%s: '%s' is too large", opt, arg);
	if (r < 0)
		bad_usage("%s: '%s' is not a size (digits with an optional K, M, G, T "
			  "or KB, MB, GB, TB suffix)", opt, arg);
	if (v < lo || v > hi)
		bad_usage("%s: '%s' is out of range (%s .. %s)", opt, arg,
			  cat_bytes_label(lo, a, sizeof(a)), cat_bytes_label(hi, b, sizeof(b)));
	return v;
}

/* A name for up_listen/up_connect: what fits a sockaddr_un (107 bytes of
 * path, or '@' and 1 to 107 bytes). The library checks again; this is for
 * a message that names the option. */
static const char *name_arg(const char *opt, const char *arg)
{
	size_t n = strlen(arg);

	if (n == 0)
		bad_usage("%s: empty name", opt);
	if (strcmp(arg, "@") == 0)
		bad_usage("%s: '@' needs a name after it (@NAME: the abstract namespace)", opt);
	if (n - (arg[0] == '@') > 107)
		bad_usage("%s: '%.40s...' is too long for a socket name (107 bytes at most)", opt,
			  arg);
	if (arg[0] != '@' && arg[n - 1] == '/')
		bad_usage("%s: '%s' is a directory name, not a name to listen at", opt, arg);
	return arg;
}

/* --wait: decimal seconds (fractions allowed) into milliseconds, rounded up
 * so that a positive wait never becomes the single try of 0. */
static int wait_arg(const char *arg)
{
	double v = seconds_arg(arg);

	if (v < 0)
		bad_usage("--wait: '%s' is not a number of seconds (0: a single try)", arg);
	if (v > INT_MAX / 1000)
		bad_usage("--wait: '%s' is too long (at most %d s; leave --wait out to wait for"
			  " ever)", arg, INT_MAX / 1000);
	return (int)ceil(v * 1000.0);
}

/* --tcp-timeout: decimal seconds, fractions allowed, at least 1 and at most
 * a day (the kernel's keepalive counts whole seconds). */
static int tcp_timeout_arg(const char *arg)
{
	double v = seconds_arg(arg);

	if (v < 1 || v > 86400)
		bad_usage("--tcp-timeout: '%s' is not a number of seconds (at least 1, at most"
			  " 86400)", arg);
	return (int)ceil(v * 1000.0);
}

/* Physical memory in bytes, as mbuffer -m and sort -S measure it; 0 when
 * unknown (then only the library's bound applies). */
static uint64_t machine_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || ps <= 0)
		return 0;
	return (uint64_t)pages * (uint64_t)ps;
}

static void print_version(void)
{
	struct up_pipe *p = NULL;
	struct up_stats st;
	struct cat_io *io;
	const char *backend = "unavailable";
	int r;

	/* The wake backend is chosen per endpoint at run time: ask a real
	 * pipe rather than guess from the build. */
	r = up_pipe_create(NULL, &p);
	if (r == 0 && up_stats(p, &st) == 0)
		backend = st.backend;
	printf(CAT_PROG " %s\n", UP_VERSION_STRING);
	printf("wake backend: %s\n", r == 0 ? backend : up_strerror(r));
	io = cat_io_open(false);
	printf("file I/O: %s\n", io ? cat_io_name(io) : "unavailable");
	cat_io_close(io);
	up_pipe_release(p);
}

enum { O_PAGE = 256, O_NODE, O_JSON, O_NO_URING, O_TO, O_FROM, O_MODE, O_WAIT,
       O_TCP_TIMEOUT };
#define SHORT_OPTS ":B:pqs:hVL:nterafi:N:Wclub"
/* pv's long names; pv's -W is --wait there, which is --from's here. */
static const struct option lo[] = {
	{"buffer", required_argument, NULL, 'B'},
	{"page-size", required_argument, NULL, O_PAGE},
	{"node", required_argument, NULL, O_NODE},
	{"progress", no_argument, NULL, 'p'},
	{"quiet", no_argument, NULL, 'q'},
	{"size", required_argument, NULL, 's'},
	{"json", no_argument, NULL, O_JSON},
	{"no-uring", no_argument, NULL, O_NO_URING},
	{"to", required_argument, NULL, O_TO},
	{"from", required_argument, NULL, O_FROM},
	{"mode", required_argument, NULL, O_MODE},
	{"wait", required_argument, NULL, O_WAIT},
	{"tcp-timeout", required_argument, NULL, O_TCP_TIMEOUT},
	{"rate-limit", required_argument, NULL, 'L'},
	{"numeric", no_argument, NULL, 'n'},
	{"timer", no_argument, NULL, 't'},
	{"eta", no_argument, NULL, 'e'},
	{"rate", no_argument, NULL, 'r'},
	{"average-rate", no_argument, NULL, 'a'},
	{"bytes", no_argument, NULL, 'b'},
	{"force", no_argument, NULL, 'f'},
	{"interval", required_argument, NULL, 'i'},
	{"name", required_argument, NULL, 'N'},
	{"cursor", no_argument, NULL, 'c'},
	{"line-mode", no_argument, NULL, 'l'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* @arg is an option whose value is the next argument ("-N", "--to",
 * "-qN"), as getopt_long() takes it: "--bench" after one is that value. */
bool cat_opt_takes_value(const char *arg)
{
	if (arg[0] != '-' || !arg[1] || strcmp(arg, "--") == 0)
		return false;
	if (arg[1] == '-') {
		const char *name = arg + 2;
		size_t n = strlen(name);
		const struct option *hit = NULL;
		int hits = 0;

		if (strchr(name, '='))
			return false;
		for (const struct option *op = lo; op->name; op++) {
			if (strncmp(op->name, name, n) != 0)
				continue;
			if (op->name[n] == '\0') { /* exact: never ambiguous */
				hit = op;
				hits = 1;
				break;
			}
			hit = op;
			hits++;
		}
		return hits == 1 && hit->has_arg == required_argument;
	}
	/* A cluster of short options: the value follows the first one that
	 * takes one, if nothing of the cluster is left after it. */
	for (const char *c = arg + 1; *c; c++) {
		const char *o = strchr(&SHORT_OPTS[1], *c);

		if (o && o[1] == ':')
			return c[1] == '\0';
	}
	return false;
}

void cat_parse_args(int argc, char **argv, struct cat_opts *o)
{
	const char *pipe_opt = NULL, *mode_opt = NULL, *wait_opt = NULL, *tcpto_opt = NULL;
	bool cap_given = false;
	uint64_t v, mem;
	int c;

	memset(o, 0, sizeof(*o));
	o->capacity = CAT_DEFAULT_CAPACITY;
	o->page_size = CAT_DEFAULT_PAGE;
	o->node = -1;
	o->mode = 0600;
	o->wait_ms = -1;
	o->tcp_timeout_ms = CAT_TCP_TIMEOUT_MS;
	opterr = 0; /* our own messages, naming the option */
	while ((c = getopt_long(argc, argv, SHORT_OPTS, lo, NULL)) != -1) {
		switch (c) {
		case 'B':
			pipe_opt = "-B/--buffer";
			cap_given = true;
			o->capacity = size_arg("--buffer", optarg, 8 * KiB, CAT_MAX_CAPACITY);
			mem = machine_memory();
			if (mem && o->capacity > mem) {
				char h[32];

				bad_usage("--buffer: '%s' is more than this machine's memory (%s)",
					  optarg, cat_human((double)mem, h, sizeof(h)));
			}
			break;
		case O_PAGE:
			pipe_opt = "--page-size";
			o->page_size = size_arg("--page-size", optarg, 4 * KiB, MiB);
			if (o->page_size & (o->page_size - 1))
				bad_usage("--page-size: '%s' is not a power of two", optarg);
			break;
		case O_NODE:
			pipe_opt = "--node";
			if (cat_parse_uint(optarg, &v, 10) < 0 || v > 4095)
				bad_usage("--node: '%s' is not a NUMA node number", optarg);
			o->node = (int)v;
			break;
		case 'p':
			o->progress = true;
			o->fields |= CAT_F_BAR;
			break;
		case 'f':
			o->progress = true;
			break;
		case 't':
			o->fields |= CAT_F_TIMER;
			break;
		case 'e':
			o->fields |= CAT_F_ETA;
			break;
		case 'r':
			o->fields |= CAT_F_RATE;
			break;
		case 'a':
			o->fields |= CAT_F_AVG;
			break;
		case 'b':
			o->fields |= CAT_F_BYTES;
			break;
		case 'n':
			o->numeric = true;
			break;
		case 'L':
			o->rate_limit = size_arg("--rate-limit", optarg, 1, UINT64_MAX);
			break;
		case 'i':
			o->interval = interval_arg(optarg);
			break;
		case 'N':
			o->name = meter_name_arg(optarg);
			break;
		case 'W':
			o->wait_first = true;
			break;
		case 'c':
			o->cursor = true;
			break;
		case 'l':
			o->lines = true;
			break;
		case 'u':
			break; /* POSIX cat's "unbuffered": our writes are never held back */
		case 'q':
			o->quiet = true;
			break;
		case 's':
			o->size = size_arg("--size", optarg, 0, UINT64_MAX);
			o->have_size = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_NO_URING:
			o->no_uring = true;
			break;
		case O_TO:
			o->to = name_arg("--to", optarg);
			break;
		case O_FROM:
			o->from = name_arg("--from", optarg);
			break;
		case O_MODE:
			/* As chmod and mkfifo -m take it: octal digits only. */
			if (cat_parse_uint(optarg, &v, 8) < 0 || v > 0777)
				bad_usage("--mode: '%s' is not an octal mode of 0 .. 777", optarg);
			if (v == 0)
				bad_usage("--mode: '%s' lets nobody connect (root excepted)", optarg);
			o->mode = (unsigned)v;
			mode_opt = optarg;
			break;
		case O_WAIT:
			o->wait_ms = wait_arg(optarg);
			wait_opt = optarg;
			break;
		case O_TCP_TIMEOUT:
			o->tcp_timeout_ms = tcp_timeout_arg(optarg);
			tcpto_opt = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			print_version();
			exit(0);
		case ':':
			bad_usage("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt)
				bad_usage("invalid option -- '%c'", optopt);
			bad_usage("unrecognized option '%s'", argv[optind - 1]);
		}
	}
	if (!cap_given && o->to && strncmp(o->to, "tcp:", 4) == 0)
		o->capacity = CAT_TCP_SEND_CAPACITY > 2 * o->page_size ? CAT_TCP_SEND_CAPACITY
									  : 2 * o->page_size;
	if (o->capacity < 2 * o->page_size)
		bad_usage("--buffer must hold at least two pages (page size %" PRIu64 ")",
			  o->page_size);
	o->files = argv + optind;
	o->nfiles = argc - optind;
	if (o->to && o->from)
		bad_usage("--to and --from exclude each other: one process writes, the other"
			  " reads");
	if (o->from && o->nfiles)
		bad_usage("--from takes no FILE ('%s'): it copies NAME to standard output",
			  o->files[0]);
	/* A TCP receiver makes its own pipe (cat_tcp.c); a named one is the
	 * server's. */
	if (o->from && pipe_opt && strncmp(o->from, "tcp:", 4) != 0)
		bad_usage("--from: %s belongs to the side that makes the pipe (--to)", pipe_opt);
	if (mode_opt && (!o->to || strncmp(o->to, "tcp:", 4) == 0))
		bad_usage("--mode %s: only --to NAME listens at a name", mode_opt);
	if (wait_opt && !o->from && !(o->to && strncmp(o->to, "tcp:", 4) == 0)) /* cat_tcp.c */
		bad_usage("--wait %s: only --from waits for a name", wait_opt);
	if (tcpto_opt && !cat_tcp_wanted(o))
		bad_usage("--tcp-timeout %s: only --to tcp: and --from tcp: have a peer to time"
			  " out", tcpto_opt);
}
