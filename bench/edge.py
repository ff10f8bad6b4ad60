#!/usr/bin/env python3
"""The edge handler benchmark (issue 27): the Cloudflare handler (`gen config cloudflare`) in
workerd, run by miniflare, against the origin it reads, a bare nginx (`root` and `index
index.json`, nothing else: a store's public endpoint), on loopback with wrk (2 threads, 64
connections, keep-alive). For each kind of request, requests/s and p99 through the Worker, and
the same figures for the file it stands for fetched straight from nginx; the table gives the
ratio Worker / origin.

- a record: `/api/v2/<segment>/<id>/` against its `index.json`;
- a page the tree holds (`?offset=20&limit=20`: one origin read) against `_pages/20/20/`;
- a computed page (`?offset=21&limit=37`: two reads of `_pages/50/...`) against one of them;
- the whole list (`?limit=100000`: `_pages/all/`) against `_pages/all/index.json`.

`ONLY=edge python3 bench/run.py` (or `make bench ONLY=edge`) runs it alone. The tree: API_DATA
imported (the published data) when set, else the repository's sample data/; built into
target/bench/edge-out. ROUNDS (default 3) interleaved rounds of EDGE_DURATION seconds per run
(default 5). Needs tests/tools/edge-runtimes.sh's miniflare (installed when missing), nginx
and wrk. Results: target/bench/results-edge.json.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load  # noqa: E402
import run  # noqa: E402
from run import GEN, ROOT, WORK, build_gen, ensure_wrk_and_nginx, log, rm  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("EDGE_DURATION", "5"))
RUNTIMES = ROOT / "target" / "edge-runtimes"


def wrk(url):
    return run.wrk(url, DURATION)


def tree():
    out = WORK / "edge-out"
    src = os.environ.get("API_DATA")
    if src:
        data = WORK / "edge-data"
        rm(data)
        subprocess.run([str(GEN), "import", "api-data", src, "--out", str(data)], check=True, capture_output=True)
        kind = "the published data (API_DATA)"
    else:
        data = ROOT / "data"
        kind = "the sample data (data/)"
    subprocess.run([str(GEN), "build", "-q", "--data", str(data), "--out", str(out)], check=True)
    return out, kind


def wait_for(url, proc, what):
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"{what} ended early")
        try:
            if load.get(url)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{what} did not answer {url}")


def start_origin(out):
    port = load.free_port()
    prefix = WORK / "edge-nginx"
    rm(prefix)
    (prefix / "tmp").mkdir(parents=True)
    conf = f"""worker_processes 2;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 100000;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    server {{
        listen 127.0.0.1:{port};
        root "{out}";
        index index.json;
    }}
}}
"""
    (prefix / "nginx.conf").write_text(conf)
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"])
    url = f"http://127.0.0.1:{port}"
    wait_for(url + "/api/v2/index.json", proc, "nginx")
    return proc, url


def start_worker(out, origin):
    worker = WORK / "edge-worker.js"
    worker.write_text(subprocess.run([str(GEN), "config", "cloudflare", "--dir", str(out)], check=True, capture_output=True, text=True).stdout)
    port = load.free_port()
    runner = ROOT / "tests" / "tools" / "miniflare-run.mjs"
    proc = subprocess.Popen(
        ["node", str(runner), str(RUNTIMES), str(worker), str(port), "origin", origin],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for(url + "/api/v2/", proc, "workerd")
    return proc, url


def targets(out):
    manifest = json.loads((out / "manifest.json").read_text())
    segment = max(manifest["resources"], key=lambda s: manifest["resources"][s]["count"])
    count = manifest["resources"][segment]["count"]
    record = next(p for p in sorted(manifest["files"]) if re.fullmatch(rf"api/v2/{segment}/\d+/index\.json", p))
    return count, segment, {
        "record": ("/" + record.removesuffix("index.json"), "/" + record),
        "page the tree holds (offset=20, limit=20)": (f"/api/v2/{segment}/?offset=20&limit=20", f"/api/v2/{segment}/_pages/20/20/index.json"),
        "computed page (offset=21, limit=37)": (f"/api/v2/{segment}/?offset=21&limit=37", f"/api/v2/{segment}/_pages/50/0/index.json"),
        "whole list (limit=100000)": (f"/api/v2/{segment}/?limit=100000", f"/api/v2/{segment}/_pages/all/index.json"),
    }


def main():
    ensure_wrk_and_nginx()
    build_gen()
    subprocess.run(["sh", str(ROOT / "tests" / "tools" / "edge-runtimes.sh")], check=True)
    out, kind = tree()
    count, segment, paths = targets(out)
    load_avg = os.getloadavg()
    log(f"edge: {kind}, list {segment} of {count} entries; load average before: {load_avg[0]:.2f}")
    results = {}
    for round_ in range(ROUNDS):
        log(f"edge round {round_ + 1}/{ROUNDS}")
        nginx, origin = start_origin(out)
        worker, edge = start_worker(out, origin)
        try:
            for label, (worker_path, origin_path) in paths.items():
                for who, url in (("worker", edge + worker_path), ("origin", origin + origin_path)):
                    rps, p99 = wrk(url)
                    results.setdefault(label, {}).setdefault(who, []).append((rps, p99))
        finally:
            os.killpg(worker.pid, 15)
            nginx.terminate()
            worker.wait()
            nginx.wait()
    print(f"\nedge handler (workerd through miniflare; tree: {kind}; wrk -t2 -c64, {DURATION} s runs, {ROUNDS} rounds, medians)")
    print(f"load average before: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}; after: {os.getloadavg()[0]:.2f}\n")
    rows = [("request", "Worker req/s", "Worker p99 ms", "origin req/s", "origin p99 ms", "Worker / origin req/s")]
    for label, by in results.items():
        w = [statistics.median(x[i] for x in by["worker"]) for i in (0, 1)]
        o = [statistics.median(x[i] for x in by["origin"]) for i in (0, 1)]
        rows.append((label, f"{w[0]:.0f}", f"{w[1]:.1f}", f"{o[0]:.0f}", f"{o[1]:.2f}", f"{w[0] / o[0]:.3f}"))
    print("| " + " | ".join(rows[0]) + " |")
    print("| " + " | ".join("---" for _ in rows[0]) + " |")
    for row in rows[1:]:
        print("| " + " | ".join(row) + " |")
    report = {"tree": kind, "segment": segment, "count": count, "load_before": load_avg, "results": results}
    (WORK / "results-edge.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
