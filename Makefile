# The README's quick start: `make build`, then `make test`.
CARGO ?= cargo

.PHONY: build serve check test bench soak fuzz fmt

## build: write the default tree from data/ into out/
build:
	$(CARGO) run --release --quiet -- build

## serve: preview out/ at http://127.0.0.1:8080/api/v2/
serve: build
	$(CARGO) run --release --quiet -- serve

## check: validate data/ without writing anything
check:
	$(CARGO) run --release --quiet -- check

## test: every test (unit, integration against the real binary, and the host configs against
## real nginx and Caddy: installed from Debian's packages when missing, skipped without root/apt)
test:
	sh tests/tools/install-hosts.sh
	$(CARGO) test --release --quiet

## bench: build and serve benchmarks against cp -r, ditto and nginx (see BENCHMARKS.md);
## API_DATA=<path> uses the real published tree, HUGE=1 adds the 1M-record memory run
bench:
	python3 bench/run.py

## soak: a bounded load run (wrk, 128 connections, SOAK_SECONDS=30) over a mix of requests: no errors, flat memory
soak:
	python3 bench/soak.py

## fuzz: the fuzz loops of tests/fuzz.rs and 400 random-edit rebuilds of tests/incremental.rs, with a fresh seed (FUZZ_ITERATIONS, FUZZ_SEED)
fuzz:
	FUZZ_ITERATIONS=$${FUZZ_ITERATIONS:-20000} $(CARGO) test --release --test fuzz --test incremental -- --nocapture

fmt:
	$(CARGO) fmt --all
