/* SPDX-License-Identifier: MIT */
/*
 * cat_progress.c - the pv-like meter on stderr.
 *
 * One line per update, laid out as pv lays it out: [NAME:] count, elapsed
 * time, [current rate], [average rate], a bar with the percentage, ETA. The
 * current rate is what moved since the previous update over the time since
 * it, so a stalled producer reads 0 B/s at once while the average decays;
 * the final line shows the average in both places, as pv does.
 *
 * On a terminal the line is rewritten in place (\r, then the line, then
 * ESC[K so a shorter line leaves nothing of a longer one behind), and it is
 * kept at most width - 1 columns: a line that filled the last column would
 * leave the cursor in the terminal's pending-wrap state, where ESC[K would
 * erase the last character instead. Off a terminal (-p/-f/-n forced) each
 * update is a line of its own, with no escape sequences, for log files.
 *
 * Cursor mode (-c) lets several meters share a terminal, one row each, with
 * pv's escape sequences: each instance learns its row once (ESC[6n, the
 * cursor position report) and then draws there between ESC 7 and ESC 8
 * (save and restore the cursor). Instances agree through a lock file per
 * terminal: the position query and the newline that reserves the row are
 * done under its flock(2), so two instances never get the same row, and an
 * instance whose newline scrolled the screen appends one byte to the file.
 * Every instance reads the file's size before it draws: the bytes appended
 * since it took its row are the lines its row moved up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cat.h"

static const char *hms(double s, char *b, size_t bl)
{
	uint64_t t = s > 0 ? (uint64_t)(s + 0.5) : 0;
	snprintf(b, bl, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, t / 3600, t / 60 % 60, t % 60);
	return b;
}

/* The columns of stderr's terminal (TIOCGWINSZ), else $COLUMNS, else 80;
 * kept within the line buffer. Asked at every update: terminals resize. */
static int term_width(void)
{
	struct winsize ws;
	const char *c;
	long w = 0;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		w = ws.ws_col;
	else if ((c = getenv("COLUMNS")) && *c) {
		char *end;

		w = strtol(c, &end, 10);
		if (*end != '\0')
			w = 0;
	}
	if (w <= 0)
		w = 80;
	if (w > CAT_METER_MAX_WIDTH)
		w = CAT_METER_MAX_WIDTH;
	return (int)w;
}

/* A count: bytes in binary units, or (-l) lines as a plain number. */
static const char *count_label(const struct cat_meter *m, double v, char *b, size_t bl)
{
	if (!m->o->lines)
		return cat_human(v, b, bl);
	snprintf(b, bl, "%.0f", v);
	return b;
}

static const char *rate_label(const struct cat_meter *m, double v, char *b, size_t bl)
{
	char c[32];

	if (m->o->lines)
		snprintf(b, bl, "%.1f/s", v);
	else
		snprintf(b, bl, "%s/s", cat_human(v, c, sizeof(c)));
	return b;
}

/* Appends to @line (of CAT_METER_MAX_WIDTH + 1 bytes) at *len. */
static void add(char *line, int *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *line, int *len, const char *fmt, ...)
{
	size_t room = CAT_METER_MAX_WIDTH + 1 - (size_t)*len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line + *len, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n < room ? n : (int)room - 1;
}

/*
 * The bar: [====>    ] fills what the other fields leave of @width, with
 * the percentage after it; with the size unknown, pv's <=> moving to and
 * fro instead. Omitted when fewer than 3 columns would be left inside.
 */
static void add_bar(const struct cat_meter *m, char *line, int *len, int width, int after,
		    uint64_t n, double el)
{
	int inner = width - 1 - *len - after - (*len ? 1 : 0) - 2 - (m->known ? 5 : 0);
	char bar[CAT_METER_MAX_WIDTH + 1];

	if (inner < 3)
		return;
	if (m->known) {
		double f = m->total ? (double)n / (double)m->total : 1.0;
		int fill;

		if (f > 1.0)
			f = 1.0;
		fill = (int)(f * inner);
		for (int i = 0; i < inner; i++)
			bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
		bar[inner] = '\0';
		add(line, len, "%s[%s] %3.0f%%", *len ? " " : "", bar, f * 100.0);
	} else {
		/* One step per update's worth of time, bouncing. */
		int span = inner - 3, pos = span > 0 ? (int)(el * 4.0) % (2 * span) : 0;

		if (pos > span)
			pos = 2 * span - pos;
		memset(bar, ' ', (size_t)inner);
		memcpy(bar + pos, "<=>", 3);
		bar[inner] = '\0';
		add(line, len, "%s[%s]", *len ? " " : "", bar);
	}
}

