#!/usr/bin/env python3
"""`make soak`: a bounded load run against `gen serve` over a mix of requests, checking that
no request fails and that memory stays flat.

wrk (Debian's package, installed when missing) runs 2 threads and 128 connections for
SOAK_SECONDS (default 30) over a mix: records by id and by name, list roots, precomputed pages,
computed pages (limits and offsets the build did not precompute, so the server renders and
caches them), 404s and 400s. The server's RSS is sampled every second; the run fails if any
response is a socket error or a 5xx, or if RSS grows by more than 25% after the first third.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "soak"
GEN = ROOT / "target" / "release" / "gen"
SECONDS = int(os.environ.get("SOAK_SECONDS", "30"))


def main():
    if not shutil.which("wrk"):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "gen"], cwd=ROOT, check=True)
    WORK.mkdir(parents=True, exist_ok=True)
    tree = WORK / "out"
    subprocess.run([str(GEN), "build", "--quiet", "--data", str(ROOT / "data"), "--out", str(tree)], check=True)
    manifest = json.loads((tree / "manifest.json").read_text())
    paths = []
    for segment, info in sorted(manifest["resources"].items()):
        count = info["count"]
        paths += [f"/api/v2/{segment}/", f"/api/v2/{segment}/?limit=50&offset=0"]
        paths += [f"/api/v2/{segment}/?limit={7 + i}&offset={i * 3}" for i in range(5)]  # computed
        paths += [f"/api/v2/{segment}/?limit=100000", f"/api/v2/{segment}/?offset={count + 5}"]
    records = [p for p in manifest["files"] if re.fullmatch(r"api/v2/[a-z0-9-]+/[a-z0-9-]+/index\.json", p)]
    paths += ["/" + p.removesuffix("index.json") for p in records[:: max(1, len(records) // 400)]]
    paths += ["/api/v2/nowhere/", "/api/v2/berry/999999/", "/api/v2/berry/?limit=abc", "/api/v2/berry/?offset=-1"]
    script = WORK / "mix.lua"
    lua_paths = ",\n".join(json.dumps(p) for p in paths)
    script.write_text(
        f"""paths = {{
{lua_paths}
}}
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1], {{["Accept-Encoding"] = (counter % 2 == 0) and "gzip" or "identity"}})
end
threads = {{}}
setup = function(thread) table.insert(threads, thread) end
init = function() server_errors = 0 end
response = function(status, headers, body)
  if status >= 500 then server_errors = server_errors + 1 end
end
done = function()
  local n = 0
  for _, t in ipairs(threads) do n = n + t:get("server_errors") end
  io.write("server errors: " .. n .. "\\n")
end
"""
    )
    server = subprocess.Popen(
        [str(GEN), "serve", "--quiet", "--keep-urls", "--dir", str(tree), "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = server.stdout.readline().strip()
    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            status = Path(f"/proc/{server.pid}/status").read_text()
            samples.append(int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024)
            time.sleep(1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = subprocess.run(
            ["wrk", "-t2", "-c128", f"-d{SECONDS}s", "--latency", "-s", str(script), url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        done.set()
        sampler.join()
        alive = server.poll() is None
        server.terminate()
        server.wait()
    print(result)
    errors = re.search(r"Socket errors: (.*)", result)
    server_errors = int(re.search(r"server errors: (\d+)", result).group(1))
    requests = int(re.search(r"(\d+) requests in", result).group(1))
    third = max(1, len(samples) // 3)
    settled, peak = max(samples[:third]), max(samples)
    print(f"{len(paths)} distinct requests; {requests} answered; RSS after the first third {settled:.1f} MB, peak {peak:.1f} MB")
    problems = []
    if not alive:
        problems.append("the server died")
    if errors:
        problems.append(f"socket errors: {errors.group(1)}")
    if server_errors:
        problems.append(f"{server_errors} server errors (5xx)")
    if peak > settled * 1.25 + 2:
        problems.append(f"memory grew from {settled:.1f} MB to {peak:.1f} MB")
    if problems:
        sys.exit("soak failed: " + "; ".join(problems))
    print("soak passed: no errors, memory flat")


if __name__ == "__main__":
    main()
