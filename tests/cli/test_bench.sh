#!/usr/bin/env bash
# --bench: a short run gives valid JSON with every transport and the ratios;
# --report writes a well-formed HTML page and SVG image; --memory-pressure
# without stress-ng fails clearly.
# usage: test_bench.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

short=(--sizes '4K,64K' --bytes 8M --repeat 1)
"$CAT" --bench "${short[@]}" --json --report "$T/r.html" >"$T/j" 2>"$T/err"
expect_eq "bench --json exit" "$?" 0
json_valid "$T/j"
expect_eq "bench --json is valid JSON" "$?" 0
for k in '"kernel":' '"uringpipe":' '"uringpipe_zc":' '"ratio":' '"ratio_zc":' \
	'"mbps_median":' '"syscalls_per_gib_median":' '"p99":'; do
	expect_grep "bench JSON has $k" "$k" "$T/j"
done
if have_python; then
	python3 - "$T/j" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["configs"][0]["rows"]
assert [r["size"] for r in rows] == [4096, 65536], rows
for r in rows:
    for t in ("kernel", "uringpipe", "uringpipe_zc"):
        assert r[t]["mbps_median"] > 0, (t, r[t])
        assert r[t]["verified_bytes"] >= 16 << 20
    assert abs(r["ratio"] - r["uringpipe"]["mbps_median"] / r["kernel"]["mbps_median"]) < 1e-3
PY
	expect_eq "bench JSON content (sizes, transports, ratio)" "$?" 0
fi

test -s "$T/r.html"
expect_eq "HTML report written" "$?" 0
xml_valid "$T/r.html"
rc=$?
if [ $rc -eq 77 ]; then echo "skip: no XML parser"; else expect_eq "HTML report is well-formed" $rc 0; fi
expect_grep "HTML report has an inline SVG" "<svg xmlns=" "$T/r.html"
if grep -qi -e '<script' -e 'http://[^w]' -e 'https://' "$T/r.html"; then
	fail "HTML report must not contain scripts or fetches"
else
	ok "HTML report: no script, no fetch"
fi

"$CAT" --bench --sizes 100 --bytes 1M --repeat 1 --report "$T/r.svg" >"$T/t" 2>"$T/err"
expect_eq "bench table + SVG exit" "$?" 0
expect_grep "table has the ratio column" "ratio" "$T/t"
xml_valid "$T/r.svg"
rc=$?
if [ $rc -eq 77 ]; then echo "skip: no XML parser"; else expect_eq "SVG report is well-formed" $rc 0; fi
expect_grep "SVG report root" "<svg xmlns=\"http://www.w3.org/2000/svg\"" "$T/r.svg"

"$CAT" --bench --report "$T/no/such/dir/r.html" --sizes 4K --bytes 1M --repeat 1 \
	>/dev/null 2>"$T/err"
expect_eq "unwritable report: exit 2, before any run" "$?" 2
expect_grep "unwritable report: message" "no/such/dir/r.html" "$T/err"

# --memory-pressure with a PATH that has no stress-ng.
mkdir "$T/bin"
PATH="$T/bin" "$CAT" --bench --memory-pressure "${short[@]}" >/dev/null 2>"$T/err"
expect_eq "memory pressure without stress-ng: exit 1" "$?" 1
expect_grep "memory pressure without stress-ng: message" "needs stress-ng" "$T/err"

cli_done
