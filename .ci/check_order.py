#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_order.py - every atomic access says why its memory order is enough.

Usage:
    python3 .ci/check_order.py ROOT DIR...      e.g.  python3 .ci/check_order.py . core uring
    python3 .ci/check_order.py --self-test

The scheme. Every release/acquire pair has a name in square brackets,
unique in the tree ([head], [u-cq-tail]), and each half says so in a comment
on the access's line or in the comment block directly above it:

    /* [head] rel: <what it publishes>; pairs with [head] acq in rd_ready(). */
    /* [head] acq: <what it may now read>; pairs with [head] rel in publish(). */

seq_cst halves of a handshake say `[x] sc:`, fences `[x] mb: orders <store>
before <load>; pairs with [x] mb in f()`, read-modify-writes the order they
use (`[x] acq_rel:`, or rel/acq/sc). A partner in the kernel is named as
such: "pairs with the kernel's smp_load_acquire() in io_sqring_entries()";
no function is looked for then. A relaxed access carries a comment that
contains `relaxed:` and a reason, on its line or ending within the 3 lines
above (a comment block right above a run of consecutive relaxed accesses
covers the run). Relaxed accesses inside the arguments of up__count() (a
per-endpoint statistic) need nothing.

Checks, over every .c and .h file under ROOT/DIR...:
  1. each call of atomic_{load,store,exchange,compare_exchange_*,fetch_*}
     _explicit, atomic_thread_fence and atomic_signal_fence with an order
     other than relaxed has a [tag] comment on its lines or in the comment
     block ending within 4 lines above it; relaxed ones have `relaxed:`;
  2. each tag has at least two sites, not all of them releases and not all
     acquires, unless a site names the kernel as its partner, or the one
     site is an acq_rel read-modify-write that every party runs and says
     it "pairs with itself" (a reference count's decrement);
  3. each "pairs with [t] ... in f()" names a function f whose body (in
     some file under the dirs) holds a site of [t];
  4. each site says what it pairs with.
A site is a `[t] kind:` (kind one of rel, acq, acq_rel, sc, mb, consume) in
any comment; a mention of a tag without the colon is not a site. Accesses
written inside #define bodies are not seen.

Every violation is printed as `file:line: message`, then a count per file
and a summary line; the exit status is 1 if there was any violation.
"""

import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_calls as cc  # noqa: E402  (the shared C scanner)

ATOMIC_RE = re.compile(r"^(atomic_(load|store|exchange|compare_exchange_strong|"
                       r"compare_exchange_weak|fetch_[a-z]+)_explicit|"
                       r"atomic_thread_fence|atomic_signal_fence)$")
TAG = r"\[([A-Za-z0-9][A-Za-z0-9_.-]*)\]"
KINDS = ("acq_rel", "rel", "acq", "sc", "mb", "consume")
SITE_RE = re.compile(TAG + r"\s*(" + "|".join(KINDS) + r")\s*:")
RELAXED_RE = re.compile(r"relaxed\s*:\s*[A-Za-z0-9(\"'`]", re.I)
PAIRS_RE = re.compile(r"pairs\s+with\b", re.I)
SELF_RE = re.compile(r"pairs\s+with\s+itself", re.I)
KERNEL_RE = re.compile(r"pairs\s+with\s+(?:an?\s+|the\s+)?kernel", re.I)
FUNC_REF_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*\)")

TAG_LINES_ABOVE = 4
RELAXED_LINES_ABOVE = 3


def comment_body(text):
    """A comment's words, without the comment markers and leading stars."""
    if text.startswith("/*"):
        text = text[2:-2] if text.endswith("*/") else text[2:]
    elif text.startswith("//"):
        text = text[2:]
    lines = []
    for ln in text.split("\n"):
        ln = ln.strip()
        if ln.startswith("//"):
            ln = ln[2:]
        elif ln.startswith("*"):
            ln = ln[1:]
        lines.append(ln.strip())
    return " ".join(x for x in lines if x)


class Block:
    """Consecutive whole-line comments, or one comment sharing a line with
    code."""

    def __init__(self, comments):
        self.line = comments[0].line
        self.end_line = comments[-1].end_line
        self.text = " ".join(comment_body(c.text) for c in comments)


def blocks_of(comments):
    out = []
    run = []
    for c in comments:
        if run and c.alone and run[-1].alone and c.line <= run[-1].end_line + 1:
            run.append(c)
            continue
        if run:
            out.append(Block(run))
        run = [c]
    if run:
        out.append(Block(run))
    return out


class Site:
    """A [tag] kind: in a comment."""

    def __init__(self, rel, line, tag, kind, clause):
        self.rel = rel
        self.line = line
        self.tag = tag
        self.kind = kind
        self.clause = clause
        self.kernel = bool(KERNEL_RE.search(clause))
        self.funcs = []  # names of the functions whose bodies hold it


class Access:
    def __init__(self, rel, name, line, end_line, orders, start, end):
        self.rel = rel
        self.name = name
        self.line = line
        self.end_line = end_line
        self.orders = orders
        self.start = start
        self.end = end

    @property
    def relaxed(self):
        return bool(self.orders) and all(o == "memory_order_relaxed" for o in self.orders)


class FileScan:
    def __init__(self, root, rel):
        self.rel = rel
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        self.toks, comments = cc.lex(text)
        self.code = cc.code_tokens(self.toks)
        self.funcs = cc.find_functions(self.code)
        self.blocks = blocks_of(comments)
        self.accesses = self._accesses()
        self.sites = []
        for b in self.blocks:
            ms = list(SITE_RE.finditer(b.text))
            for k, m in enumerate(ms):
                end = ms[k + 1].start() if k + 1 < len(ms) else len(b.text)
                self.sites.append(Site(rel, b.line, m.group(1), m.group(2),
                                       b.text[m.end():end]))
        for s in self.sites:
            s.funcs = [f.name for f in self.funcs if f.open_line <= s.line <= f.close_line]

    def _accesses(self):
        code = self.code
        found = []
        for i, t in enumerate(code):
            if t.kind == "id" and ATOMIC_RE.match(t.val) and i + 1 < len(code) and \
                    code[i + 1].val == "(":
                prev = code[i - 1] if i > 0 else None
                if prev is not None and prev.kind == "punct" and prev.val in (".", "->"):
                    continue
                close = cc.match_forward(code, i + 1)
                found.append([t.val, i, close])
        # up__count( argument spans: relaxed statistics.
        stats = []
        for i, t in enumerate(code):
            if t.kind == "id" and t.val == "up__count" and i + 1 < len(code) and \
                    code[i + 1].val == "(":
                stats.append((i + 1, cc.match_forward(code, i + 1)))
        out = []
        for name, i, close in found:
            orders = []
            for k in range(i + 2, close):
                tk = code[k]
                if tk.kind == "id" and tk.val.startswith("memory_order"):
                    # Only the orders of this call, not of a nested one.
                    inner = [f for f in found if f[1] > i and f[1] < k <= f[2]]
                    if not inner:
                        orders.append(tk.val)
            a = Access(self.rel, name, code[i].line, code[close].line, orders, i, close)
            a.in_count = any(s < i and close < e for s, e in stats)
            out.append(a)
        return out

    def block_above(self, line, within, end_line=None):
        """The nearest comment block ending within @within lines above @line,
        and the blocks on the lines [line, end_line]."""
        end_line = line if end_line is None else end_line
        on = [b for b in self.blocks if b.line <= end_line and b.end_line >= line]
        above = [b for b in self.blocks if b.end_line < line]
        near = above[-1] if above and above[-1].end_line >= line - within else None
        return near, on


def run(root, dirs, out=sys.stdout):
    for d in dirs:
        if not os.path.exists(os.path.join(root, d)):
            print("check_order: %s: no such directory under %s" % (d, root), file=sys.stderr)
            return 2
    rels = cc.collect(root, dirs, (".c", ".h"))
    scans = [FileScan(root, r) for r in rels]
    viol = []  # (rel, line, category, message)

    def bad(rel, line, cat, msg):
        viol.append((rel, line, cat, msg))

    # 1. every access is explained.
    naccess = 0
    for fs in scans:
        covered_relaxed = {}
        for a in fs.accesses:
            naccess += 1
            orders = ", ".join(o.replace("memory_order_", "") for o in a.orders) or "an order in a variable"
            what = "%s(%s)" % (a.name, orders)
            if a.relaxed:
                if a.in_count:
                    continue
                near, on = fs.block_above(a.line, RELAXED_LINES_ABOVE, a.end_line)
                ok = any(RELAXED_RE.search(b.text) for b in on) or \
                    (near is not None and RELAXED_RE.search(near.text))
                if not ok:
                    # A run of relaxed accesses below one comment.
                    prev = covered_relaxed.get("last")
                    if prev is not None and prev[0] and a.line <= prev[1] + 1 and \
                            not on:
                        ok = True
                covered_relaxed["last"] = (ok, a.end_line)
                if not ok:
                    bad(fs.rel, a.line, "relaxed", "%s has no 'relaxed:' comment with a reason"
                        % what)
                continue
            covered_relaxed["last"] = None
            near, on = fs.block_above(a.line, TAG_LINES_ABOVE, a.end_line)
            cands = on + ([near] if near is not None else [])
            if not any(SITE_RE.search(b.text) for b in cands):
                bad(fs.rel, a.line, "untagged", "%s has no [tag] comment (e.g. '[name] %s:')" %
                    (what, _kind_hint(a)))

    # 2. every tag has both halves.
    sites = {}
    for fs in scans:
        for s in fs.sites:
            sites.setdefault(s.tag, []).append(s)
    for tag in sorted(sites):
        ss = sites[tag]
        if any(s.kernel for s in ss):
            continue
        first = ss[0]
        # A read-modify-write that every party runs (a reference count's
        # decrement) is both halves at once: each run pairs with the others.
        if len(ss) == 1 and first.kind == "acq_rel" and SELF_RE.search(first.clause):
            continue
        if len(ss) < 2:
            bad(first.rel, first.line, "unpaired",
                "[%s] has one site: its other half carries no [%s] comment" % (tag, tag))
            continue
        kinds = set(s.kind for s in ss)
        if kinds == {"rel"}:
            bad(first.rel, first.line, "unpaired",
                "[%s] has only release sites (%d): no acquire half" % (tag, len(ss)))
        elif kinds == {"acq"} or kinds == {"consume"} or kinds == {"acq", "consume"}:
            bad(first.rel, first.line, "unpaired",
                "[%s] has only acquire sites (%d): no release half" % (tag, len(ss)))

    # 3. every "pairs with [t] ... in f()" names a function holding [t];
    # 4. every site names its partner.
    bodies = {}
    for fs in scans:
        for s in fs.sites:
            for fn in s.funcs:
                bodies.setdefault(fn, []).append(s)
    defined = set()
    for fs in scans:
        defined.update(f.name for f in fs.funcs)
    for fs in scans:
        for b in fs.blocks:
            for m in PAIRS_RE.finditer(b.text):
                ref = _reference(b.text, m.end())
                if KERNEL_RE.match(b.text, m.start()):
                    continue
                tags = re.findall(TAG, ref)
                fns = FUNC_REF_RE.findall(_after_in(ref))
                if not tags and re.match(r"\s*itself", ref):
                    continue  # the acq_rel RMW every party runs (check 2)
                if not tags:
                    # Prose ("pairs with the release in lock_drop()") in an
                    # untagged comment is not a reference to check.
                    if SITE_RE.search(b.text):
                        bad(fs.rel, b.line, "partner",
                            "'pairs with %s' names no [tag]" % _short(ref))
                    continue
                if not fns:
                    bad(fs.rel, b.line, "partner",
                        "'pairs with %s' names no function (... in f())" % _short(ref))
                    continue
                for t in tags:
                    for fn in fns:
                        if fn not in defined:
                            bad(fs.rel, b.line, "partner",
                                "pairs with [%s] in %s(): no function %s() under %s" %
                                (t, fn, fn, " ".join(dirs)))
                            continue
                        here = [s for s in bodies.get(fn, ()) if s.tag == t and
                                not (s.rel == fs.rel and b.line <= s.line <= b.end_line)]
                        if not here:
                            bad(fs.rel, b.line, "partner",
                                "pairs with [%s] in %s(): %s() has no [%s] site" %
                                (t, fn, fn, t))
        for s in fs.sites:
            if not PAIRS_RE.search(s.clause):
                bad(fs.rel, s.line, "partner",
                    "[%s] %s: does not say what it pairs with" % (s.tag, s.kind))

    # Report.
    viol = sorted(set(viol), key=lambda v: (v[0], v[1], v[3]))
    for rel, line, cat, msg in viol:
        print("%s:%d: %s" % (rel, line, msg), file=out)
    per = {}
    for rel, line, cat, msg in viol:
        per.setdefault(rel, {}).setdefault(cat, 0)
        per[rel][cat] += 1
    if viol:
        print("", file=out)
        print("violations per file:", file=out)
        for rel in sorted(per):
            cats = per[rel]
            print("  %-28s %4d  (%s)" % (rel, sum(cats.values()),
                                         ", ".join("%s %d" % (c, cats[c]) for c in
                                                   ("untagged", "relaxed", "unpaired", "partner")
                                                   if c in cats)), file=out)
    nsites = sum(len(v) for v in sites.values())
    print("check_order: %d files, %d atomic accesses, %d tags at %d sites; %s" %
          (len(scans), naccess, len(sites), nsites,
           "%d violation%s" % (len(viol), "" if len(viol) == 1 else "s") if viol
           else "no violation"), file=out)
    return 1 if viol else 0


def _kind_hint(a):
    if a.name.endswith("_fence"):
        return "mb"
    o = set(a.orders)
    if "memory_order_seq_cst" in o:
        return "sc"
    if "memory_order_acq_rel" in o or ("memory_order_acquire" in o and "memory_order_release" in o):
        return "acq_rel"
    if "memory_order_release" in o:
        return "rel"
    return "acq"


def _reference(text, pos):
    """The words after 'pairs with', to the end of that clause."""
    end = len(text)
    for stop in (";", ". "):
        k = text.find(stop, pos)
        if 0 <= k < end:
            end = k
    nxt = SITE_RE.search(text, pos)
    if nxt and nxt.start() < end:
        end = nxt.start()
    if text.endswith(".", 0, end):
        end -= 1
    return text[pos:end].strip()


def _after_in(ref):
    m = re.search(r"\bin\b", ref)
    return ref[m.end():] if m else ""


def _short(s, n=60):
    return s if len(s) <= n else s[:n - 3] + "..."


# ---------------------------------------------------------------------------
# self-test

_GOOD_C = r'''
#include <stdatomic.h>
#include "t.h"

static _Atomic unsigned head, len, nwait, flag;
static _Atomic unsigned long stat;
static unsigned data;

static inline void up__count(_Atomic unsigned long *c, unsigned long n)
{
	/* relaxed: a statistic with a single writer. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

void up_publish(unsigned v)
{
	data = v;
	/* [t-head] rel: data before head; pairs with [t-head] acq in up_consume(). */
	atomic_store_explicit(&head, 1, memory_order_release);
	/* Relaxed: counters nobody orders anything by; a run of three. */
	atomic_fetch_add_explicit(&len, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&len, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&len, 1, memory_order_relaxed);
	up__count(&stat, atomic_load_explicit(&len, memory_order_relaxed));
	const char *s = "atomic_load_explicit(&head, memory_order_acquire) in a string";
	(void)s;
}

unsigned up_consume(void)
{
	unsigned exp = 0;

	/* [t-head] acq: data after head; pairs with [t-head] rel in up_publish(). */
	if (atomic_load_explicit(&head, memory_order_acquire))
		return data;
	/* [t-flag] acq_rel: takes the flag;
	 * pairs with [t-flag] acq_rel in up_sleep(). */
	if (atomic_compare_exchange_strong_explicit(&flag, &exp, 1,
						    memory_order_acq_rel,
						    memory_order_relaxed))
		return 1;
	/* [u-sq-tail] rel: the SQEs before the tail; pairs with the kernel's
	 * smp_load_acquire() in io_sqring_entries(). */
	atomic_store_explicit(&nwait, 2, memory_order_release);
	return 0;
}
'''

_GOOD_H = r'''
#include <stdatomic.h>
extern _Atomic unsigned nwait2, seq2;
static inline int up_sleep(void)
{
	unsigned e = 0;

	/* [t-flag] acq_rel: takes the flag; pairs with [t-flag] acq_rel in up_consume(). */
	atomic_compare_exchange_strong_explicit(&seq2, &e, 1, memory_order_acq_rel,
						memory_order_acquire);
	atomic_fetch_add_explicit(&nwait2, 1, memory_order_seq_cst); /* [t-dekker] sc: announce; pairs with [t-dekker] sc in up_waker(). */
	/* [t-fence] mb: orders the nwait store before the flag load;
	 * pairs with [t-fence] mb in up_waker(). */
	atomic_thread_fence(memory_order_seq_cst);
	return 0;
}

static inline void up_waker(void)
{
	/* [t-dekker] sc: progress; pairs with [t-dekker] sc in up_sleep(). */
	atomic_store_explicit(&seq2, 2, memory_order_seq_cst);
	/* [t-fence] mb: orders the progress store before the nwait load;
	 * pairs with [t-fence] mb in up_sleep(). */
	atomic_thread_fence(memory_order_seq_cst);
}
'''

_MUTANTS = [
    # (name, file, old, new, message expected)
    ("missing tag", "core/t.c",
     "\t/* [t-head] rel: data before head; pairs with [t-head] acq in up_consume(). */\n", "",
     "has no [tag] comment"),
    ("wrong function", "core/t.c",
     "pairs with [t-head] rel in up_publish()", "pairs with [t-head] rel in up_sleep()",
     "up_sleep() has no [t-head] site"),
    ("no such function", "core/t.c",
     "pairs with [t-head] rel in up_publish()", "pairs with [t-head] rel in up_publsh()",
     "no function up_publsh()"),
    ("unpaired tag", "core/t.h",
     "/* [t-dekker] sc: progress; pairs with [t-dekker] sc in up_sleep(). */",
     "/* [t-lone] sc: progress; pairs with [t-dekker] sc in up_sleep(). */",
     "[t-lone] has one site"),
    ("release only", "core/t.c",
     "/* [t-head] acq: data after head;", "/* [t-head] rel: data after head;",
     "no acquire half"),
    ("relaxed without reason", "core/t.c",
     "\t/* Relaxed: counters nobody orders anything by; a run of three. */\n", "",
     "has no 'relaxed:' comment"),
    ("relaxed, empty reason", "core/t.c",
     "/* Relaxed: counters nobody orders anything by; a run of three. */",
     "/* relaxed: */", "has no 'relaxed:' comment"),
    ("no partner named", "core/t.h",
     "/* [t-dekker] sc: progress; pairs with [t-dekker] sc in up_sleep(). */",
     "/* [t-dekker] sc: progress. */", "does not say what it pairs with"),
]


def _write(base, files):
    for rel, text in files.items():
        p = os.path.join(base, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)


def self_test():
    me = os.path.abspath(__file__)
    good = {"core/t.c": _GOOD_C, "core/t.h": _GOOD_H}
    cases = [("good tree", good, 0, "no violation")]
    for name, rel, old, new, msg in _MUTANTS:
        if old not in good[rel]:
            print("self-test %-24s BROKEN: text to mutate not found" % name)
            return 1
        files = dict(good)
        files[rel] = good[rel].replace(old, new, 1)
        cases.append(("mutant: " + name, files, 1, msg))
    failures = 0
    for name, files, want, msg in cases:
        with tempfile.TemporaryDirectory(prefix="check_order.") as tmp:
            _write(tmp, files)
            p = subprocess.run([sys.executable, me, tmp, "core"], capture_output=True,
                               text=True)
            ok = p.returncode == want and msg in p.stdout
            print("self-test %-32s %s (exit %d)" % (name, "ok" if ok else "FAILED",
                                                   p.returncode))
            if not ok:
                failures += 1
                print("  wanted exit %d and %r; got:" % (want, msg))
                sys.stdout.write("".join("  | " + ln + "\n" for ln in
                                         (p.stdout + p.stderr).splitlines()))
    print("check_order self-test: %s" % ("passed" if not failures else "%d FAILED" % failures))
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 3 or argv[1].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    return run(argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
