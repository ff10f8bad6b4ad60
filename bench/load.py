"""Helpers shared by the benchmarks that load `gen serve` with many distinct requests (the 1M
run of bench/huge.py and the crawl of every document in bench/run.py): start a server and time
its first answer, read its memory from /proc, drop the kernel's caches, and send a list of
request paths from a few client processes.

The client is Python (4 processes, one keep-alive connection each, every other request with
`Accept-Encoding: gzip`), not wrk: it sends each path of the list exactly once and stops, which
wrk cannot do without running for a fixed time. Its requests/s are bounded by the client (about
as much CPU as the server gets), so they are a floor for the server, not a throughput to compare
with nginx (bench/run.py's wrk rounds do that).
"""

import http.client
import json
import multiprocessing
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

CLIENTS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_caches():
    """Writes back and drops the kernel's page, dentry and inode caches, so the next step starts
    cold. Returns None when done, else why not (not root, or a read-only /proc/sys)."""
    subprocess.run(["sync"], check=True)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as e:
        return f"kernel caches not dropped ({e.strerror}): the cold figures are not cold"
    return None


def memory_mb(pid):
    """(VmRSS, VmHWM) of a running process, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
    return rss / 1024, hwm / 1024


def get(url, timeout=5.0):
    """(status, body) of one GET; status 0 when the server does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def start_serve(gen, args, probe, log_path, timeout):
    """Starts `gen serve ARGS --addr 127.0.0.1:<free port>` and polls `probe` (a record's path)
    until it answers 200. Returns (process, base url, seconds from start to that answer), or
    (None, None, why) when the server exits or does not answer within `timeout` seconds; its
    stderr is in log_path."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(log_path, "w")
    started = time.perf_counter()
    proc = subprocess.Popen([str(gen), "serve", "--quiet", *args, "--addr", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=log)
    while time.perf_counter() - started < timeout:
        status, _ = get(base + probe, timeout=2)
        if status == 200:
            return proc, base, time.perf_counter() - started
        if proc.poll() is not None:
            log.close()
            tail = Path(log_path).read_text().strip().splitlines()[-3:]
            return None, None, f"gen serve exited ({proc.returncode}) before answering: {' | '.join(tail) or 'no message'}"
        time.sleep(0.05)
    stop(proc)
    return None, None, f"no answer to {probe} within {timeout} s"


def stop(proc):
    proc.terminate()  # SIGINT may be ignored when the bench itself runs in the background
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _client(job):
    """One keep-alive client sending its share of the paths in order: (answers, failures by
    status, first failing path)."""
    base, paths = job
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    answered, failures, first = 0, {}, None
    for i, path in enumerate(paths):
        headers = {"Accept-Encoding": "gzip"} if i % 2 else {}
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
        answered += 1
        if status != 200:
            failures[status] = failures.get(status, 0) + 1
            first = first or f"{path}: {status or 'no answer'}"
    conn.close()
    return answered, failures, first


def send_all(base, paths):
    """Sends every path once from CLIENTS processes. Returns a dict: requests, seconds,
    requests/s, failures ({status: count}) and the first failing path."""
    shares = [(base, paths[i::CLIENTS]) for i in range(CLIENTS)]
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(CLIENTS) as pool:
        results = pool.map(_client, shares)
    seconds = time.perf_counter() - started
    failures, first = {}, None
    for _, failed, path in results:
        for status, count in failed.items():
            failures[status] = failures.get(status, 0) + count
        first = first or path
    requests = sum(r[0] for r in results)
    return {"requests": requests, "seconds": seconds, "requests/s": requests / seconds, "failures": failures, "first failure": first}


def manifest_urls(tree):
    """The URL path of every file manifest.json lists, in its order (a document's folder for
    index.json files, as clients ask for them)."""
    files = json.loads((tree / "manifest.json").read_text())["files"]
    return ["/" + (p.removesuffix("index.json") if p.endswith("/index.json") else p) for p in files]
