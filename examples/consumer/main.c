/* SPDX-License-Identifier: MIT */
/*
 * A program built against the *installed* uringpipe (.ci/consumer.sh):
 * through find_package(uringpipe) or through pkg-config. It round-trips a
 * message and checks the version macros. Exit 0 on success.
 *
 * It takes its read buffer from malloc, so that the program's own binding
 * of malloc is made: whichever flavour it links, that malloc must be
 * libc's (`LD_DEBUG=bindings` in .ci/consumer.sh and .ci/deb.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uringpipe.h>

#if !defined(UP_VERSION_MAJOR) || UP_VERSION_NUMBER < 100
#error "uringpipe/version.h not installed or too old"
#endif

int main(void)
{
	struct up_end *ends[2];
	struct up_stats st;
	char *buf;
	const char msg[] = "hello from an installed uringpipe";
	ssize_t n;
	int r;

	buf = malloc(64);
	if (!buf)
		return 1;
	memset(buf, 0, 64);
	r = up_pipe2(ends, NULL);
	if (r < 0) {
		fprintf(stderr, "up_pipe2: %s\n", up_strerror(r));
		return 1;
	}
	n = up_write(ends[1], msg, sizeof(msg));
	if (n != (ssize_t)sizeof(msg))
		return 1;
	up_close(ends[1]);
	n = up_read(ends[0], buf, 64);
	if (n != (ssize_t)sizeof(msg) || memcmp(buf, msg, sizeof(msg)) != 0 ||
	    up_read(ends[0], buf, 64) != 0)
		return 1;
	if (up_stats(up_end_pipe(ends[0]), &st) != 0)
		return 1;
	up_close(ends[0]);
	printf("%s (uringpipe %s, backend %s)\n", buf, UP_VERSION_STRING, st.backend);
	free(buf);
	return 0;
}
