#!/usr/bin/env python3
"""The 1M-record run (issue 21): every figure of the issue's 1M targets in one run, beside its
target, written to target/bench/results-huge.json.

`ONLY=huge python3 bench/run.py` runs it alone; `HUGE=1 make bench` runs it after the rest.

Steps, each with its seconds and peak RSS (`wait4`):
1. room: free inodes (`df -i`) against what the run will create; it refuses when short;
2. the data: HUGE_DATA=<folder> uses an imported data folder as it is; otherwise the synthetic
   generator writes HUGE_RECORDS (default 1000000) records of ~1 KB, `gen import api-data`
   imports them into target/bench/huge-data-<records> (kept for the next run), and the
   generator's tree is removed;
3. a fresh `gen build` into an empty folder, `cp -r` of its output (then removed at once);
4. an unchanged rebuild, cold (kernel caches dropped first) and warm (HUGE_WARM runs, default 3,
   fewer once they have taken HUGE_WARM_BUDGET seconds, default 120), median of the warm runs;
5. a one-record edit (one number of a creature record), cold and warm as above, each warm run
   a new number;
6. `gen serve`, caches dropped: seconds from start to the first 200 for that record; VmRSS
   and VmHWM after start and after HUGE_REQUESTS (default 100000) random requests (records by
   id and by name, sub-documents, precomputed and computed pages, lists); then a second start,
   warm;
7. `gen serve --watch`: seconds from start to the first answer (it builds first), then from a
   one-record edit in the data folder to the first answer that shows it.

The trees are target/bench/huge-out and huge-out-copy; both are removed before the run, the
copy right after it is timed, the tree at the end (HUGE_KEEP_TREE=1 keeps it). HUGE_SKIP_CP=1
leaves the copy out (it needs more inodes than the tree). The edited record is restored at the
end. A server step that fails (a server that exits, an answer that never comes within
HUGE_SERVE_TIMEOUT seconds, default 3600) is recorded with its reason and the run goes on; a
build that fails ends the run with its message. HUGE_OUT=<tree built from HUGE_DATA> runs only
the serve steps (6 and 7) on that tree, and keeps it.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load  # noqa: E402
from run import GEN, SETTLE, SYNTH, WORK, edit_one_number, log, timed  # noqa: E402

RECORDS = int(os.environ.get("HUGE_RECORDS", "1000000"))
WARM = int(os.environ.get("HUGE_WARM", "3"))
WARM_BUDGET = float(os.environ.get("HUGE_WARM_BUDGET", "120"))
REQUESTS = int(os.environ.get("HUGE_REQUESTS", "100000"))
SERVE_TIMEOUT = float(os.environ.get("HUGE_SERVE_TIMEOUT", "3600"))
SEED = int(os.environ.get("HUGE_SEED", "21"))

# Inodes per record of the synthetic data, counted on a 2,055-record tree (files and folders;
# the tree's by-name paths are hard links, one inode with the by-id file, which `cp -r` does not
# keep): the generator's tree 3.18, the imported data 2.17, the built tree 4.94, its copy 6.53.
# Rounded up; MARGIN is for the build index, staging and everyone else on the disk.
SRC_INODES, DATA_INODES, TREE_INODES, COPY_INODES = 3.3, 2.3, 5.1, 6.7
MARGIN = 200_000

TARGETS = {  # figure: (target as text, test)
    "fresh build: peak RSS (MB)": ("<= 512", lambda v: v <= 512),
    "fresh build / cp -r": ("<= 1.0", lambda v: v <= 1.0),
    "unchanged, warm (s, median)": ("< 3", lambda v: v < 3),
    "unchanged: peak RSS (MB)": ("<= 512", lambda v: v <= 512),
    "one-record edit, warm (s, median)": ("< 5", lambda v: v < 5),
    "one-record edit: peak RSS (MB)": ("<= 512", lambda v: v <= 512),
    "serve: first answer, cold (s)": ("< 5", lambda v: v < 5),
    "serve: first answer, warm (s)": ("< 5", lambda v: v < 5),
    "serve: VmRSS after the requests (MB)": ("<= 512", lambda v: v <= 512),
    "serve --watch: edit to new body (s)": ("< 5", lambda v: v < 5),
}


def remove(path):
    """Removes a large tree with 8 `rm -rf` at once, over the entries a few levels down (on this
    disk about 5 times as fast as one `rm -rf`, itself much faster than shutil.rmtree)."""
    frontier = [str(path)] if os.path.lexists(path) else []
    for _ in range(4):
        if len(frontier) >= 64:
            break
        below = []
        for entry in frontier:
            is_folder = os.path.isdir(entry) and not os.path.islink(entry)
            below += [os.path.join(entry, name) for name in os.listdir(entry)] if is_folder else [entry]
        frontier = below
    subprocess.run(["xargs", "-0", "-r", "-P", "8", "-n", "1000", "rm", "-rf", "--"], input="\0".join(frontier).encode(), check=True)
    subprocess.run(["rm", "-rf", str(path)], check=True)


def free_inodes():
    return os.statvfs(WORK).f_favail


def room(records, importing, copy=True):
    """Inodes the rest of the run needs at its peak (the data folder, when it still has to be
    made, then the tree beside its `cp -r` copy)."""
    build = TREE_INODES + (COPY_INODES if copy else 0)
    need = max(SRC_INODES + DATA_INODES, DATA_INODES + build) if importing else build
    return int(records * need) + MARGIN


def check_room(records, importing):
    """Refuses to start when the disk has too few free inodes for the run (see room)."""
    log(subprocess.run(["df", "-i", str(WORK)], capture_output=True, text=True).stdout.strip())
    copy = not os.environ.get("HUGE_SKIP_CP")
    need, free = room(records, importing, copy), free_inodes()
    if free < need:
        what = "the generator's tree and the import, then " if importing else ""
        what += f"the tree ({TREE_INODES} inodes a record)" + (f" and its cp -r copy ({COPY_INODES})" if copy else "")
        skip = f"; HUGE_SKIP_CP=1 leaves the cp -r step out (about {room(records, importing, False):,} needed then)" if copy else ""
        raise SystemExit(
            f"not enough free inodes on {WORK}: {free:,} free, about {need:,} needed for {records:,} records: {what}. "
            f"Remove old trees (target/bench/huge-*, other large trees), point HUGE_DATA at an imported data folder, "
            f"or set HUGE_RECORDS lower{skip}."
        )
    log(f"room: {free:,} free inodes, about {need:,} needed")


def make_data(records, figures):
    """The imported synthetic data folder for `records` records, made when missing."""
    data = WORK / f"huge-data-{records}"
    if data.exists():  # an import is swapped in whole: a data folder that exists is complete
        return data
    src = WORK / f"synth-{records}-1"
    remove(src)
    log(f"writing a synthetic tree of {records:,} records of ~1 KB")
    t, m = timed([str(SYNTH), "--records", str(records), "--record-kb", "1", "--out", str(src)])
    figures.update({"generator (s)": t, "generator: peak RSS (MB)": m / 1024})
    log("importing it")
    t, m = timed([str(GEN), "import", "api-data", str(src), "--out", str(data)])
    figures.update({"import (s)": t, "import: peak RSS (MB)": m / 1024})
    remove(src)
    return data


def scan(data):
    """{segment: (record ids, ids with sub-documents)} of a data folder, and its folder count
    (what `gen serve --watch` asks inotify to watch)."""
    segments, folders = {}, 1
    for entry in sorted(os.scandir(data), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        ids, subs = [], []
        folders += 1
        for item in os.scandir(entry.path):
            if item.name.endswith(".json"):
                ids.append(item.name[:-5])
            elif item.is_dir():
                subs.append(item.name)
        folders += len(subs)
        segments[entry.name] = (ids, subs)
    return segments, folders


def page_sizes(tree):
    """The page sizes from manifest.json's head (read up to its file list, not whole)."""
    head = []
    with open(tree / "manifest.json") as f:
        for line in f:
            if line.strip().startswith('"files"'):
                break
            head.append(line)
    try:
        return json.loads("".join(head).rstrip().rstrip(",") + "}")["page_sizes"]
    except (ValueError, KeyError):
        return [20, 50, 100]


