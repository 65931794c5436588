#!/usr/bin/env bash
# CI: uringpipe as its users get it (issue 7).
#   1. build the library from this tree and `cmake --install` it into a temp prefix;
#   2. build examples/consumer against the installed package with find_package
#      (shared and static targets) and with pkg-config (shared, and static via
#      `pkg-config --static`), and run every binary;
#      every consumer's malloc must bind to libc (examples/consumer/check_malloc.sh:
#      the static library never brings jemalloc into the host);
#   3. render `man uringpipe` and `man up_write` from the installed man pages;
#   4. configure and build a fresh clone out of tree and check that its source
#      tree stays clean (`git status --porcelain --ignored` is empty).
# Needs cmake, pkg-config, a C compiler, git and man (installed if missing when
# run as root). Takes well under two minutes. Environment: CC, KEEP_TMP=1 to
# keep the work directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uringpipe-consumer.XXXXXX")
cleanup() {
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "consumer: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
prefix=$tmp/prefix
jobs=$(nproc 2>/dev/null || echo 2)
cc=${CC:-cc}

step() { echo "== consumer: $*"; }
fail() { echo "consumer: FAIL: $*" >&2; exit 1; }

if ! command -v man >/dev/null 2>&1; then
	[ "$(id -u)" -eq 0 ] || fail "man is missing (apt-get install man-db)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq man-db >/dev/null
fi

step "build the library and install it into $prefix"
cmake -S "$root" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DUP_WERROR=ON \
	-DUP_BUILD_TESTS=OFF -DUP_BUILD_EXAMPLES=OFF >"$tmp/configure.log" ||
	{ cat "$tmp/configure.log"; fail "configure"; }
cmake --build "$tmp/build" -j"$jobs" >"$tmp/build.log" || { cat "$tmp/build.log"; fail "build"; }
cmake --install "$tmp/build" --prefix "$prefix" >"$tmp/install.log" ||
	{ cat "$tmp/install.log"; fail "install"; }
so=$(find "$prefix" -name 'liburingpipe.so.0' -print -quit)
[ -n "$so" ] || fail "liburingpipe.so.0 not installed"
libdir=$(dirname "$so")
for f in include/uringpipe.h include/uringpipe/uring.h include/uringpipe/version.h \
	share/man/man7/uringpipe.7 share/man/man3/up_write.3 share/man/man3/up_writev.3; do
	[ -f "$prefix/$f" ] || fail "$f not installed"
done
for f in liburingpipe.a pkgconfig/uringpipe.pc cmake/uringpipe/uringpipeConfig.cmake \
	cmake/uringpipe/uringpipeConfigVersion.cmake cmake/uringpipe/uringpipeTargets.cmake; do
	[ -f "$libdir/$f" ] || fail "$libdir/$f not installed"
done
# Debian: the multiarch libdir for every prefix (cmake/UpLibdir.cmake).
multiarch=$("$cc" -print-multiarch 2>/dev/null || true)
if [ -f /etc/debian_version ] && [ -n "$multiarch" ]; then
	[ "$libdir" = "$prefix/lib/$multiarch" ] || fail "libdir is $libdir, not $prefix/lib/$multiarch"
fi
for f in README.md CHANGELOG.md LICENSE DESIGN.md DESIGN-NOTES.md examples/two_threads.c \
	examples/consumer/main.c examples/consumer/CMakeLists.txt; do
	[ -f "$prefix/share/doc/uringpipe/$f" ] || fail "share/doc/uringpipe/$f not installed"
done
# The packages' copyright files come only with CPack's component installs.
[ ! -e "$prefix/share/doc/liburingpipe0" ] || fail "a plain install has share/doc/liburingpipe0"
soname=$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = liburingpipe.so.0 ] || fail "SONAME is '$soname'"
# Only the public API is exported (core/uringpipe.map).
extra=$(nm -D --defined-only "$so" | awk '{print $3}' |
	grep -v -e '^up_[a-z0-9_]*@@URINGPIPE_' -e '^URINGPIPE_' || true)
[ -z "$extra" ] || fail "unexpected exported symbols: $extra"

