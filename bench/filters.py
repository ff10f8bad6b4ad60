#!/usr/bin/env python3
"""Search and filters on the published data (issue 29): `ONLY=filters python3 bench/run.py`,
API_DATA=<api-data's data folder> (the whole published tree; the fixture is no substitute).

1. Fresh builds (into an empty folder) of the published data imported, in ROUNDS interleaved
   rounds: this gen with declared filters (three fields of `creature`, two of `move`), this gen
   without them (names documents only), and, when BASELINE_GEN names a gen binary from before
   issue 29, that one (no index files at all). Medians and ratios of wall time.
2. One record edited (a creature's type): the files the rebuild writes, and which of them are
   index files (names documents, values documents, value lists).
3. gen serve, wrk on loopback (-t2 -c8, DURATION seconds): a plain page, `?q=`, one filter, two
   filters, a filter with `q`, each after one warm-up request.
4. Bytes of the names documents and of the filter files, per resource.

Prints a Markdown report on stdout. Work folder: BENCH_DIR (default target/bench/filters).
"""

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import load

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "target/release/gen"
WORK = Path(os.environ.get("BENCH_DIR", ROOT / "target/bench/filters"))
ROUNDS = int(os.environ.get("ROUNDS", "7"))
DURATION = int(os.environ.get("DURATION", "5"))
FILTERS = {
    "creature": {"type": "types[].type.name", "default": "is_default", "ability": "abilities[].ability.name"},
    "move": {"type": "type.name", "class": "damage_class.name"},
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def set_filters(data, filters):
    config = json.loads((data / "gen.json").read_text())
    if filters:
        config["filters"] = filters
    else:
        config.pop("filters", None)
    (data / "gen.json").write_text(json.dumps(config, indent=2))


def fresh_build(gen, data, out):
    """(wall seconds, CPU seconds: user + sys) of one build into an empty folder."""
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(["sync"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(gen), "build", "-q", "--data", str(data), "--out", str(out)], check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def index_file(path):
    return "/_names/" in path or "/_filters/" in path


def wrk(url):
    out = subprocess.run(
        ["wrk", "-t2", "-c8", f"-d{DURATION}s", "--latency", url], check=True, capture_output=True, text=True
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    if "Non-2xx" in out:
        raise SystemExit(f"{url}: error answers")
    return rps


def main():
    api_data = os.environ.get("API_DATA")
    if not api_data:
        raise SystemExit("bench/filters.py needs API_DATA=<api-data's data folder> (the whole published tree)")
    baseline = os.environ.get("BASELINE_GEN")
    WORK.mkdir(parents=True, exist_ok=True)
    data, out = WORK / "data", WORK / "out"
    if not (data / "gen.json").is_file():
        log("importing the published data ...")
        subprocess.run([str(GEN), "import", "api-data", api_data, "--out", str(data), "--force"], check=True)
    report = ["## Search and filters on the published data (`ONLY=filters`, bench/filters.py)", ""]
    load_avg = os.getloadavg()
    report.append(f"Load average at the start: {load_avg[0]:.1f}. {ROUNDS} interleaved rounds of fresh builds.")
    report.append("")

    # 1. fresh builds, interleaved
    kinds = [("with filters", GEN, FILTERS), ("without filters", GEN, None)]
    if baseline:
        kinds.append(("before issue 29 (no index files)", Path(baseline), None))
    times = {name: [] for name, _, _ in kinds}
    cpu = {name: [] for name, _, _ in kinds}
    for round_ in range(ROUNDS):
        for name, gen, filters in kinds:
            set_filters(data, filters)
            wall, used = fresh_build(gen, data, out)
            times[name].append(wall)
            cpu[name].append(used)
            log(f"round {round_ + 1}: {name}: {wall:.2f} s wall, {used:.2f} s CPU")
    base, base_cpu = statistics.median(times["without filters"]), statistics.median(cpu["without filters"])
    report += [
        "| fresh build | wall min | wall median | wall max | median / without filters | CPU median | CPU median / without filters |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, values in times.items():
        m, c = statistics.median(values), statistics.median(cpu[name])
        report.append(
            f"| {name} | {min(values):.2f} s | {m:.2f} s | {max(values):.2f} s | {m / base:.3f} | {c:.2f} s | {c / base_cpu:.3f} |"
        )
    report.append("")
    # the machine's speed drifts within minutes: the ratio within each round, then its median
    for name in times:
        if name != "without filters":
            ratios = [a / b for a, b in zip(times[name], times["without filters"])]
            cpu_ratios = [a / b for a, b in zip(cpu[name], cpu["without filters"])]
            report.append(
                f"- {name} / without filters, within each round: median {statistics.median(ratios):.3f} wall "
                f"({min(ratios):.2f} to {max(ratios):.2f}), {statistics.median(cpu_ratios):.3f} CPU."
            )
    report.append("")

    # 2. one record edited
    set_filters(data, FILTERS)
    fresh_build(GEN, data, out)
    time.sleep(0.05)
    before = {p: (out / p).stat().st_mtime_ns for p in json.loads((out / "manifest.json").read_text())["files"]}
    record_path = data / "creature" / "25.json"
    original = record_path.read_text()
    record = json.loads(original)
    # electric (13) becomes fire (10), or fire becomes water (11)
    fire = record["types"][0]["type"]["name"] == "fire"
    record["types"][0]["type"] = {"name": "water", "url": "/api/v2/type/11/"} if fire else {"name": "fire", "url": "/api/v2/type/10/"}
    record_path.write_text(json.dumps(record))
    try:
        started = time.perf_counter()
        subprocess.run([str(GEN), "build", "-q", "--data", str(data), "--out", str(out)], check=True)
        rebuild = time.perf_counter() - started
    finally:
        record_path.write_text(original)
    after = json.loads((out / "manifest.json").read_text())["files"]
    written = sorted(p for p in after if before.get(p) != (out / p).stat().st_mtime_ns)
    index_total = sum(1 for p in after if index_file(p))
    index_written = [p for p in written if index_file(p)]
    report.append(
        f"One creature's type edited: the rebuild took {rebuild:.2f} s and wrote {len(written)} files, "
        f"{len(index_written)} of them index files (of {index_total} in the tree): "
        + ", ".join(sorted({re.sub(r"/_pages/.*", "/_pages/...", p) for p in index_written}))
        + "."
    )
    report.append("")
    fresh_build(GEN, data, out)

    # 3. gen serve, wrk
    port = load.free_port()
    serve = subprocess.Popen(
        [str(GEN), "serve", "--dir", str(out), "--addr", f"127.0.0.1:{port}", "-q", "--keep-urls"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            if load.get(base_url + "/api/v2/")[0] == 200:
                break
            time.sleep(0.1)
        cases = [
            ("plain page `?offset=40&limit=20`", "/api/v2/creature/?offset=40&limit=20"),
            ("`?q=char`", "/api/v2/creature/?q=char"),
            ("`?type=fire` (the value list's page file)", "/api/v2/creature/?type=fire"),
            ("`?type=fire&offset=3&limit=7` (computed from it)", "/api/v2/creature/?type=fire&offset=3&limit=7"),
            ("`?type=fire&type=flying` (intersected)", "/api/v2/creature/?type=fire&type=flying"),
            ("`?type=fire&q=char`", "/api/v2/creature/?type=fire&q=char"),
        ]
        report += ["| gen serve, list of creature | req/s |", "| --- | --- |"]
        for label, path in cases:
            status, _ = load.get(base_url + path)
            assert status == 200, f"{path}: {status}"
            report.append(f"| {label} | {wrk(base_url + path):,.0f} |")
        report.append("")
    finally:
        serve.terminate()
        serve.wait()

    # 4. bytes
    manifest = json.loads((out / "manifest.json").read_text())
    names = {}
    filters = {}
    for path in manifest["files"]:
        segment = path.split("/")[2]
        size = (out / path).stat().st_size
        if "/_names/" in path:
            names[segment] = names.get(segment, 0) + size
        elif "/_filters/" in path:
            count, total = filters.get(segment, (0, 0))
            filters[segment] = (count + 1, total + size)
    tree_bytes = sum((out / p).stat().st_size for p in manifest["files"])
    largest = sorted(names.items(), key=lambda kv: -kv[1])[:6]
    report.append(
        f"Names documents: {len(names)} files, {sum(names.values()):,} bytes "
        f"({100 * sum(names.values()) / tree_bytes:.2f}% of the tree's {tree_bytes:,}); largest: "
        + ", ".join(f"{s} {b:,}" for s, b in largest)
        + "."
    )
    report.append(
        "Filter files: "
        + "; ".join(f"{s}: {c:,} files, {b:,} bytes" for s, (c, b) in sorted(filters.items()))
        + "."
    )
    print("\n".join(report))


if __name__ == "__main__":
    main()
