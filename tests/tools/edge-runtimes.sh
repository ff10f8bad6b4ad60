#!/bin/sh
# Installs the JavaScript runtimes the edge handler tests run in (tests/suite/edge.rs), pinned, under
# target/edge-runtimes: `miniflare` (it runs workerd, Cloudflare's runtime), `wrangler` (the
# Cloudflare project's `wrangler dev`, on the same miniflare) and `deno` from npm.
# Node itself is the system's. Used by `make test` and so by CI.
#
# Never fails the build: without npm the edge tests skip with a message (they fail under CI=true).
# miniflare is pinned to the last release that runs on Node 18 and 20 (later ones need Node 22);
# wrangler to the release built on that miniflare (src/hosts/project.rs writes it into package.json).
set -u

MINIFLARE_VERSION=4.20251217.0
DENO_VERSION=2.9.6
WRANGLER_VERSION=4.56.0

dir="$(cd "$(dirname "$0")/../.." && pwd)/target/edge-runtimes"
stamp="$dir/.installed-$MINIFLARE_VERSION-$DENO_VERSION-$WRANGLER_VERSION"
[ -f "$stamp" ] && exit 0

if ! command -v npm >/dev/null 2>&1; then
    echo "edge-runtimes: npm not found; the edge handler tests will skip" >&2
    exit 0
fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || printf '{"name": "gen-edge-runtimes", "private": true}\n' > "$dir/package.json"
echo "edge-runtimes: installing miniflare@$MINIFLARE_VERSION, wrangler@$WRANGLER_VERSION and deno@$DENO_VERSION into $dir" >&2
if npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
    "miniflare@$MINIFLARE_VERSION" "wrangler@$WRANGLER_VERSION" "deno@$DENO_VERSION" >&2; then
    touch "$stamp"
else
    echo "edge-runtimes: npm install failed; the edge handler tests will skip" >&2
fi
exit 0
