#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_calls.py - which .c file calls which, and no call cycle between files.

Usage:
    python3 .ci/check_calls.py ROOT DIR...     e.g.  python3 .ci/check_calls.py . core uring
    python3 .ci/check_calls.py --self-test

For every .c file under ROOT/DIR... it finds the non-static functions named
up_* or up__* that the file defines, and the identifiers the file uses
(comments and string literals stripped first): calls `name(` as well as
functions taken as values (`.wait = up__foo`, `f = up__foo;`). A use of a
name that another file defines non-static is an edge from the user to the
definer. A static function shadows a non-static one of the same name in its
own file. Static inline functions of the headers a file includes (quoted
includes, followed recursively) count as part of the file when it uses them,
so a call made from a header's inline fast path is charged to its user.

It prints every edge as
    core/a.c -> core/b.c: f, g
then, for every strongly connected component of more than one file,
    cycle: core/a.c core/b.c ...
and exits 1 if there is any, else prints a one-line summary and exits 0.

The C scanner here (lex(), find_functions()) is also used by
.ci/check_order.py. It is a scanner, not a parser: it knows comments,
strings, character constants, preprocessor lines, brace and parenthesis
nesting, attributes, K&R-style definitions (return type on the line before,
parameter declarations before the body) and functions returning function
pointers; it does not expand macros.
"""

import os
import re
import subprocess
import sys
import tempfile

# ---------------------------------------------------------------------------
# the scanner

_PUNCT3 = ("...", "<<=", ">>=")
_PUNCT2 = ("->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
           "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##")
_ID_START = re.compile(r"[A-Za-z_]")
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUM = re.compile(r"[0-9](?:[0-9A-Za-z_.]|[eEpP][+-])*|\.[0-9][0-9A-Za-z_.]*")

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern
    float for goto if inline int long register restrict return short signed
    sizeof static struct switch typedef union unsigned void volatile while
    _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
    _Static_assert _Thread_local static_assert alignof __typeof__ typeof
    __inline __inline__ __restrict __restrict__ __volatile__ __extension__
""".split())

# Groups that may follow a declarator and are not part of it.
_ATTR_WORDS = frozenset(("__attribute__", "__attribute", "__declspec", "asm",
                         "__asm__", "__asm", "_Alignas", "__alignas"))


class Tok:
    __slots__ = ("kind", "val", "line", "off", "pp")

    def __init__(self, kind, val, line, off, pp):
        self.kind = kind  # 'id', 'num', 'str', 'chr', 'punct'
        self.val = val
        self.line = line
        self.off = off
        self.pp = pp      # None, or the directive name ('define', 'include', ...)

    def __repr__(self):
        return "Tok(%s %r @%d%s)" % (self.kind, self.val, self.line,
                                     " pp=" + self.pp if self.pp else "")


class Comment:
    __slots__ = ("text", "line", "end_line", "off", "end_off", "alone")

    def __init__(self, text, line, end_line, off, end_off):
        self.text = text
        self.line = line
        self.end_line = end_line
        self.off = off
        self.end_off = end_off
        self.alone = True  # no code token shares its first or last line

    def __repr__(self):
        return "Comment(%d-%d %r)" % (self.line, self.end_line, self.text[:40])


