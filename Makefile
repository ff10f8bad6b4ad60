# The README's quick start: `make build`, then `make test`.
CARGO ?= cargo

.PHONY: build serve check test fmt

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

fmt:
	$(CARGO) fmt --all