def request_mix(data, segments, sizes, count):
    """`count` random request paths: records by id (40%) and by name (20%), sub-documents (15%),
    precomputed (10%) and computed (10%) pages, list roots and the index (5%). Segments are
    drawn in proportion to their records."""
    rng = random.Random(SEED)
    names = [s for s in segments if segments[s][0]]
    weights = [len(segments[s][0]) for s in names]
    with_subs = [s for s in names if segments[s][1]]
    paths = []
    for _ in range(count):
        segment = rng.choices(names, weights)[0]
        ids = segments[segment][0]
        kind = rng.random()
        if kind < 0.40:
            paths.append(f"/api/v2/{segment}/{rng.choice(ids)}/")
        elif kind < 0.60:
            record = json.loads((data / segment / f"{rng.choice(ids)}.json").read_bytes())
            paths.append(f"/api/v2/{segment}/{record.get('name', record['id'])}/")
        elif kind < 0.75 and with_subs:
            segment = rng.choice(with_subs)
            id_ = rng.choice(segments[segment][1])
            sub = rng.choice(os.listdir(data / segment / id_)).removesuffix(".json")
            paths.append(f"/api/v2/{segment}/{id_}/{sub}/")
        elif kind < 0.85:
            limit = rng.choice(sizes)
            paths.append(f"/api/v2/{segment}/?limit={limit}&offset={limit * rng.randrange(-(-len(ids) // limit))}")
        elif kind < 0.95:
            limit = rng.choice([n for n in range(1, 101) if n not in sizes])
            paths.append(f"/api/v2/{segment}/?limit={limit}&offset={rng.randrange(len(ids))}")
        else:
            paths.append(rng.choice([f"/api/v2/{segment}/", "/api/v2/"]))
    return paths


