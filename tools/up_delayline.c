/* SPDX-License-Identifier: MIT */
/*
 * up_delayline.c - `uringpipe-delayline`: a link with delay and loss between
 * two network namespaces, for measuring the TCP bridge where the kernel has
 * no netem qdisc (CONFIG_NET_SCH_NETEM unset, as on this project's VM).
 *
 *   uringpipe-delayline [--delay MS] [--loss PCT] [--limit PACKETS]
 *                       [--mtu BYTES] NETNS_A NETNS_B
 *
 * Makes a TUN device `updl0` in each of the two named namespaces (as `ip
 * netns add` makes them, under /run/netns) and carries the IP packets
 * between them: those from A to B held MS milliseconds and PCT percent of
 * them dropped at random, those from B to A at once. That is what `tc qdisc
 * add dev X root netem delay MS loss PCT%` on A's side of a veth pair does.
 * Like netem, a queue over --limit packets (default 10000) drops the
 * newcomer. Prints "ready" on stdout once both devices exist; the caller
 * then gives them addresses and brings them up. Runs until SIGTERM or
 * SIGINT, then prints the packets it carried and dropped on stderr and
 * exits 0; the devices go with it.
 *
 * One thread, one poll: a packet is read from one device and written to
 * the other in the same order, none reordered, none duplicated. A lost
 * packet is never sent, as on a wire.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DL_PROG "uringpipe-delayline"
#define DL_SLOT 65536 /* the largest packet a TUN device gives */

struct pkt {
	uint64_t due_ns;
	uint32_t len;
	unsigned char *data;
};

/* The A -> B queue: a ring of --limit packets, in arrival order. */
struct queue {
	struct pkt *p;
	uint32_t cap, head, n;
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, DL_PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(const char *msg)
{
	fprintf(stderr,
		DL_PROG ": %s\nUsage: " DL_PROG " [--delay MS] [--loss PCT] [--limit PACKETS]"
			" [--mtu BYTES] NETNS_A NETNS_B\n",
		msg);
	exit(2);
}

/* A TUN device named updl0 of @mtu, made inside /run/netns/@ns. Its MTU
 * is the queue slots' size: no packet read from it is longer. */
static int tun_in(const char *ns, unsigned long mtu)
{
	char path[256];
	struct ifreq ifr;
	int nsfd, fd, s;

	if (snprintf(path, sizeof(path), "/run/netns/%s", ns) >= (int)sizeof(path))
		usage("namespace name too long");
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		die(path);
	if (setns(nsfd, CLONE_NEWNET) < 0)
		die("setns");
	close(nsfd);
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die("/dev/net/tun");
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "updl0");
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die("TUNSETIFF");
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket");
	ifr.ifr_mtu = (int)mtu;
	if (ioctl(s, SIOCSIFMTU, &ifr) < 0)
		die("SIOCSIFMTU");
	close(s);
	return fd;
}

static unsigned long num(const char *opt, const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max) {
		char m[128];

		snprintf(m, sizeof(m), "%s: '%s' is not a number from 0 to %lu", opt, s, max);
		usage(m);
	}
	return v;
}

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

/* xorshift64*: the loss draw; seeded from the clock. */
static uint64_t rnd_state;

static uint32_t rnd_pct(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return (uint32_t)(((rnd_state * 0x2545f4914f6cdd1dull) >> 32) % 10000u);
}

/* Write what is due of @q to @fd. */
static void flush_due(struct queue *q, int fd, uint64_t now)
{
	while (q->n && q->p[q->head].due_ns <= now) {
		struct pkt *k = &q->p[q->head];

		/* A full device queue on the far side drops, as a link's would. */
		(void)!write(fd, k->data, k->len);
		q->head = (q->head + 1) % q->cap;
		q->n--;
	}
}

