#!/usr/bin/env bash
# CI: uringpipe as a Debian user gets it (issue 19).
#   1. configure with --prefix /usr, build, and `cmake --build --target package`:
#      liburingpipe0, liburingpipe-dev, uringpipe-tools (cmake/UpPackage.cmake);
#      show their control fields and contents (dpkg -c);
#   2. install them with dpkg -i (apt-get install -f for missing Depends);
#   3. build examples/consumer against the installed packages only: find_package
#      (shared and static) and pkg-config (shared and --static), from the
#      system paths; run each; every malloc binding must go to libc
#      (examples/consumer/check_malloc.sh); uringpipe-cat from /usr/bin copies a
#      file byte for byte; man finds uringpipe(7) and uringpipe-cat(1);
#   4. purge the packages (also when a check failed).
# Root only (dpkg). Environment: CC, KEEP_TMP=1 to keep the work directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uringpipe-deb.XXXXXX")
pkgs=(uringpipe-tools liburingpipe-dev liburingpipe0)
installed=0
cleanup() {
	if [ "$installed" = 1 ]; then
		dpkg --purge "${pkgs[@]}" >/dev/null || echo "deb: purge failed" >&2
	fi
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "deb: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
jobs=$(nproc 2>/dev/null || echo 2)
cc=${CC:-cc}

step() { echo "== deb: $*"; }
fail() { echo "deb: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i)"
command -v dpkg-shlibdeps >/dev/null || fail "dpkg-shlibdeps missing (apt-get install dpkg-dev)"
for p in "${pkgs[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed'; then
		fail "$p is already installed; this check installs and purges its own build"
	fi
done
multiarch=$("$cc" -print-multiarch)
libdir=/usr/lib/$multiarch

step "build the packages (prefix /usr)"
cmake -S "$root" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DUP_WERROR=ON \
	-DCMAKE_INSTALL_PREFIX=/usr -DUP_BUILD_TESTS=OFF -DUP_BUILD_EXAMPLES=OFF \
	>"$tmp/configure.log" || { cat "$tmp/configure.log"; fail "configure"; }
cmake --build "$tmp/build" -j"$jobs" >"$tmp/build.log" || { cat "$tmp/build.log"; fail "build"; }
cmake --build "$tmp/build" --target package >"$tmp/package.log" ||
	{ cat "$tmp/package.log"; fail "cpack"; }
debs=()
for p in "${pkgs[@]}"; do
	d=$(find "$tmp/build" -maxdepth 1 -name "${p}_*.deb" -print -quit)
	[ -n "$d" ] || fail "no ${p}_*.deb"
	debs+=("$d")
	echo "-- $(basename "$d")"
	dpkg-deb -f "$d" Package Version Architecture Depends
	dpkg -c "$d" | awk '$6 !~ /\/$/ {print "   " $6, $7, $8}'
done
# debs[] is in the order of pkgs[]: tools, dev, lib.
dev_files=$(dpkg -c "${debs[1]}")
grep -q "\./usr/lib/$multiarch/liburingpipe\.a$" <<<"$dev_files" ||
	fail "the static library is not in /usr/lib/$multiarch"
grep -q '\./usr/share/doc/uringpipe/CHANGELOG\.md$' <<<"$dev_files" ||
	fail "the changelog is not in /usr/share/doc/uringpipe"
grep -q 'libjemalloc' <<<"$(dpkg-deb -f "${debs[0]}" Depends)" &&
	fail "uringpipe-tools depends on libjemalloc"

step "dpkg -i"
if ! dpkg -i "${debs[@]}" >"$tmp/dpkg.log" 2>&1; then
	cat "$tmp/dpkg.log"
	echo "deb: dpkg -i failed, apt-get install -f for the Depends"
	DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq >/dev/null
fi
installed=1
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" | grep -q 'install ok installed' || fail "$p not installed"
done

step "consumers against the installed packages"
# Only the package's files: /usr/local would come first in both searches.
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig:/usr/share/pkgconfig
cmake -S "$root/examples/consumer" -B "$tmp/consumer-cmake" -DCMAKE_BUILD_TYPE=Release \
	-Duringpipe_DIR="$libdir/cmake/uringpipe" -DCONSUMER_STATIC=ON \
	>"$tmp/consumer-configure.log" || { cat "$tmp/consumer-configure.log"; fail "consumer configure"; }
cmake --build "$tmp/consumer-cmake" -j"$jobs" >"$tmp/consumer-build.log" ||
	{ cat "$tmp/consumer-build.log"; fail "consumer build"; }
# shellcheck disable=SC2046  # word splitting of the flags is wanted
"$cc" -Wall -Werror -o "$tmp/consumer-pc" "$root/examples/consumer/main.c" \
	$(pkg-config --cflags --libs uringpipe) || fail "pkg-config build (shared)"
static_libs=$(pkg-config --static --libs uringpipe)
static_libs=${static_libs/-luringpipe/-l:liburingpipe.a}
# shellcheck disable=SC2046,SC2086
"$cc" -Wall -Werror -o "$tmp/consumer-pc-static" "$root/examples/consumer/main.c" \
	$(pkg-config --cflags uringpipe) $static_libs || fail "pkg-config build (static)"
check=$root/examples/consumer/check_malloc.sh
for b in consumer-cmake/consumer consumer-pc; do
	"$tmp/$b" || fail "$b"
	grep -q "liburingpipe\.so\.0 => /\(usr/\)\?lib/$multiarch/" <<<"$(ldd "$tmp/$b")" ||
		fail "$b does not load the packaged liburingpipe.so.0"
	"$check" "$tmp/$b" || fail "$b: the host's malloc is not libc's"
done
for b in consumer-cmake/consumer_static consumer-pc-static; do
	"$tmp/$b" || fail "$b"
	grep -q 'liburingpipe\.so\|libjemalloc' <<<"$(readelf -d "$tmp/$b")" &&
		fail "$b links liburingpipe.so or libjemalloc"
	"$check" "$tmp/$b" || fail "$b: the host's malloc is not libc's"
done

step "uringpipe-cat and the man pages from the packages"
head -c 3000000 /dev/urandom >"$tmp/in"
/usr/bin/uringpipe-cat -q "$tmp/in" >"$tmp/out" || fail "uringpipe-cat"
cmp "$tmp/in" "$tmp/out" || fail "uringpipe-cat changed the bytes"
if command -v man >/dev/null 2>&1; then
	for page in uringpipe.7 uringpipe-cat.1 up_write.3; do
		grep -q "^/usr/share/man/" <<<"$(man -w "${page%.*}" 2>/dev/null)" || fail "man $page"
	done
fi

step "purge"
dpkg --purge "${pkgs[@]}" >/dev/null || fail "dpkg --purge"
installed=0
[ ! -e "$libdir/liburingpipe.so.0" ] || fail "purge left $libdir/liburingpipe.so.0"

step "ok"
