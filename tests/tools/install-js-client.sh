#!/bin/sh
# Installs the public API's official browser client, pokeapi-js-wrapper 2.x, from npm into
# target/npm (never committed), for tests/suite/browser.rs, which loads it unchanged in headless
# Chromium against `gen serve`. Used by `make test` and so by CI.
#
# Never fails the build: without npm or the registry the test skips with a message instead
# (under CI=true it fails, saying so).
set -u
cd "$(dirname "$0")/../.." || exit 0
dir=target/npm
[ -f "$dir/node_modules/pokeapi-js-wrapper/package.json" ] && exit 0
if ! command -v npm >/dev/null 2>&1; then
    echo "install-js-client: npm not found; the browser client test will skip" >&2
    exit 0
fi
mkdir -p "$dir"
npm install --prefix "$dir" --no-save --no-audit --no-fund --ignore-scripts 'pokeapi-js-wrapper@^2' >/dev/null ||
    echo "install-js-client: npm install pokeapi-js-wrapper@^2 failed; the browser client test will skip" >&2
exit 0
