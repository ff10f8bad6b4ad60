#!/usr/bin/env python3
"""The publish section of `make bench` (alone: `python3 bench/run.py publish`).

The whole published tree (API_DATA, imported with `gen import api-data`, built with
`--links path`) to a local SeaweedFS (`weed mini`, from target/pyvenv, installed by
tests/tools/python-venv.sh with awscli), in one run:

- first publish: `gen publish` against `aws s3 sync` with the flags of docs/deploy.md's recipe
  (plus its `aws s3 cp` of the manifest), each into an empty bucket of the same server;
- a one-record edit from a fresh copy of out/ (`cp -r`: new modification times, no build
  index), rebuilt: `gen publish`'s upload count and time against its first publish, and the
  number of objects `aws s3 sync` uploads for the same copy;
- peak RSS of `gen publish` (GNU time's view of the child, as the rest of make bench).

Each measurement is taken in PUBLISH_ROUNDS rounds (default 1), each on a fresh server.
Targets: first publish `aws s3 sync` / `gen publish` >= 2; after the edit, gen publish uploads a
handful and takes < 5% of its first publish, while aws s3 sync uploads everything.
"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "bench" / "publish"
GEN = ROOT / "target" / "release" / "gen"
ROUNDS = int(os.environ.get("PUBLISH_ROUNDS", "1"))
KEY, SECRET = "benchkey", "benchsecret"


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def free_ports(n):
    ports = set()
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.add(s.getsockname()[1])
    return sorted(ports)


class Weed:
    """weed mini on a fresh folder, every port explicit, buckets `gen` and `aws`."""

    def __init__(self, weed):
        self.dir = WORK / "weed"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        (self.dir / "s3.json").write_text(json.dumps({"identities": [{"name": "bench", "credentials": [
            {"accessKey": KEY, "secretKey": SECRET}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        p = free_ports(10)
        self.endpoint = f"http://127.0.0.1:{p[0]}"
        names = ["s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                 "filer.port", "filer.port.grpc", "admin.port", "admin.port.grpc"]
        args = [f"-{name}={port}" for name, port in zip(names, p)]
        self.proc = subprocess.Popen(
            [str(weed), "mini", f"-dir={self.dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
             f"-s3.config={self.dir / 's3.json'}", "-bucket=gen,aws", *args, "-s3.port.iceberg=0", "-s3.port.lance=0",
             "-webdav=false", "-admin.ui=false"],
            stdout=open(self.dir / "weed.log", "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if subprocess.run(self.aws(["s3", "ls", "s3://gen"]), env=self.env(), capture_output=True).returncode == 0:
                return
            time.sleep(0.5)
        self.stop()
        raise SystemExit("weed mini did not answer")

    def env(self):
        return {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}

    def aws(self, args):
        return [str(WORK.parent.parent / "pyvenv" / "bin" / "aws"), "--endpoint-url", self.endpoint, *args]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def timed(cmd, env):
    """(seconds, peak RSS in MB, stdout) of a command."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{err.decode()[-2000:]}")
    return elapsed, out.decode()


