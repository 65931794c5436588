/* SPDX-License-Identifier: MIT */
/*
 * test_alloc.c - the library's private allocator stays private.
 *
 * liburingpipe takes its own memory from jemalloc (mallocx/dallocx, in
 * core/alloc.c), but must not replace the host program's malloc: linked
 * against the shared library, this program's malloc must still be libc's.
 * Built against liburingpipe.so, not the testing archive.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uringpipe.h"

/* gcc says __SANITIZE_ADDRESS__; clang 14 says __has_feature(...). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UP_TEST_CLANG_SANITIZED 1
#endif
#endif
#ifndef UP_TEST_CLANG_SANITIZED
#define UP_TEST_CLANG_SANITIZED 0
#endif

int main(void)
{
	struct up_end *e[2];
	Dl_info di;
	void *sym;
	int r;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || UP_TEST_CLANG_SANITIZED
	/* The sanitizer runtime interposes malloc in this very program. */
	printf("skip: sanitizer build\n");
	return 77;
#endif
	r = up_pipe2(e, NULL); /* the library allocates, and is loaded */
	if (r < 0) {
		fprintf(stderr, "up_pipe2: %s\n", up_strerror(r));
		return 1;
	}
	sym = dlsym(RTLD_DEFAULT, "malloc");
	if (!sym || !dladdr(sym, &di) || !di.dli_fname) {
		fprintf(stderr, "cannot resolve malloc\n");
		return 1;
	}
	printf("# host malloc comes from %s\n", di.dli_fname);
	if (!strstr(di.dli_fname, "libc.so")) {
		fprintf(stderr, "the host's malloc was replaced by %s\n", di.dli_fname);
		return 1;
	}
	up_close(e[0]);
	up_close(e[1]);
	printf("ok host_malloc_untouched\n");
	return 0;
}
