#!/usr/bin/env python3
"""The archive against the tree (issue 49): every row of the issue's Targets table that a build
gives, measured side by side with one gen binary, printed as a Markdown table ready to paste
into BENCHMARKS.md, raw figures in target/bench/results-archive.json.

`ONLY=archive make bench` (or `ONLY=archive python3 bench/run.py`) runs it. Cases:
- `published` (with API_DATA=<api-data's data folder>, imported once, as bench/scale.py does):
  ROUNDS rounds of a fresh build as a tree and as an archive (`gen build --archive`), in turn,
  the order flipped each round; then a one-record edit of each, and an unchanged rebuild;
- `1m-ndjson` (with HUGE=1; the data of bench/scale.py, made when missing): one fresh build of
  each (the tree's alone takes minutes and 3.3M files), then EDITS one-line edits of each and
  an unchanged rebuild.
ARCHIVE_CASES=<comma list> runs only those.

For each build: wall seconds and peak RSS (`wait4`), and what a publish would upload: the
output's files (every path an object: a bucket has no hard links) and their bytes; after an
edit, the files that are new or changed (by size and modification time, and for the archive by
name, since its parts are content-named) and their bytes.

Trees go in SCALE_WORK (default target/bench) as bench-archive-<case>-<tree|archive>, removed
at the end (ARCHIVE_KEEP=1 keeps them). GEN=<a gen binary> (default target/release/gen, built
first).
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402
import scale  # noqa: E402
from huge import remove  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "5"))
EDITS = int(os.environ.get("EDITS", "3"))
SETTLE = float(os.environ.get("ARCHIVE_SETTLE", "5"))
MODES = ("tree", "archive")

# The targets, by (case, figure): (as printed, met?).
TARGETS = {
    ("published", "objects to publish"): ("≤ 16 (archive)", lambda t, a: a <= 16),
    ("published", "bytes to store (MB)"): ("≤ 60 (archive)", lambda t, a: a <= 60),
    ("published", "fresh build (s)"): ("archive / tree ≤ 0.5", lambda t, a: a / t <= 0.5),
    ("published", "one-record edit: objects published"): ("≤ 4 (archive)", lambda t, a: a <= 4),
    ("1m-ndjson", "fresh build (s)"): ("archive / tree ≤ 0.25", lambda t, a: a / t <= 0.25),
    ("1m-ndjson", "fresh build: peak RSS (MB)"): ("≤ 512 (archive)", lambda t, a: a <= 512),
    ("1m-ndjson", "objects to publish"): ("≤ 1,000 (archive)", lambda t, a: a <= 1000),
    ("1m-ndjson", "one-line edit (s)"): ("< 3 (archive)", lambda t, a: a < 3),
    ("1m-ndjson", "one-line edit: objects published"): ("≤ 4 (archive)", lambda t, a: a <= 4),
}


def build(gen, data, out, mode):
    cmd = scale.build(gen, data, out)
    return cmd + ["--archive"] if mode == "archive" else cmd


def files_of(out):
    """{relative path: (size, mtime_ns, inode)} of every file under `out` (every path: a bucket
    has no hard links)."""
    found = {}
    stack = [str(out)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    st = entry.stat(follow_symlinks=False)
                    found[os.path.relpath(entry.path, out)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def published(before, after):
    """(objects, bytes) a publish uploads to go from `before` to `after`: files new or changed."""
    # `root.previous` stays on this machine (docs/archive.md, "Pruning"): no publish uploads it
    changed = [
        p for p, f in after.items() if p != "root.previous" and (before.get(p) is None or before[p][:2] != f[:2])
    ]
    return len(changed), sum(after[p][0] for p in changed)


def measure_build(figures, case, mode, figure, cmd, out):
    """Runs a build, recording its time and peak RSS, and the objects it leaves to publish."""
    before = files_of(out) if out.exists() else {}
    figures.measure(case, figure, mode, cmd)
    after = files_of(out)
    objects, size = published(before, after)
    name = figure.removesuffix(" (s)")
    figures.add(case, f"{name}: objects published", mode, objects, os.getloadavg()[0])
    figures.add(case, f"{name}: bytes published (MB)", mode, size / 1e6, os.getloadavg()[0])
    return after


def count_output(figures, case, mode, out):
    files = {p: f for p, f in files_of(out).items() if p != "root.previous"}
    figures.add(case, "objects to publish", mode, len(files), 0)
    figures.add(case, "bytes to store (MB)", mode, sum(f[0] for f in files.values()) / 1e6, 0)


def fresh(figures, case, gen, data, trees, mode):
    scale.reset(trees[mode])
    run.run(["sync"])
    time.sleep(SETTLE)
    measure_build(figures, case, mode, "fresh build (s)", build(gen, data, trees[mode], mode), trees[mode])


def edits(figures, case, gen, data, trees, edit, figure, count):
    for n in range(count):
        edit.set(n)
        for mode in MODES if n % 2 == 0 else MODES[::-1]:
            measure_build(figures, case, mode, figure, build(gen, data, trees[mode], mode), trees[mode])
    for mode in MODES:
        measure_build(figures, case, mode, "unchanged rebuild (s)", build(gen, data, trees[mode], mode), trees[mode])


def clean_up(edit, trees):
    """Puts the edited record back and, unless ARCHIVE_KEEP=1, removes the built outputs."""
    edit.restore()
    if os.environ.get("ARCHIVE_KEEP") != "1":
        for tree in trees.values():
            scale.reset(tree)
            remove(tree)


def case_published(gen, work, figures):
    api_data = Path(os.environ["API_DATA"]).resolve()
    source = work / "bench-import-published"
    marker = work / "bench-import-published.source"
    if not source.exists() or not marker.exists() or marker.read_text() != str(api_data):
        scale.reset(source)
        run.log(f"importing {api_data} into {source}")
        run.run([str(gen), "import", "api-data", str(api_data), "--out", str(source)], stdout=subprocess.DEVNULL)
        marker.write_text(str(api_data))
    data = scale.working_copy("published", source, work)
    edit = scale.Edit(data, source)
    trees = {mode: work / f"bench-archive-published-{mode}" for mode in MODES}
    try:
        edit.restore()
        for round_ in range(ROUNDS):
            run.log(f"published: round {round_ + 1}/{ROUNDS}")
            for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
                fresh(figures, "published", gen, data, trees, mode)
        for mode in MODES:
            count_output(figures, "published", mode, trees[mode])
        edits(figures, "published", gen, data, trees, edit, "one-record edit (s)", EDITS)
    finally:
        clean_up(edit, trees)


def case_1m(gen, work, figures):
    case = "1m-ndjson"
    source = scale.data_folder(case, gen)
    data = scale.working_copy(case, source, work)
    edit = scale.Edit(data, source)
    trees = {mode: work / f"bench-archive-{case}-{mode}" for mode in MODES}
    try:
        edit.restore()
        for mode in MODES[::-1]:
            fresh(figures, case, gen, data, trees, mode)
            count_output(figures, case, mode, trees[mode])
        edits(figures, case, gen, data, trees, edit, "one-line edit (s)", EDITS)
    finally:
        clean_up(edit, trees)


def table(figures):
    rows = ["| case | figure | tree | archive | archive / tree | target |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for (case, figure), by_mode in sorted(figures.runs.items()):
        values = {mode: statistics.median(v for v, _ in by_mode[mode]) for mode in MODES if mode in by_mode}
        if len(values) < 2:
            continue
        t, a = values["tree"], values["archive"]
        runs = {mode: [v for v, _ in by_mode[mode]] for mode in MODES}

        def cell(mode):
            vs = runs[mode]
            text = f"{values[mode]:,.2f}" if values[mode] % 1 else f"{values[mode]:,.0f}"
            return text + (f" ({min(vs):,.2f}–{max(vs):,.2f}, {len(vs)})" if len(vs) > 1 and min(vs) != max(vs) else "")

        target = TARGETS.get((case, figure))
        verdict = f"{target[0]}: {'met' if target[1](t, a) else '**missed**'}" if target and t else (target[0] if target else "—")
        ratio = f"{a / t:.3f}" if t else "—"
        rows.append(f"| {case} | {figure} | {cell('tree')} | {cell('archive')} | {ratio} | {verdict} |")
    return "\n".join(rows)


def main():
    gen = Path(os.environ["GEN"]).resolve() if os.environ.get("GEN") else None
    if gen is None:
        run.build_gen()
        gen = run.GEN
    work = Path(os.environ.get("SCALE_WORK", run.WORK)).resolve()
    work.mkdir(parents=True, exist_ok=True)
    chosen = [c for c in os.environ.get("ARCHIVE_CASES", "published,1m-ndjson").split(",") if c]
    figures = scale.Figures()
    load = os.getloadavg()[0]
    if "published" in chosen:
        if os.environ.get("API_DATA"):
            case_published(gen, work, figures)
        else:
            figures.notes.append("published: not run: set API_DATA=<api-data's data folder>")
    if "1m-ndjson" in chosen:
        if os.environ.get("HUGE") == "1" or os.environ.get("ARCHIVE_CASES"):
            case_1m(gen, work, figures)
        else:
            figures.notes.append("1m-ndjson: not run: set HUGE=1 (minutes, and 3.3M files for the tree)")
    out = table(figures)
    print(out)
    for note in figures.notes:
        print(f"- {note}")
    print(f"- load average at the start: {load:.1f}; commit {run.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}")
    results = {f"{c}|{f}": r for (c, f), r in figures.runs.items()}
    (run.WORK / "results-archive.json").write_text(json.dumps({"runs": results, "notes": figures.notes}, indent=1))


if __name__ == "__main__":
    main()
