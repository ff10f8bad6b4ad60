#!/bin/sh
# Installs puppeteer-core from npm, pinned, into target/puppeteer (never committed), for
# tests/suite/browser.rs, which drives the system's Chromium with it through tests/tools/click-view.mjs:
# it fills in and submits the HTML view's forms and clicks its links as a user does.
# puppeteer-core downloads no browser. Used by `make test` and so by CI.
#
# Never fails the build: without npm or the registry the test skips with a message instead
# (under CI=true it fails, saying so). Pinned to the last 24.x: 25.x needs Node 22.
set -u

PUPPETEER_VERSION=24.43.1

dir="$(cd "$(dirname "$0")/../.." && pwd)/target/puppeteer"
stamp="$dir/.installed-$PUPPETEER_VERSION"
[ -f "$stamp" ] && exit 0

if ! command -v npm >/dev/null 2>&1; then
    echo "install-puppeteer: npm not found; the HTML view's click test will skip" >&2
    exit 0
fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || printf '{"name": "gen-puppeteer", "private": true}\n' > "$dir/package.json"
echo "install-puppeteer: installing puppeteer-core@$PUPPETEER_VERSION into $dir" >&2
if npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
    "puppeteer-core@$PUPPETEER_VERSION" >&2; then
    touch "$stamp"
else
    echo "install-puppeteer: npm install failed; the HTML view's click test will skip" >&2
fi
exit 0
