#!/usr/bin/env bash
# Runs the README's API examples (the block between the readme-examples markers) as written,
# in order, against a fresh release server, and checks the answers they promise.
#
#   scripts/readme_examples.sh [path/to/agentry]     (default: target/release/agentry)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/agentry}")
WORK=$(mktemp -d)
PID=""
# The service is waited for before its directory goes: killed but still closing its SQLite
# file, it would write the WAL back into a directory being removed.
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# exec: $! is then the service itself, which the cleanup can stop (not a subshell).
# The README subscribes a webhook to hooks.example.com and deletes it before any event: the
# allow-list keeps every other host out, and no delivery is ever attempted.
(cd "$WORK" && AGENTRY_BIND="127.0.0.1:$PORT" AGENTRY_LOG=warn AGENTRY_WEBHOOK_ALLOWED_HOSTS=hooks.example.com exec "$BIN" >"$WORK/service.log" 2>&1) &
PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

# The block, on this server's port.
sed -n '/<!-- readme-examples:start -->/,/<!-- readme-examples:end -->/p' README.md |
    sed -e '/^<!--/d' -e '/^```/d' -e "s/127.0.0.1:8080/127.0.0.1:$PORT/g" >"$WORK/examples.sh"
bash -euo pipefail "$WORK/examples.sh" >"$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt"; exit 1; }

expect() {
    grep -qF -- "$1" "$WORK/out.txt" || { echo "README examples: expected $1 in:"; cat "$WORK/out.txt"; exit 1; }
}
expect '"session_id":"user-42:support"'
expect '"workflows":[{"id":"wf_'
expect '"status":"completed","origin":"api","input":{"name":"Ada"},"trigger":null,"output":"Hello Ada"'
expect '"trigger_id":"trg_'
expect '"cron":"0 9 * * MON-FRI","timezone":"Europe/Berlin","input":{"name":"team"},"is_active":true'
expect '"total":4'
expect '{"queued":0}'
expect '"deliveries":{"pending":0,"delivered":0,"failed":0,"skipped":0,"total":0}'
expect 'event: message.delta'
expect 'event: message.completed'
expect '"error":"conflict"'
expect '"email":"ada@example.com"'
expect '"email":"grace@example.com","role":"member","invited_by":"usr_'
expect '"role":"owner"'
expect '"items":[{"id":"key_'
expect '"name":"memory_search"'
expect '"plan":"starter"'
expect 'If an account exists for this address'
expect '204'
expect '"error":"unauthorized"'
expect '"status":"ready"'
expect '"chunks":1'
expect '"key":"plan"'
expect '"label":"human","value":"Name: Ada. Prefers short answers.","description":"Who the user is","limit":2000,"chars":33,"version":1'
expect '"file_name":"refunds.md"'
expect '"citations":[{"index":1,"chunk_id":"kbc_'
expect '"file_name":"refunds.md","page":null,"snippet":"Annual plans are paid back'
echo "README examples: every example ran as written"