def lex(text):
    """Split C source into tokens and comments.

    Returns (tokens, comments). String and character literals become one
    token each (kind 'str'/'chr') whose value is the literal with its quotes;
    callers looking for identifiers never see their contents. Tokens of a
    preprocessor line carry the directive name in .pp.
    """
    toks = []
    comments = []
    i = 0
    n = len(text)
    line = 1
    line_start = True   # only blanks since the last newline
    pp = None           # directive of the current preprocessor line
    pp_expect_name = False
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            line_start = True
            pp = None
            pp_expect_name = False
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            # Line continuation: the logical line (and a directive) goes on.
            line += 1
            i += 2
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            body = text[i:j]
            comments.append(Comment(body, line, line + body.count("\n"), i, j))
            line += body.count("\n")
            i = j
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = i + 2
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            body = text[i:j]
            comments.append(Comment(body, line, line + body.count("\n"), i, j))
            line += body.count("\n")
            i = j
            continue
        if c == "#" and line_start:
            pp = ""
            pp_expect_name = True
            line_start = False
            toks.append(Tok("punct", "#", line, i, "#"))
            i += 1
            continue
        line_start = False
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    break  # unterminated: stop at the line's end
                j += 1
            j = min(j + 1, n)
            lit = text[i:j]
            toks.append(Tok("str" if c == '"' else "chr", lit, line, i, pp))
            line += lit.count("\n")
            i = j
            continue
        m = _ID.match(text, i) if _ID_START.match(c) else None
        if m:
            word = m.group(0)
            # String prefixes: L"x", u8"x", u'x' ...
            if m.end() < n and text[m.end()] in "\"'" and word in ("L", "u", "U", "u8"):
                i = m.end()
                continue
            if pp_expect_name:
                pp = word
                pp_expect_name = False
                # <...> after #include is a header name, not tokens.
                if word == "include":
                    k = m.end()
                    while k < n and text[k] in " \t":
                        k += 1
                    if k < n and text[k] == "<":
                        e = text.find(">", k)
                        e = text.find("\n", k) if e < 0 else e + 1
                        e = n if e < 0 else e
                        toks.append(Tok("id", word, line, i, pp))
                        toks.append(Tok("str", text[k:e], line, k, pp))
                        i = e
                        continue
            toks.append(Tok("id", word, line, i, pp))
            i = m.end()
            continue
        m = _NUM.match(text, i) if (c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit())) else None
        if m:
            toks.append(Tok("num", m.group(0), line, i, pp))
            i = m.end()
            continue
        pp_expect_name = False
        for p in _PUNCT3 + _PUNCT2:
            if text.startswith(p, i):
                toks.append(Tok("punct", p, line, i, pp))
                i += len(p)
                break
        else:
            toks.append(Tok("punct", c, line, i, pp))
            i += 1
    # Which comments share a line with code?
    code_lines = set(t.line for t in toks)
    for cm in comments:
        cm.alone = cm.line not in code_lines and cm.end_line not in code_lines
    return toks, comments


def code_tokens(toks):
    """The tokens outside preprocessor lines."""
    return [t for t in toks if t.pp is None]


def match_forward(toks, i):
    """Index of the bracket closing toks[i] ('(', '[' or '{'), or len-1."""
    opening = toks[i].val
    closing = {"(": ")", "[": "]", "{": "}"}[opening]
    depth = 0
    for j in range(i, len(toks)):
        v = toks[j].val
        if toks[j].kind != "punct":
            continue
        if v == opening:
            depth += 1
        elif v == closing:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def match_backward(toks, i):
    """Index of the bracket opening toks[i] (')' or ']'), or -1."""
    closing = toks[i].val
    opening = {")": "(", "]": "["}[closing]
    depth = 0
    for j in range(i, -1, -1):
        if toks[j].kind != "punct":
            continue
        v = toks[j].val
        if v == closing:
            depth += 1
        elif v == opening:
            depth -= 1
            if depth == 0:
                return j
    return -1


class Func:
    __slots__ = ("name", "static", "inline", "name_idx", "open_idx",
                 "close_idx", "line", "open_line", "close_line")

    def __repr__(self):
        return "Func(%s%s @%d-%d)" % ("static " if self.static else "",
                                      self.name, self.open_line, self.close_line)


def _skip_attrs_back(toks, j):
    """From toks[j] backwards, skip __attribute__((...)) and asm(...) groups
    (and bare attribute-like macros written in capitals after a ')')."""
    while j >= 0:
        t = toks[j]
        if t.kind == "punct" and t.val == ")":
            m = match_backward(toks, j)
            if m > 0 and toks[m - 1].kind == "id" and toks[m - 1].val in _ATTR_WORDS:
                j = m - 2
                continue
            return j
        if t.kind == "id" and t.val in ("const", "volatile", "__THROW", "noexcept"):
            j -= 1
            continue
        return j
    return j


def _knr_declarator_end(toks, j, lo):
    """toks[j] is the ';' before a body's '{': K&R parameter declarations?
    Returns the index of the declarator's ')' or -1."""
    k = j
    while k > lo:
        t = toks[k]
        if t.kind == "punct" and t.val in ("{", "}", "="):
            return -1
        if t.kind == "punct" and t.val == ")" and k + 1 <= j:
            nxt = toks[k + 1]
            if nxt.kind == "id" and nxt.val not in _ATTR_WORDS:
                return k
        k -= 1
    return -1


