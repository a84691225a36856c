# Agentry — common tasks. `make help` lists them.

CARGO ?= cargo

.PHONY: help run test lint fmt deny bench ci migrate

help:
	@echo "make run     - build and serve on 127.0.0.1:8080 (embedded SQLite in ./data)"
	@echo "make test    - all tests (PostgreSQL ones too when AGENTRY_TEST_DATABASE_URL is set)"
	@echo "make lint    - rustfmt check, clippy -D warnings, cargo deny"
	@echo "make fmt     - format the code"
	@echo "make bench   - load benchmarks against the release build on SQLite and PostgreSQL"
	@echo "make ci      - what CI runs (.ci/run)"

run:
	$(CARGO) run --release

migrate:
	$(CARGO) run --release -- migrate

test:
	$(CARGO) test --workspace --all-features

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	$(CARGO) deny check licenses bans sources

deny:
	$(CARGO) deny check licenses bans sources

bench:
	bash scripts/bench.sh

ci:
	bash .ci/run
