# The README's quick start: `make build`, then `make test`.
CARGO ?= cargo

.PHONY: build serve check test bench fmt

## build: write the default tree from data/ into out/
build:
	$(CARGO) run --release --quiet -- build

## serve: preview out/ at http://127.0.0.1:8080/api/v2/
serve: build
	$(CARGO) run --release --quiet -- serve

## check: validate data/ without writing anything
check:
	$(CARGO) run --release --quiet -- check

## test: every test (unit, integration against the real binary)
test:
	$(CARGO) test --release --quiet

## bench: build and serve benchmarks against cp -r, ditto and nginx (see BENCHMARKS.md);
## API_DATA=<path> uses the real published tree, HUGE=1 adds the 1M-record memory run
bench:
	python3 bench/run.py

fmt:
	$(CARGO) fmt --all