def find_functions(toks):
    """Function definitions among @toks (code tokens, no preprocessor lines):
    a list of Func with the body's bracket indices into @toks."""
    funcs = []
    depth = 0
    i = 0
    last_top = -1  # index of the last top-level ';' or '}' (declaration boundary)
    while i < len(toks):
        t = toks[i]
        if t.kind == "punct" and t.val == "{" and depth == 0:
            f = _function_at(toks, i, last_top)
            close = match_forward(toks, i)
            if f is not None:
                f.open_idx = i
                f.close_idx = close
                f.open_line = toks[i].line
                f.close_line = toks[close].line
                funcs.append(f)
                i = close + 1
                last_top = close
                continue
            # struct/union/enum body or an initializer: step over it whole.
            i = close + 1
            continue
        if t.kind == "punct":
            if t.val == "{":
                depth += 1
            elif t.val == "}":
                depth -= 1
                if depth <= 0:
                    depth = 0
                    last_top = i
            elif t.val == ";" and depth == 0:
                last_top = i
        i += 1
    return funcs


def _function_at(toks, brace, last_top):
    j = _skip_attrs_back(toks, brace - 1)
    if j <= last_top:
        return None
    if toks[j].kind == "punct" and toks[j].val == ";":
        j = _knr_declarator_end(toks, j, last_top)
        if j < 0:
            return None
        j = _skip_attrs_back(toks, j)
    if not (toks[j].kind == "punct" and toks[j].val == ")"):
        return None
    m = match_backward(toks, j)
    if m <= last_top or m <= 0:
        return None
    before = toks[m - 1]
    name_idx = None
    if before.kind == "id" and before.val not in C_KEYWORDS and before.val not in _ATTR_WORDS:
        name_idx = m - 1
    elif before.kind == "punct" and before.val == ")":
        # A function returning a function pointer: T (*name(params))(args).
        m2 = match_backward(toks, m - 1)
        for k in range(m2 + 1, m - 1):
            if (toks[k].kind == "id" and toks[k].val not in C_KEYWORDS and
                    toks[k + 1].kind == "punct" and toks[k + 1].val == "("):
                name_idx = k
                break
    if name_idx is None or name_idx <= last_top:
        return None
    # The declaration specifiers: back to the previous top-level boundary.
    spec = [toks[k].val for k in range(last_top + 1, name_idx) if toks[k].kind == "id"]
    # 'extern "C" {' in headers is not a function; neither is an initializer.
    for k in range(last_top + 1, name_idx):
        if toks[k].kind == "punct" and toks[k].val == "=":
            return None
    f = Func()
    f.name = toks[name_idx].val
    f.static = "static" in spec
    f.inline = any(s in ("inline", "__inline", "__inline__") for s in spec)
    f.name_idx = name_idx
    f.line = toks[name_idx].line
    return f


# ---------------------------------------------------------------------------
# the call graph

def is_up_name(name):
    return name.startswith("up_")


def _uses(toks, funcs):
    """Identifiers used as calls or values: everything in function bodies and
    initializers, and in #define bodies; not declarators, member names or
    types of top-level declarations."""
    inside = set()
    for f in funcs:
        inside.update(range(f.open_idx, f.close_idx + 1))
    uses = {}
    depth = 0
    paren = 0
    after_eq = False
    for i, t in enumerate(toks):
        if t.kind == "punct":
            if i in inside:
                continue
            if t.val == "{":
                depth += 1
            elif t.val == "}":
                depth = max(0, depth - 1)
            elif t.val == "(":
                paren += 1
            elif t.val == ")":
                paren = max(0, paren - 1)
            elif t.val == "=" and paren == 0:
                after_eq = True
            elif t.val == ";" and depth == 0:
                after_eq = False
                paren = 0
            continue
        if t.kind != "id" or not is_up_name(t.val):
            continue
        prev = toks[i - 1] if i > 0 else None
        if prev is not None and prev.kind == "punct" and prev.val in (".", "->"):
            continue  # a member, not a function
        if i in inside or after_eq or depth > 0:
            uses.setdefault(t.val, t.line)
    return uses


def _pp_define_uses(toks):
    uses = {}
    for i, t in enumerate(toks):
        if t.pp == "define" and t.kind == "id" and is_up_name(t.val):
            prev = toks[i - 1]
            if prev.val == "define":
                continue  # the macro's own name
            if prev.kind == "punct" and prev.val in (".", "->"):
                continue
            uses.setdefault(t.val, t.line)
    return uses