def cold_and_warm(build, prepare, label, figures, notes):
    """One run after the kernel caches are dropped, then up to WARM runs right after; `prepare`
    runs before each (an edit, or nothing)."""
    prepare()
    note = load.drop_caches()
    if note:
        notes.append(note)
    cold, cold_rss = timed(build)
    warm, warm_rss = [], []
    while len(warm) < WARM and (not warm or sum(warm) < WARM_BUDGET):
        prepare()
        t, m = timed(build)
        warm.append(t)
        warm_rss.append(m)
    log(f"{label}: cold {cold:.2f} s, warm {', '.join(f'{t:.2f}' for t in warm)} s")
    figures[f"{label}, cold (s)"] = cold
    figures[f"{label}, warm (s, median)"] = statistics.median(warm)
    figures[f"{label}, warm runs (s)"] = warm
    figures[f"{label}: peak RSS (MB)"] = max([cold_rss, *warm_rss]) / 1024


def builds(data, out, record, figures, notes):
    """Steps 3 to 5: fresh, cp -r, unchanged, one-record edit."""
    build = [str(GEN), "build", "--quiet", "--data", str(data), "--out", str(out)]
    subprocess.run(["sync"], check=True)
    time.sleep(SETTLE)  # let the removal of the old trees age (see run.py's bench_build)
    log("fresh build")
    t, m = timed(build)
    figures.update({"fresh build (s)": t, "fresh build: peak RSS (MB)": m / 1024})
    copy = WORK / "huge-out-copy"
    need = int(figures["records"] * COPY_INODES) + MARGIN
    if os.environ.get("HUGE_SKIP_CP"):
        notes.append("cp -r left out (HUGE_SKIP_CP)")
    elif free_inodes() < need:
        notes.append(f"cp -r left out: {free_inodes():,} free inodes after the build, about {need:,} needed")
    else:
        log("cp -r of its output")
        t = timed(["cp", "-r", str(out), str(copy)])[0]
        figures["cp -r (s)"] = t
        figures["fresh build / cp -r"] = figures["fresh build (s)"] / t
        started = time.perf_counter()
        remove(copy)
        figures["removing the copy (s, not a target)"] = time.perf_counter() - started
    cold_and_warm(build, lambda: None, "unchanged", figures, notes)
    edits = iter(range(1, 1000))
    cold_and_warm(build, lambda: edit_one_number(record, next(edits)), "one-record edit", figures, notes)


def serve(out, data, probe, segments, figures, notes):
    """Step 6: cold start, the random requests, warm start."""
    paths = request_mix(data, segments, page_sizes(out), REQUESTS)
    note = load.drop_caches()
    if note:
        notes.append(note)
    log("gen serve, cold start")
    proc, base, seconds = load.start_serve(GEN, ["--keep-urls", "--dir", str(out)], probe, WORK / "huge-serve.log", SERVE_TIMEOUT)
    if proc is None:
        notes.append(f"gen serve: {seconds}")
        return
    try:
        figures["serve: first answer, cold (s)"] = seconds
        figures["serve: VmRSS after start (MB)"], figures["serve: VmHWM after start (MB)"] = load.memory_mb(proc.pid)
        log(f"{len(paths):,} random requests")
        sent = load.send_all(base, paths)
        figures["serve: VmRSS after the requests (MB)"], figures["serve: VmHWM after the requests (MB)"] = load.memory_mb(proc.pid)
        figures["serve: requests"] = sent["requests"]
        figures["serve: requests/s (4 Python clients)"] = sent["requests/s"]
        if sent["failures"]:
            notes.append(f"serve: answers other than 200: {sent['failures']} (first: {sent['first failure']})")
    finally:
        load.stop(proc)
    proc, _, seconds = load.start_serve(GEN, ["--keep-urls", "--dir", str(out)], probe, WORK / "huge-serve.log", SERVE_TIMEOUT)
    if proc is None:
        notes.append(f"gen serve, warm start: {seconds}")
        return
    figures["serve: first answer, warm (s)"] = seconds
    load.stop(proc)


