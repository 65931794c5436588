/* SPDX-License-Identifier: MIT */
/*
 * cat.h - private interfaces shared by the uringpipe-cat sources. Nothing here
 * is installed; the tool sees the library only through uringpipe.h.
 *
 *   cat_main.c   option parsing, the pump (reader thread -> uringpipe ->
 *                writer thread), progress, the --json summary, exit codes;
 *   cat_io.c     file I/O for the pump: one small io_uring per thread, or
 *                readv/writev where io_uring is refused or disabled;
 *   cat_size.c   size parsing and formatting, shared by the pump and --bench;
 *   cat_bench.c  --bench: uringpipe against kernel pipes (was uringpipe-bench);
 *   cat_report.c --report: the self-contained HTML/SVG chart.
 */
#ifndef UP_TOOLS_CAT_H
#define UP_TOOLS_CAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define TiB ((uint64_t)1 << 40)

/* Exit statuses, documented in --help and uringpipe-cat(1). */
enum {
	CAT_EXIT_OK = 0,
	CAT_EXIT_INPUT = 1,  /* an input could not be opened or read */
	CAT_EXIT_USAGE = 2,  /* bad option, bad size */
	CAT_EXIT_OUTPUT = 3, /* writing stdout failed (or EPIPE with SIGPIPE ignored) */
	CAT_EXIT_PIPE = 4,   /* uringpipe itself failed (create, open, -EPROTO) */
};

/* ------------------------------------------------------------ cat_size.c */

/*
 * cat_parse_size - "123", "4K"/"4KiB" (binary: K M G T), "4KB" (decimal:
 * KB MB GB TB), lower case accepted. Returns 0 and *out, or -EINVAL for
 * anything else (empty, sign, trailing junk) and -ERANGE on overflow.
 */
int cat_parse_size(const char *s, uint64_t *out);

/* cat_parse_uint - digits in @base (0: C prefixes) only. 0 or -EINVAL/-ERANGE. */
int cat_parse_uint(const char *s, uint64_t *out, int base);

/* "4K", "1M", "100": exact short form (table, labels). */
const char *cat_size_label(uint64_t v, char *b, size_t bl);
/* "4 KiB", "100 B": exact long form. */
const char *cat_bytes_label(uint64_t v, char *b, size_t bl);
/* "1.50 GiB": rounded human form for progress lines. */
const char *cat_human(double v, char *b, size_t bl);

/* ------------------------------------------------------------ cat_io.c */

struct cat_io;

/*
 * cat_io_open - per-thread I/O context. Uses io_uring unless @no_uring, or
 * UPCAT_NO_URING=1 / UP_FORCE_FUTEX=1 is set, or io_uring_queue_init fails
 * (seccomp, io_uring_disabled): then readv/writev. Returns NULL on ENOMEM.
 */
struct cat_io *cat_io_open(bool no_uring);
void cat_io_close(struct cat_io *io);
/* "io_uring" or "readv/writev". */
const char *cat_io_name(const struct cat_io *io);
/* Like readv/writev at the current file position: bytes, 0 (EOF), -errno.
 * EINTR is retried inside. */
ssize_t cat_io_readv(struct cat_io *io, int fd, const struct iovec *iov, int cnt);
ssize_t cat_io_writev(struct cat_io *io, int fd, const struct iovec *iov, int cnt);

/* ---------------------------------------------------------- cat_bench.c */

/* The --bench mode; argv[0] is the program name, "--bench" already removed.
 * Returns the exit status. */
int cat_bench_main(int argc, char **argv);

/* --------------------------------------------------------- cat_report.c */

enum { CAT_T_KERNEL = 0, CAT_T_URING = 1, CAT_T_URING_ZC = 2, CAT_T_COUNT = 3 };

struct cat_report_point {
	uint64_t size;
	double mbps[CAT_T_COUNT]; /* medians, MB = 10^6 B */
};

struct cat_report_series {
	unsigned writers, readers;
	const struct cat_report_point *pts;
	unsigned npts;
};

/*
 * cat_write_report - write the chart to @path: an SVG document if the name
 * ends in .svg, else an XHTML page with the SVG inline and a table. No
 * scripts, no external fetches. @title is plain text (escaped here).
 * Returns 0 or -errno.
 */
int cat_write_report(const char *path, const char *title, const char *subtitle,
		     const struct cat_report_series *s, unsigned ns);

#endif /* UP_TOOLS_CAT_H */
