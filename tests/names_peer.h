/* SPDX-License-Identifier: MIT */
/*
 * names_peer.h - what tests/names_peer (a program of its own, exec'd by
 * test_names) reports to the test through the pipe fd it is given.
 *
 * It writes fixed-size records: 'S' just before up_connect() (t = when it
 * started connecting), 'C' once up_connect() returned (res = its result,
 * t = when), 'O' once its end is open (t = when: the test checks the start
 * order with it; it never waits for it before moving data, as the ends may
 * open in any order).
 * Times are CLOCK_MONOTONIC in ns, which all processes share.
 */
#ifndef UP_TESTS_NAMES_PEER_H
#define UP_TESTS_NAMES_PEER_H

#include <stdint.h>

struct names_peer_rec {
	char tag;      /* 'S', 'C' or 'O' */
	char pad[3];
	int32_t res;   /* 'C': what up_connect() returned */
	uint64_t t_ns; /* CLOCK_MONOTONIC */
};

#endif /* UP_TESTS_NAMES_PEER_H */