def watch(out, data, record, probe, folders, figures, notes):
    """Step 7: `gen serve --watch`, then one edit, timed to the first answer showing it."""
    limit = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    figures["data folders (inotify watches needed)"] = folders
    if folders > limit:
        notes.append(f"serve --watch: the data has {folders:,} folders, inotify allows {limit:,} watches (fs.inotify.max_user_watches)")
    log("gen serve --watch")
    args = ["--watch", "--data", str(data), "--dir", str(out)]
    proc, base, seconds = load.start_serve(GEN, args, probe, WORK / "huge-watch.log", SERVE_TIMEOUT)
    if proc is None:
        notes.append(f"gen serve --watch: {seconds}")
        return
    try:
        figures["serve --watch: first answer (s, after its build)"] = seconds
        time.sleep(1)  # past the debounce of any event from the start
        key, value = edit_one_number(record, 999)
        edited = time.perf_counter()
        while time.perf_counter() - edited < SERVE_TIMEOUT:
            status, body = load.get(base + probe)
            if status == 200 and json.loads(body).get(key) == value:
                figures["serve --watch: edit to new body (s)"] = time.perf_counter() - edited
                return
            time.sleep(0.05)
        notes.append(f"serve --watch: the edit was not served within {SERVE_TIMEOUT} s")
    finally:
        load.stop(proc)


def table(figures, notes):
    rows = [(f"figure ({figures['records']:,} records)", "value", "target", "")]
    for label, value in figures.items():
        if isinstance(value, list):
            continue
        target, test = TARGETS.get(label, ("", None))
        verdict = ("met" if test(value) else "MISSED") if test else ""
        rows.append((label, f"{value:,.2f}" if isinstance(value, float) else f"{value:,}", target, verdict))
    for label in TARGETS:
        if label not in figures:
            rows.append((label, "not measured", TARGETS[label][0], "see notes"))
    width = max(len(r[0]) for r in rows)
    for label, value, target, verdict in rows:
        print(f"{label:<{width}}  {value:>14}  {target:>7}  {verdict}")
    for note in notes:
        print(f"note: {note}")


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    given_out = os.environ.get("HUGE_OUT")  # a tree built from HUGE_DATA: only the serve steps run
    out = Path(given_out).resolve() if given_out else WORK / "huge-out"
    if not given_out:
        remove(WORK / "huge-out-copy")  # the old trees first, never beside the next run's
        remove(out)
    figures, notes = {}, []
    given = os.environ.get("HUGE_DATA")
    data = Path(given).resolve() if given else WORK / f"huge-data-{RECORDS}"
    if given and not (data / "gen.json").exists():
        raise SystemExit(f"HUGE_DATA={given}: no gen.json there; point it at a folder written by `gen import api-data`")
    if not data.exists():
        check_room(RECORDS, importing=True)
        data = make_data(RECORDS, figures)
    segments, folders = scan(data)
    figures["records"] = sum(len(ids) for ids, _ in segments.values())
    if "import (s)" not in figures:
        check_room(figures["records"], importing=False)
    log(f"data: {data}, {figures['records']:,} records")
    segment = "creature" if "creature" in segments else next(iter(segments))
    record = data / segment / f"{min(segments[segment][0], key=lambda i: (len(i), i))}.json"
    probe = f"/api/v2/{segment}/{record.stem}/"
    original = record.read_bytes()
    try:
        if not given_out:
            builds(data, out, record, figures, notes)
        serve(out, data, probe, segments, figures, notes)
        watch(out, data, record, probe, folders, figures, notes)
    finally:
        record.write_bytes(original)
    figures["load average at the end (1 min)"] = os.getloadavg()[0]
    if not os.environ.get("HUGE_KEEP_TREE") and not given_out:
        log("removing the tree")
        remove(out)
    print(f"\n1M run: {data}, {figures['records']:,} records; warm = median of up to {WARM} runs\n")
    table(figures, notes)
    report = {"data": str(data), "figures": figures, "notes": notes, "targets": {k: t for k, (t, _) in TARGETS.items()}}
    (WORK / "results-huge.json").write_text(json.dumps(report, indent=2))
    print(f"\nraw figures: {WORK / 'results-huge.json'}")


if __name__ == "__main__":
    main()
