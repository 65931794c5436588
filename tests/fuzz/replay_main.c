/* SPDX-License-Identifier: MIT */
/*
 * replay_main.c - run a fuzz target over saved inputs, without libFuzzer.
 *
 * Usage: <target>_replay PATH...   (files, or directories read one level deep)
 *
 * Calls LLVMFuzzerTestOneInput once per file, in sorted order, so the corpus
 * runs under CTest with any compiler (zstd tests/fuzz/regression_driver.c
 * does the same). A crash or sanitizer report fails the test by itself; the
 * driver exits 1 when a path cannot be read or no input was found at all,
 * 0 otherwise. Each input is named on stderr before it runs, so a failure
 * names its reproducer.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path, unsigned long *count)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;
	int rc = 1;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		goto out;
	/* A copy of exactly the file's size: ASan catches reads past it. */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf)
		goto out;
	if (n && fread(buf, 1, (size_t)n, f) != (size_t)n)
		goto out;
	fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	++*count;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "replay: %s: cannot read\n", path);
	free(buf);
	fclose(f);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, unsigned long *count)
{
	struct dirent *de;
	char **names = NULL;
	size_t nn = 0, cap = 0, i;
	int rc = 0;
	DIR *d = opendir(dir);

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	while ((de = readdir(d)) != NULL) {
		size_t len;
		char *p;
		struct stat st;

		if (de->d_name[0] == '.')
			continue; /* ., .., and hidden files such as .gitkeep */
		len = strlen(dir) + strlen(de->d_name) + 2;
		p = malloc(len);
		if (!p) {
			rc = 1;
			break;
		}
		snprintf(p, len, "%s/%s", dir, de->d_name);
		if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
			free(p);
			continue;
		}
		if (nn == cap) {
			char **nw = realloc(names, (cap ? cap * 2 : 64) * sizeof(*names));

			if (!nw) {
				free(p);
				rc = 1;
				break;
			}
			names = nw;
			cap = cap ? cap * 2 : 64;
		}
		names[nn++] = p;
	}
	closedir(d);
	if (nn)
		qsort(names, nn, sizeof(*names), cmp_str);
	for (i = 0; i < nn; i++) {
		rc |= run_file(names[i], count);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned long count = 0;
	int i, rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		} else if (S_ISDIR(st.st_mode)) {
			rc |= run_dir(argv[i], &count);
		} else {
			rc |= run_file(argv[i], &count);
		}
	}
	printf("replay: %lu inputs ran\n", count);
	if (count == 0) {
		fprintf(stderr, "replay: no inputs found\n");
		rc = 1;
	}
	return rc;
}