/* The ETA field's text (empty when not shown). */
static void eta_text(const struct cat_meter *m, char *b, size_t bl, uint64_t n, double avg,
		     bool final)
{
	char e[32];

	b[0] = '\0';
	if (!(m->fields & CAT_F_ETA) || !m->known || final)
		return;
	if (avg > 0)
		snprintf(b, bl, "ETA %s",
			 hms((double)(m->total - (n < m->total ? n : m->total)) / avg, e, sizeof(e)));
	else
		snprintf(b, bl, "ETA ?:??:??");
}

/* The line itself, at most @width - 1 columns. Returns its length. */
static int format_line(const struct cat_meter *m, char *line, int width, uint64_t n, double el,
		       double cur, double avg, bool final)
{
	char a[32], eta[48];
	int len = 0, after;

	line[0] = '\0';
	if (m->o->name)
		add(line, &len, "%s: ", m->o->name);
	if (m->fields & CAT_F_BYTES)
		add(line, &len, "%10s ", count_label(m, (double)n, a, sizeof(a)));
	if (m->fields & CAT_F_TIMER)
		add(line, &len, "%s ", hms(el, a, sizeof(a)));
	if (m->fields & CAT_F_RATE)
		add(line, &len, "[%12s] ", rate_label(m, cur, a, sizeof(a)));
	if (m->fields & CAT_F_AVG)
		add(line, &len, "[%12s] ", rate_label(m, avg, a, sizeof(a)));
	while (len > 0 && line[len - 1] == ' ')
		line[--len] = '\0';
	eta_text(m, eta, sizeof(eta), n, avg, final);
	after = eta[0] ? (int)strlen(eta) + 1 : 0;
	if (m->fields & CAT_F_BAR)
		add_bar(m, line, &len, width, after, n, el);
	if (eta[0])
		add(line, &len, "%s%s", len ? " " : "", eta);
	if (len > width - 1 && width > 1) {
		len = width - 1;
		line[len] = '\0';
	}
	return len;
}

/*
 * -n: numbers only, one line per update: the elapsed seconds (-t), then the
 * count (-b), the rate over the last interval (-r); with neither -b nor -r
 * the percentage when the size is known, else the count.
 */
static void numeric_line(const struct cat_meter *m, uint64_t n, double el, double cur)
{
	char line[128];
	int len = 0;
	bool sep = false;

	if (m->fields & CAT_F_TIMER) {
		len += snprintf(line + len, sizeof(line) - (size_t)len, "%.4f", el);
		sep = true;
	}
	if (m->fields & (CAT_F_BYTES | CAT_F_RATE)) {
		if (m->fields & CAT_F_BYTES) {
			len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%" PRIu64,
					sep ? " " : "", n);
			sep = true;
		}
		if (m->fields & CAT_F_RATE)
			len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%.0f",
					sep ? " " : "", cur);
	} else if (m->known) {
		double f = m->total ? (double)n / (double)m->total : 1.0;

		len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%.0f", sep ? " " : "",
				(f > 1.0 ? 1.0 : f) * 100.0);
	} else {
		len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%" PRIu64,
				sep ? " " : "", n);
	}
	(void)len;
	fprintf(stderr, "%s\n", line);
}

/* ---------------------------------------------------------- cursor mode */

/* Reads the cursor position report ESC [ row ; col R from @fd within 1 s.
 * Returns the row (1-based) or 0. */
static int read_cpr(int fd)
{
	char b[32];
	size_t got = 0;
	int row, col;

	while (got < sizeof(b) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 1000) <= 0)
			return 0;
		r = read(fd, b + got, 1);
		if (r <= 0)
			return 0;
		if (b[got++] == 'R')
			break;
	}
	b[got] = '\0';
	/* Anything typed before the reply comes first: find the reply. */
	for (char *s = b; (s = strchr(s, '\033')); s++)
		if (sscanf(s, "\033[%d;%dR", &row, &col) == 2 && row > 0)
			return row;
	return 0;
}

/* The cursor's row on the terminal @fd, or 0: ESC[6n with the terminal in
 * non-canonical mode without echo for the reply, its mode restored after. */
