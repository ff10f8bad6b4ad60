#!/usr/bin/env python3
"""`make conformance API_DATA=<path>`: the whole published tree, imported, built and served by
gen, compared document by document with what the public API answers for the same request.

The public API is the published static tree (PokeAPI/api-data): a record at
`api/v2/<segment>/<id>/index.json`, a sub-document at `.../<id>/encounters/index.json`, and each
list whole at `api/v2/<segment>/index.json`. Offline, those files are what it answers; a list
page at `?limit=L&offset=O` is the published full list sliced by the paging rules of the README.
Our tree renames the brand segments and makes urls absolute; the expected document is the
published one with the same change, nothing else.

Steps: `gen import api-data API_DATA`, `gen build`, `gen serve` on a free port; then over HTTP
(one keep-alive connection): every record by id and by name, every sub-document by the url its
record gives and by the record's name, every list's root, its whole list and PAGES random
limit/offset pairs per list (seeded, SEED), and the root index. Prints counts of equal and
different documents (the first differences in full) and exits 1 if any differ.

Environment: API_DATA (required; the folder holding api/v2/), SEED (default 11), PAGES
(default 40 per list), WORK (default target/conformance).
"""

import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "target" / "release" / "gen"
BASE = "http://conformance.example"
NEUTRAL = {
    "pokemon": "creature",
    "pokemon-color": "creature-color",
    "pokemon-form": "creature-form",
    "pokemon-species": "creature-species",
    "pokemon-habitat": "creature-habitat",
    "pokemon-shape": "creature-shape",
    "pokeathlon-stat": "athlon-stat",
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def strict_json(data):
    """Parses JSON keeping each number's written form, so that 1.50 and 1.5 differ."""
    return json.loads(data, parse_float=lambda s: ("float", s))


def expected(value):
    """A published document as our tree must serve it: urls renamed and made absolute."""
    if isinstance(value, str):
        if value.startswith("/api/v2/"):
            rest = value[len("/api/v2/"):]
            segment, sep, tail = rest.partition("/")
            return f"{BASE}/api/v2/{NEUTRAL.get(segment, segment)}{sep}{tail}"
        return value
    if isinstance(value, list):
        return [expected(v) for v in value]
    if isinstance(value, dict):
        return {k: expected(v) for k, v in value.items()}
    return value


def expected_page(segment, results, limit, offset):
    """A list page by the README's paging rules, from the published full list."""
    count = len(results)
    limit = limit or 20
    url = f"{BASE}/api/v2/{segment}/"
    nxt = f"{url}?offset={offset + limit}&limit={min(limit, count - offset - limit)}" if count > offset + limit else None
    prev = None if offset == 0 else f"{url}?offset={max(0, offset - limit)}&limit={min(limit, offset)}"
    return {"count": count, "next": nxt, "previous": prev, "results": expected(results[offset:offset + limit])}


class Client:
    """One keep-alive HTTP/1.1 connection to gen serve, reopened if the server closes it."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = http.client.HTTPConnection(host, port, timeout=60)

    def get(self, path):
        for attempt in range(2):
            try:
                self.conn.request("GET", path)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                if attempt:
                    raise


class Tally:
    def __init__(self):
        self.kinds = {}
        self.first = []

    def check(self, kind, path, status, body, want):
        equal, different = self.kinds.setdefault(kind, [0, 0])
        got = strict_json(body) if status == 200 else None
        if status == 200 and got == want:
            self.kinds[kind][0] += 1
        else:
            self.kinds[kind][1] += 1
            if len(self.first) < 10:
                self.first.append(f"{kind}: GET {path}: status {status}: {body[:300]!r}")


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def main():
    src = os.environ.get("API_DATA")
    if not src:
        print("skipped: set API_DATA to the data folder of a PokeAPI/api-data checkout (the folder holding api/v2/), "
              "e.g. make conformance API_DATA=~/api-data/data")
        return 0
    src = Path(src).expanduser().resolve()
    published = src / "api" / "v2"
    if not (published / "index.json").is_file():
        print(f"{published / 'index.json'} is missing: API_DATA must be the folder that holds api/v2/", file=sys.stderr)
        return 2
    seed = int(os.environ.get("SEED", "11"))
    pages = int(os.environ.get("PAGES", "40"))
    work = Path(os.environ.get("WORK", ROOT / "target" / "conformance"))
    data, out = work / "data", work / "out"
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)

    run(["cargo", "build", "--release", "--quiet", "--bin", "gen"], cwd=ROOT)
    started = time.perf_counter()
    imported = run([GEN, "import", "api-data", src, "--out", data], capture_output=True, text=True)
    log(imported.stdout.strip())
    log(imported.stderr.strip())
    built = run([GEN, "build", "--data", data, "--out", out, "--base-url", BASE], capture_output=True, text=True)
    log(built.stdout.strip())
    config = json.loads((data / "gen.json").read_text())
    shared = config.get("shared_names", {})

    server = subprocess.Popen([str(GEN), "serve", "--quiet", "--keep-urls", "--dir", str(out), "--addr", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        address = server.stdout.readline().strip()
        if not address.startswith("http://"):
            print("gen serve did not start", file=sys.stderr)
            return 2
        host, port = address[len("http://"):].rsplit(":", 1)
        log(f"gen serve at {address}; comparing (seed {seed}, {pages} random pages per list)")
        client = Client(host, int(port))
        tally = Tally()
        rng = random.Random(seed)
        compare(published, client, tally, rng, pages, shared)
    finally:
        server.terminate()
        server.wait()

    total_equal = sum(e for e, _ in tally.kinds.values())
    total_different = sum(d for _, d in tally.kinds.values())
    print(f"\nconformance of the published tree at {src} (seed {seed}), {time.perf_counter() - started:.0f} s:")
    width = max(len(k) for k in tally.kinds)
    print(f"{'':<{width}}  {'equal':>8}  {'different':>9}")
    for kind, (equal, different) in tally.kinds.items():
        print(f"{kind:<{width}}  {equal:>8}  {different:>9}")
    print(f"{'total':<{width}}  {total_equal:>8}  {total_different:>9}")
    print("not compared: /api/v2/meta/ (deploy information in the published tree; gen writes its own)")
    for line in tally.first:
        print("DIFFERENT", line)
    (work / "results.json").write_text(json.dumps({"seed": seed, "kinds": tally.kinds, "first": tally.first}, indent=2))
    return 1 if total_different else 0


def compare(published, client, tally, rng, pages, shared):
    segments = sorted(p.name for p in published.iterdir() if p.is_dir() and p.name != "meta")

    # The root: every resource's list url. The published root also lists meta (set aside above).
    root = strict_json((published / "index.json").read_bytes())
    want = {NEUTRAL.get(k, k): v for k, v in expected(root).items() if k != "meta"}
    want = {k: f"{BASE}/api/v2/{k}/" for k in want}
    status, body = client.get("/api/v2/")
    tally.check("root index (meta set aside)", "/api/v2/", status, body, want)

    for segment in segments:
        ours = NEUTRAL.get(segment, segment)
        results = strict_json((published / segment / "index.json").read_bytes())["results"]
        count = len(results)
        # records by id; names collected for the name paths (a shared name serves the lowest id)
        by_name, subs_by_name = {}, {}
        for entry in results:
            rid = int(entry["url"].rstrip("/").rsplit("/", 1)[1])
            record_dir = published / segment / str(rid)
            record = strict_json((record_dir / "index.json").read_bytes())
            want = expected(record)
            path = f"/api/v2/{ours}/{rid}/"
            status, body = client.get(path)
            tally.check("record by id", path, status, body, want)
            name = record.get("name")
            if isinstance(name, str) and (name not in by_name or rid < by_name[name][0]):
                by_name[name] = (rid, want)
            for sub in sorted(p.name for p in record_dir.iterdir() if p.is_dir()):
                sub_want = expected(strict_json((record_dir / sub / "index.json").read_bytes()))
                # by the url the record gives (no trailing slash in the published data), if any
                links = [v for v in want.values() if isinstance(v, str) and v.rstrip("/").endswith(f"/{rid}/{sub}")]
                for link in links or [f"{BASE}/api/v2/{ours}/{rid}/{sub}/"]:
                    path = link[len(BASE):]
                    status, body = client.get(path)
                    tally.check("sub-document by id", path, status, body, sub_want)
                if isinstance(name, str) and ((name, sub) not in subs_by_name or rid < subs_by_name[(name, sub)][0]):
                    subs_by_name[(name, sub)] = (rid, sub_want)
        for name, (rid, want) in sorted(by_name.items()):
            path = f"/api/v2/{ours}/{name}/"
            tally.check("record by name", path, *client.get(path), want)
        for (name, sub), (rid, want) in sorted(subs_by_name.items()):
            path = f"/api/v2/{ours}/{name}/{sub}/"
            tally.check("sub-document by name", path, *client.get(path), want)
        for name in shared.get(ours, []):
            log(f"{ours}: shared name {name!r} served from the lowest id, {by_name[name][0]}")

        # list pages: the root, the whole list, edges and random pairs
        pairs = [(None, None), (count, 0), (100000, 0), (0, count), (20, count + 5), (1, count - 1)]
        pairs += [(rng.randint(0, count + 30), rng.randint(0, count + 10)) for _ in range(pages)]
        for limit, offset in pairs:
            query = "" if limit is None else f"?limit={limit}&offset={offset}"
            path = f"/api/v2/{ours}/{query}"
            want = expected_page(ours, results, limit or 0, offset or 0)
            tally.check("list page", path, *client.get(path), want)
        log(f"{segment}: {count} records compared")


if __name__ == "__main__":
    sys.exit(main())
