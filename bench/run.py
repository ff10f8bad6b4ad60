#!/usr/bin/env python3
"""The benchmark suite behind `make bench`: build and serve speed, as ratios against
baselines measured in the same run (this machine is shared and noisy).

Build: `gen build` of a full-size tree against `cp -r` of its own output and against
`ditto transform` (pokeapi-ditto, the tool the public API uses) on the same published-layout
input; an unchanged rebuild; peak memory. Serve: `gen serve` against nginx (Debian, the config
`gen config nginx` prints) on the same tree with wrk, keep-alive, 64 connections. Startup time
and memory of `gen serve`.

Every measurement is taken in ROUNDS interleaved rounds; the table shows min/median/max and
ratios of medians. Then the crawl: a fresh `gen serve` is asked for every document of the
manifest once (bench/load.py's client), and its RSS read after (issue 21: <= 200 MB on the
published tree), ROUNDS times. Installs what it needs when missing: wrk and nginx from Debian's packages,
pokeapi-ditto from PyPI into target/bench/venv.

Environment: API_DATA=<path holding api/v2/> benchmarks the real published tree instead of the
synthetic one; ROUNDS (default 3); RECORDS and RECORD_KB size the synthetic tree (default
15000 records of ~29 KB on average: the published tree's 656 MB and 15.5k documents);
DURATION (wrk seconds per run, default 10); SETTLE (default 35) seconds
between removing the destinations and the timed build steps of a round; ONLY=build
skips the serve benchmarks and the crawl, ONLY=serve reuses the last built tree, ONLY=crawl runs
the crawl alone (on the last built tree, built first when there is none).

ONLY=edge runs the edge handler benchmark alone (bench/edge.py: the Cloudflare handler in
workerd against the bare nginx it reads); a full run runs it after the crawl.

ONLY=filters runs the search and filters benchmark alone (bench/filters.py: fresh builds with
and without declared filters, a one-record edit, gen serve on ?q= and filters; needs API_DATA;
BASELINE_GEN=<a gen from before issue 29> adds builds without any index file).

ONLY=compile measures `make build`'s compile time, from a fresh clone and after a one-file edit,
for f3d1d49 (before issue 35) and HEAD in alternating rounds (bench/compile.py).

ONLY=scale measures issue 36's targets (bench/scale.py: 200k records one file each and in
NDJSON, unchanged and one-record edits; the published data fresh and edited with API_DATA; 1M
records in NDJSON with HUGE=1; GEN_BASE=<another gen> measures it in turn with GEN).

HUGE=1 adds the 1M-record run (bench/huge.py: builds cold and warm, cp -r, gen serve, --watch)
after the rest; ONLY=huge runs it alone. Its own settings (HUGE_DATA, HUGE_RECORDS, ...) are
described in bench/huge.py.

`python3 bench/run.py publish` runs the publish benchmark alone (bench/publish.py: gen publish
against aws s3 sync on a local SeaweedFS; needs API_DATA); `make bench` runs it after the rest
when API_DATA is set.

At its end it prints the rows it measured (build, serve, crawl: the parts that ran) in the
columns of BENCHMARKS.md's "Current figures" table (what | figure | target | date | commit |
load | method), with today's date, `git rev-parse --short HEAD` and /proc/loadavg read when it
started. The other parts (ONLY=edge, compile, scale, filters, huge, publish) print their own
tables.

Targets: on the real published tree (API_DATA), `ditto transform` / `gen build` >= 3 and
`gen build` / `cp -r` <= 1.0; on the synthetic tree, the older >= 2.5 and <= 1.5. Issue 21, on
the published tree: one record changed / fresh build <= 0.05 (medians of the rounds) and under
0.5 s; gen serve's RSS after the crawl <= 200 MB; gen serve / nginx >= 1.0 (the synthetic: 0.8).
"""

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import load
from load import free_port

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "bench"
GEN = ROOT / "target" / "release" / "gen"
SYNTH = ROOT / "target" / "release" / "examples" / "synth"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "10"))
SETTLE = int(os.environ.get("SETTLE", "35"))


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


