/* SPDX-License-Identifier: MIT */
/*
 * noiouring.c - run a program with io_uring refused, as a container's
 * seccomp profile refuses it (Docker's default profile answers EPERM).
 *
 *   noiouring [--errno E] [--calls setup,enter,register] [--] PROG ARG...
 *   noiouring [--errno E] [--calls ...] --check
 *
 * Installs a seccomp BPF filter (PR_SET_NO_NEW_PRIVS, then
 * seccomp(SECCOMP_SET_MODE_FILTER)) under which io_uring_setup,
 * io_uring_enter and io_uring_register (or those named by --calls) fail
 * with E (EPERM by default; ENOSYS, EOPNOTSUPP, EACCES, EINVAL, ENOMEM or a
 * number), then execvp()s PROG. The filter is inherited by every child and
 * survives exec, so the whole tree under PROG runs without io_uring. The
 * environment gets UP_NOIOURING=E, so that a test of the io_uring backend
 * itself can skip (77) rather than fail.
 *
 * --check runs the self-test instead of a program: each refused call fails
 * with E (and the others do not fail with E), and a pipe made under the
 * filter runs on futex(2) (up_stats().backend), moves bytes through
 * blocking calls between two threads and times out a read.
 *
 * The filter checks the architecture first: the syscall numbers are the
 * native ABI's. On x86_64, the i386 ABI (int 0x80) has the same three
 * numbers and is filtered too; x32 numbers are refused alike. A call made
 * through any other ABI kills the process, since its numbers are unknown.
 *
 * Exit: PROG's status (exec), 2 on a usage error, 77 when seccomp is
 * unavailable here (so a test run through it skips), 1 when --check fails.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uringpipe.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define COMPAT_ARCH AUDIT_ARCH_I386
#define X32_BIT     0x40000000u
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define NATIVE_ARCH AUDIT_ARCH_I386
#else
#error "noiouring: add this architecture's AUDIT_ARCH_* value"
#endif

/* io_uring came after the syscall tables were unified: the same numbers on
 * every ABI this file knows. */
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_io_uring_enter
#define SYS_io_uring_enter 426
#endif
#ifndef SYS_io_uring_register
#define SYS_io_uring_register 427
#endif

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "EPERM", EPERM },   { "ENOSYS", ENOSYS }, { "EOPNOTSUPP", EOPNOTSUPP },
	{ "EACCES", EACCES }, { "EINVAL", EINVAL }, { "ENOMEM", ENOMEM },
};

#define CALL_SETUP    1u
#define CALL_ENTER    2u
#define CALL_REGISTER 4u
#define CALL_ALL      (CALL_SETUP | CALL_ENTER | CALL_REGISTER)

static int parse_errno(const char *s)
{
	size_t i;
	char *end;
	long v;

	for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (strcmp(s, errnos[i].name) == 0)
			return errnos[i].err;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 4095)
		return -1;
	return (int)v;
}

static int parse_calls(const char *s, unsigned *calls)
{
	char buf[64], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*calls = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "setup") == 0)
			*calls |= CALL_SETUP;
		else if (strcmp(tok, "enter") == 0)
			*calls |= CALL_ENTER;
		else if (strcmp(tok, "register") == 0)
			*calls |= CALL_REGISTER;
		else
			return -1;
	}
	return *calls ? 0 : -1;
}

/* Append the three compares of one ABI (numbers plus @bias) to @f: a match
 * jumps to the ERRNO return, which sits @to_errno instructions after the
 * last one; no match falls through to the instruction after them. */
static unsigned add_compares(struct sock_filter *f, unsigned n, unsigned calls, uint32_t bias,
			     unsigned to_errno)
{
	static const struct {
		unsigned bit;
		uint32_t nr;
	} tab[] = {
		{ CALL_SETUP, SYS_io_uring_setup },
		{ CALL_ENTER, SYS_io_uring_enter },
		{ CALL_REGISTER, SYS_io_uring_register },
	};
	unsigned i, k = 0, total = 0;

	for (i = 0; i < 3; i++)
		total += (calls & tab[i].bit) != 0;
	for (i = 0; i < 3; i++) {
		if (!(calls & tab[i].bit))
			continue;
		k++;
		/* jt: skip the remaining compares, then to_errno more. */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tab[i].nr + bias,
						      (unsigned char)(total - k + to_errno), 0);
	}
	return n;
}