def peak_rss_mb(cmd, env):
    """Peak RSS of a command, by /usr/bin/time -v."""
    res = subprocess.run(["/usr/bin/time", "-v", *cmd], env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{res.stderr[-2000:]}")
    line = next(l for l in res.stderr.splitlines() if "Maximum resident set size" in l)
    return int(line.split(":")[1]) / 1024


def aws_sync(weed, out, bucket):
    """docs/deploy.md's recipe; returns (seconds, objects uploaded)."""
    sync = weed.aws(["s3", "sync", f"{out}/", f"s3://{bucket}/", "--delete", "--exclude", "*.gz", "--exclude",
                     "manifest.json", "--content-type", "application/json; charset=utf-8", "--cache-control",
                     "public, max-age=86400"])
    cp = weed.aws(["s3", "cp", f"{out}/manifest.json", f"s3://{bucket}/manifest.json", "--content-type",
                   "application/json; charset=utf-8", "--cache-control", "no-cache"])
    t1, text = timed(sync + ["--no-progress"], weed.env())
    t2, _ = timed(cp + ["--no-progress"], weed.env())
    return t1 + t2, sum(1 for line in text.splitlines() if line.startswith("upload:")) + 1


def gen_publish(weed, out, bucket):
    """Returns (seconds, objects uploaded, summary line)."""
    t, text = timed([str(GEN), "publish", "--dir", str(out), "--endpoint", weed.endpoint, f"s3://{bucket}"], weed.env())
    line = text.strip().splitlines()[-1]
    uploaded = int(line.split(": ", 1)[1].split(" uploaded")[0]) if " uploaded" in line else 0
    return t, uploaded, line


def edit_one_record(data):
    record = sorted((data / "creature").glob("*.json"))[0]
    original = record.read_bytes()
    value = json.loads(original)
    key = next(k for k, v in value.items() if k != "id" and isinstance(v, int) and not isinstance(v, bool))
    value[key] = value[key] + 1
    record.write_text(json.dumps(value, indent=2))
    return record, original


def prepare():
    if not os.environ.get("API_DATA"):
        raise SystemExit("the publish benchmark needs API_DATA=<the published tree's data folder>")
    venv = subprocess.run(["sh", str(ROOT / "tests/tools/python-venv.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "gen"], cwd=ROOT, check=True)
    data, out = WORK / "data", WORK / "out"
    if not (data / "gen.json").exists():
        log("importing API_DATA")
        shutil.rmtree(data, ignore_errors=True)
        subprocess.run([str(GEN), "import", "api-data", os.environ["API_DATA"], "--out", str(data)], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run([str(GEN), "build", "-q", "--data", str(data), "--out", str(out), "--links", "path"], check=True)
    return Path(venv) / "bin" / "weed", data, out


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    weed_bin, data, out = prepare()
    objects = len(json.loads((out / "manifest.json").read_text())["files"]) + 1
    r = {k: [] for k in ("gen first (s)", "aws first (s)", "gen edit (s)", "gen edit uploads", "aws edit uploads",
                         "aws first uploads", "gen first uploads", "gen first peak RSS (MB)", "gen edit peak RSS (MB)")}
    for n in range(ROUNDS):
        log(f"round {n + 1}/{ROUNDS}: {objects} objects")
        weed = Weed(weed_bin)
        try:
            t, up, line = gen_publish(weed, out, "gen")
            r["gen first (s)"].append(t), r["gen first uploads"].append(up)
            log("  gen publish:", line)
            t, up = aws_sync(weed, out, "aws")
            r["aws first (s)"].append(t), r["aws first uploads"].append(up)
            log(f"  aws s3 sync: {t:.1f} s, {up} uploads")
            fresh = WORK / "out-fresh"
            shutil.rmtree(fresh, ignore_errors=True)
            subprocess.run(["cp", "-r", str(out), str(fresh)], check=True)
            record, original = edit_one_record(data)
            try:
                subprocess.run([str(GEN), "build", "-q", "--data", str(data), "--out", str(fresh), "--links", "path"],
                               check=True)
            finally:
                record.write_bytes(original)
            t, up, line = gen_publish(weed, fresh, "gen")
            r["gen edit (s)"].append(t), r["gen edit uploads"].append(up)
            log("  gen publish after the edit:", line)
            _, up = aws_sync(weed, fresh, "aws")
            r["aws edit uploads"].append(up)
            log(f"  aws s3 sync after the edit: {up} uploads")
            # peak RSS: a full publish into a fresh prefix, and an unchanged one
            cmd = [str(GEN), "publish", "-q", "--dir", str(fresh), "--endpoint", weed.endpoint]
            r["gen first peak RSS (MB)"].append(peak_rss_mb(cmd + ["s3://gen/rss"], weed.env()))
            r["gen edit peak RSS (MB)"].append(peak_rss_mb(cmd + ["s3://gen"], weed.env()))
        finally:
            weed.stop()
    med = {k: statistics.median(v) for k, v in r.items() if v}
    print(f"\npublish: {objects} objects of the published tree (--links path) to a local SeaweedFS; "
          f"{ROUNDS} round(s), medians\n")
    rows = [("", "value", "target"),
            ("first publish: gen publish (s)", f"{med['gen first (s)']:.1f}", ""),
            ("first publish: aws s3 sync + cp (s)", f"{med['aws first (s)']:.1f}", ""),
            ("aws s3 sync / gen publish", f"{med['aws first (s)'] / med['gen first (s)']:.2f}", ">= 2"),
            ("after a one-record edit, fresh copy: gen uploads", f"{med['gen edit uploads']:.0f}", "a handful"),
            ("  gen publish (s)", f"{med['gen edit (s)']:.2f}", ""),
            ("  gen edit / gen first publish", f"{med['gen edit (s)'] / med['gen first (s)']:.3f}", "< 0.05"),
            ("  aws s3 sync uploads", f"{med['aws edit uploads']:.0f}", f"(all: {objects})"),
            ("gen publish peak RSS, full publish (MB)", f"{med['gen first peak RSS (MB)']:.0f}", ""),
            ("gen publish peak RSS, nothing to do (MB)", f"{med['gen edit peak RSS (MB)']:.0f}", "")]
    width = max(len(row[0]) for row in rows)
    for label, *cols in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{c:>10}" for c in cols))
    (WORK / "results.json").write_text(json.dumps({"objects": objects, "rounds": r}, indent=2))
    print(f"\nraw figures: {WORK / 'results.json'}")


if __name__ == "__main__":
    main()