# Starts a command and reports its wall time and peak RSS (`wait4`) on the descriptor its first
# argument names. Run as a
# small process of its own: a child's `ru_maxrss` starts from its parent's peak RSS at the
# fork (Linux carries the old memory's high-water mark across `exec`), so a command started
# straight from this script, whose RSS grows past 100 MB reading trees, would report at
# least that much (a `cp -r` of 296 MB). The runner's own peak (10 MB) is the floor of what
# it reports.
RUNNER = """
import os, sys, time
report, cmd = int(sys.argv[1]), sys.argv[2:]
os.set_inheritable(report, False)
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
_, status, usage = os.wait4(pid, 0)
os.write(report, f"{time.perf_counter() - start} {usage.ru_maxrss}".encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def timed(cmd, **kw):
    """Runs cmd; returns (seconds, peak RSS in KB) from `wait4`'s view of the child, both taken
    by RUNNER. Its stderr goes to target/bench/step.log, whose end a failure shows."""
    read, write = os.pipe()
    with open(WORK / "step.log", "w") as stderr:
        runner = [sys.executable, "-c", RUNNER, str(write), *map(str, cmd)]
        proc = subprocess.Popen(runner, stdout=subprocess.DEVNULL, stderr=stderr, pass_fds=(write,), **kw)
        os.close(write)
        proc.wait()
        status = proc.returncode
    with os.fdopen(read) as report:
        measured = report.read().split()
    elapsed, rss = (float(measured[0]), int(measured[1])) if len(measured) == 2 else (0.0, 0)
    if status != 0:
        tail = " | ".join((WORK / "step.log").read_text(errors="replace").strip().splitlines()[-3:])
        raise SystemExit(f"failed ({status}): {' '.join(map(str, cmd))}: {tail or 'no message'}")
    return elapsed, rss


def ensure_wrk_and_nginx():
    """Installs wrk and nginx from Debian's packages when missing."""
    missing = [p for p, b in (("wrk", "wrk"), ("nginx", "/usr/sbin/nginx")) if not shutil.which(b)]
    if missing:
        log(f"installing {' '.join(missing)} from Debian's packages")
        run(["apt-get", "update", "-qq"])
        run(["apt-get", "install", "-y", "-qq", *missing], stdout=subprocess.DEVNULL)


def ensure_tools():
    """Installs what the benchmarks need and builds gen; returns the path of ditto."""
    ensure_wrk_and_nginx()
    venv = WORK / "venv"
    if not (venv / "bin" / "ditto").exists():
        log("installing pokeapi-ditto into target/bench/venv")
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(venv / "bin" / "pip"), "install", "-q", "pokeapi-ditto==0.6.0"])
    build_gen()
    return venv / "bin" / "ditto"


def build_gen():
    log("building gen (release)")
    run(["cargo", "build", "--release", "--quiet", "--bin", "gen", "--example", "synth"], cwd=ROOT)


def source_tree():
    if os.environ.get("API_DATA"):
        return Path(os.environ["API_DATA"]).resolve(), "published api-data"
    records = os.environ.get("RECORDS", "15000")
    kb = os.environ.get("RECORD_KB", "29")
    src = WORK / f"synth-{records}-{kb}"
    if not (src / "api" / "v2" / "index.json").exists():
        log(f"writing a synthetic published tree: {records} records of ~{kb} KB")
        run([str(SYNTH), "--records", records, "--record-kb", kb, "--out", str(src)])
    return src, f"synthetic, {records} records of ~{kb} KB"


def du(path):
    """Bytes of unique files (hard links counted once) and number of paths."""
    seen, size, files = set(), 0, 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                size += st.st_size
    return size, files


def rm(path):
    shutil.rmtree(path, ignore_errors=True)


def stats(values):
    return min(values), statistics.median(values), max(values)


