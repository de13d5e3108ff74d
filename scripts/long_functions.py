#!/usr/bin/env python3
"""long_functions.py [LIMIT]: every function body outside tests/ and build*/ longer than LIMIT
lines (default 100), longest first, as `lines path name`. A rough C++ reader (braces outside
strings, characters and // comments; a body is a '{' at namespace depth whose last few lines hold
a '('): enough to keep docs/ARCHITECTURE.md's "Function length" list honest."""
import glob
import os
import re
import sys


def code_of(line):
    out, i, quote = [], 0, None
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif line.startswith("//", i):
            break
        else:
            out.append(c)
        i += 1
    return "".join(out)


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = []
    for path in sorted(glob.glob(os.path.join(root, "**", "*.*"), recursive=True)):
        rel = os.path.relpath(path, root)
        if not rel.endswith((".cpp", ".hpp", ".cu", ".cuh")) or rel.startswith(("tests", "build")):
            continue
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        depth, start, scopes = 0, None, []
        for i, line in enumerate(lines):
            code = code_of(line)
            head = "".join(code_of(x) for x in lines[max(0, i - 4):i + 1])
            if start is None and depth == len(scopes) and code.rstrip().endswith("{") and "(" in head and \
                    not re.match(r"\s*(namespace|struct|class|enum|union|extern)\b", code):
                start, start_depth = i, depth
            if re.match(r"\s*(namespace\b.*|extern \"C\"\s*)\{", line):
                scopes.append(depth)
            depth += code.count("{") - code.count("}")
            if scopes and depth <= scopes[-1] and code.strip().startswith("}"):
                scopes.pop()
            if start is not None and depth == start_depth:
                if i - start + 1 > limit:
                    names = re.findall(r"([A-Za-z_][A-Za-z0-9_:]*)\s*\(", "".join(code_of(x) for x in lines[max(0, start - 3):start + 1]))
                    found.append((i - start + 1, rel, names[-1] if names else "?"))
                start = None
    for n, rel, name in sorted(found, reverse=True):
        print(n, rel, name)


if __name__ == "__main__":
    main()
