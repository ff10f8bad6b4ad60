#!/usr/bin/env python3
"""Peak memory of `gen serve --cache-mb 16` under concurrent searches (docs/tree.md, "What a
query costs"): the data of tests/suite/edge.rs's
`searches_of_150000_records_hold_a_shard_at_a_time_in_serve_and_node` (150,000 records of one
resource, two localized names each: three names shards), built once into BENCH_DIR, then
ROUNDS rounds of 32 searches at once (one thread and one connection each), each round with
searches not asked before (so none is answered from the cache). After each round: the
server's peak RSS (VmHWM) and its RSS now (VmRSS), from /proc.

Two kinds of searches, KIND=narrow (the test's: `?q=<n>%20ECLAIR&limit=3`, a few matches each)
or KIND=wide (`?q=eclair&limit=<k>`, every record matching, a distinct limit each), or both
(the default).

CACHE_MB sets `--cache-mb` (16 by default). Prints a Markdown table on stdout. Work folder: BENCH_DIR (default target/bench/search-memory).
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = Path(os.environ.get("GEN", ROOT / "target/release/gen"))
WORK = Path(os.environ.get("BENCH_DIR", ROOT / "target/bench/search-memory"))
ROUNDS = int(os.environ.get("ROUNDS", "12"))
KINDS = os.environ.get("KIND", "narrow,wide").split(",")
CACHE_MB = os.environ.get("CACHE_MB", "16")
COUNT = 150_000
AT_ONCE = 32


def build():
    data, out = WORK / "data", WORK / "out"
    if (out / "manifest.json").is_file():
        return out
    (data / "thing").mkdir(parents=True, exist_ok=True)
    (data / "gen.json").write_text('{"base_url": "http://127.0.0.1:8080"}')
    for i in range(1, COUNT + 1):
        names = [
            {"name": f"Thing {i} Éclair", "language": {"name": "en"}},
            {"name": f"Ding {i} Blitzschnell", "language": {"name": "de"}},
        ]
        record = {"id": i, "name": f"thing-{i}", "names": names}
        (data / f"thing/{i}.json").write_text(json.dumps(record, ensure_ascii=False))
    subprocess.run([GEN, "build", "-q", "--data", data, "--out", out], check=True)
    return out


def status(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise KeyError(field)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queries(kind, round_):
    if kind == "narrow":
        return [f"/api/v2/thing/?q={1000 + (round_ * AT_ONCE + i) * 37}%20ECLAIR&limit=3" for i in range(AT_ONCE)]
    # each matches all 150,000 records (a distinct limit keeps it from the cache)
    return [f"/api/v2/thing/?q=eclair&limit={1 + round_ * AT_ONCE + i}" for i in range(AT_ONCE)]


def main():
    out = build()
    rows = []
    for kind in KINDS:
        port = free_port()
        serve = subprocess.Popen(
            [GEN, "serve", "-q", "--dir", out, "--addr", f"127.0.0.1:{port}", "--cache-mb", CACHE_MB],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/api/v2/", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        idle = status(serve.pid, "VmHWM")
        for r in range(ROUNDS):
            errors = []

            def get(url):
                try:
                    body = urllib.request.urlopen(base + url, timeout=600).read()
                    json.loads(body)["count"]
                except Exception as e:  # noqa: BLE001 (reported below)
                    errors.append(f"{url}: {e}")

            threads = [threading.Thread(target=get, args=(u,)) for u in queries(kind, r)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                sys.exit("\n".join(errors))
            rows.append((kind, r + 1, idle, status(serve.pid, "VmHWM"), status(serve.pid, "VmRSS")))
        serve.terminate()
        serve.wait()
    print("| searches | round | peak RSS idle (MB) | peak RSS after the round (MB) | RSS after the round (MB) |")
    print("| --- | --- | --- | --- | --- |")
    for kind, r, idle, peak, now in rows:
        print(f"| {kind} | {r} | {idle} | {peak} | {now} |")


if __name__ == "__main__":
    main()
