#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/man_header_check.py INCLUDEDIR MANDIR VERSION - the manual pages
follow the public headers:
  - every public function, macro, enum constant, typedef and struct field in
    INCLUDEDIR/softlimit/*.h (and version.h.in) appears in some page of
    MANDIR; a struct field must appear in a page that names its struct;
  - every public function's prototype in a page's SYNOPSIS matches the
    header's, const and all (whitespace aside);
  - every page's footer (.TH) carries the full current VERSION, e.g.
    "softlimit 0.2.2", not "0.2".
Headers whose library was not built are skipped by name with --skip.
"""
import os
import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def public_names(path):
    """(kind, name, struct) for each public name the header declares."""
    src = strip_comments(open(path, encoding="utf-8").read())
    out = []
    for m in re.finditer(r"\bSL_API\b[^;(]*?\b(sl_\w+)\s*\(", src):
        out.append(("function", m.group(1), None))
    for m in re.finditer(r"^\s*#\s*define\s+(SL_\w+)", src, flags=re.M):
        if m.group(1) != "SL_API":
            out.append(("macro", m.group(1), None))
    for m in re.finditer(r"\benum\b\s*(\w*)\s*\{(.*?)\}", src, flags=re.S):
        for c in re.finditer(r"\b(SL_\w+)\s*(=|,|$)", m.group(2), flags=re.M):
            out.append(("constant", c.group(1), None))
    for m in re.finditer(r"\btypedef\b[^;]*?\(\s*\*\s*(sl_\w+)\s*\)", src):
        out.append(("typedef", m.group(1), None))
    for m in re.finditer(r"\bstruct\s+(sl_\w+)\s*\{(.*?)\}\s*;", src, flags=re.S):
        body = m.group(2)
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
            if fp:
                names = [fp.group(1)]
            else:
                names = [re.sub(r"\[.*?\]", "", n).strip().split()[-1].lstrip("*")
                         for n in decl.split(",")]
            for n in names:
                out.append(("field", n, m.group(1)))
    return out


def prototypes(path):
    """name -> the header's prototype, whitespace removed."""
    src = strip_comments(open(path, encoding="utf-8").read())
    out = {}
    for m in re.finditer(r"\bSL_API\b([^;{]*?\b(sl_\w+)\s*\([^;{]*\))\s*;", src, flags=re.S):
        out[m.group(2)] = re.sub(r"\s+", "", m.group(1))
    return out


def groff_tokens(line):
    """The text a .B/.BI/.IB/.BR line shows, its quoted and bare arguments joined."""
    line = re.sub(r"^\.(B|I|BI|IB|BR|RB|IR|RI)\s+", "", line)
    toks = re.findall(r'"((?:[^"]|"")*)"|(\S+)', line)
    text = "".join(a if a or not b else b for a, b in toks)
    return text.replace("\\-", "-").replace("\\(dq", '"')


def synopses(text):
    """Each prototype-like statement of a page's SYNOPSIS, whitespace removed."""
    m = re.search(r"^\.SH SYNOPSIS\n(.*?)^\.SH ", text, flags=re.S | re.M)
    if not m:
        return []
    stmts, cur = [], ""
    for line in m.group(1).splitlines():
        if not re.match(r"^\.(B|I|BI|IB|BR|RB|IR|RI)\s", line):
            cur = ""
            continue
        text = groff_tokens(line)
        if text.lstrip().startswith("#"):
            cur = ""
            continue
        cur += text
        if cur.rstrip().endswith(";") or cur.rstrip().endswith("}"):
            stmts.append(re.sub(r"\s+", "", cur).rstrip(";"))
            cur = ""
    return stmts


def main():
    args = sys.argv[1:]
    skip = set()
    while args and args[0] == "--skip":
        skip.add(args[1])
        args = args[2:]
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    incdir, mandir, version = args
    hdrdir = os.path.join(incdir, "softlimit")
    headers = sorted(f for f in os.listdir(hdrdir)
                     if (f.endswith(".h") or f.endswith(".h.in")) and f not in skip)
    pages = {}
    for f in sorted(os.listdir(mandir)):
        if re.search(r"\.[137]$", f):
            pages[f] = open(os.path.join(mandir, f), encoding="utf-8").read()
    # Words as a page shows them: groff escapes removed.
    words = {f: set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t.replace("\\-", "-").replace("\\fB", " ")
                                .replace("\\fI", " ").replace("\\fR", " ").replace("\\fP", " ")))
             for f, t in pages.items()}
    fails = []
    checked = 0
    for h in headers:
        for kind, name, struct in public_names(os.path.join(hdrdir, h)):
            checked += 1
            if kind == "field":
                where = [f for f in pages if struct in words[f]]
                if not where:
                    fails.append(f"{h}: struct {struct} appears in no page")
                elif not any(name in words[f] for f in where):
                    fails.append(f"{h}: field {struct}.{name} appears in no page that names {struct}"
                                 f" ({', '.join(where)})")
            elif not any(name in words[f] for f in pages):
                fails.append(f"{h}: {kind} {name} appears in no page")
    for h in headers:
        for name, proto in prototypes(os.path.join(hdrdir, h)).items():
            shown = [st for f, t in pages.items() for st in synopses(t)
                     if re.search(r"\b" + name + r"\(", st)]
            if shown and proto not in shown:
                fails.append(f"{h}: {name}'s SYNOPSIS shows {shown[0]!r}, the header {proto!r}")
    for f, t in pages.items():
        m = re.search(r'^\.TH\s+\S+\s+\S+\s+\S+\s+"softlimit ([^"]*)"', t, flags=re.M)
        if not m:
            fails.append(f"{f}: its .TH line carries no \"softlimit VERSION\"")
        elif m.group(1) != version:
            fails.append(f"{f}: footer says softlimit {m.group(1)}, the project is {version}")
    for line in fails:
        print("man_header_check: FAIL:", line)
    if fails:
        return 1
    print(f"man_header_check: {checked} public names of {len(headers)} headers, each in a page;"
          f" {len(pages)} footers at {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