int main(int argc, char **argv)
{
	unsigned long delay_ms = 0, loss_bp = 0, limit = 10000, mtu = 1500;
	unsigned long long ab = 0, ab_lost = 0, ab_over = 0, ba = 0;
	struct sigaction sa;
	unsigned char *buf;
	struct queue q;
	int a, b, i;

	for (i = 1; i < argc && argv[i][0] == '-'; i += 2) {
		if (i + 1 >= argc)
			usage("an option needs a value");
		if (strcmp(argv[i], "--delay") == 0) {
			delay_ms = num("--delay", argv[i + 1], 10000);
		} else if (strcmp(argv[i], "--loss") == 0) {
			/* PCT with up to two decimals, in basis points. */
			char *dot = strchr(argv[i + 1], '.');
			char whole[16] = "", frac[3] = "00";

			if (dot && (size_t)(dot - argv[i + 1]) < sizeof(whole)) {
				memcpy(whole, argv[i + 1], (size_t)(dot - argv[i + 1]));
				for (int k = 0; k < 2 && dot[1 + k]; k++)
					frac[k] = dot[1 + k];
				if (strlen(dot + 1) > 2)
					usage("--loss: two decimals at most");
			} else if (!dot && strlen(argv[i + 1]) < sizeof(whole)) {
				snprintf(whole, sizeof(whole), "%s", argv[i + 1]);
			} else {
				usage("--loss: not a percentage");
			}
			loss_bp = num("--loss", whole[0] ? whole : "0", 100) * 100 +
				  num("--loss", frac, 99);
			if (loss_bp > 10000)
				usage("--loss: 100 at most");
		} else if (strcmp(argv[i], "--limit") == 0) {
			limit = num("--limit", argv[i + 1], 1000000);
			if (limit == 0)
				usage("--limit: at least 1");
		} else if (strcmp(argv[i], "--mtu") == 0) {
			mtu = num("--mtu", argv[i + 1], DL_SLOT);
			if (mtu < 576)
				usage("--mtu: 576 at least");
		} else {
			usage("unknown option");
		}
	}
	if (argc - i != 2)
		usage("two namespaces, A and B");
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop; /* no SA_RESTART: ppoll returns EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	rnd_state = now_ns() | 1;
	a = tun_in(argv[i], mtu);
	b = tun_in(argv[i + 1], mtu);
	q.cap = (uint32_t)limit;
	q.head = q.n = 0;
	q.p = calloc(q.cap, sizeof(*q.p));
	buf = malloc(DL_SLOT);
	if (!q.p || !buf)
		die("malloc");
	for (uint32_t k = 0; k < q.cap; k++) {
		q.p[k].data = malloc(mtu);
		if (!q.p[k].data)
			die("malloc");
	}
	printf("ready\n");
	fflush(stdout);

	while (!stop) {
		struct pollfd pf[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
		struct timespec ts, *tsp = NULL;
		uint64_t now = now_ns();
		ssize_t n;

		flush_due(&q, b, now);
		if (q.n) {
			uint64_t w = q.p[q.head].due_ns - now;

			ts.tv_sec = (time_t)(w / 1000000000u);
			ts.tv_nsec = (long)(w % 1000000000u);
			tsp = &ts;
		}
		if (ppoll(pf, 2, tsp, NULL) < 0) {
			if (errno == EINTR)
				continue;
			die("ppoll");
		}
		/* B -> A: at once. */
		while ((n = read(b, buf, DL_SLOT)) > 0) {
			(void)!write(a, buf, (size_t)n);
			ba++;
		}
		/* A -> B: lost, or queued until due. */
		now = now_ns();
		for (;;) {
			struct pkt *k;

			if (q.n == q.cap) {
				n = read(a, buf, DL_SLOT); /* over the limit: dropped */
				if (n <= 0)
					break;
				ab++;
				ab_over++;
				continue;
			}
			k = &q.p[(q.head + q.n) % q.cap];
			n = read(a, k->data, mtu);
			if (n <= 0)
				break;
			ab++;
			if (loss_bp && rnd_pct() < loss_bp) {
				ab_lost++;
				continue;
			}
			k->len = (uint32_t)n;
			k->due_ns = now + (uint64_t)delay_ms * 1000000u;
			q.n++;
		}
	}
	fprintf(stderr, DL_PROG ": A->B %llu packets, %llu lost, %llu over the limit; B->A %llu\n",
		ab, ab_lost, ab_over, ba);
	for (uint32_t k = 0; k < q.cap; k++)
		free(q.p[k].data);
	free(q.p);
	free(buf);
	return 0;
}
