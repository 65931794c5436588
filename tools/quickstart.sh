#!/usr/bin/env bash
# uringpipe quick start: install what is missing (Debian 12, as root), build,
# then run the comparison with kernel pipes (`bench`: uringpipe-cat --bench) or
# the test suite (`test`).
#
#   bash tools/quickstart.sh bench [bench options...]
#   bash tools/quickstart.sh test  [ctest options...]
#
# Environment: BUILD_DIR (default build), UP_CMAKE_ARGS (extra -D options),
# UP_TEST_JOBS (tests run at once; default: the CPUs).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
build=${BUILD_DIR:-build}
what=${1:-}
shift || true

# spin: the model check of the sleep/wake and publish protocols (tests/model).
# python3: the CLI tests parse the --bench JSON and the HTML/SVG report with it
# (they fall back to a minimal shell check without it).
# iproute2, nftables: the TCP tests between two network namespaces (loss and a
# half-open connection; skipped without them).
packages=(build-essential cmake pkg-config liburing-dev libnuma-dev libjemalloc-dev
          strace numactl python3 spin iproute2 nftables)

install_deps() {
	local missing=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "quickstart: missing packages: ${missing[*]} (run as root to install them)" >&2
		exit 1
	fi
	echo "quickstart: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

configure_and_build() {
	# shellcheck disable=SC2086
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUP_WERROR=ON ${UP_CMAKE_ARGS:-} >/dev/null
	cmake --build "$build" -j"$(nproc)"
}

case "$what" in
bench)
	install_deps
	configure_and_build
	exec "$build"/tools/uringpipe-cat --bench "$@"
	;;
test)
	install_deps
	configure_and_build
	cd "$build"
	# As many tests at once as there are CPUs (UP_TEST_JOBS to change it);
	# the few that time themselves against the machine run alone
	# (RUN_SERIAL, tests/CMakeLists.txt).
	exec ctest --output-on-failure --timeout 900 -j "${UP_TEST_JOBS:-$(nproc)}" "$@"
	;;
*)
	echo "usage: $0 bench|test [options...]" >&2
	exit 2
	;;
esac
