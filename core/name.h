/* SPDX-License-Identifier: MIT */
/*
 * name.h - the wire format of named pipes (core/name.c), private.
 *
 * A listener answers each accepted connection with exactly one message and
 * then closes it: a struct up__name_hdr, with the pipe's memfd attached as
 * SCM_RIGHTS when status is 0, and nothing attached when the client is
 * refused (status EACCES). Both ends run on the same host, so the fields are
 * in host byte order. Tests build fake listeners from this header.
 */
#ifndef UP_CORE_NAME_H
#define UP_CORE_NAME_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

#define UP_NAME_MAGIC   0x4d4e5055u /* "UPNM" in memory on little-endian */
#define UP_NAME_VERSION 1u

/* How long up_connect() waits for the reply once connected, when its own
 * timeout does not end sooner (timeout_ms -1 or 0 included). */
#define UP_NAME_REPLY_MS 5000

/* up_connect()'s retry delay while nothing listens on the name: from
 * UP_NAME_BACKOFF_MIN_NS doubling up to UP_NAME_BACKOFF_MAX_NS. */
#define UP_NAME_BACKOFF_MIN_NS 100000ull
#define UP_NAME_BACKOFF_MAX_NS 5000000ull

struct up__name_hdr {
	uint32_t magic;    /* UP_NAME_MAGIC */
	uint16_t version;  /* UP_NAME_VERSION */
	uint16_t flags;    /* 0; a client ignores it */
	int32_t  status;   /* 0: the fd is attached; EACCES: refused, no fd */
	uint32_t reserved; /* 0 */
};

_Static_assert(sizeof(struct up__name_hdr) == 16, "the reply is 16 bytes");

/* name.c: @name ("/path" or "@abstract") as a socket address: 0, -EINVAL,
 * -ENAMETOOLONG. */
int up__name_addr(const char *name, struct sockaddr_un *sa, socklen_t *len);
/* A non-blocking, close-on-exec AF_UNIX stream socket, or -errno. */
int up__name_socket(void);

#endif /* UP_CORE_NAME_H */
