#!/usr/bin/env python3
"""`make soak`: a bounded load run against `gen serve` over a mix of requests, checking that
no request fails and that memory stays flat.

wrk (Debian's package, installed when missing) runs 2 threads and 128 connections for
SOAK_SECONDS (default 30) over a mix: records by id and by name, list roots, precomputed pages,
computed pages (limits and offsets the build did not precompute, so the server renders and
caches them), 404s and 400s. The server's RSS is sampled every second; the run fails if any
response is a socket error or a 5xx, or if RSS grows by more than 25% after the first third.

Then clients that never read: 0 (the baseline), 4, 16 and 64 connections each pipeline 400
requests for a document of about 50 KB and never read, for SOAK_ATTACK_SECONDS (default 6)
each, while one well-behaved keep-alive client asks for records one after the other. The run
fails if that client's p99 latency reaches 100 ms with any number of attackers.
"""

import http.client
import json
import os
import socket
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
ATTACK_SECONDS = float(os.environ.get("SOAK_ATTACK_SECONDS", "6"))
P99_LIMIT_MS = 100.0


def never_reading_clients(url, target, count, stop):
    """`count` connections that each pipeline 400 requests for `target` and never read."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * 400
    sockets = []

    def attack():
        sock = socket.create_connection((host, int(port)))
        sock.settimeout(1)
        sockets.append(sock)
        try:
            sock.sendall(request)  # stalls once the server stops reading
        except OSError:
            pass

    threads = [threading.Thread(target=attack) for _ in range(count)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join()
    for sock in sockets:
        sock.close()


def good_client_latencies(url, targets, seconds):
    """Latencies (ms) of one keep-alive client asking for `targets` in turn for `seconds`."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    latencies, failures, deadline, i = [], 0, time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            conn.request("GET", targets[i % len(targets)])
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                failures += 1
        except OSError:
            failures += 1
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
        latencies.append((time.perf_counter() - started) * 1000)
        i += 1
    conn.close()
    return latencies, failures


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def attack_phase(url, records, lists):
    """p50/p99 of a good client beside 0, 4, 16, 64 clients that never read; problems found."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sizes = []
    for target in ["/api/v2/soak-padding/1/"] + lists:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", target)
        length = len(conn.getresponse().read())
        sizes.append((abs(length - 50_000), length, target))
        conn.close()
    _, size, target = min(sizes)
    targets = ["/" + p.removesuffix("index.json") for p in records[:: max(1, len(records) // 200)]]
    print(f"clients that never read: each pipelines 400 requests for {target} (about {size // 1000} KB)")
    problems = []
    for count in [0, 4, 16, 64]:
        stop = threading.Event()
        attackers = threading.Thread(target=never_reading_clients, args=(url, target, count, stop))
        attackers.start()
        time.sleep(0.5)  # let them fill their buffers
        latencies, failures = good_client_latencies(url, targets, ATTACK_SECONDS)
        stop.set()
        attackers.join()
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        print(f"  {count:2} attackers: {len(latencies)} answers, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(latencies):.1f} ms, {failures} failures")
        if p99 >= P99_LIMIT_MS:
            problems.append(f"p99 {p99:.1f} ms beside {count} clients that never read")
        if failures:
            problems.append(f"{failures} failed requests beside {count} clients that never read")
    return problems


def main():
    if not shutil.which("wrk"):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "gen"], cwd=ROOT, check=True)
    WORK.mkdir(parents=True, exist_ok=True)
    tree = WORK / "out"
    # data/ plus one 50 KB record, the document the clients that never read ask for
    data = WORK / "data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(ROOT / "data", data)
    (data / "soak-padding").mkdir()
    padding = {"id": 1, "name": "padding", "values": [f"value-{i:06}" for i in range(3700)]}
    (data / "soak-padding" / "1.json").write_text(json.dumps(padding))
    subprocess.run([str(GEN), "build", "--quiet", "--data", str(data), "--out", str(tree)], check=True)
    manifest = json.loads((tree / "manifest.json").read_text())
    paths = []
    for segment, info in sorted(manifest["resources"].items()):
        count = info["count"]
        paths += [f"/api/v2/{segment}/", f"/api/v2/{segment}/?limit=50&offset=0"]
        paths += [f"/api/v2/{segment}/?limit={7 + i}&offset={i * 3}" for i in range(5)]  # computed
        paths += [f"/api/v2/{segment}/?limit=100000", f"/api/v2/{segment}/?offset={count + 5}"]
    records = [p for p in manifest["files"] if re.fullmatch(r"api/v2/[a-z0-9-]+/[a-z0-9-]+/index\.json", p)]
    records = [p for p in records if "soak-padding" not in p]
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
        print(result)
        lists = [f"/api/v2/{segment}/?limit={limit}" for segment in manifest["resources"] for limit in (100, 1000, 100000)]
        attack_problems = attack_phase(url, records, lists)
    finally:
        done.set()
        sampler.join()
        alive = server.poll() is None
        server.terminate()
        server.wait()
    errors = re.search(r"Socket errors: (.*)", result)
    server_errors = int(re.search(r"server errors: (\d+)", result).group(1))
    requests = int(re.search(r"(\d+) requests in", result).group(1))
    third = max(1, len(samples) // 3)
    settled, peak = max(samples[:third]), max(samples)
    print(f"{len(paths)} distinct requests; {requests} answered; RSS after the first third {settled:.1f} MB, peak {peak:.1f} MB")
    problems = attack_problems
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
    print("soak passed: no errors, memory flat, a good client's p99 under 100 ms beside clients that never read")


if __name__ == "__main__":
    main()