class Unit:
    """One scanned file."""

    def __init__(self, root, rel):
        self.rel = rel
        self.path = os.path.join(root, rel)
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            self.text = fh.read()
        self.toks, self.comments = lex(self.text)
        self.code = code_tokens(self.toks)
        self.funcs = find_functions(self.code)
        self.includes = []
        for k, t in enumerate(self.toks):
            if t.pp == "include" and t.kind == "str" and t.val.startswith('"'):
                self.includes.append(t.val.strip('"'))
        self.uses = _uses(self.code, self.funcs)
        self.uses.update({k: v for k, v in _pp_define_uses(self.toks).items()
                          if k not in self.uses})

    def func_uses(self, f):
        """Identifiers used in the body of @f."""
        out = set()
        for k in range(f.open_idx, f.close_idx + 1):
            t = self.code[k]
            if t.kind == "id" and is_up_name(t.val):
                prev = self.code[k - 1]
                if prev.kind == "punct" and prev.val in (".", "->"):
                    continue
                out.add(t.val)
        return out


def collect(root, dirs, exts):
    out = []
    for d in dirs:
        base = os.path.join(root, d)
        if os.path.isfile(base):
            if base.endswith(exts):
                out.append(os.path.relpath(base, root))
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith(exts):
                    out.append(os.path.relpath(os.path.join(dirpath, fn), root))
    seen = set()
    res = []
    for r in out:
        r = r.replace(os.sep, "/")
        if r not in seen:
            seen.add(r)
            res.append(r)
    return res


def _resolve_include(root, from_rel, name, search):
    cands = [os.path.join(os.path.dirname(from_rel), name)]
    cands += [os.path.join(d, name) for d in search]
    for c in cands:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c.replace(os.sep, "/")
    return None


def build_graph(root, dirs):
    """Returns (files, edges, multi) with edges {(src, dst): {name: via}}
    and multi {name: files} for names defined non-static in several files
    (builds that pick one of them: each counts)."""
    c_files = collect(root, dirs, (".c",))
    units = {rel: Unit(root, rel) for rel in c_files}
    search = list(dirs) + ["include", "."]
    headers = {}

    def header(rel):
        if rel not in headers:
            headers[rel] = Unit(root, rel)
        return headers[rel]

    # Non-static definitions, by name.
    defs = {}
    for rel, u in units.items():
        for f in u.funcs:
            if not f.static and is_up_name(f.name):
                defs.setdefault(f.name, set()).add(rel)

    edges = {}
    for rel, u in units.items():
        statics = set(f.name for f in u.funcs if f.static)
        own = set(f.name for f in u.funcs)
        # Inline functions of the headers this file includes, recursively.
        inl = {}
        todo = [(rel, i) for i in u.includes]
        seen = set()
        while todo:
            frm, name = todo.pop()
            h = _resolve_include(root, frm, name, search)
            if h is None or h in seen or h.endswith(".c"):
                continue
            seen.add(h)
            hu = header(h)
            for f in hu.funcs:
                if f.name not in own:
                    inl.setdefault(f.name, hu.func_uses(f))
            todo.extend((h, i) for i in hu.includes)
        # Uses, expanding header inline functions the file uses.
        via = {}
        work = [(name, None) for name in u.uses]
        done = set()
        while work:
            name, through = work.pop()
            if (name, through) in done:
                continue
            done.add((name, through))
            if name in statics:
                continue
            if name in inl and name not in defs:
                for sub in inl[name]:
                    if sub != name:
                        work.append((sub, through or name))
                continue
            for d in defs.get(name, ()):
                if d != rel:
                    via.setdefault(d, {})
                    if name not in via[d] or through is None:
                        via[d][name] = through
        for d, names in via.items():
            edges[(rel, d)] = names
    multi = {k: sorted(v) for k, v in defs.items() if len(v) > 1}
    return c_files, edges, multi


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    adj = {n: [] for n in nodes}
    for (a, b) in edges:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, [])
    for a in adj:
        adj[a].sort()
    index = {}
    low = {}
    on = set()
    stack = []
    out = []
    counter = [0]
    for start in sorted(adj):
        if start in index:
            continue
        work = [(start, 0)]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, pi = work[-1]
            if pi < len(adj[v]):
                work[-1] = (v, pi + 1)
                w = adj[v][pi]
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def run(root, dirs, out=sys.stdout):
    for d in dirs:
        if not os.path.exists(os.path.join(root, d)):
            print("check_calls: %s: no such directory under %s" % (d, root), file=sys.stderr)
            return 2
    files, edges, multi = build_graph(root, dirs)
    for (a, b) in sorted(edges):
        names = edges[(a, b)]
        parts = []
        for n in sorted(names):
            parts.append(n if names[n] is None else "%s (via %s)" % (n, names[n]))
        print("%s -> %s: %s" % (a, b, ", ".join(parts)), file=out)
    for name in sorted(multi):
        print("note: %s is defined in %s (one per build?); each other definer gets the edge" %
              (name, ", ".join(multi[name])), file=out)
    cycles = [c for c in sccs(files, edges) if len(c) > 1]
    cycles.sort()
    for c in cycles:
        print("cycle: " + " ".join(c), file=out)
        members = set(c)
        for (a, b) in sorted(edges):
            if a in members and b in members:
                print("  in cycle: %s -> %s: %s" % (a, b, ", ".join(sorted(edges[(a, b)]))),
                      file=out)
    if cycles:
        print("check_calls: %d files, %d edges, %d call cycle%s between files (%s)" %
              (len(files), len(edges), len(cycles), "" if len(cycles) == 1 else "s",
               "; ".join(" ".join(c) for c in cycles)), file=out)
        return 1
    print("check_calls: %d files, %d edges, no call cycle between files" %
          (len(files), len(edges)), file=out)
    return 0