static int cursor_row(int fd)
{
	struct termios old, raw;
	int row;

	if (tcgetattr(fd, &old) < 0)
		return 0;
	raw = old;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(fd, TCSANOW, &raw) < 0)
		return 0;
	row = write(fd, "\033[6n", 4) == 4 ? read_cpr(fd) : 0;
	tcsetattr(fd, TCSANOW, &old);
	return row;
}

/* Takes this instance's row (see the top of the file); on any failure the
 * meter falls back to \r updates on the current line. */
static void cursor_setup(struct cat_meter *m)
{
	char path[128];
	const char *dir = getenv("TMPDIR");
	struct stat st;
	int tty, lk, row, row2;

	tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (tty < 0)
		return;
	/* A background job that set the terminal's mode or read its reply
	 * would be stopped (SIGTTOU, SIGTTIN): only the foreground asks. */
	if (tcgetpgrp(tty) != getpgrp())
		goto out;
	if (fstat(tty, &st) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/uringpipe-cat-%u-%jx.cursor", dir && *dir ? dir : "/tmp",
		 (unsigned)getuid(), (uintmax_t)st.st_rdev);
	lk = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lk < 0)
		goto out;
	if (flock(lk, LOCK_EX) < 0) {
		close(lk);
		goto out;
	}
	row = cursor_row(tty);
	if (row > 0 && write(STDERR_FILENO, "\n", 1) == 1) {
		row2 = cursor_row(tty);
		if (row2 == row) /* the newline scrolled: every row moved up */
			(void)!write(lk, "s", 1);
		else if (row2 != row + 1)
			row = 0; /* something else wrote meanwhile: do not guess */
		if (row && row2 == row)
			row--;
	}
	/* The size is read under the lock: a later instance's scroll must
	 * count against this row, and the earlier ones' must not. */
	if (row > 0 && fstat(lk, &st) == 0) {
		m->row = row;
		m->scrolls = (uint64_t)st.st_size;
		m->lock_fd = lk;
	}
	flock(lk, LOCK_UN);
	if (m->lock_fd < 0)
		close(lk);
out:
	close(tty);
}

/* The row now: the rows taken later that scrolled the screen moved it up. */
static int cursor_now(const struct cat_meter *m)
{
	struct stat st;

	if (fstat(m->lock_fd, &st) < 0 || (uint64_t)st.st_size < m->scrolls)
		return m->row;
	return m->row - (int)((uint64_t)st.st_size - m->scrolls);
}

/* ------------------------------------------------------------------ API */

void cat_meter_init(struct cat_meter *m, const struct cat_opts *o, bool tty, bool known,
		    uint64_t total, double t0)
{
	memset(m, 0, sizeof(*m));
	m->o = o;
	/* -n alone is pv's: the percentage (or the count) only. */
	m->fields = o->fields || o->numeric ? o->fields : CAT_F_DEFAULT;
	m->tty = tty && !o->numeric;
	m->known = known;
	m->total = total;
	m->t0 = m->last_t = t0;
	m->started = !o->wait_first;
	m->lock_fd = -1;
}

void cat_meter_update(struct cat_meter *m, uint64_t n, double now, bool final)
{
	char line[CAT_METER_MAX_WIDTH + 1];
	double el, cur, avg, dt;
	int width, row;

	if (!m->started) {
		/* -W: nothing until the first byte; the timer starts there. */
		if (n == 0)
			return;
		m->started = true;
		m->t0 = m->last_t = now;
		m->last_n = 0;
	}
	el = now - m->t0;
	avg = el > 0 ? (double)n / el : 0.0;
	dt = now - m->last_t;
	cur = final ? avg : dt > 0 ? (double)(n - m->last_n) / dt : 0.0;
	m->last_t = now;
	m->last_n = n;
	if (m->o->numeric) {
		numeric_line(m, n, el, cur);
		fflush(stderr);
		return;
	}
	if (m->o->cursor && m->tty && !m->cursor_tried) {
		m->cursor_tried = true;
		cursor_setup(m);
	}
	width = term_width();
	format_line(m, line, width, n, el, cur, avg, final);
	if (m->row > 0) {
		row = cursor_now(m);
		if (row > 0)
			fprintf(stderr, "\0337\033[%d;1H%s\033[K\0338", row, line);
	} else if (m->tty) {
		fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
	} else {
		fprintf(stderr, "%s\n", line);
	}
	fflush(stderr);
}

void cat_meter_done(struct cat_meter *m)
{
	if (m->lock_fd >= 0)
		close(m->lock_fd);
	m->lock_fd = -1;
}