/*
 * The program:
 *   A = arch
 *   native: A = nr; compares (native, and x32 on x86_64) -> ERRNO; ALLOW
 *   compat (x86_64 only): A = nr; compares -> ERRNO; ALLOW
 *   else KILL
 */
static int install_filter(int err, unsigned calls)
{
	struct sock_filter f[32];
	struct sock_fprog prog;
	unsigned n = 0, ncmp = 0, i;

	for (i = 0; i < 3; i++)
		ncmp += (calls >> i) & 1u;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
#ifdef COMPAT_ARCH
	/* native block: 1 load + ncmp + ncmp (x32) + 1 allow */
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0,
					      (unsigned char)(2 + 2 * ncmp));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	/* to ERRNO: past the x32 compares, ALLOW, the compat block (jeq, ld,
	 * ncmp, allow) and KILL. */
	n = add_compares(f, n, calls, 0, ncmp + 1 + 3 + ncmp + 1);
	n = add_compares(f, n, calls, X32_BIT, 1 + 3 + ncmp + 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_ARCH, 0,
					      (unsigned char)(2 + ncmp));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	n = add_compares(f, n, calls, 0, 1 + 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#else
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0,
					      (unsigned char)(2 + ncmp));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	n = add_compares(f, n, calls, 0, 1 + 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#endif
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      SECCOMP_RET_ERRNO |
						      ((unsigned)err & SECCOMP_RET_DATA));
	prog.len = (unsigned short)n;
	prog.filter = f;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		return -errno;
	return 0;
}

/* ---- --check ----------------------------------------------------------- */

static int failures;

#define EXPECT(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "noiouring --check: " __VA_ARGS__);    \
			fputc('\n', stderr);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

/* -errno of a raw call, or its (non-negative) result. */
static long raw(long nr, long a, long b, long c, long d)
{
	long r = syscall(nr, a, b, c, d, 0L, 0L);

	return r < 0 ? -errno : r;
}

static void check_calls(int err, unsigned calls)
{
	unsigned char params[120]; /* struct io_uring_params, zeroed */
	long r;

	memset(params, 0, sizeof(params));
	r = raw(SYS_io_uring_setup, 1, (long)(uintptr_t)params, 0, 0);
	if (r >= 0)
		close((int)r);
	if (calls & CALL_SETUP)
		EXPECT(r == -err, "io_uring_setup gave %ld, not -%d", r, err);
	else
		EXPECT(r >= 0, "io_uring_setup gave %ld though allowed", r);
	/* On fd -2 an allowed call fails with EBADF, a refused one with err
	 * (-1 is not used: io_uring_register takes it for "no ring", 6.13+). */
	r = raw(SYS_io_uring_enter, -2, 0, 0, 0);
	if (calls & CALL_ENTER)
		EXPECT(r == -err, "io_uring_enter gave %ld, not -%d", r, err);
	else
		EXPECT(r == -EBADF, "io_uring_enter gave %ld, not -EBADF", r);
	r = raw(SYS_io_uring_register, -2, 0, 0, 0);
	if (calls & CALL_REGISTER)
		EXPECT(r == -err, "io_uring_register gave %ld, not -%d", r, err);
	else
		EXPECT(r == -EBADF, "io_uring_register gave %ld, not -EBADF", r);
}

#define CHECK_BYTES (1u << 20)

static void *check_writer(void *arg)
{
	struct up_end *w = arg;
	unsigned char buf[3000];
	size_t sent = 0;
	unsigned i;

	while (sent < CHECK_BYTES) {
		size_t n = CHECK_BYTES - sent < sizeof(buf) ? CHECK_BYTES - sent : sizeof(buf);
		ssize_t r;

		for (i = 0; i < n; i++)
			buf[i] = (unsigned char)((sent + i) * 7u + 1u);
		r = up_write(w, buf, n);
		if (r <= 0)
			return (void *)(intptr_t)(r < 0 ? r : -EIO);
		sent += (size_t)r;
	}
	up_close(w);
	return NULL;
}