def edit_one_number(record, n):
    """Changes one number of a record (its first integer field other than id), as a user's edit
    would: the record's documents change, its name and the schemas do not. Returns the field
    and its new value."""
    value = json.loads(record.read_bytes())
    key = next((k for k, v in value.items() if k != "id" and isinstance(v, int) and not isinstance(v, bool)), None)
    if key is None:
        key = "bench_value"
    value[key] = 1000 + n
    record.write_text(json.dumps(value, indent=2))
    return key, 1000 + n


def import_data(src):
    """Imports the published-layout tree into target/bench/data, anew (target/bench/out is no
    longer known to match it until the caller builds it)."""
    (WORK / "out.source").unlink(missing_ok=True)
    data = WORK / "data"
    rm(data)
    log("importing into target/bench/data")
    run([str(GEN), "import", "api-data", str(src), "--out", str(data)], stdout=subprocess.DEVNULL)
    return data


def reusable(tree, kind):
    """True when target/bench/out is a whole tree built from this input by an earlier run."""
    marker = WORK / "out.source"
    return (tree / "manifest.json").exists() and marker.exists() and marker.read_text() == kind


def build_once(src, kind):
    """One import and build into target/bench/out, untimed (for ONLY=crawl without a tree)."""
    data, out = import_data(src), WORK / "out"
    rm(out)
    log("building target/bench/out")
    run([str(GEN), "build", "--quiet", "--data", str(data), "--out", str(out)])
    (WORK / "out.source").write_text(kind)
    return {}, {}, out


def bench_build(ditto, src, kind):
    data = import_data(src)
    results = {k: [] for k in ("gen build", "cp -r (of gen's output)", "ditto transform", "gen build, unchanged", "gen build, one record changed")}
    rss = []
    out, copy, dout = WORK / "out", WORK / "out-copy", WORK / "ditto-out"
    record = next((data / "creature").glob("*.json"), None) or next(data.glob("*/*.json"))
    for round_ in range(ROUNDS):
        log(f"build round {round_ + 1}/{ROUNDS}")
        # The same start for gen, cp and ditto: every destination removed, then SETTLE seconds
        # for the deletions to age: on this disk, creating inodes right after a large rm is
        # slower (perf put most of gen build's kernel time in ext4's recently_deleted check), and
        # the old order ran gen build and ditto right after one, cp not.
        for path in (out, copy, dout):
            rm(path)
        run(["sync"])
        time.sleep(SETTLE)
        t, m = timed([str(GEN), "build", "--quiet", "--data", str(data), "--out", str(out)])
        results["gen build"].append(t)
        rss.append(m)
        results["cp -r (of gen's output)"].append(timed(["cp", "-r", str(out), str(copy)])[0])
        results["ditto transform"].append(
            timed([str(ditto), "transform", "--src-dir", str(src), "--dest-dir", str(dout), "--base-url", "http://127.0.0.1:8080"])[0]
        )
        results["gen build, unchanged"].append(timed([str(GEN), "build", "--quiet", "--data", str(data), "--out", str(out)])[0])
        original = record.read_bytes()
        edit_one_number(record, round_)
        results["gen build, one record changed"].append(timed([str(GEN), "build", "--quiet", "--data", str(data), "--out", str(out)])[0])
        record.write_bytes(original)
    (WORK / "out.source").write_text(kind)
    return results, {"peak RSS of gen build (MB)": [m / 1024 for m in rss]}, out


