# shellcheck shell=bash
# Helpers for the uringpipe-cat CLI tests. Source it, then call cli_init "$@".
# Exit codes as CTest is told to read them: 0 pass, 1 fail, 77 skip
# (SKIP_RETURN_CODE 77).
set -u

CAT=
T=
failures=0

cli_init() {
	CAT=${1:?usage: $0 /path/to/uringpipe-cat}
	[ -x "$CAT" ] || { echo "not executable: $CAT" >&2; exit 1; }
	T=$(mktemp -d "${TMPDIR:-/tmp}/upcat-test.XXXXXX")
	trap 'rm -rf "$T"' EXIT
}

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

ok() {
	echo "ok: $*"
}

# expect_eq WHAT GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi
}

# expect_grep WHAT PATTERN FILE
expect_grep() {
	if grep -q -- "$2" "$3"; then ok "$1"; else
		fail "$1: '$2' not in $3:"; sed 's/^/    /' "$3" >&2
	fi
}

# expect_usage WHAT MESSAGE-PATTERN ARGS...: uringpipe-cat ARGS refuses its
# command line as a usage error: exit 2, one message line (besides the "Try"
# hint) that names the program (and the mode, as "uringpipe-cat --bench:")
# and matches the pattern, nothing on stdout.
expect_usage() {
	local what=$1 pat=$2
	shift 2
	"$CAT" "$@" </dev/null >"$T/out" 2>"$T/err"
	expect_eq "$what: exit 2" "$?" 2
	expect_grep "$what: message" "^uringpipe-cat[^:]*: .*$pat" "$T/err"
	expect_eq "$what: one message line" "$(grep -vc '^Try ' "$T/err")" 1
	if [ -s "$T/out" ]; then fail "$what: wrote to stdout"; fi
}

# same_file WHAT EXPECTED GOT: byte-identical (cmp), else the first difference.
same_file() {
	if cmp -s "$2" "$3"; then ok "$1"; else
		fail "$1: output differs: $(cmp "$2" "$3" 2>&1 | head -1)"
	fi
}

have_python() { command -v python3 >/dev/null 2>&1; }

# json_get KEY FILE: the value of "KEY" in a one-line JSON object (a number,
# true/false/null, or a string without its quotes); empty if absent. Enough
# for the flat summaries of uringpipe-cat --json, and needs no python3.
json_get() {
	sed -n "s/.*\"$1\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$2" | head -1 | tr -d '"'
}

# now_s: seconds on the wall clock, with nanoseconds.
now_s() { date +%s.%N; }

# fcmp A OP B: floating-point comparison (awk), e.g. fcmp "$x" '<' 0.5
fcmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; }

# json_valid FILE: python3 if present; else a minimal structural check (one
# top-level object, balanced braces/brackets outside strings) so CI images
# without python3 still catch truncated or garbled output.
json_valid() {
	if have_python; then
		python3 -m json.tool "$1" >/dev/null
		return
	fi
	awk 'BEGIN { d = 0; s = 0; e = 0; bad = 0 }
	{ n = length($0); for (i = 1; i <= n; i++) { c = substr($0, i, 1)
		if (s) { if (e) e = 0; else if (c == "\\") e = 1; else if (c == "\"") s = 0; continue }
		if (c == "\"") s = 1
		else if (c == "{" || c == "[") d++
		else if (c == "}" || c == "]") { d--; if (d < 0) bad = 1 }
	} }
	END { exit (bad || d != 0 || s) ? 1 : 0 }' "$1" && head -c 1 "$1" | grep -q '{'
}

# xml_valid FILE: well-formed XML (python3 xml.etree, else xmllint), 77 if neither.
xml_valid() {
	if have_python; then
		python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$1"
	elif command -v xmllint >/dev/null 2>&1; then
		xmllint --noout "$1"
	else
		return 77
	fi
}

# netns_pair PREFIX: two network namespaces of this test, NA and NB (named
# PREFIXA$$ and PREFIXB$$), removed with $T on exit, after netns_extra_cleanup
# when the test defines it; inA and inB run a command in each. Skips (77)
# when not root or without ip(8).
netns_pair() {
	[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (network namespaces)"; exit 77; }
	command -v ip >/dev/null 2>&1 || { echo "skip: no ip"; exit 77; }
	NA=$1A$$
	NB=$1B$$
	trap netns_cleanup EXIT
	if ! ip netns add "$NA" 2>"$T/ns.err" || ! ip netns add "$NB" 2>>"$T/ns.err"; then
		echo "skip: cannot make network namespaces: $(head -1 "$T/ns.err")"
		exit 77
	fi
}
netns_cleanup() {
	if declare -F netns_extra_cleanup >/dev/null; then netns_extra_cleanup; fi
	ip netns del "$NA" 2>/dev/null
	ip netns del "$NB" 2>/dev/null
	rm -rf "$T"
}
inA() { ip netns exec "$NA" "$@"; }
inB() { ip netns exec "$NB" "$@"; }

cli_done() {
	if [ "$failures" -ne 0 ]; then
		echo "$failures check(s) failed" >&2
		exit 1
	fi
	echo "all checks passed"
	exit 0
}
