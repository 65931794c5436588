#!/usr/bin/env bash
# --bench --report: an unwritable report path fails before any run (exit 2);
# the SVG and the HTML page of a short run parse as XML, every number they
# show is the --json figure of the same run (at the precision shown), every
# other digit in the SVG's text is a tick, a size, a configuration or the
# header, and the header names the machine, kernel, backend, pinning, date
# and the exact command; the text table's header names them too.
# usage: test_report.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

# --- the report path is checked before the benchmark starts -------------
: >"$T/file"
for bad in "$T/no/such/dir/r.html" "$T/file/r.svg" "$T"; do
	"$CAT" --bench --report "$bad" --sizes 4K --bytes 1M --repeat 1 >"$T/out" 2>"$T/err"
	expect_eq "unwritable report $bad: exit 2" "$?" 2
	expect_eq "unwritable report $bad: no benchmark output" "$(wc -c <"$T/out")" 0
	expect_grep "unwritable report $bad: message names it" "--report $bad: cannot write" "$T/err"
done
# A bench that fails after the check (--memory-pressure, no stress-ng on
# PATH) leaves an existing report as it was: the check does not truncate.
echo keep >"$T/old.html"
mkdir "$T/bin"
PATH="$T/bin" "$CAT" --bench --memory-pressure --report "$T/old.html" --sizes 4K --bytes 1M \
	--repeat 1 >/dev/null 2>"$T/err"
expect_eq "failed bench with an existing report: exit 1" "$?" 1
expect_grep "failed bench with an existing report: past the check" "needs stress-ng" "$T/err"
expect_eq "the check leaves an existing report as it was" "$(cat "$T/old.html")" keep

# --- the text table's header ---------------------------------------------
"$CAT" --bench --sizes 4K --bytes 1M --repeat 1 --report "$T/t.html" >"$T/t" 2>"$T/err"
expect_eq "bench table + report: exit" "$?" 0
expect_grep "table header: machine line" "^  machine: .*cores online; backend " "$T/t"
expect_grep "table header: kernel line" "^  kernel: $(uname -r) " "$T/t"
expect_grep "table header: the command" "command: .* --bench --sizes 4K --bytes 1M" "$T/t"
expect_grep "says where the report went" "report written to $(realpath "$T/t.html")" "$T/err"

if ! have_python; then
	echo "skip: the report checks need python3"
	cli_done
fi

# --- every number of the report is the JSON's -----------------------------
# A path with a space: the command in the header must be shell-quoted.
"$CAT" --bench --sizes 100,64K --bytes 2M --repeat 3 --json --report "$T/r a.svg" \
	>"$T/j.svg" 2>"$T/err"
expect_eq "bench --json --report .svg: exit" "$?" 0
expect_grep "says where the SVG went" "report written to $(realpath "$T/r a.svg")" "$T/err"
"$CAT" --bench --sweep --sizes 100,4K --bytes 1M --repeat 2 --json --report "$T/r.html" \
	>"$T/j.html" 2>"$T/err"
expect_eq "bench --sweep --json --report .html: exit" "$?" 0

