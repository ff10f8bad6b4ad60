#!/usr/bin/env python3
"""Compile time of `make build` (issue 35): from a fresh clone, and after an edit of one library
file, for two commits measured in the same run (`ONLY=compile python3 bench/run.py`, or
`python3 bench/compile.py [BEFORE [AFTER]]`; default: f3d1d49, before issue 35, and HEAD).

Each commit is cloned into its own folder under target/bench/compile with its own cargo target
folder, so nothing is shared but cargo's download cache (the registry is fetched before the
first timed build: the timings are compiles, not downloads). Per round and commit:
- fresh: `make build` in the clone, target folder removed first;
- edit: one line of a function body in src/tree/layout.rs changed (`folder_name`'s empty case), then
  `make build` again; three edits, each a different string.
The rounds alternate the commits (A B, B A, ...) so that the machine's load falls on both alike.
Prints each figure's runs and median, and the ratio AFTER / BEFORE of the medians.
"""
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "bench" / "compile"
ROUNDS = int(os.environ.get("COMPILE_ROUNDS", "2"))
EDITS = 3


def sh(args, cwd, quiet=True):
    out = subprocess.DEVNULL if quiet else None
    subprocess.run(args, cwd=cwd, check=True, stdout=out, stderr=out)


def clone(commit, name):
    dest = WORK / name
    if dest.exists():
        shutil.rmtree(dest)
    sh(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(dest)], WORK)
    sh(["git", "checkout", "--quiet", commit], dest)
    sh(["cargo", "fetch", "--quiet"], dest)
    return dest


def timed_make_build(clone_dir):
    env = dict(os.environ, CARGO_TARGET_DIR=str(clone_dir / "target"))
    env.pop("CARGO_PROFILE_RELEASE_INCREMENTAL", None)
    started = time.monotonic()
    subprocess.run(["make", "build"], cwd=clone_dir, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def edit_one_library_file(clone_dir, n):
    """Edit `n` of src/tree/layout.rs: the file as committed, with `folder_name`'s empty case rewritten
    as other code returning the same string (a change of code, not only of a comment)."""
    sh(["git", "checkout", "--quiet", "--", "src/tree/layout.rs"], clone_dir)
    path = clone_dir / "src" / "tree" / "layout.rs"
    text = path.read_text()
    old = 'return "_".to_string();'
    assert old in text, "src/tree/layout.rs no longer holds folder_name's empty case: update bench/compile.py"
    new = f'return "_".repeat({n}).chars().take(1).collect(); // edit {n}'
    path.write_text(text.replace(old, new, 1))


def load():
    return open("/proc/loadavg").read().split()[0]


def main():
    before = sys.argv[1] if len(sys.argv) > 1 else "f3d1d49"
    after = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    WORK.mkdir(parents=True, exist_ok=True)
    figures = {c: {"fresh": [], "edit": []} for c in (before, after)}
    for r in range(ROUNDS):
        order = (before, after) if r % 2 == 0 else (after, before)
        for commit in order:
            d = clone(commit, f"c-{commit}")
            print(f"round {r + 1}, {commit}: fresh make build (load {load()})", flush=True)
            figures[commit]["fresh"].append(timed_make_build(d))
            for n in range(EDITS):
                edit_one_library_file(d, r * EDITS + n + 1)
                figures[commit]["edit"].append(timed_make_build(d))
            shutil.rmtree(d)
    print()
    for kind in ("fresh", "edit"):
        a, b = figures[before][kind], figures[after][kind]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{kind:5}  {before}: median {ma:6.1f} s  runs {[round(x, 1) for x in a]}")
        print(f"{kind:5}  {after}: median {mb:6.1f} s  runs {[round(x, 1) for x in b]}  ratio {mb / ma:.2f}")


if __name__ == "__main__":
    main()
