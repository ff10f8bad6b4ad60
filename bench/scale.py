#!/usr/bin/env python3
"""Scale by the change (issue 36): every row of the issue's Targets table in one run, printed
as a Markdown table ready to paste into BENCHMARKS.md, raw figures in
target/bench/results-scale.json.

`ONLY=scale make bench` (or `ONLY=scale python3 bench/run.py`) runs it. Cases:
- `200k-files`: 200k records, one file each: unchanged rebuild, one-record edit, peak RSS; then
  the same edit under `gen serve --watch` (watch_edits: the rebuild told what changed), on a
  copy of the data without hard links (real_copy: the watcher lists everything when a file has
  two names);
- `200k-ndjson`: the same records as NDJSON tables: unchanged, one-line edit, peak RSS;
- `published` (with API_DATA=<api-data's data folder>, imported once): fresh build against
  `cp -r` of its output, a one-record edit against the fresh build;
- `1m-ndjson` (only with HUGE=1: about an hour a binary): 1M records as NDJSON tables: fresh
  build against `cp -r` of its output, unchanged, one-line edit, and each one's peak RSS.
SCALE_CASES=<comma list> runs only those.

Binaries: GEN=<a gen binary> (default: target/release/gen, built first); GEN_BASE=<another
gen> measures it too, in turn with GEN in every round (the order flips each round), and the
table adds GEN / GEN_BASE.

Data: SCALE_DATA=<folder holding data-200k-files, data-200k-ndjson, data-1m-ndjson> reuses data
made before; otherwise they are made in target/bench/ (kept between runs): examples/synth.rs
(records of ~1 KB), then `gen import api-data [--layout ndjson]`. The data folders are never
written: each case builds from a hard-link copy of its data (`cp -al`, kept in SCALE_WORK), and
an edit replaces the copy's file by rename (one number of the first creature record, a new
number each round, EDIT_SETTLE seconds before the build so its stamp is trusted afterwards,
docs/builds.md), which the end of the run links back to the original.

Trees, copies and indexes go in SCALE_WORK (default target/bench), as bench-<case>-<binary>.
The 200k trees are kept between runs (the first build of a run, untimed, brings each up to
date); the published trees are removed and rebuilt fresh every round (SETTLE seconds after the
removal, as in run.py); a 1M tree is built once a binary (its unchanged and edit runs after),
then removed: one tree at a time, after a check of free inodes and bytes.

ROUNDS (default 5) rounds; each figure is the median with min and max, the peak RSS (wait4)
beside, and the 1-minute load average read before every run, printed as its range per row.
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
from huge import remove  # noqa: E402
from load import free_port  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "5"))
SETTLE = int(os.environ.get("SETTLE", "35"))
EDIT_SETTLE = float(os.environ.get("EDIT_SETTLE", "3"))
SIZES = {"200k": 200_000, "1m": 1_000_000}

# Inodes and disk bytes a record takes, counted by describe() on the synthetic data's tree
# (200,055 records, 2026-11-26): the tree 4.96 inodes (by-name paths are hard links of the
# by-id file) and 21 KB of blocks (a folder or a small file takes a whole 4 KiB block: 3.3
# folders and 1.7 distinct files a record); its `cp -r` copy 6.6 inodes (no hard links), 27 KB. Rounded up;
# the margins are for the index, the staging folder and everyone else on the disk.
TREE_INODES, COPY_INODES = 5.1, 6.7
TREE_BYTES, COPY_BYTES = 22_000, 28_000
MARGIN_INODES, MARGIN_BYTES = 300_000, 5 * 2**30

TARGETS = {  # (case, figure): (target as text, test of the first binary's value)
    ("200k-files", "unchanged rebuild (s)"): ("< 0.6", lambda v: v < 0.6),
    ("200k-files", "one-record edit (s)"): ("< 1", lambda v: v < 1),
    ("200k-files", "unchanged rebuild: peak RSS (MB)"): ("≤ 110", lambda v: v <= 110),
    ("200k-files", "one-record edit: peak RSS (MB)"): ("≤ 110", lambda v: v <= 110),
    ("200k-files", "one-record edit under --watch: rebuild (s)"): ("< 1", lambda v: v < 1),
    ("200k-ndjson", "unchanged rebuild (s)"): ("< 0.3", lambda v: v < 0.3),
    ("200k-ndjson", "one-line edit (s)"): ("< 1", lambda v: v < 1),
    ("200k-ndjson", "unchanged rebuild: peak RSS (MB)"): ("≤ 110", lambda v: v <= 110),
    ("200k-ndjson", "one-line edit: peak RSS (MB)"): ("≤ 110", lambda v: v <= 110),
    ("1m-ndjson", "fresh build / cp -r"): ("≤ 1.0", lambda v: v <= 1.0),
    ("1m-ndjson", "fresh build: peak RSS (MB)"): ("≤ 512", lambda v: v <= 512),
    ("1m-ndjson", "unchanged rebuild (s)"): ("< 3", lambda v: v < 3),
    ("1m-ndjson", "unchanged rebuild: peak RSS (MB)"): ("≤ 512", lambda v: v <= 512),
    ("1m-ndjson", "one-line edit (s)"): ("< 5", lambda v: v < 5),
    ("1m-ndjson", "one-line edit: peak RSS (MB)"): ("≤ 512", lambda v: v <= 512),
    ("published", "fresh build / cp -r"): ("no worse (0.76–0.98)", None),
    ("published", "one-record edit / fresh build"): ("≤ 0.05", lambda v: v <= 0.05),
}


class Figures:
    """Every timed run: {(case, figure): {binary: [(value, load average before it)]}}."""

    def __init__(self):
        self.runs, self.notes, self.counts = {}, [], {}

    def add(self, case, figure, binary, value, load):
        self.runs.setdefault((case, figure), {}).setdefault(binary, []).append((value, load))

    def measure(self, case, figure, binary, cmd):
        """Runs cmd (run.timed: wall seconds and wait4's peak RSS); records both."""
        load = os.getloadavg()[0]
        seconds, kb = run.timed(cmd)
        self.add(case, figure, binary, seconds, load)
        rss = "fresh build: peak RSS (MB)" if figure == "fresh build (s)" else figure.replace(" (s)", ": peak RSS (MB)")
        if figure != "cp -r (s)":
            self.add(case, rss, binary, kb / 1024, load)
        run.log(f"{case}, {binary}: {figure.removesuffix(' (s)')}: {seconds:.2f} s, {kb / 1024:.0f} MB (load {load:.1f})")

    def median(self, case, figure, binary):
        runs = self.runs.get((case, figure), {}).get(binary)
        return statistics.median(v for v, _ in runs) if runs else None


def reset(tree):
    """Removes a tree and what a build keeps beside it (.<name>.gen-index, -journal, -staging),
    and leaves the tree's folder empty: a first build into a missing folder locks its parent,
    which other builds in SCALE_WORK may hold, and the wait would be timed."""
    for path in tree.parent.glob(f".{tree.name}.gen-*"):
        remove(path)
    remove(tree)
    tree.mkdir()


def build(gen, data, out):
    return [str(gen), "build", "--quiet", "--data", str(data), "--out", str(out)]


def binaries():
    """[(label, path)]: GEN (or target/release/gen, built now) and GEN_BASE when given."""
    given = os.environ.get("GEN")
    if given:
        gen = Path(given).resolve()
    else:
        run.build_gen()
        gen = run.GEN
    found = [("gen", gen)]
    if os.environ.get("GEN_BASE"):
        found.append(("base", Path(os.environ["GEN_BASE"]).resolve()))
    for label, path in found:
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{label}: {path} is not an executable gen binary")
    return found


def in_turn(bins, round_):
    """Both binaries in every round, the order flipped each round."""
    return bins if round_ % 2 == 0 else bins[::-1]


def data_folder(case, gen):
    """The data of a case: SCALE_DATA/data-<case>, or target/bench/data-<case>, made when
    missing (synth, then the import into a temporary folder renamed into place)."""
    given = os.environ.get("SCALE_DATA")
    home = Path(given).resolve() if given else run.WORK
    data = home / f"data-{case}"
    if data.exists():
        return data
    if given:
        raise SystemExit(f"SCALE_DATA={given}: no data-{case} there (run without SCALE_DATA to make it in target/bench)")
    size, layout = case.split("-")
    src = run.WORK / f"synth-{size}-1"
    remove(src)
    if not run.SYNTH.exists():
        run.build_gen()
    run.log(f"writing {SIZES[size]:,} synthetic records of ~1 KB, then importing them as {layout}")
    run.run([str(run.SYNTH), "--records", str(SIZES[size]), "--record-kb", "1", "--out", str(src)])
    partial = home / f".data-{case}.partial"
    remove(partial)
    run.run([str(gen), "import", "api-data", str(src), "--layout", layout, "--out", str(partial)], stdout=subprocess.DEVNULL)
    partial.rename(data)
    remove(src)
    return data


def working_copy(case, source, work):
    """A hard-link copy of a data folder (`cp -al`), SCALE_WORK/bench-data-<case>, kept while
    the source is the same folder: edits replace its files by rename, so the source is never
    written."""
    return kept_copy(source, work / f"bench-data-{case}", ["cp", "-al"])


def kept_copy(source, copy, cp):
    """`copy`, made of `source` by the command `cp` (then `EDIT_SETTLE` seconds, for its stamps
    to be trusted), kept while the source is the same folder (noted in `<copy>.source`)."""
    marker = copy.parent / f"{copy.name}.source"
    identity = f"{source.resolve()} {source.stat().st_ino} {(source / 'gen.json').stat().st_mtime_ns}"
    if copy.exists() and marker.exists() and marker.read_text() == identity:
        return copy
    remove(copy)
    run.log(f"{' '.join(cp)} {source} {copy}")
    run.run([*cp, str(source), str(copy)])
    marker.write_text(identity)
    time.sleep(EDIT_SETTLE)
    return copy


class Edit:
    """One number of the first creature record of a working copy, changed to a new value per
    round (a file, or a line of creature.ndjson); restore() links the source's file back."""

    def __init__(self, copy, source, link=True):
        self.copy, self.source, self.link = copy, source, link
        table = copy / "creature.ndjson"
        if table.exists():
            self.name = "creature.ndjson"
        else:
            ids = [int(e.name[:-5]) for e in os.scandir(copy / "creature") if e.name[:-5].isdigit()]
            self.name = f"creature/{min(ids)}.json"

    def replace(self, write):
        """Writes the new file beside the copy and renames it over the copy's file."""
        temporary = self.copy.parent / f".{self.copy.name}.edit"
        temporary.unlink(missing_ok=True)
        write(temporary)
        os.replace(temporary, self.copy / self.name)

    def set(self, n):
        original = (self.source / self.name).read_bytes()
        if self.name.endswith(".ndjson"):
            first, rest = original.split(b"\n", 1)
            line = json.dumps(changed(json.loads(first), n), ensure_ascii=False, separators=(",", ":"))
            edited = line.encode() + b"\n" + rest
        else:
            edited = json.dumps(changed(json.loads(original), n), indent=2).encode()
        self.replace(lambda path: path.write_bytes(edited))
        time.sleep(EDIT_SETTLE)

    def restore(self):
        """Puts the source's file back: linked, or copied into a copy without hard links."""
        if self.link:
            self.replace(lambda path: os.link(self.source / self.name, path))
        else:
            self.replace(lambda path: path.write_bytes((self.source / self.name).read_bytes()))


def changed(record, n):
    """The record with its first integer field other than id set to 1000 + n (run.py's edit)."""
    key = next((k for k, v in record.items() if k != "id" and isinstance(v, int) and not isinstance(v, bool)), "bench_value")
    record[key] = 1000 + n
    return record


def count_tree(tree):
    """{files, folders, inodes, bytes, disk, object bytes} of a tree: hard links counted once in
    inodes, bytes (the files' sizes) and disk (allocated blocks, folders included), and once a
    path in object bytes (a bucket has no hard links)."""
    seen = set()
    counts = {"files": 0, "folders": 1, "bytes": 0, "disk": tree.stat().st_blocks * 512, "object bytes": 0}
    stack = [str(tree)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                folder = entry.is_dir(follow_symlinks=False)
                counts["folders" if folder else "files"] += 1
                if folder:
                    stack.append(entry.path)
                else:
                    counts["object bytes"] += st.st_size
                if st.st_ino not in seen:
                    seen.add(st.st_ino)
                    counts["bytes"] += 0 if folder else st.st_size
                    counts["disk"] += st.st_blocks * 512
    counts["inodes"] = len(seen) + 1
    return counts


def records_of(data):
    """Records of a data folder: lines of its tables, files of its resource folders."""
    count = 0
    for entry in os.scandir(data):
        if entry.name.endswith(".ndjson") and entry.name.count(".") == 1:
            with open(entry.path, "rb") as f:
                count += sum(1 for line in f if line.strip())
        elif entry.is_dir():
            count += sum(1 for e in os.scandir(entry.path) if e.name.endswith(".json"))
    return count


def describe(case, data, tree, figures):
    """The tree's paths, inodes and bytes per record, and its index's, for docs/scale.md."""
    if os.environ.get("SCALE_COUNT", "1") == "0":
        return
    records = records_of(data)
    tree_counts = count_tree(tree)
    index = tree.parent / f".{tree.name}.gen-index"
    tree_counts["index"] = index.stat().st_size if index.exists() else 0
    figures.counts[case] = {"records": records, **tree_counts}
    per = {k: v / records for k, v in tree_counts.items()}
    figures.notes.append(
        f"{case}: {records:,} records; the tree: {tree_counts['files']:,} files (objects in a bucket), "
        f"{tree_counts['folders']:,} folders, {tree_counts['inodes']:,} inodes, {tree_counts['bytes'] / 1e6:,.0f} MB in files, "
        f"{tree_counts['disk'] / 1e6:,.0f} MB on disk, {tree_counts['object bytes'] / 1e6:,.0f} MB as objects; the build index {tree_counts['index'] / 1e6:,.0f} MB. A record: "
        f"{per['files']:.2f} files, {per['folders']:.2f} folders, {per['inodes']:.2f} inodes, {per['bytes']:,.0f} bytes in files, "
        f"{per['disk']:,.0f} on disk, {per['object bytes']:,.0f} as objects, {per['index']:,.0f} of index"
    )


def case_200k(case, bins, work, figures):
    """Unchanged rebuild and one-record edit of a kept tree, ROUNDS rounds, binaries in turn."""
    source = data_folder(case, bins[0][1])
    data = working_copy(case, source, work)
    edit = Edit(data, source)
    edit_figure = "one-line edit (s)" if case.endswith("ndjson") else "one-record edit (s)"
    trees = {label: work / f"bench-{case}-{label}" for label, _ in bins}
    try:
        edit.restore()
        time.sleep(EDIT_SETTLE)
        for label, gen in bins:
            run.log(f"{case}, {label}: bringing {trees[label]} up to date (untimed)")
            trees[label].mkdir(exist_ok=True)
            run.timed(build(gen, data, trees[label]))
        describe(case, data, trees[bins[0][0]], figures)
        for round_ in range(ROUNDS):
            run.log(f"{case}: round {round_ + 1}/{ROUNDS}")
            edit.set(round_)
            for label, gen in in_turn(bins, round_):
                figures.measure(case, edit_figure, label, build(gen, data, trees[label]))
            for label, gen in in_turn(bins, round_):
                figures.measure(case, "unchanged rebuild (s)", label, build(gen, data, trees[label]))
    finally:
        edit.restore()
    if case == "200k-files":
        # `gen serve --watch` lists everything when a file has two names: its rounds run on a
        # copy without hard links
        copy = real_copy(case, source, work)
        edit = Edit(copy, source, link=False)
        try:
            for label, gen in bins:
                watch_edits(case, (label, gen), (copy, trees[label]), edit, figures)
        finally:
            edit.restore()


def real_copy(case, source, work):
    """A copy of a data folder whose files are their own (`cp -r`, not hard links),
    SCALE_WORK/bench-copy-<case>, kept while the source is the same folder."""
    return kept_copy(source, work / f"bench-copy-{case}", ["cp", "-r"])


def watch_edits(case, binary, where, edit, figures):
    """The edit of case_200k under `gen serve --watch` (one binary at a time: a server lives
    across its rounds): ROUNDS edits, each timed from the rename to the server's `rebuilt ...
    in X s` line (which gives the rebuild's own X); the server's peak RSS (VmHWM) at the end.
    The first rebuild after the start is untimed: it lists everything (the watch began after
    the build at start did)."""
    import queue
    import threading

    (label, gen), (data, tree) = binary, where
    cmd = [str(gen), "serve", "--watch", "--data", str(data), "--dir", str(tree), "--addr", f"127.0.0.1:{free_port()}"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put((time.monotonic(), line)) for line in server.stderr], daemon=True).start()

    def wait_for(text, limit=600):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                at, line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if text in line:
                return at, line
        raise SystemExit(f"{case}, {label}: gen serve --watch never said {text!r}")

    try:
        wait_for("watching")
        for round_ in range(-1, ROUNDS):
            load = os.getloadavg()[0]
            started = time.monotonic()
            edit.set(1000 + round_)  # sleeps EDIT_SETTLE after the rename; the rebuild goes on meanwhile
            at, line = wait_for("gen serve: rebuilt")
            if round_ < 0:
                continue
            rebuild = float(line.split(" in ")[-1].split(" s")[0])
            figures.add(case, "one-record edit under --watch: rebuild (s)", label, rebuild, load)
            figures.add(case, "one-record edit under --watch: rename to rebuilt (s)", label, at - started, load)
            run.log(f"{case}, {label}: under --watch: rebuilt in {rebuild:.2f} s, {at - started:.2f} s after the rename (load {load:.1f})")
        status = Path(f"/proc/{server.pid}/status").read_text()
        hwm = next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM"))
        figures.add(case, "under --watch: server's peak RSS (MB)", label, hwm / 1024, os.getloadavg()[0])
    finally:
        server.terminate()
        server.wait()


def fresh_and_copy(case, gen, label, data, tree, figures):
    """A fresh build into an empty folder (SETTLE seconds after the removals), then `cp -r` of
    its output, then the copy removed."""
    copy = tree.parent / f"{tree.name}-copy"
    reset(tree)
    remove(copy)
    run.run(["sync"])
    time.sleep(SETTLE)
    figures.measure(case, "fresh build (s)", label, build(gen, data, tree))
    try:
        figures.measure(case, "cp -r (s)", label, ["cp", "-r", str(tree), str(copy)])
    finally:
        remove(copy)


def case_published(bins, work, figures):
    """Fresh build and `cp -r`, then a one-record edit, ROUNDS rounds, binaries in turn."""
    api_data = Path(os.environ["API_DATA"]).resolve()
    source = work / "bench-import-published"
    marker = work / "bench-import-published.source"
    if not source.exists() or not marker.exists() or marker.read_text() != str(api_data):
        reset(source)
        run.log(f"importing {api_data} into {source}")
        run.run([str(bins[0][1]), "import", "api-data", str(api_data), "--out", str(source)], stdout=subprocess.DEVNULL)
        marker.write_text(str(api_data))
    data = working_copy("published", source, work)
    edit = Edit(data, source)
    trees = {label: work / f"bench-published-{label}" for label, _ in bins}
    try:
        edit.restore()
        for round_ in range(ROUNDS):
            run.log(f"published: round {round_ + 1}/{ROUNDS}")
            for label, gen in in_turn(bins, round_):
                fresh_and_copy("published", gen, label, data, trees[label], figures)
            edit.set(round_)
            for label, gen in in_turn(bins, round_):
                figures.measure("published", "one-record edit (s)", label, build(gen, data, trees[label]))
        describe("published", data, trees[bins[0][0]], figures)
    finally:
        edit.restore()


def room(records, tree):
    """Whether the disk holds a 1M tree and its copy: (copy fits, why not when the tree does
    not fit either)."""
    st = os.statvfs(tree.parent)
    inodes, space = st.f_favail, st.f_bavail * st.f_frsize
    tree_fits = inodes >= records * TREE_INODES + MARGIN_INODES and space >= records * TREE_BYTES + MARGIN_BYTES
    copy_fits = (
        inodes >= records * (TREE_INODES + COPY_INODES) + MARGIN_INODES
        and space >= records * (TREE_BYTES + COPY_BYTES) + MARGIN_BYTES
    )
    run.log(f"room on {tree.parent}: {inodes:,} free inodes, {space / 2**30:.1f} GiB free")
    if tree_fits:
        return copy_fits, None
    need = f"{records * TREE_INODES + MARGIN_INODES:,.0f} inodes and {(records * TREE_BYTES + MARGIN_BYTES) / 2**30:.1f} GiB"
    return False, f"not enough room for the tree: {inodes:,} free inodes and {space / 2**30:.1f} GiB, about {need} needed"


def case_1m(bins, work, figures):
    """Per binary, one tree at a time: fresh build and `cp -r`, then ROUNDS pairs of a one-line
    edit and an unchanged rebuild; the tree removed at the end."""
    case = "1m-ndjson"
    source = data_folder(case, bins[0][1])
    data = working_copy(case, source, work)
    edit = Edit(data, source)
    records = records_of(data)
    try:
        edit.restore()
        for label, gen in bins:
            tree = work / f"bench-{case}-{label}"
            reset(tree)
            copy_fits, refused = room(records, tree)
            if refused:
                figures.notes.append(f"{case}, {label}: not run: {refused}")
                continue
            if copy_fits:
                fresh_and_copy(case, gen, label, data, tree, figures)
            else:
                figures.notes.append(f"{case}, {label}: cp -r left out: too little room for a copy beside the tree")
                run.run(["sync"])
                time.sleep(SETTLE)
                figures.measure(case, "fresh build (s)", label, build(gen, data, tree))
            if label == bins[0][0]:
                describe(case, data, tree, figures)
            for round_ in range(ROUNDS):
                edit.set(round_ + 100 * bins.index((label, gen)))
                figures.measure(case, "one-line edit (s)", label, build(gen, data, tree))
                figures.measure(case, "unchanged rebuild (s)", label, build(gen, data, tree))
            run.log(f"{case}, {label}: removing the tree")
            reset(tree)
            tree.rmdir()
    finally:
        edit.restore()


ROWS = {  # the figures of each case, in the table's order (ratios computed from medians)
    "200k-files": [
        "unchanged rebuild (s)",
        "unchanged rebuild: peak RSS (MB)",
        "one-record edit (s)",
        "one-record edit: peak RSS (MB)",
        "one-record edit under --watch: rebuild (s)",
        "one-record edit under --watch: rename to rebuilt (s)",
        "under --watch: server's peak RSS (MB)",
    ],
    "200k-ndjson": ["unchanged rebuild (s)", "unchanged rebuild: peak RSS (MB)", "one-line edit (s)", "one-line edit: peak RSS (MB)"],
    "1m-ndjson": [
        "fresh build (s)",
        "cp -r (s)",
        "fresh build / cp -r",
        "fresh build: peak RSS (MB)",
        "unchanged rebuild (s)",
        "unchanged rebuild: peak RSS (MB)",
        "one-line edit (s)",
        "one-line edit: peak RSS (MB)",
    ],
    "published": [
        "fresh build (s)",
        "cp -r (s)",
        "fresh build / cp -r",
        "fresh build: peak RSS (MB)",
        "one-record edit (s)",
        "one-record edit / fresh build",
        "one-record edit: peak RSS (MB)",
    ],
}
RATIOS = {"fresh build / cp -r": ("fresh build (s)", "cp -r (s)"), "one-record edit / fresh build": ("one-record edit (s)", "fresh build (s)")}
CASE_NAMES = {
    "200k-files": "200k records, one file each",
    "200k-ndjson": "200k records in NDJSON",
    "1m-ndjson": "1M records in NDJSON",
    "published": "published data",
}


def value_of(figures, case, figure, binary):
    """(the figure the target is judged on, the cell's text): a time's median, a peak's largest
    (a bound holds for every run), a ratio of medians."""
    if figure in RATIOS:
        top, bottom = (figures.median(case, f, binary) for f in RATIOS[figure])
        return (top / bottom, f"{top / bottom:.3f}") if top and bottom else (None, "")
    runs = [v for v, _ in figures.runs.get((case, figure), {}).get(binary, [])]
    if not runs:
        return None, ""
    low, mid, high = min(runs), statistics.median(runs), max(runs)
    if figure.endswith("(MB)"):
        return high, f"{high:.0f} (median {mid:.0f})"
    return mid, f"{mid:.2f} ({low:.2f}–{high:.2f})"


def markdown(figures, bins):
    """The table to paste: a row per figure, a column per binary, their ratio, the target and
    whether the first binary meets it, the range of load averages over the row's runs."""
    labels = [label for label, _ in bins]
    head = ["case", "figure", *(f"`{label}`" for label in labels)]
    if len(labels) == 2:
        head.append(f"{labels[0]} / {labels[1]}")
    lines = ["| " + " | ".join(head + ["target", "load (1 min)"]) + " |", "|" + " --- |" * (len(head) + 2)]
    for case, rows in ROWS.items():
        for figure in rows:
            values = [value_of(figures, case, figure, label) for label in labels]
            if all(v is None for v, _ in values):
                continue
            cells = [CASE_NAMES[case], figure, *(text for _, text in values)]
            if len(labels) == 2:
                after, before = values[0][0], values[1][0]
                cells.append(f"{after / before:.2f}" if after and before else "")
            target, test = TARGETS.get((case, figure), ("", None))
            if test and values[0][0] is not None:
                target += ": met" if test(values[0][0]) else ": **missed**"
            loads = [load for f in RATIOS.get(figure, [figure]) for runs in figures.runs.get((case, f), {}).values() for _, load in runs]
            cells += [target, f"{min(loads):.1f}–{max(loads):.1f}" if loads else ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cases():
    """The cases to run: SCALE_CASES, else every one whose inputs are given."""
    if os.environ.get("SCALE_CASES"):
        chosen = os.environ["SCALE_CASES"].split(",")
        unknown = [c for c in chosen if c not in ROWS]
        if unknown:
            raise SystemExit(f"SCALE_CASES: unknown {', '.join(unknown)}; the cases are {', '.join(ROWS)}")
        if "published" in chosen and not os.environ.get("API_DATA"):
            raise SystemExit("SCALE_CASES=published needs API_DATA=<api-data's data folder>")
        return chosen
    chosen = ["200k-files", "200k-ndjson"]
    if os.environ.get("API_DATA"):
        chosen.append("published")
    if os.environ.get("HUGE"):
        chosen.append("1m-ndjson")
    return chosen


def main():
    run.WORK.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("SCALE_WORK", run.WORK)).resolve()
    work.mkdir(parents=True, exist_ok=True)
    bins, chosen, figures = binaries(), cases(), Figures()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for case in chosen:
        try:
            if case == "published":
                case_published(bins, work, figures)
            elif case == "1m-ndjson":
                case_1m(bins, work, figures)
            else:
                case_200k(case, bins, work, figures)
        except SystemExit as stopped:  # a failed step (run.timed): the figures so far still count
            figures.notes.append(f"{case}: stopped: {stopped}")
            run.log(f"{case}: stopped: {stopped}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=run.ROOT, capture_output=True, text=True).stdout.strip()
    print(f"\nScale by the change (issue 36), {started}, {os.cpu_count()} cores, checkout {commit}, {ROUNDS} rounds")
    for label, path in bins:
        print(f"- `{label}`: {path}")
    print("- seconds: median (min–max) of the rounds; peak RSS (wait4): the largest run (median); ratios of medians\n")
    print(markdown(figures, bins))
    print()
    for note in figures.notes:
        print(f"- {note}")
    raw = {f"{case} / {figure}": by for (case, figure), by in figures.runs.items()}
    (run.WORK / "results-scale.json").write_text(json.dumps({"binaries": {k: str(v) for k, v in bins}, "runs": raw, "trees": figures.counts, "notes": figures.notes}, indent=2))
    print(f"\nraw figures: {run.WORK / 'results-scale.json'}")


if __name__ == "__main__":
    main()