check_report() { # FILE JSON
	python3 - "$1" "$2" "$(uname -r) $(uname -v)" "$(getconf _NPROCESSORS_ONLN)" <<'PY'
import calendar, json, math, re, sys, time
import xml.etree.ElementTree as ET

path, jpath, kernel, ncpu = sys.argv[1:5]
d = json.load(open(jpath))
root = ET.parse(path).getroot()
raw = open(path, encoding="utf-8").read()
SVG = "{http://www.w3.org/2000/svg}"
html = not path.endswith(".svg")
bad = []
NUM = re.compile(r"-?\d+(?:\.\d+)?")

def fail(msg):
    bad.append(msg)

m = d["machine"]
if m["kernel"] != kernel:
    fail("json machine.kernel %r, uname says %r" % (m["kernel"], kernel))
if m["cores"] != int(ncpu):
    fail("json machine.cores %r, getconf says %s" % (m["cores"], ncpu))
if m["backend"] != d["backend"] or not m["cpu"] or not m["pinning"]:
    fail("json machine backend/cpu/pinning: %r" % m)
if abs(calendar.timegm(time.strptime(m["date"], "%Y-%m-%dT%H:%M:%SZ")) - time.time()) > 600:
    fail("json machine.date %r is not now" % m["date"])
if " " in path and ("'%s'" % path) not in m["command"]:
    fail("command %r does not quote %r" % (m["command"], path))
if not m["command"].split(" ", 2)[1] == "--bench" or path not in m["command"]:
    fail("command %r" % m["command"])

cfgs = {"%dx%d" % (c["writers"], c["readers"]): c for c in d["configs"]}
sizes = {r["size"] for c in d["configs"] for r in c["rows"]}

def row(cfg, size):
    for r in cfgs[cfg]["rows"]:
        if r["size"] == int(size):
            return r
    raise KeyError((cfg, size))

def want(q, a):
    r = row(a["data-cfg"], a["data-size"])
    t = r[a["data-t"]]
    if q == "mbps": return t["mbps_median"], 0.0005
    if q == "min": return min(t["mbps"]), 0.0005
    if q == "max": return max(t["mbps"]), 0.0005
    if q == "p50": return t["lat_us"]["p50"], 0.0005
    if q == "p99": return t["lat_us"]["p99"], 0.0005
    if q == "sys": return t["syscalls_per_gib_median"], 0.05
    if q == "ratio":
        u, k = t["mbps_median"], r[a["data-ref"]]["mbps_median"]
        v = u / k
        return v, v * (0.0005 / u + 0.0005 / k)
    raise KeyError(q)

seen = set()
def check_nums(el, text):
    qs = el.get("data-q").split()
    nums = NUM.findall(text.split(": ", 1)[1] if el.tag.endswith("title") else text)
    if len(nums) != len(qs):
        fail("%r: %d numbers for data-q %r" % (text, len(nums), qs))
        return
    for q, s in zip(qs, nums):
        v, slack = want(q, el.attrib)
        dec = len(s.split(".")[1]) if "." in s else 0
        if abs(float(s) - v) > 0.5 * 10 ** -dec + slack + 1e-9:
            fail("%s %s %s: shows %s, json %.4f (%r)" % (q, el.get("data-cfg"),
                 el.get("data-t"), s, v, text))
        seen.add((q, el.get("data-cfg"), int(el.get("data-size")), el.get("data-t"),
                  el.get("data-ref")))

def nice(s):
    s = s.rstrip("\u00d7")
    mul = 1e3 if s.endswith("k") else 1e6 if s.endswith("M") else 1
    v = float(s.rstrip("kM")) * mul
    e = 10 ** int(f"{v:e}".split("e")[1])
    return any(abs(v - k * e) < 1e-9 * e for k in (1, 2, 5))

UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size_of(s):
    mt = re.fullmatch(r"(\d+) (B|KiB|MiB|GiB)", s)
    return int(mt.group(1)) * UNIT[mt.group(2)] if mt else None

def cap_label(v):
    for u in ("GiB", "MiB", "KiB"):
        if v % UNIT[u] == 0:
            return "%d %s" % (v // UNIT[u], u)
    return "%d B" % v

setup = "capacity %s, uringpipe %s, median of %d run%s per point" % (
    cap_label(d["capacity"]), d["version"], d["repeat"], "" if d["repeat"] == 1 else "s")
labels = {"cpu": "CPU", "cores": "cores online", "kernel": "kernel",
          "backend": "wake backend", "pinning": "pinning", "date": "date",
          "command": "command", "setup": "setup"}
def header_value(k):
    return setup if k == "setup" else str(m[k])

# Every <text> and <title> of the SVG that holds a digit says what it is.
for el in root.iter():
    if el.tag not in (SVG + "text", SVG + "title"):
        continue
    text = "".join(el.itertext())
    cls = el.get("class")
    if el.get("data-q"):
        check_nums(el, text)
    elif not re.search(r"\d", text):
        continue
    elif cls == "tick":
        if not nice(text):
            fail("tick %r is not 1, 2 or 5 x 10^k" % text)
    elif cls == "scale":
        v = float(text.rstrip("\u00d7"))
        if not (v > 0 and abs(v - 2 ** round(math.log2(v))) < 1e-9):
            fail("colour scale step %r is not a power of two" % text)
    elif cls == "label":
        if text not in ("Write latency, median (p50)", "Write latency, 99th percentile (p99)"):
            fail("chart title %r has digits" % text)
    elif cls == "size":
        if size_of(text) not in sizes:
            fail("size label %r is not a write size of the run" % text)
    elif cls == "cfg":
        mt = re.fullmatch(r"(\d+) writers? x (\d+) readers?(, pinned: writer on cpu(\d+), "
                          r"reader on cpu(\d+)|, not pinned)?", text)
        c = mt and cfgs.get("%sx%s" % (mt.group(1), mt.group(2)))
        if not c:
            fail("configuration %r not in the json" % text)
        elif mt.group(3) and ((mt.group(4) is not None) != c["pinned"] or (mt.group(4) and
              (int(mt.group(4)), int(mt.group(5))) != (d["writer_cpu"], d["reader_cpu"]))):
            fail("configuration %r: pinning differs from the json" % text)
    elif cls == "note":
        if re.search(r"\d", text.replace("10\u2076", "")):
            fail("note %r has digits" % text)
    elif cls == "hdr" and not html:
        k = el.get("data-k")
        if text != "%s: %s" % (labels[k], header_value(k)):
            fail("header %r, json says %r" % (text, header_value(k)))
    else:
        fail("unexplained digits in %r (class %r)" % (text, cls))

# The HTML page: the header as a list, the numbers as a table.
if html:
    for el in root.iter("{http://www.w3.org/1999/xhtml}td"):
        if el.get("data-q"):
            check_nums(el, "".join(el.itertext()))
    got = {el.get("data-k"): "".join(el.itertext())
           for el in root.iter("{http://www.w3.org/1999/xhtml}dd")}
    for k in labels:
        if got.get(k) != header_value(k):
            fail("page header %s: %r, json says %r" % (k, got.get(k), header_value(k)))
else:
    hdr = {el.get("data-k") for el in root.iter(SVG + "text") if el.get("class") == "hdr"}
    if hdr != set(labels):
        fail("SVG header fields %r" % sorted(hdr))

# Every figure of every transport is shown, and every ratio to the pipe.
ups = [t for t in d["transports"] if t.startswith("uringpipe")]
for cfg, c in cfgs.items():
    for r in c["rows"]:
        for t in d["transports"]:
            # A sweep's SVG is the heat map of ratios only; its page's
            # table, and the charts of one configuration, show them all.
            sweep_svg = len(cfgs) > 1 and not html
            for q in () if sweep_svg else ("mbps", "min", "max", "p50", "p99", "sys"):
                if (q, cfg, r["size"], t, None) not in seen:
                    fail("%s of %s %s %d not shown" % (q, t, cfg, r["size"]))
        for t in ups:
            if ("ratio", cfg, r["size"], t, "kernel") not in seen:
                fail("ratio of %s over kernel, %s %d, not shown" % (t, cfg, r["size"]))

# How it reads: units as text, labels as people write them, the title once,
# nothing fetched, nothing run.
if "10^" in raw:
    fail("a literal caret: 10^")
if re.search(r"\d[KMG] B\b", raw):
    fail("a size label like '4K B'")
if not html and "higher is better" not in raw:
    fail("no 'higher is better'")
title = root.find(SVG + "title" if not html else
                  "{http://www.w3.org/1999/xhtml}head/{http://www.w3.org/1999/xhtml}title").text
shown = [el for el in root.iter() if not el.tag.endswith("}title")
         and "".join(el.itertext()).strip() == title.strip()]
if len(shown) != 1:
    fail("title shown %d times" % len(shown))
if re.search(r"<script|https?://(?!www\.w3\.org/)", raw):
    fail("a script or an external reference")
if len(seen) < 6:
    fail("only %d numbers checked" % len(seen))
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
PY
}

check_report "$T/r a.svg" "$T/j.svg"
expect_eq "SVG: every number is the JSON's, the header the machine's" "$?" 0
check_report "$T/r.html" "$T/j.html"
expect_eq "HTML (sweep): every number is the JSON's, the header the machine's" "$?" 0
cli_done