# ---------------------------------------------------------------------------
# self-test

_ST_A = r'''
/* a.c: the tricky shapes of a definition. */
#include "a.h"

static int up__helper(void);

int
up_a(int x)           /* return type on the line before */
{
	return up_b(x) + up__helper();
}

static inline int up__helper(void) { return 1; }

__attribute__((noinline)) long up_a_attr(void)
{
	return 0;
}

int up_a_knr(x)
	int x;
{
	return x;
}

int (*up_a_getter(void))(int)    /* returns a function pointer */
{
	return up_a;
}
'''

_ST_A_H = r'''
#ifndef A_H
#define A_H
int up_a(int x);
int up_b(int x);
int up_b2(void);
/* An inline fast path: its call is charged to the file that uses it. */
static inline int up__fast(void) { return up_b2(); }
#endif
'''

_ST_B_ACYCLIC = r'''
#include "a.h"
static int up_a_attr(void) { return 2; }   /* a static shadow: no edge to a.c */
struct ops { int (*f)(int); };
static const struct ops o = { .f = up_b };  /* its own function as a value */
/* up_a(1) in a comment is not a call, */
static const char *s = "nor is up_a_knr(2) in a string";
int up_b(int x) { return x + up_a_attr(); }
int up_b2(void) { return 0; }
'''

_ST_B_CYCLIC = r'''
#include "a.h"
struct ops { int (*f)(int); };
/* b takes a.c's function as a value: that is a use, and closes a cycle. */
static const struct ops o = { .f = up_a };
int up_b(int x) { return x; }
int up_b2(void) { return 0; }
'''

_ST_C_INLINE = r'''
#include "a.h"
int up_c(void) { return up__fast(); }
'''


def _write_tree(base, files):
    for rel, text in files.items():
        p = os.path.join(base, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)


def self_test():
    me = os.path.abspath(__file__)
    failures = 0
    cases = [
        ("acyclic", {"core/a.c": _ST_A, "core/a.h": _ST_A_H, "core/b.c": _ST_B_ACYCLIC,
                     "core/c.c": _ST_C_INLINE}, 0,
         ["core/a.c -> core/b.c: up_b", "core/c.c -> core/b.c: up_b2 (via up__fast)",
          "no call cycle"],
         ["core/b.c -> core/a.c", "cycle:"]),
        ("cycle", {"core/a.c": _ST_A, "core/a.h": _ST_A_H, "core/b.c": _ST_B_CYCLIC}, 1,
         ["core/a.c -> core/b.c: up_b", "core/b.c -> core/a.c: up_a",
          "cycle: core/a.c core/b.c"],
         []),
    ]
    for name, files, want_rc, must, must_not in cases:
        with tempfile.TemporaryDirectory(prefix="check_calls.") as tmp:
            _write_tree(tmp, files)
            p = subprocess.run([sys.executable, me, tmp, "core"], capture_output=True,
                               text=True)
            ok = p.returncode == want_rc
            why = [] if ok else ["exit %d, want %d" % (p.returncode, want_rc)]
            for s in must:
                if s not in p.stdout:
                    ok = False
                    why.append("missing %r" % s)
            for s in must_not:
                if s in p.stdout:
                    ok = False
                    why.append("unexpected %r" % s)
            print("self-test %-8s %s (exit %d)%s" % (name, "ok" if ok else "FAILED",
                                                    p.returncode,
                                                    "" if ok else ": " + "; ".join(why)))
            if not ok:
                failures += 1
                sys.stdout.write(p.stdout + p.stderr)
    print("check_calls self-test: %s" % ("passed" if not failures else "%d FAILED" % failures))
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