def start_gen(tree):
    proc = subprocess.Popen(
        [str(GEN), "serve", "--quiet", "--keep-urls", "--dir", str(tree), "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    start = time.perf_counter()
    line = proc.stdout.readline()
    startup = time.perf_counter() - start
    if not line.startswith("http://"):
        raise SystemExit("gen serve did not start")
    rss_kb = int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{proc.pid}/status").read_text()).group(1))
    return proc, line.strip(), startup, rss_kb


def start_nginx(tree):
    port = free_port()
    prefix = WORK / "nginx"
    rm(prefix)
    (prefix / "logs").mkdir(parents=True)
    (prefix / "tmp").mkdir()
    server = subprocess.run(
        [str(GEN), "config", "nginx", "--dir", str(tree), "--listen", f"127.0.0.1:{port}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    conf = f"""worker_processes 2;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
{server}
}}
"""
    (prefix / "nginx.conf").write_text(conf)
    proc = subprocess.Popen(
        ["/usr/sbin/nginx", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=open(prefix / "logs" / "stderr.log", "w"),
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    raise SystemExit(f"nginx did not start: see {prefix / 'logs'}")


def wrk(url, duration=None):
    """(requests/s, p99 ms) of wrk -t2 -c64 on `url` for `duration` seconds (DURATION)."""
    out = subprocess.run(
        ["wrk", "-t2", "-c64", f"-d{duration or DURATION}s", "--latency", url], check=True, capture_output=True, text=True
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise SystemExit(f"{url}: {errors.group(1)} error responses")
    return rps, float(p99.group(1)) * scale


def targets(tree):
    manifest = json.loads((tree / "manifest.json").read_text())
    files = manifest["files"]
    sizes = {p: (tree / p).stat().st_size for p in files if re.fullmatch(r"api/v2/[a-z0-9-]+/\d+/index\.json", p)}
    ordered = sorted(sizes, key=sizes.get)
    small, large = ordered[len(ordered) // 2], ordered[-1]
    segment = max(manifest["resources"], key=lambda s: manifest["resources"][s]["count"])
    return {
        f"small record ({sizes[small] // 1024} KB)": "/" + small.removesuffix("index.json"),
        f"large record ({sizes[large] // 1024} KB)": "/" + large.removesuffix("index.json"),
        "precomputed page (limit=50, offset=100)": f"/api/v2/{segment}/?limit=50&offset=100",
        "list root": f"/api/v2/{segment}/",
        "computed page (limit=37, offset=101)": f"/api/v2/{segment}/?limit=37&offset=101",
    }


def bench_crawl(tree):
    """ROUNDS times: a fresh `gen serve`, every document of the manifest asked once, its memory
    after."""
    urls = load.manifest_urls(tree)
    probe = next(u for u in urls if re.fullmatch(r"/api/v2/[a-z0-9-]+/\d+/", u))
    crawl = {"RSS after start (MB)": [], "RSS after the crawl (MB)": [], "peak RSS, VmHWM (MB)": [], "requests/s (4 Python clients)": []}
    for round_ in range(ROUNDS):
        log(f"crawl round {round_ + 1}/{ROUNDS}: {len(urls)} documents")
        proc, base, seconds = load.start_serve(GEN, ["--keep-urls", "--dir", str(tree)], probe, WORK / "crawl-serve.log", 600)
        if proc is None:
            raise SystemExit(f"crawl: {seconds}")
        try:
            crawl["RSS after start (MB)"].append(load.memory_mb(proc.pid)[0])
            sent = load.send_all(base, urls)
            rss, hwm = load.memory_mb(proc.pid)
        finally:
            load.stop(proc)
        if sent["failures"]:
            raise SystemExit(f"crawl: answers other than 200: {sent['failures']} (first: {sent['first failure']})")
        crawl["RSS after the crawl (MB)"].append(rss)
        crawl["peak RSS, VmHWM (MB)"].append(hwm)
        crawl["requests/s (4 Python clients)"].append(sent["requests/s"])
    return crawl, len(urls)


def crawl_table(crawl, documents, real):
    rows = [(f"gen serve, every document once ({documents})", "min", "median", "max", "target")]
    for label, values in crawl.items():
        target = "<= 200" if real and label == "RSS after the crawl (MB)" else ""
        rows.append((label, *(f"{v:.0f}" for v in stats(values)), target))
    table(rows)


def bench_serve(tree):
    results, latency, startup = {}, {}, {"startup (s)": [], "RSS after load (MB)": [], "RSS after serving, all compressed (MB)": []}
    paths = targets(tree)
    for round_ in range(ROUNDS):
        log(f"serve round {round_ + 1}/{ROUNDS}")
        gen, gen_url, seconds, rss = start_gen(tree)
        startup["startup (s)"].append(seconds)
        startup["RSS after load (MB)"].append(rss / 1024)
        nginx, nginx_url = start_nginx(tree)
        try:
            for label, path in paths.items():
                for server, base in (("nginx", nginx_url), ("gen serve", gen_url)):
                    if server == "nginx" and label.startswith("computed"):
                        continue  # a static host holds only precomputed pages
                    rps, p99 = wrk(base + path)
                    results.setdefault((label, server), []).append(rps)
                    latency.setdefault((label, server), []).append(p99)
            status = Path(f"/proc/{gen.pid}/status").read_text()
            startup["RSS after serving, all compressed (MB)"].append(int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024)
        finally:
            gen.terminate()  # SIGINT may be ignored when the bench itself runs in the background
            nginx.terminate()
            gen.wait()
            nginx.wait()
    return results, latency, startup, paths


def table(rows):
    width = max(len(r[0]) for r in rows)
    for label, *cols in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{c:>12}" for c in cols))


def build_tables(build, memory, real):
    """Prints the build figures and their ratios; returns the ratios."""
    rows = [("build (seconds)", "min", "median", "max")]
    for label, values in build.items():
        rows.append((label, *(f"{v:.2f}" for v in stats(values))))
    for label, values in memory.items():
        rows.append((label, *(f"{v:.0f}" for v in stats(values))))
    table(rows)
    med = {k: statistics.median(v) for k, v in build.items()}
    ratios = {
        "gen build / cp -r": med["gen build"] / med["cp -r (of gen's output)"],
        "ditto transform / gen build": med["ditto transform"] / med["gen build"],
        "unchanged rebuild / gen build": med["gen build, unchanged"] / med["gen build"],
        "one record changed / gen build": med["gen build, one record changed"] / med["gen build"],
    }
    print()
    table([("build ratios (of medians)", "value", "target")] + [
        ("gen build / cp -r", f"{ratios['gen build / cp -r']:.2f}", "<= 1.0" if real else "<= 1.5"),
        ("ditto transform / gen build", f"{ratios['ditto transform / gen build']:.2f}", ">= 3" if real else ">= 2.5"),
        ("unchanged rebuild / gen build", f"{ratios['unchanged rebuild / gen build']:.3f}", "<= 0.10"),
        ("one record changed / gen build", f"{ratios['one record changed / gen build']:.3f}", "<= 0.05"),
        ("one record changed (s, median)", f"{med['gen build, one record changed']:.2f}", "< 0.5" if real else "< 1"),
    ])
    print()
    return ratios


def serve_tables(serve, latency, startup, paths, size, report, real):
    """Prints the wrk rounds, the ratios against nginx (on the published tree, issue 21 asks
    for no worse than the 1.0 measured before it) and the startup figures."""
    rows = [("serve (requests/s, wrk -t2 -c64)", "min", "median", "max", "p99 ms (med)")]
    for (label, server), values in serve.items():
        rows.append((f"{label}: {server}", *(f"{v:.0f}" for v in stats(values)), f"{statistics.median(latency[(label, server)]):.2f}"))
    table(rows)
    print()
    rows = [("serve ratios (of medians)", "gen / nginx", "target")]
    for label in paths:
        if (label, "nginx") in serve:
            ratio = statistics.median(serve[(label, "gen serve")]) / statistics.median(serve[(label, "nginx")])
            rows.append((label, f"{ratio:.2f}", ">= 1.0" if real else ">= 0.8"))
            report[f"serve ratio: {label}"] = ratio
    pre = statistics.median(serve[("precomputed page (limit=50, offset=100)", "gen serve")])
    comp = statistics.median(serve[("computed page (limit=37, offset=101)", "gen serve")])
    rows.append(("precomputed / computed page (gen serve)", f"{pre / comp:.2f}", "<= 1.5"))
    table(rows)
    print()
    rows = [("gen serve startup", "min", "median", "max", "target")]
    rows.append(("seconds to first line", *(f"{v:.2f}" for v in stats(startup["startup (s)"])), "< 2"))
    rows.append(("RSS after load (MB)", *(f"{v:.0f}" for v in stats(startup["RSS after load (MB)"])), f"<= {1.2 * size / 2**20:.0f}"))
    rows.append(("RSS after serving, all compressed (MB)", *(f"{v:.0f}" for v in stats(startup["RSS after serving, all compressed (MB)"])), f"<= {1.2 * size / 2**20:.0f}"))
    table(rows)
    print()
    report["startup"] = startup
    report["serve"] = {f"{label}: {server}": v for (label, server), v in serve.items()}
    report["p99 ms"] = {f"{label}: {server}": v for (label, server), v in latency.items()}


def started_now():
    """The date (UTC), the commit and the load averages (1, 5 and 15 minutes) at the start of a
    run: the date, commit and load columns of BENCHMARKS.md's "Current figures"."""
    try:
        load = " / ".join(Path("/proc/loadavg").read_text().split()[:3]) + " at the start (1 / 5 / 15 min)"
    except OSError:
        load = "not recorded"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "not recorded"
    return {"date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": f"`{commit}`" if commit != "not recorded" else commit, "load": load}


def figure_row(what, figure, target, started, method):
    """One row of BENCHMARKS.md's "Current figures": what | figure | target | date | commit |
    load | method ("—" for no target)."""
    cells = (what, figure, target or "—", started["date"], started["commit"], started["load"], method)
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def spread(values, unit, digits=2):
    """A median and its range, as the table gives them: `6.50 s (5.57–9.07)`."""
    low, mid, high = stats(values)
    return f"{mid:.{digits}f} {unit} ({low:.{digits}f}–{high:.{digits}f})"


def current_rows(report, real, started, command):
    """The rows of "Current figures" that this run measured: the build rows when the build ran,
    the serve rows when the wrk rounds ran, the crawl row when the crawl ran."""
    method = f"[Method](#method): `{command}`"
    tree = "the published tree" if real else "the synthetic tree"
    rows, build, ratios = [], report.get("build") or {}, report.get("ratios") or {}
    if build:
        med = {k: statistics.median(v) for k, v in build.items()}
        fresh, cp = build["gen build"], build["cp -r (of gen's output)"]
        rows.append(figure_row(
            f"fresh build of {tree}, against `cp -r` of its output",
            f"{spread(fresh, 's')} against {spread(cp, 's')}: **{ratios['gen build / cp -r']:.2f}**",
            "≤ 1.0 (issue 11)" if real else "≤ 1.5", started, method))
        rows.append(figure_row(
            f"`ditto transform` / `gen build`, {tree}",
            f"{med['ditto transform']:.2f} s / {med['gen build']:.2f} s: **{ratios['ditto transform / gen build']:.2f}**",
            "≥ 3 (issue 11)" if real else "≥ 2.5", started, method))
        rows.append(figure_row(
            f"unchanged rebuild of {tree}",
            f"{spread(build['gen build, unchanged'], 's')}: **{ratios['unchanged rebuild / gen build']:.3f}** of a fresh build",
            "≤ 0.10", started, method))
        rows.append(figure_row(
            f"one-record edit of {tree}",
            f"**{spread(build['gen build, one record changed'], 's')}**; / fresh build **{ratios['one record changed / gen build']:.3f}**",
            "≤ 0.05 of a fresh build (issue 12); < 0.5 s (issue 21)" if real else "≤ 0.05 of a fresh build; < 1 s",
            started, method))
        for label, values in (report.get("memory") or {}).items():
            rows.append(figure_row(f"{label.removesuffix(' (MB)')}, {tree}", spread(values, "MB", 0), "", started, method))
    if report.get("serve"):
        serve = report["serve"]
        ratios = [
            f"{label} {statistics.median(serve[f'{label}: gen serve']) / statistics.median(serve[f'{label}: nginx']):.2f}"
            for label in dict.fromkeys(k.rsplit(": ", 1)[0] for k in serve)
            if f"{label}: nginx" in serve
        ]
        rows.append(figure_row(
            f"`gen serve` against nginx, {tree}",
            "gen / nginx (medians of `wrk -t2 -c64`): " + ", ".join(ratios),
            "≥ 1.0 (issue 21)" if real else "≥ 0.8", started, method))
        startup = report["startup"]
        rows.append(figure_row(
            f"`gen serve`, {tree}: start and memory",
            f"first line {spread(startup['startup (s)'], 's')}; RSS after load {spread(startup['RSS after load (MB)'], 'MB', 0)}, "
            f"after serving {spread(startup['RSS after serving, all compressed (MB)'], 'MB', 0)}",
            f"< 2 s; ≤ {1.2 * report['tree unique MB'] * 1e6 / 2**20:.0f} MB", started, method))
    if report.get("crawl"):
        crawl = report["crawl"]
        rows.append(figure_row(
            f"`gen serve`, {tree}: RSS after every document once",
            f"**{spread(crawl['RSS after the crawl (MB)'], 'MB', 0)}** (after start {spread(crawl['RSS after start (MB)'], 'MB', 0)})",
            "≤ 200 MB (issue 21)" if real else "", started, method))
    return rows


def run_huge():
    import huge  # it imports this file's helpers

    huge.main()


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    only = os.environ.get("ONLY", "")
    started = started_now()
    if only == "huge":
        build_gen()
        return run_huge()
    if only == "edge":
        import edge  # the edge handler against its origin (bench/edge.py)

        return edge.main()
    if only == "compile":
        import compile  # make build's compile time, fresh and after a one-file edit (bench/compile.py)

        return compile.main()
    if only == "scale":
        import scale  # issue 36's targets: 200k and 1M records, files and NDJSON (bench/scale.py)

        return scale.main()
    if only == "archive":
        import archive  # issue 49's targets: the archive against the tree (bench/archive.py)

        return archive.main()
    if only == "filters":
        import filters  # search and filters on the published data (bench/filters.py)

        ensure_wrk_and_nginx()
        build_gen()
        return filters.main()
    ditto = None if only == "crawl" else ensure_tools()
    if ditto is None:
        build_gen()
    src, kind = source_tree()
    size_src, files_src = du(src)
    log(f"input: {kind}, {size_src / 1e6:.0f} MB in {files_src} files")
    build, memory, tree = {}, {}, WORK / "out"
    if only not in ("serve", "crawl") or not reusable(tree, kind):
        build, memory, tree = build_once(src, kind) if only == "crawl" else bench_build(ditto, src, kind)
    size, files = du(tree)
    page_files = sum(len(names) for d, _, names in os.walk(tree) if "/_pages" in d)
    report = {"input": kind, "input MB": size_src / 1e6, "input files": files_src, "tree unique MB": size / 1e6, "tree files": files}
    print(f"\ninput: {kind}: {size_src / 1e6:.0f} MB, {files_src} files; tree: {size / 1e6:.0f} MB unique, {files} files ({page_files} page files); {ROUNDS} rounds\n")
    real = bool(os.environ.get("API_DATA"))
    report.update({"build": build, "memory": memory, "ratios": build_tables(build, memory, real) if build else {}})
    if only not in ("build", "crawl"):
        serve_tables(*bench_serve(tree), size, report, real)
    if only != "build":
        crawl, documents = bench_crawl(tree)
        crawl_table(crawl, documents, real)
        report["crawl"] = crawl
    (WORK / "results.json").write_text(json.dumps(report, indent=2))
    print(f"\nraw figures: {WORK / 'results.json'}")
    command = ("ONLY=" + only + " " if only else "") + "make bench" + (" API_DATA=<path>" if real else "")
    rows = current_rows(report, real, started, command)
    if not only:
        import edge

        print()
        edge.main()
    if os.environ.get("HUGE") and only != "build":
        print()
        run_huge()
    if real and only not in ("build", "crawl"):
        sys.path.insert(0, str(ROOT / "bench"))
        import publish

        publish.main()
    if rows:
        print('\nrows of BENCHMARKS.md\'s "Current figures" (what | figure | target | date | commit | load | method):')
        print("\n".join(rows))


if __name__ == "__main__":
    if sys.argv[1:] == ["publish"]:
        sys.path.insert(0, str(ROOT / "bench"))
        import publish

        publish.main()
    else:
        main()
