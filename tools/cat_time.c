/* SPDX-License-Identifier: MIT */
/*
 * cat_time.c - the monotonic clock, for the pump and --bench alike.
 *
 * Every deadline is computed on CLOCK_MONOTONIC, so every condition variable
 * that waits for one must use that clock too: a wall-clock step (NTP, date)
 * would otherwise stretch or cut a wait.
 */
#include <pthread.h>
#include <time.h>

#include "cat.h"

double cat_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cat_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}
