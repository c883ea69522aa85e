#!/usr/bin/env python3
"""Lists C++ function definitions by length in lines (signature's first line to closing brace).

Usage: scripts/function_lengths.py [--min N] [--summary] [DIR...]   (default: every *.cc of the
repository outside tests/, build*/ and third_party/).  A brace counter, not a parser: comments,
string and character literals are blanked first; a '{' opened outside any function whose text since
the previous ';', '{' or '}' holds a '(' and no class/struct/enum/namespace/'=' starts a function.
Lambdas and local classes count toward the function that holds them.
"""
import argparse
import os
import re
import sys

SKIP_DIRS = {"tests", "build", "third_party", ".git", "node_modules"}


def blank(text):
    """Replaces comments and literals by spaces, newlines kept (line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i-1].isalnum() or text[i-1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                j = n if end < 0 else end + len(m.group(1)) + 2
                out.append('""' + re.sub(r"[^\n]", " ", text[i+2:j])); i = j
            else:
                out.append(c); i += 1
        elif c in "\"'":
            if c == "'" and i > 0 and text[i-1].isalnum() and i + 1 < n and text[i+1].isalnum():
                out.append(" "); i += 1  # digit separator 1'000
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else "")); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    res = []
    stack = []  # per open brace: True if it is a function body (or inside one)
    seg_start = 0
    for i, c in enumerate(text):
        if c == "{":
            in_fn = any(stack)
            starts_fn = False
            if not in_fn:
                seg = text[seg_start:i]
                head = re.sub(r"\s+", " ", seg).strip()
                if "(" in head and not re.search(r"\b(class|struct|union|enum|namespace)\b", head.split("(")[0]) \
                        and not re.search(r"=\s*$", head) and not head.startswith("extern"):
                    starts_fn = True
                    # the first non-blank line of the signature, templates included
                    k = seg_start
                    while k < i and text[k].isspace():
                        k += 1
                    res.append([head.split("(")[0].split()[-1] if head.split("(")[0].split() else "?",
                                text.count("\n", 0, k) + 1, None])
            stack.append(starts_fn or in_fn)
            if starts_fn:
                stack[-1] = "fn"
            seg_start = i + 1
        elif c == "}":
            if stack:
                top = stack.pop()
                if top == "fn":
                    res[-1][2] = text.count("\n", 0, i) + 1
            if not any(stack):
                seg_start = i + 1
        elif c == ";" and not any(stack):
            seg_start = i + 1
    return [(name, a, b, b - a + 1) for name, a, b in res if b]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--min", type=int, default=100)
    ap.add_argument("--summary", action="store_true", help="only the counts over 100 and over 150 lines")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = args.dirs or [root]
    rows = []
    for d in dirs:
        for dp, dn, fn in os.walk(d):
            dn[:] = sorted(x for x in dn if x not in SKIP_DIRS and not x.startswith("build"))
            for f in sorted(fn):
                if f.endswith(".cc"):
                    p = os.path.join(dp, f)
                    for name, a, b, length in functions(p):
                        rows.append((length, os.path.relpath(p, root), a, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    if not args.summary:
        for length, p, a, name in rows:
            if length > args.min:
                print(f"{length:5d}  {p}:{a}  {name}")
    print(f"functions over 100 lines: {sum(r[0] > 100 for r in rows)}; over 150: {sum(r[0] > 150 for r in rows)}")


if __name__ == "__main__":
    sys.exit(main())