static void check_pipe(void)
{
	struct up_config cfg;
	struct up_end *e[2];
	struct up_stats st;
	unsigned char buf[5000];
	size_t got = 0;
	bool order_ok = true;
	pthread_t t;
	void *res;
	ssize_t r;
	size_t i;

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024; /* small: the writer must block on a full pipe */
	r = up_pipe2(e, &cfg);
	EXPECT(r == 0, "up_pipe2: %s", up_strerror((int)r));
	if (r != 0)
		return;
	/* A read with nothing written times out, on futex(2). */
	EXPECT(up_set_timeout(e[0], 50) == 0, "up_set_timeout");
	r = up_read(e[0], buf, sizeof(buf));
	EXPECT(r == -ETIMEDOUT, "empty read gave %zd, not -ETIMEDOUT", r);
	EXPECT(up_set_timeout(e[0], -1) == 0, "up_set_timeout(-1)");
	EXPECT(pthread_create(&t, NULL, check_writer, e[1]) == 0, "pthread_create");
	while (got < CHECK_BYTES) {
		r = up_read(e[0], buf, sizeof(buf));
		if (r <= 0) {
			EXPECT(0, "read at %zu gave %zd", got, r);
			break;
		}
		for (i = 0; i < (size_t)r; i++)
			if (buf[i] != (unsigned char)((got + i) * 7u + 1u))
				order_ok = false;
		got += (size_t)r;
	}
	EXPECT(order_ok, "the stream came out garbled");
	EXPECT(pthread_join(t, &res) == 0 && res == NULL, "writer failed: %ld",
	       (long)(intptr_t)res);
	r = up_read(e[0], buf, sizeof(buf));
	EXPECT(r == 0, "read after the writer closed gave %zd, not 0", r);
	/* The handles are closed; the pipe's stats include closed ends. */
	EXPECT(up_stats(up_end_pipe(e[0]), &st) == 0, "up_stats");
	EXPECT(strcmp(st.backend, "futex") == 0, "backend is \"%s\", not futex", st.backend);
	EXPECT(st.waits > 0, "nobody slept (waits %llu): the blocking path was not run",
	       (unsigned long long)st.waits);
	up_close(e[0]);
}

static int usage(void)
{
	fprintf(stderr, "usage: noiouring [--errno EPERM|ENOSYS|EOPNOTSUPP|EACCES|EINVAL|ENOMEM|N]\n"
			"                 [--calls setup,enter,register] (--check | [--] PROG ARG...)\n");
	return 2;
}

int main(int argc, char **argv)
{
	unsigned calls = CALL_ALL;
	int err = EPERM, i, r;
	bool check = false;
	char val[16];

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "--check") == 0) {
			check = true;
		} else if (strcmp(argv[i], "--errno") == 0 && i + 1 < argc) {
			err = parse_errno(argv[++i]);
			if (err < 0)
				return usage();
		} else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
			if (parse_calls(argv[++i], &calls) < 0)
				return usage();
		} else {
			return usage();
		}
	}
	if (check == (i < argc))
		return usage();
	r = install_filter(err, calls);
	if (r < 0) {
		fprintf(stderr, "noiouring: cannot install the seccomp filter: %s\n", strerror(-r));
		return 77;
	}
	snprintf(val, sizeof(val), "%d", err);
	for (size_t k = 0; k < sizeof(errnos) / sizeof(errnos[0]); k++)
		if (errnos[k].err == err)
			snprintf(val, sizeof(val), "%s", errnos[k].name);
	if (setenv("UP_NOIOURING", val, 1) != 0)
		return 1;
	if (check) {
		check_calls(err, calls);
		check_pipe();
		if (failures)
			return 1;
		printf("ok noiouring --errno %s: refused, and a pipe runs on futex\n", val);
		return 0;
	}
	fflush(NULL);
	execvp(argv[i], &argv[i]);
	fprintf(stderr, "noiouring: %s: %s\n", argv[i], strerror(errno));
	return 127;
}
