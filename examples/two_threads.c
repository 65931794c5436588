/* SPDX-License-Identifier: MIT */
/*
 * two_threads.c - the smallest use of uringpipe: a writer thread and a
 * reader thread, like pipe(2) between two threads.
 *
 * The writer sends 32 MiB of a known pattern in writes of varying sizes and
 * closes its end; the reader reads until end of stream (0) and checks every
 * byte. Exit 0 on success, 1 on failure.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <uringpipe.h>

#define TOTAL ((size_t)32 << 20)

static unsigned char pattern(size_t off)
{
	return (unsigned char)(off * 2654435761u >> 13);
}

static void *writer_main(void *arg)
{
	struct up_end *w = arg;
	static unsigned char buf[70000];
	size_t off = 0, sizes[] = { 1, 100, 4096, 5000, 65536, 70000 };
	unsigned k = 0;

	while (off < TOTAL) {
		size_t n = sizes[k++ % 6], i;
		ssize_t r;

		if (n > TOTAL - off)
			n = TOTAL - off;
		for (i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		r = up_write(w, buf, n); /* blocks while the pipe is full */
		if (r < 0) {
			fprintf(stderr, "up_write: %s\n", up_strerror((int)r));
			break;
		}
		off += (size_t)r; /* short only after partial progress */
	}
	up_close(w); /* the reader sees end of stream once it has drained */
	return (void *)(uintptr_t)(off == TOTAL);
}

int main(void)
{
	struct up_end *ends[2]; /* [0] reads, [1] writes */
	static unsigned char buf[1 << 16];
	struct up_stats st;
	pthread_t t;
	void *ok;
	size_t off = 0, i;
	int r;

	r = up_pipe2(ends, NULL); /* 1 MiB, 4 KiB pages */
	if (r < 0) {
		fprintf(stderr, "up_pipe2: %s\n", up_strerror(r));
		return 1;
	}
	if (pthread_create(&t, NULL, writer_main, ends[1]) != 0)
		return 1;
	for (;;) {
		ssize_t n = up_read(ends[0], buf, sizeof(buf));

		if (n == 0)
			break; /* end of stream: the writer closed */
		if (n < 0) {
			fprintf(stderr, "up_read: %s\n", up_strerror((int)n));
			return 1;
		}
		for (i = 0; i < (size_t)n; i++) {
			if (buf[i] != pattern(off + i)) {
				fprintf(stderr, "mismatch at byte %zu\n", off + i);
				return 1;
			}
		}
		off += (size_t)n;
	}
	pthread_join(t, &ok);
	if (up_stats(up_end_pipe(ends[0]), &st) == 0)
		printf("%zu bytes, %llu writes, %llu reads, %llu syscalls, backend %s\n", off,
		       (unsigned long long)st.writes, (unsigned long long)st.reads,
		       (unsigned long long)st.syscalls, st.backend);
	up_close(ends[0]);
	if (!ok || off != TOTAL) {
		fprintf(stderr, "got %zu of %zu bytes\n", off, TOTAL);
		return 1;
	}
	printf("ok\n");
	return 0;
}
