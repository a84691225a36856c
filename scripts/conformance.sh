#!/usr/bin/env bash
# Conformance of the served API with its own OpenAPI document, against a live release server:
# the document validates (openapi-spec-validator) under both envelopes, and schemathesis finds
# no failure with every check and every phase (scripts/schemathesis.toml).
#
#   scripts/conformance.sh [path/to/agentry]     (default: target/release/agentry)
#
# Needs the Python tools of scripts/requirements.txt on PATH (.ci/run makes .venv-ci).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/agentry}")
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
    # Waited for, so that no service still writes its SQLite file into a directory being removed.
    for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start <envelope>: serves a fresh SQLite database; sets PORT and DIR. Webhooks may only go to
# 127.0.0.1: whatever URLs the generated requests subscribe, nothing leaves this machine.
start() {
    DIR="$WORK/$1"
    mkdir -p "$DIR"
    PORT=$(free_port)
    # exec: $! is then the service itself, which the cleanup can stop (not a subshell).
    (cd "$DIR" && AGENTRY_BIND="127.0.0.1:$PORT" AGENTRY_API_ENVELOPE="$1" \
        AGENTRY_AUTH_RATE_PER_MINUTE=1000000 AGENTRY_AUTH_FAILURES_PER_MINUTE=1000000 \
        AGENTRY_PAYMENT_PROVIDER=manual AGENTRY_LOG=warn \
        AGENTRY_WEBHOOK_ALLOWED_HOSTS=127.0.0.1 AGENTRY_WEBHOOK_ALLOW_PRIVATE=true AGENTRY_WEBHOOK_ALLOW_INSECURE=true \
        exec "$BIN" >"$DIR/service.log" 2>&1) &
    PIDS+=($!)
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return 0
        sleep 0.1
    done
    echo "the service did not start:" >&2
    cat "$DIR/service.log" >&2
    return 1
}

for envelope in bare wrapped; do
    start "$envelope"
    curl -sf "http://127.0.0.1:$PORT/api/v1/openapi.json" -o "$DIR/openapi.json"
    python3 - "$DIR/openapi.json" "$envelope" <<'PY'
import json, sys
from openapi_spec_validator import validate
doc = json.load(open(sys.argv[1]))
validate(doc)
error = doc["components"]["schemas"]["Error"]
wrapped = "success" in error["properties"]
assert wrapped == (sys.argv[2] == "wrapped"), "the document must reflect the envelope"
print(f"openapi-spec-validator: the {sys.argv[2]} document is valid ({len(doc['paths'])} paths)")
PY
done

# Schemathesis against the bare-envelope server, as the test account of an Enterprise tenant
# (no plan limit to hit) with credits to spend.
start bare
BASE="http://127.0.0.1:$PORT"
curl -sf -X POST "$BASE/api/v1/auth/register" -H 'content-type: application/json' \
    -d '{"email": "schemathesis@example.com", "password": "correct horse battery", "full_name": "Schemathesis"}' \
    -o "$WORK/registered.json"
export AGENTRY_ST_TENANT=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["tenant_id"])' "$WORK/registered.json")
(cd "$DIR" && AGENTRY_LOG=warn "$BIN" tenant set-plan "$AGENTRY_ST_TENANT" enterprise)
export AGENTRY_ST_TOKEN=$(curl -sf -X POST "$BASE/api/v1/auth/login" \
    --data-urlencode username=schemathesis@example.com --data-urlencode 'password=correct horse battery' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')
st --config-file scripts/schemathesis.toml run "$BASE/api/v1/openapi.json" --url "$BASE" \
    --checks all --phases examples,coverage,fuzzing,stateful ${ST_ARGS:-}