step "find_package(uringpipe): shared and static targets"
cmake -S "$root/examples/consumer" -B "$tmp/consumer-cmake" -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_STATIC=ON >"$tmp/consumer-configure.log" ||
	{ cat "$tmp/consumer-configure.log"; fail "consumer configure"; }
cmake --build "$tmp/consumer-cmake" -j"$jobs" >"$tmp/consumer-build.log" ||
	{ cat "$tmp/consumer-build.log"; fail "consumer build"; }
LD_LIBRARY_PATH=$libdir "$tmp/consumer-cmake/consumer" || fail "find_package consumer (shared)"
"$tmp/consumer-cmake/consumer_static" || fail "find_package consumer (static)"
if readelf -d "$tmp/consumer-cmake/consumer_static" | grep -q 'liburingpipe\.so'; then
	fail "consumer_static depends on liburingpipe.so"
fi

step "pkg-config: shared, then static"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists --print-errors 'uringpipe >= 0.1' || fail "pkg-config does not find uringpipe"
# shellcheck disable=SC2046  # word splitting of the flags is wanted
"$cc" -Wall -Werror -o "$tmp/consumer-pc" "$root/examples/consumer/main.c" \
	$(pkg-config --cflags --libs uringpipe) || fail "pkg-config build (shared)"
LD_LIBRARY_PATH=$libdir "$tmp/consumer-pc" || fail "pkg-config consumer (shared)"
# The archive by file name: -luringpipe would pick the .so next to it.
static_libs=$(pkg-config --static --libs uringpipe)
static_libs=${static_libs/-luringpipe/-l:liburingpipe.a}
# shellcheck disable=SC2046,SC2086
"$cc" -Wall -Werror -o "$tmp/consumer-pc-static" "$root/examples/consumer/main.c" \
	$(pkg-config --cflags uringpipe) $static_libs || fail "pkg-config build (static)"
"$tmp/consumer-pc-static" || fail "pkg-config consumer (static)"
if readelf -d "$tmp/consumer-pc-static" | grep -q 'liburingpipe\.so'; then
	fail "static pkg-config consumer depends on liburingpipe.so"
fi

step "every consumer's malloc binds to libc (LD_DEBUG=bindings)"
check=$root/examples/consumer/check_malloc.sh
for b in consumer-cmake/consumer_static consumer-pc-static; do
	"$check" "$tmp/$b" || fail "$b: the host's malloc is not libc's"
	if readelf -d "$tmp/$b" | grep -q 'libjemalloc'; then
		fail "$b links libjemalloc"
	fi
done
for b in consumer-cmake/consumer consumer-pc; do
	LD_LIBRARY_PATH=$libdir "$check" "$tmp/$b" || fail "$b: the host's malloc is not libc's"
done

step "man pages render after install"
check_man() { # check_man <page> <expected text>
	local out
	out=$(MANPAGER=cat MANWIDTH=80 man -M "$prefix/share/man" "$1" 2>"$tmp/man.err") ||
		{ cat "$tmp/man.err"; fail "man $1"; }
	grep -q "$2" <<<"$out" || fail "man $1: '$2' not found"
	# groff/man warnings fail the check; a host without the locale does not.
	if grep -v -i 'locale' "$tmp/man.err" | grep -q .; then
		cat "$tmp/man.err"
		fail "man $1 warned"
	fi
}
check_man uringpipe "Security model"
check_man up_write "up_writev"
check_man up_writev "UP_PIPE_BUF"   # a .so alias resolves to up_write(3)

step "out-of-tree build of a fresh clone leaves the source tree clean"
git clone -q "$root" "$tmp/src" || fail "git clone"
cmake -S "$tmp/src" -B "$tmp/src-build" -DCMAKE_BUILD_TYPE=Release >"$tmp/oot.log" 2>&1 ||
	{ cat "$tmp/oot.log"; fail "out-of-tree configure"; }
cmake --build "$tmp/src-build" -j"$jobs" >>"$tmp/oot.log" 2>&1 ||
	{ tail -50 "$tmp/oot.log"; fail "out-of-tree build"; }
dirty=$(git -C "$tmp/src" status --porcelain --ignored)
[ -z "$dirty" ] || fail "the build wrote into the source tree:
$dirty"

step "ok"
