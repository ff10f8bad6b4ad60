#!/usr/bin/env python3
"""The house's figures (docs/develop.md, "The house in figures"), for the checkout at argv[1]
(default: .): python3 tests/tools/house-figures.py [DIR]

- build/'s share: lines of code of src/build.rs and src/build/ over all of src/ (a line of code
  is non-blank, not a comment, outside #[cfg(test)] items, as tests/suite/docs.rs counts them);
- files over 400 lines of code (Rust and JavaScript), functions over 80 lines;
- arrows up between rooms (tree::layout and data::data_path nodes of their own) (the top-level modules of src/): a room naming one the house puts above
  it, which reads import -> data -> build -> tree <- serve, publish, hosts over the vocabulary
  (config, paging, json, ...); and circles of rooms naming each other;
- public items: `pub` (not pub(crate) or pub(super)) items and fields outside tests.
Standard library only."""
import os, re, sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
SRC = os.path.join(ROOT, "src")

def strip_tests(text):
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]":
            j, depth, opened = i + 1, 0, False
            while j < len(lines):
                line = re.sub(r"b?'(?:\\.|[^'\\])'|\"(?:\\.|[^\"\\])*\"", "", lines[j])  # literals
                depth += line.count("{") - line.count("}")
                opened = opened or "{" in line
                if (opened and depth <= 0) or (not opened and line.rstrip().endswith(";")):
                    break
                j += 1
            i = j + 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)

def code_lines(text):
    return [l for l in text.split("\n") if l.strip() and not l.strip().startswith("//")]

def rust_files():
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                yield os.path.relpath(p, SRC), strip_tests(open(p).read())

def js_files():
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith((".js", ".mjs")):
                p = os.path.join(d, f)
                yield os.path.relpath(p, SRC), open(p).read()

rust = dict(rust_files())
js = dict(js_files())
room = lambda rel: rel.split("/")[0].removesuffix(".rs")
# the grammars, the paths of the tree and of the data folder, are vocabulary every floor uses:
# nodes of their own in the graph of rooms
GRAMMARS = {"tree/layout.rs": "tree::layout", "data/data_path.rs": "data::data_path"}
node = lambda rel: GRAMMARS.get(rel, room(rel))

total = sum(len(code_lines(t)) for t in rust.values())
build = sum(len(code_lines(t)) for r, t in rust.items() if room(r) == "build")
print(f"build/ lines of code: {build} of {total} ({100 * build / total:.1f}%)")

long_rs = sorted((len(code_lines(t)), r) for r, t in rust.items() if len(code_lines(t)) > 400)
long_js = sorted((len(code_lines(t)), r) for r, t in js.items() if len(code_lines(t)) > 400)
print(f"files over 400 lines of code: Rust {len(long_rs)} {long_rs}; JavaScript {len(long_js)} {long_js}")

fn_re = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))? )?(?:const )?(?:async )?(?:unsafe )?fn (\w+)")
def long_functions(files, start):
    """The functions of `files` longer than 80 lines, from the line `start` matches (indent,
    name) to the closing brace at its indentation."""
    found = []
    for r, t in files.items():
        lines = t.split("\n")
        for i, line in enumerate(lines):
            m = start.match(line)
            if not m or line.rstrip().endswith(";"):
                continue
            closing = m.group(1) + "}"
            end = next((j for j in range(i, len(lines)) if lines[j] == closing), None)
            if end is not None and end - i + 1 > 80:
                found.append((end - i + 1, f"{r}:{m.group(2)}"))
    return found

js_fn = re.compile(r"^(\s*)(?:export )?(?:async )?function\*? ?(\w+)")
long_fn = long_functions(rust, fn_re) + long_functions(js, js_fn)
print(f"functions over 80 lines: {len(long_fn)} {sorted(long_fn, reverse=True)}")

# rooms: the top-level modules; an arrow is a room naming another (crate::x, use crate::{x, ..})
rooms = {node(r) for r in rust} - {"lib", "main"}
arrows = {}
for r, t in rust.items():
    a = node(r)
    t = t.replace("super::layout", "crate::tree::layout").replace("super::data_path", "crate::data::data_path")
    named = set()
    for path in re.findall(r"(?:crate|genapi)::(\w+(?:::\w+)?)", t):
        named.add(path if path in GRAMMARS.values() else path.split("::")[0])
    for group in re.findall(r"crate::\{([^}]*)\}", t):
        named |= {w.strip().split("::")[0] for w in group.split(",")}
    if a not in ("main", "cli", "cmd"):
        named -= {"cli", "cmd"}
    for b in named & rooms:
        if b != a:
            arrows.setdefault(a, set()).add(b)
# the house reads import -> data -> build -> tree <- serve, publish, hosts; below them, the vocabulary
level = {"cli": 6, "cmd": 6, "main": 6, "import": 5, "serve": 5, "publish": 5, "hosts": 5,
         "build": 4, "data": 3, "tree": 2, "archive": 2}
up = sorted(f"{a} -> {b}" for a, bs in arrows.items() for b in bs if level.get(a, 1) < level.get(b, 1))
print(f"arrows up between rooms (tree::layout and data::data_path nodes of their own): {len(up)} {up}")
# circles: pairs of rooms naming each other, and longer cycles found by DFS
def cycles():
    found = set()
    def dfs(start, node, path):
        for n in arrows.get(node, ()):
            if n == start:
                found.add(tuple(sorted(path)))
            elif n not in path and n > start:
                dfs(start, n, path + [n])
    for s in sorted(arrows):
        dfs(s, s, [s])
    return sorted(found)
cyc = cycles()
print(f"circles between rooms: {len(cyc)} {cyc}")

pub_items = 0
for r, t in rust.items():
    pub_items += len(re.findall(r"^\s*pub (?:fn|struct|enum|trait|type|const|static|mod|use|unsafe fn|async fn)\b", t, re.M))
pub_fields = sum(len(re.findall(r"^\s*pub \w+:", t, re.M)) for t in rust.values())
print(f"public items (pub, not pub(crate)/pub(super); outside tests): {pub_items} items, {pub_fields} fields")
