#!/usr/bin/env bash
# Load benchmark: the release build on SQLite and on PostgreSQL, driven by wrk over many
# connections. Prints requests/s and p50/p99 latency per route, and each route's throughput as a
# ratio to GET /healthz measured in the same run (the baseline: the HTTP stack alone).
#
# Beside GET /api/v1/agents and chat over 32 tenants, the database's own limit for the same work:
# on PostgreSQL, pgbench -M prepared running exactly the statements the route sends per request
# (scripts/bench/pg/*.sql, one copy per benchmark tenant, chosen at random per transaction) with
# as many clients as the service has request connections, for as long as wrk ran; on SQLite,
# the same statements in a Rust loop on as many threads as the service serves requests with
# (crates/store/examples/sqlite_baseline.rs). The route's req/s is printed
# against that baseline's, with their ratio.
#
# Then SmolLM2 in process (scripts/bench.sh llm: load, prefill, generated tokens/s against the
# memory-bandwidth limit) and the enumeration timing of forgot-password and magic-link (scripts/enumeration_timing.py):
# the median answer time for an address with an account and for one without, per database.
# `scripts/bench.sh timing` runs only that part; `scripts/bench.sh hotpath` only the routes of the
# first table (GET /agents, GET /auth/me, chat) on both databases; `scripts/bench.sh learning`
# only memory that learns (chat with extraction by the rules against none, and its lag).
#
# Settings: BENCH_DURATION (default 10s), BENCH_CONNECTIONS (64), BENCH_THREADS (2),
# BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/agentry_bench; set to "" to skip),
# BENCH_TIMING_REQUESTS (1000 per address), BENCH_BIN (a binary to measure instead of building
# this tree), BENCH_SQLITE=0 (the hotpath, stores, webhooks, workflows and chat parts: PostgreSQL only),
# BENCH_LLM_PROVIDER (the servers' chat model, default builtin: the service's cost, not a model's),
# BENCH_CHAT_REQUESTS (2000 per route of `scripts/bench.sh chat`).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${BENCH_DURATION:-10s}
connections=${BENCH_CONNECTIONS:-64}
threads=${BENCH_THREADS:-2}
pg_url=${BENCH_PG_URL-postgres://postgres@127.0.0.1:5432/agentry_bench}
port=18089
base="http://127.0.0.1:$port"

if [ "${1:-}" != "timing" ] && ! command -v wrk >/dev/null 2>&1; then
    echo "installing wrk (Debian package)"
    apt-get install -y -qq wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
fi
if [ -n "$pg_url" ] && ! command -v pgbench >/dev/null 2>&1; then
    echo "installing pgbench (Debian package postgresql-client)"
    apt-get install -y -qq postgresql-client >/dev/null ||
        { apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null; }
fi
target_dir=${CARGO_TARGET_DIR:-target}
# BENCH_BIN: a binary to measure instead of this tree's release build (to compare two builds).
if [ -n "${BENCH_BIN:-}" ]; then
    bin=$BENCH_BIN
else
    cargo build --release --quiet
    bin=$target_dir/release/agentry
fi
workdir=$(mktemp -d)
# The real embedding model for memory (make model fetches it).
export AGENTRY_EMBEDDING_MODEL_DIR="${AGENTRY_EMBEDDING_MODEL_DIR:-$PWD/data/models/all-MiniLM-L6-v2}"
bash scripts/fetch-model.sh "$AGENTRY_EMBEDDING_MODEL_DIR" >/dev/null
cargo build --release --locked --quiet --example memory_fill --example webhook_sink --example mcp_call_bench
cargo build --release --locked --quiet -p agentry-store --example sqlite_baseline
fill=$target_dir/release/examples/memory_fill
sink=$target_dir/release/examples/webhook_sink
sqlite_baseline=$target_dir/release/examples/sqlite_baseline
mcp_call_bench=$target_dir/release/examples/mcp_call_bench
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$workdir"
}
trap cleanup EXIT

start_server() { # $1 = database URL
    AGENTRY_BIND="127.0.0.1:$port" AGENTRY_DATABASE_URL="$1" AGENTRY_AUTO_MIGRATE=true \
        AGENTRY_DATA_DIR="$workdir/data" AGENTRY_LOG=warn AGENTRY_PAYMENT_PROVIDER=manual \
        AGENTRY_AUTH_RATE_PER_MINUTE=1000000 AGENTRY_LLM_PROVIDER="${BENCH_LLM_PROVIDER:-builtin}" \
        "$bin" serve >"$workdir/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do curl -fs "$base/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "server did not start:"; cat "$workdir/server.log"; exit 1
}

stop_server() {
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
}

json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# Registers a tenant, lifts it to the Enterprise plan (no rate limit, so the benchmark measures
# the service rather than the limiter), buys it credits for the chats and creates agents.
# Prints "token agent".
new_tenant() { # $1 = database URL, $2 = agents to create
    local email="bench-$RANDOM$RANDOM$RANDOM@example.com" token tenant agent=""
    curl -fs -X POST "$base/api/v1/auth/register" -H 'content-type: application/json' \
        -d "{\"email\":\"$email\",\"password\":\"correct horse battery\",\"full_name\":\"Bench\",\"company\":\"Bench\"}" >/dev/null
    token=$(curl -fs -X POST "$base/api/v1/auth/login" --data-urlencode "username=$email" \
        --data-urlencode "password=correct horse battery" | json_field '["access_token"]')
    tenant=$(curl -fs "$base/api/v1/auth/me" -H "Authorization: Bearer $token" | json_field '["tenants"][0]["id"]')
    AGENTRY_DATABASE_URL="$1" AGENTRY_LOG=warn "$bin" tenant set-plan "$tenant" enterprise >/dev/null
    curl -fs -X POST "$base/api/v1/billing/purchases" -H "Authorization: Bearer $token" \
        -H 'content-type: application/json' -d '{"credits": 1000000}' >/dev/null
    for i in $(seq 1 "$2"); do
        agent=$(curl -fs -X POST "$base/api/v1/agents" -H "Authorization: Bearer $token" -H 'content-type: application/json' \
            -d "{\"name\": \"bench agent $i\", \"type\": \"assistant\"}" | json_field '["id"]')
    done
    echo "$token $tenant $agent" >>"$workdir/ids.txt"
    echo "$token $agent"
}

# One tenant with 25 agents (the list route pages over them), and 32 tenants with an agent each
# for chat spread over tenants. Sets $token and $agent, and writes the wrk scripts.
prepare_tenants() { # $1 = database URL
    : >"$workdir/ids.txt"
    read -r token agent < <(new_tenant "$1" 25)
    cat >"$workdir/chat.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"message": "Hello! What can you tell me about the weather on Mars today?"}'
wrk.headers["Content-Type"] = "application/json"
LUA
    local tokens="" agents=""
    for _ in $(seq 1 32); do
        read -r t a < <(new_tenant "$1" 1)
        tokens="$tokens\"$t\","
        agents="$agents\"$a\","
    done
    head -n 1 "$workdir/ids.txt" >"$workdir/ids-agents.txt"
    tail -n +2 "$workdir/ids.txt" >"$workdir/ids-chat32.txt"
    cat >"$workdir/chat32.lua" <<LUA
local tokens = {$tokens}
local agents = {$agents}
local body = '{"message": "Hello! What can you tell me about the weather on Mars today?"}'
local n = 0
request = function()
    n = n + 1
    local k = (n % #tokens) + 1
    return wrk.format("POST", "/api/v1/agents/" .. agents[k] .. "/chat",
        {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. tokens[k]}, body)
end
LUA
}

# run_wrk NAME ARGS... ; prints "rps p50 p99"
run_wrk() {
    local out
    out=$(wrk --latency -t"$threads" -c"$connections" -d"$duration" "$@")
    local rps p50 p99 non2xx
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    echo "$rps $p50 $p99 ${non2xx:-0}"
}

# The service's connections that serve requests: on PostgreSQL each HTTP worker thread pools its
# own share of AGENTRY_DATABASE_MAX_CONNECTIONS, one more share going to the background workers
# (crates/store/src/database.rs); on SQLite each worker thread reads on a connection of its own.
service_workers() { echo "${AGENTRY_WORKERS:-$(nproc)}"; }
request_connections() {
    local workers max per
    workers=$(service_workers)
    max=${AGENTRY_DATABASE_MAX_CONNECTIONS:-16}
    per=$((max / (workers + 1)))
    [ "$per" -ge 1 ] || per=1
    echo $((workers * per))
}

# wrk's duration (10s, 2m) in seconds, for pgbench and the SQLite loop.
duration_seconds() {
    case "$duration" in
    *m) echo $((${duration%m} * 60)) ;;
    *s) echo "${duration%s}" ;;
    *) echo "$duration" ;;
    esac
}

# The user id and refresh-token family of a bearer token (its `sub` and `sid` claims).
token_ids() {
    python3 -c 'import base64, json, sys
p = sys.argv[1].split(".")[1]
c = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
print(c["sub"], c["sid"])' "$1"
}

# pgbench -M prepared on SCRIPT (scripts/bench/pg/), with the ids of the tenants of IDS ("token
# tenant agent" lines) in place: one script in which each transaction takes the tenants in turn
# (`\if` branches, one per tenant), as the wrk script does, so that no two clients start on the
# same tenant's row; as many clients as the service's request connections, planned generically
# as the service's connections plan (plan_cache_mode) and, as they do, without TLS. Prints
# transactions per second.
pg_baseline() { # url script ids
    local user family name count script
    name=$(basename "$2" .sql)
    script="$workdir/pg-$name.sql"
    count=$(wc -l <"$3")
    # The meta-commands (\set) once, then the statements once per tenant.
    { grep '^\\' "$2" || true; } >"$script"
    [ "$count" -gt 1 ] && echo "\\set tenant (:client_id + :n) % $count" >>"$script"
    local i=0
    while read -r tok ten agt; do
        read -r user family < <(token_ids "$tok")
        if [ "$count" -gt 1 ]; then
            if [ "$i" -eq 0 ]; then echo "\\if :tenant = 0"; else echo "\\elif :tenant = $i"; fi
        fi
        grep -v '^\\' "$2" | grep -v '^--' |
            sed -e "s/:bench_user\b/'$user'/g; s/:bench_family\b/'$family'/g" \
                -e "s/:bench_tenant\b/'$ten'/g; s/:bench_agent\b/'$agt'/g"
        i=$((i + 1))
    done <"$3" >>"$script"
    [ "$count" -gt 1 ] && echo "\\endif" >>"$script"
    # Without TLS, as the service connects (libpq would otherwise negotiate it on TCP).
    local url="$1?sslmode=disable"
    [[ "$1" == *\?* ]] && url="$1&sslmode=disable"
    PGOPTIONS="-c plan_cache_mode=force_generic_plan" pgbench -n -M prepared -c "$(request_connections)" \
        -j "$threads" -T "$(duration_seconds)" -D run=$((RANDOM % 9000 + 1)) -D n=0 -f "$script" "$url" |
        awk '/^tps/ {printf "%.0f\n", $3}'
}

# The SQLite loop over GET /api/v1/agents' statements for the tenant of IDS' first line.
sqlite_agents_baseline() { # url ids
    local tok ten agt user family
    read -r tok ten agt <"$2"
    read -r user family < <(token_ids "$tok")
    "$sqlite_baseline" agents "${1#sqlite://}" "$(service_workers)" "$(duration_seconds)" "$user" "$family" "$ten"
}

# The SQLite loop over a chat's statements, over the tenants of IDS in turn, on as many threads
# as wrk has connections: a chat's writes wait for the writer's commit, and how many chats wait
# at once decides how many share a commit (the service's 64 are requests in flight, not threads).
sqlite_chat_baseline() { # url ids
    local tok ten agt user family
    while read -r tok ten agt; do
        read -r user family < <(token_ids "$tok")
        echo "$user $family $ten $agt"
    done <"$2" >"$workdir/sqlite-chat-ids.txt"
    "$sqlite_baseline" chat "${1#sqlite://}" "$connections" "$(duration_seconds)" "$workdir/sqlite-chat-ids.txt"
}

# A route against its database's baseline, into $workdir/baselines.txt.
report_baseline() { # backend route rps baseline-rps how
    local ratio
    ratio=$(python3 -c "print(f'{float($3)/float($4):.3f}')")
    printf '%-10s %-24s %10s %12s %9s  %s\n' "$1" "$2" "$3" "$4" "${ratio}x" "$5" >>"$workdir/baselines.txt"
}

print_baselines() {
    [ -s "$workdir/baselines.txt" ] || return 0
    echo
    echo "each route against its database's own limit for the same statements (same run, same duration)"
    printf '%-10s %-24s %10s %12s %9s  %s\n' backend route "req/s" "baseline/s" "ratio" "baseline"
    cat "$workdir/baselines.txt"
    : >"$workdir/baselines.txt"
}

report() { # backend route rps p50 p99 non2xx baseline
    local ratio
    ratio=$(python3 -c "print(f'{float($3)/float($7):.3f}')")
    printf '%-10s %-24s %10s %10s %10s %11s %8s\n' "$1" "$2" "$3" "$4" "$5" "${ratio}x" "$6"
}

# Mean time of N logins, in milliseconds: a wrong password against an unknown address. The two
# should be alike, so that timing does not reveal which addresses have accounts.
login_timing() {
    local known="timing-$RANDOM$RANDOM@example.com" n=20
    curl -fs -X POST "$base/api/v1/auth/register" -H 'content-type: application/json' \
        -d "{\"email\":\"$known\",\"password\":\"correct horse battery\",\"full_name\":\"T\"}" >/dev/null
    mean_ms() { # username
        local total=0 t
        for _ in $(seq 1 "$n"); do
            t=$(curl -s -o /dev/null -w '%{time_total}' -X POST "$base/api/v1/auth/login" \
                --data-urlencode "username=$1" --data-urlencode "password=wrong password")
            total=$(python3 -c "print($total + $t)")
        done
        python3 -c "print(f'{$total / $n * 1000:.1f}')"
    }
    local wrong unknown
    wrong=$(mean_ms "$known")
    unknown=$(mean_ms "nobody-$RANDOM@example.com")
    echo "login timing ($n each, sequential): wrong password ${wrong} ms, unknown address ${unknown} ms"
}

bench_backend() { # name url
    start_server "$2"
    prepare_tenants "$2"
    read -r h_rps h_p50 h_p99 h_err < <(run_wrk "$base/healthz")
    report "$1" "GET /healthz" "$h_rps" "$h_p50" "$h_p99" "$h_err" "$h_rps"
    local agents_rps chat32_rps
    read -r agents_rps p50 p99 err < <(run_wrk -H "Authorization: Bearer $token" "$base/api/v1/agents")
    report "$1" "GET /api/v1/agents" "$agents_rps" "$p50" "$p99" "$err" "$h_rps"
    read -r rps p50 p99 err < <(run_wrk -H "Authorization: Bearer $token" "$base/api/v1/auth/me")
    report "$1" "GET /api/v1/auth/me" "$rps" "$p50" "$p99" "$err" "$h_rps"
    read -r rps p50 p99 err < <(run_wrk -H "Authorization: Bearer $token" -s "$workdir/chat.lua" \
        "$base/api/v1/agents/$agent/chat")
    report "$1" "POST chat (1 tenant)" "$rps" "$p50" "$p99" "$err" "$h_rps"
    read -r chat32_rps p50 p99 err < <(run_wrk -s "$workdir/chat32.lua" "$base")
    report "$1" "POST chat (32 tenants)" "$chat32_rps" "$p50" "$p99" "$err" "$h_rps"
    # The baselines run on the same database once the service has stopped, so that neither its
    # background work (the outbox's fan-out of the chats' events) nor its idle threads share
    # the CPUs or the database with them.
    stop_server
    case "$2" in
    postgres*)
        report_baseline "$1" "GET /api/v1/agents" "$agents_rps" "$(pg_baseline "$2" scripts/bench/pg/agents.sql \
            "$workdir/ids-agents.txt")" "pgbench -M prepared -c $(request_connections) scripts/bench/pg/agents.sql"
        report_baseline "$1" "POST chat (32 tenants)" "$chat32_rps" "$(pg_baseline "$2" scripts/bench/pg/chat.sql \
            "$workdir/ids-chat32.txt")" "pgbench -M prepared -c $(request_connections) scripts/bench/pg/chat.sql × 32 tenants"
        ;;
    sqlite*)
        report_baseline "$1" "GET /api/v1/agents" "$agents_rps" "$(sqlite_agents_baseline "$2" "$workdir/ids-agents.txt")" \
            "examples/sqlite_baseline agents, $(service_workers) threads"
        report_baseline "$1" "POST chat (32 tenants)" "$chat32_rps" "$(sqlite_chat_baseline "$2" "$workdir/ids-chat32.txt")" \
            "examples/sqlite_baseline chat, $connections threads, 32 tenants"
        ;;
    esac
    print_baselines
}

# A wrk script of POSTs to PATH (as the bench tenant's $token), each body BEFORE, a number of its
# own, AFTER: distinct across the runs of one server, `offset + n`, where `n` counts a thread's
# requests and `offset` sets the threads and the runs (RUN, 1 to 9) apart. Seven digits at
# most: a handful of tokens in a text.
lua_numbered_posts() { # run path before after
    cat <<LUA
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("offset", $1 * 1000000 + threads * 100000)
end
offset = 0
n = 0
request = function()
    n = n + 1
    local body = '$3' .. (offset + n) .. '$4'
    return wrk.format("POST", "$2", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer $token"}, body)
end
LUA
}

# Memory: ingestion with the real model, search over 10,000 and 100,000 entries of one agent
# (query embedding included), and retrieval quality (recall@5 of the labelled set).
bench_memory() { # name url
    start_server "$2"
    read -r token agent < <(new_tenant "$2" 1)
    local tenant other model dim
    tenant=$(curl -fs "$base/api/v1/auth/me" -H "Authorization: Bearer $token" | json_field '["tenants"][0]["id"]')
    other=$(curl -fs -X POST "$base/api/v1/agents" -H "Authorization: Bearer $token" -H 'content-type: application/json' \
        -d '{"name": "ingest"}' | json_field '["id"]')
    model=$(curl -fs "$base/readyz" | json_field '["embedding"]["model"]')
    dim=$(curl -fs "$base/readyz" | json_field '["embedding"]["dimension"]')
    read -r h_rps _ < <(run_wrk "$base/healthz")
    lua_numbered_posts 1 /api/v1/memory '{"agent_id": "'"$other"'", "content": "Customer note ' \
        ': prefers delivery on weekday mornings and pays by invoice."}' >"$workdir/ingest.lua"
    read -r rps p50 p99 err < <(run_wrk -s "$workdir/ingest.lua" "$base")
    report "$1" "POST /memory (ingest)" "$rps" "$p50" "$p99" "$err" "$h_rps"
    # Searches whose queries differ (a customer number in each), so that every one is embedded:
    # the query cache would otherwise answer all but the first. The repeated query, which the
    # cache answers, is measured apart.
    search_lua() { # run (2 to 9)
        lua_numbered_posts "$1" /api/v1/memory/search '{"agent_id": "'"$agent"'", "query": "when does customer ' \
            ' want the delivery of the laptop?", "top_k": 5}'
    }
    cat >"$workdir/search-repeated.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"agent_id": "$agent", "query": "when does the customer want the delivery of the laptop?", "top_k": 5}'
wrk.headers["Content-Type"] = "application/json"
LUA
    local have=0 run=2
    for size in 10000 100000; do
        "$fill" "$2" "$tenant" "$agent" $((size - have)) "$model" "$dim" >/dev/null
        have=$size
        # After a bulk load PostgreSQL plans with the statistics of the empty table until
        # autovacuum's next analyze; a service's own writes would have triggered one by now.
        case "$2" in postgres*) psql -q "$2" -c "ANALYZE memory_entries" ;; esac
        curl -fs -X POST "$base/api/v1/memory/search" -H "Authorization: Bearer $token" \
            -H 'content-type: application/json' -d '{"agent_id": "'"$agent"'", "query": "warm up"}' >/dev/null
        # One client at a time: the latency of a search, not of a queue of them.
        search_lua "$run" >"$workdir/search.lua"
        read -r rps p50 p99 err < <(threads=1 connections=1 run_wrk -s "$workdir/search.lua" "$base")
        report "$1" "search ${size} (1 client)" "$rps" "$p50" "$p99" "$err" "$h_rps"
        search_lua "$((run + 1))" >"$workdir/search.lua"
        run=$((run + 2))
        read -r rps p50 p99 err < <(run_wrk -s "$workdir/search.lua" "$base")
        report "$1" "search ${size}" "$rps" "$p50" "$p99" "$err" "$h_rps"
    done
    read -r rps p50 p99 err < <(run_wrk -H "Authorization: Bearer $token" -s "$workdir/search-repeated.lua" \
        "$base/api/v1/memory/search")
    report "$1" "search ${size}, one query" "$rps" "$p50" "$p99" "$err" "$h_rps"
    python3 scripts/memory_quality.py "$base" "$1 $(curl -fs "$base/readyz" | json_field '["embedding"]["provider"]')" "$token" \
        >>"$workdir/quality.txt"
    stop_server
}

# Webhook deliveries end to end: agents are created (one `agent.created` event each) while a
# local receiver (examples/webhook_sink.rs) notes when each event arrives. Paced (one client
# creating agents one after another): the latency from the event's commit to its arrival.
# Burst (64 clients): deliveries per second, events written until the receiver has them all.
bench_webhooks() { # name url
    AGENTRY_WEBHOOK_ALLOW_PRIVATE=true AGENTRY_WEBHOOK_ALLOW_INSECURE=true start_server "$2"
    local token sink_port=$((port + 1)) mode sink_pid
    read -r token _ < <(new_tenant "$2" 0)
    curl -fs -X POST "$base/api/v1/webhooks" -H "Authorization: Bearer $token" -H 'content-type: application/json' \
        -d "{\"url\": \"http://127.0.0.1:$sink_port/hook\", \"events\": [\"agent.created\"]}" >/dev/null
    cat >"$workdir/agent.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name": "hook bench"}'
wrk.headers["Content-Type"] = "application/json"
LUA
    for mode in paced burst; do
        "$sink" "$sink_port" 3 >"$workdir/sink.txt" &
        sink_pid=$!
        sleep 0.3
        if [ "$mode" = paced ]; then
            threads=1 connections=1 duration=5s run_wrk -H "Authorization: Bearer $token" -s "$workdir/agent.lua" \
                "$base/api/v1/agents" >/dev/null
        else
            duration=5s run_wrk -H "Authorization: Bearer $token" -s "$workdir/agent.lua" "$base/api/v1/agents" >/dev/null
        fi
        wait "$sink_pid"
        local deliveries events rate p50 p99
        read -r deliveries events rate p50 p99 <"$workdir/sink.txt"
        printf '%-10s %-24s %10s %10s %10s %20s\n' "$1" "webhooks ($mode)" "$rate/s" "${p50}ms" "${p99}ms" \
            "$events events, $deliveries sent"
    done
    stop_server
}

# Workflow executions of a two-step `transform` workflow, started by 64 clients for 5 s, once
# through POST /workflows/{id}/execute and once through a trigger URL (202s per second: the
# start is one transaction, the trigger call also counts against the plan and the trigger), each
# followed by the time until the worker has completed every one (executions completed per
# second, from the first start to the last completion). /healthz of the same server is the
# baseline.
bench_workflows() { # name url
    AGENTRY_WORKFLOW_POLL_INTERVAL_MS=50 start_server "$2"
    local token healthz wf_api wf_trigger trigger_url trigger_secret
    read -r token _ < <(new_tenant "$2" 0)
    new_workflow() { # one workflow for both entry points: a trigger call's JSON body is its input
        curl -fs -X POST "$base/api/v1/workflows" -H "Authorization: Bearer $token" -H 'content-type: application/json' \
            -d "{\"name\": \"bench\", \"steps\": [{\"id\": \"a\", \"type\": \"transform\", \"output\": {\"n\": \"{{ input.n }}\", \"hi\": \"hello {{ input.name }}\"}},
                 {\"id\": \"b\", \"type\": \"transform\", \"output\": \"{{ steps.a.output.hi | upper }} #{{ steps.a.output.n }}\"}]}" |
            json_field '["id"]'
    }
    wf_api=$(new_workflow)
    wf_trigger=$(new_workflow)
    read -r trigger_url trigger_secret < <(curl -fs -X POST "$base/api/v1/workflows/$wf_trigger/webhooks" \
        -H "Authorization: Bearer $token" -H 'content-type: application/json' -d '{"name": "bench"}' |
        python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["url"], d["secret"])')
    read -r healthz _ < <(duration=5s run_wrk "$base/healthz")
    cat >"$workdir/execute.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"input": {"n": 7, "name": "bench"}}'
wrk.headers["Content-Type"] = "application/json"
LUA
    cat >"$workdir/trigger.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"n": 7, "name": "bench"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Webhook-Secret"] = "$trigger_secret"
LUA
    workflow_phase "$1" "POST execute (202)" "$wf_api" "$healthz" -H "Authorization: Bearer $token" \
        -s "$workdir/execute.lua" "$base/api/v1/workflows/$wf_api/execute"
    workflow_phase "$1" "POST trigger URL (202)" "$wf_trigger" "$healthz" -s "$workdir/trigger.lua" "$base$trigger_url"
    stop_server
}

# One phase of bench_workflows: wrk ARGS for 5 s, then waits for workflow WF's executions to
# finish; prints the starts and the completions per second.
workflow_phase() { # name label wf healthz wrk-args...
    local name=$1 label=$2 wf=$3 healthz=$4 rps p50 p99 non2xx t0 t1 running=1 completed started line
    shift 4
    t0=$(date +%s.%N)
    read -r rps p50 p99 non2xx < <(duration=5s run_wrk "$@")
    report "$name" "$label" "$rps" "$p50" "$p99" "$non2xx" "$healthz"
    while [ "$running" != 0 ]; do
        running=$(curl -fs "$base/api/v1/workflows/$wf/executions?status=running&per_page=1" \
            -H "Authorization: Bearer $token" | json_field '["total"]')
        sleep 0.05
    done
    t1=$(date +%s.%N)
    completed=$(curl -fs "$base/api/v1/workflows/$wf/executions?status=completed&per_page=1" \
        -H "Authorization: Bearer $token" | json_field '["total"]')
    started=$(curl -fs "$base/api/v1/workflows/$wf/executions?per_page=1" -H "Authorization: Bearer $token" |
        json_field '["total"]')
    line=$(python3 -c "r = $completed / ($t1 - $t0); print(f'{r:.0f} {r / float($healthz):.4f}')")
    printf '%-10s %-24s %10s %10s %10s %11s %8s\n' "$name" "  executions completed" "${line% *}" "-" "-" \
        "${line#* }x" "$((started - completed))"
}

fresh_pg() {
    local admin_url="${pg_url%/*}/postgres" db_name="${pg_url##*/}"
    psql "$admin_url" -q -c "DROP DATABASE IF EXISTS $db_name WITH (FORCE)" -c "CREATE DATABASE $db_name"
}

# The wrk settings and the column heads of the routes' table.
table_head() {
    echo "wrk: $threads threads, $connections connections, $duration per route; $(nproc) CPUs"
    printf '%-10s %-24s %10s %10s %10s %11s %8s\n' backend route "req/s" p50 p99 "vs /healthz" "non-2xx"
}

# Runs one part of the benchmark on SQLite (unless BENCH_SQLITE=0), then on a fresh PostgreSQL
# database (unless BENCH_PG_URL is empty).
on_each_database() { # $1 = function (name url), $2 = SQLite file name
    [ "${BENCH_SQLITE:-1}" = 0 ] || "$1" sqlite "sqlite://$workdir/$2"
    if [ -n "$pg_url" ]; then
        fresh_pg
        "$1" postgres "$pg_url"
    fi
}

# Does one tenant's load delay another's executions? With the tenant share and without (baseline).
fairness() { # name url
    python3 scripts/fairness_bench.py "$bin" "$2"
}

enumeration_timing() {
    local n=${BENCH_TIMING_REQUESTS:-1000}
    echo
    echo "enumeration timing: median answer time, an address with an account vs one without"
    python3 scripts/enumeration_timing.py "$bin" "sqlite://$workdir/enumeration.db" "$n"
    if [ -n "$pg_url" ]; then
        fresh_pg
        python3 scripts/enumeration_timing.py "$bin" "$pg_url" "$n"
    fi
}

if [ "${1:-}" = "timing" ]; then
    enumeration_timing
    exit 0
fi

# GET /api/v1/agents with each rate-limit store: process memory, the database, Redis. Unlike
# the routes above (an Enterprise tenant, whose requests no limiter counts), every request here
# is counted: the traffic is spread round-robin over $store_tenants Pro tenants (600 a minute
# each), enough that none reaches its limit in the $store_duration run (the non-2xx column
# shows it). The tenants are made once per database; each store gets a fresh server.
store_tenants=${BENCH_STORE_TENANTS:-800}
store_duration=${BENCH_STORE_DURATION:-5s}
redis_url=${BENCH_REDIS_URL:-redis://127.0.0.1:6379}

pro_tenants() { # $1 = database URL; writes $workdir/stores.lua
    python3 scripts/bench_tenants.py "$base" "$store_tenants" >"$workdir/tenants.txt"
    while read -r _ tenant; do
        AGENTRY_DATABASE_URL="$1" AGENTRY_LOG=warn "$bin" tenant set-plan "$tenant" pro >/dev/null
    done <"$workdir/tenants.txt"
    local tokens
    tokens=$(awk '{printf "\"%s\",", $1}' "$workdir/tenants.txt")
    cat >"$workdir/stores.lua" <<LUA
local tokens = {$tokens}
local n = 0
request = function()
    n = n + 1
    return wrk.format("GET", "/api/v1/agents", {["Authorization"] = "Bearer " .. tokens[(n % #tokens) + 1]})
end
LUA
}

bench_stores() { # name url
    local store healthz="" rps p50 p99 err
    for store in memory database redis; do
        if [ "$store" = redis ] && ! redis-cli -u "$redis_url" ping >/dev/null 2>&1; then
            echo "$1: skipping the redis store: no Redis answers at $redis_url"
            continue
        fi
        AGENTRY_RATE_LIMIT_STORE=$store AGENTRY_REDIS_URL=$redis_url \
            AGENTRY_REDIS_KEY_PREFIX="agentry-bench:$RANDOM$RANDOM:" start_server "$2"
        if [ -z "$healthz" ]; then
            pro_tenants "$2"
            read -r healthz h_p50 h_p99 h_err < <(duration=$store_duration run_wrk "$base/healthz")
            report "$1" "GET /healthz" "$healthz" "$h_p50" "$h_p99" "$h_err" "$healthz"
        fi
        read -r rps p50 p99 err < <(duration=$store_duration run_wrk -s "$workdir/stores.lua" "$base")
        report "$1" "GET /agents ($store)" "$rps" "$p50" "$p99" "$err" "$healthz"
        stop_server
    done
}

if [ "${1:-}" = "stores" ]; then
    echo "GET /api/v1/agents with each rate-limit store; $store_tenants Pro tenants round-robin;" \
        "wrk: $threads threads, $connections connections, $store_duration; $(nproc) CPUs"
    printf '%-10s %-24s %10s %10s %10s %11s %8s\n' backend route "req/s" p50 p99 "vs /healthz" "non-2xx"
    on_each_database bench_stores stores.db
    exit 0
fi

memory_quality_hashing() {
    AGENTRY_EMBEDDING_PROVIDER=hashing start_server "sqlite://$workdir/hashing.db"
    read -r token _ < <(new_tenant "sqlite://$workdir/hashing.db" 1)
    python3 scripts/memory_quality.py "$base" "sqlite hashing" "$token" >>"$workdir/quality.txt"
    stop_server
}

print_quality() {
    echo
    echo "memory retrieval quality (60 paraphrased questions, crates/server/tests/data/memory_recall.json)"
    cat "$workdir/quality.txt"
}

if [ "${1:-}" = "webhooks" ]; then
    echo "webhook deliveries, commit to arrival at a local receiver; $(nproc) CPUs"
    printf '%-10s %-24s %10s %10s %10s %20s\n' backend route "delivered" p50 p99 ""
    on_each_database bench_webhooks webhooks.db
    exit 0
fi

if [ "${1:-}" = "workflows" ]; then
    echo "workflow executions; $(nproc) CPUs; the last column of 'executions completed' counts those not completed"
    printf '%-10s %-24s %10s %10s %10s %11s %8s\n' backend route "req/s" p50 p99 "vs /healthz" "non-2xx"
    on_each_database bench_workflows workflows.db
    echo
    echo "another tenant's one-step execution while one tenant runs 100 slow executions or 20 chains of five"
    on_each_database fairness fairness.db
    exit 0
fi

# The in-process language model against llama.cpp itself: scripts/bench_llm.sh (it needs none
# of the service's release build, so `make bench-llm` runs it alone).
bench_llm() {
    bash scripts/bench_llm.sh
}

if [ "${1:-}" = "llm" ]; then
    bench_llm
    exit 0
fi

# Streamed chat against unstreamed chat, and the OpenAI-compatible endpoint against chat, with
# the built-in responder (the service's cost, not a model's), one client for all three.
bench_chat() { # name url
    start_server "$2"
    local token agent
    read -r token agent < <(new_tenant "$2" 1)
    echo "$1"
    python3 scripts/chat_stream_bench.py "$base" "$token" "$agent" "${BENCH_CHAT_REQUESTS:-2000}" 8
    stop_server
}

if [ "${1:-}" = "chat" ]; then
    on_each_database bench_chat chat.db
    exit 0
fi

# /mcp tools/call against the REST route it stands for (memory search, chat), one client.
bench_mcp() { # name url
    start_server "$2"
    local token agent
    read -r token agent < <(new_tenant "$2" 1)
    echo "$1"
    python3 scripts/mcp_bench.py "$base" "$token" "$agent" "${BENCH_MCP_REQUESTS:-2000}" 8
    stop_server
}

# One remote MCP tool call as an agent makes it (the guarded client and the official SDK: a
# session opened, tools/call, closed) against a plain HTTP round trip to the same Python server
# (scripts/mcp_test_server.py, FastMCP; make venv installs the SDK), over loopback.
bench_mcp_remote() {
    local mcp_port mcp_pid
    mcp_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    .venv-ci/bin/python scripts/mcp_test_server.py "$mcp_port" bench-token >"$workdir/mcp_server.out" 2>&1 &
    mcp_pid=$!
    for _ in $(seq 1 100); do grep -q '^ready' "$workdir/mcp_server.out" && break; sleep 0.2; done
    "$mcp_call_bench" "http://127.0.0.1:$mcp_port/mcp" bench-token "${BENCH_MCP_CALLS:-500}"
    kill "$mcp_pid" && wait "$mcp_pid" 2>/dev/null || true
}

if [ "${1:-}" = "mcp" ]; then
    on_each_database bench_mcp mcp.db
    echo "a remote MCP server's tool, called as an agent calls it"
    bench_mcp_remote
    exit 0
fi

if [ "${1:-}" = "hotpath" ]; then
    table_head
    on_each_database bench_backend bench.db
    exit 0
fi

# Memory that learns: chat throughput with extraction by the rules against none, and the lag
# from a stored exchange to its fact at a fixed rate (scripts/bench_learning.py), per database.
bench_learning() {
    echo
    echo "memory that learns (scripts/bench_learning.py)"
    python3 scripts/bench_learning.py "$bin" "sqlite://$workdir/learning.db"
    if [ -n "$pg_url" ]; then
        fresh_pg
        python3 scripts/bench_learning.py "$bin" "$pg_url"
    fi
}

if [ "${1:-}" = "learning" ]; then
    bench_learning
    exit 0
fi

if [ "${1:-}" = "memory" ]; then
    table_head
    bench_memory sqlite "sqlite://$workdir/memory.db"
    memory_quality_hashing
    if [ -n "$pg_url" ]; then
        fresh_pg
        bench_memory postgres "$pg_url"
    fi
    print_quality
    bench_learning
    exit 0
fi

table_head
bench_backend sqlite "sqlite://$workdir/bench.db"
bench_memory sqlite "sqlite://$workdir/memory.db"
memory_quality_hashing
start_server "sqlite://$workdir/timing.db"
login_timing
stop_server
if [ -n "$pg_url" ]; then
    fresh_pg
    bench_backend postgres "$pg_url"
    fresh_pg
    bench_memory postgres "$pg_url"
fi
print_quality
echo
echo "webhook deliveries, commit to arrival at a local receiver"
bench_webhooks sqlite "sqlite://$workdir/webhooks.db"
if [ -n "$pg_url" ]; then
    fresh_pg
    bench_webhooks postgres "$pg_url"
fi
echo
echo "workflow executions"
bench_workflows sqlite "sqlite://$workdir/workflows.db"
if [ -n "$pg_url" ]; then
    fresh_pg
    bench_workflows postgres "$pg_url"
fi
echo
echo "another tenant's one-step execution while one tenant runs 100 slow executions or 20 chains of five"
on_each_database fairness fairness.db
echo
echo "GET /api/v1/agents with each rate-limit store ($store_tenants Pro tenants, $store_duration)"
bench_stores sqlite "sqlite://$workdir/stores.db"
if [ -n "$pg_url" ]; then
    fresh_pg
    bench_stores postgres "$pg_url"
fi
enumeration_timing

echo
echo "streamed chat and the OpenAI-compatible endpoint"
on_each_database bench_chat chat.db
echo
echo "MCP tools/call against the REST routes"
on_each_database bench_mcp mcp.db
echo "a remote MCP server's tool, called as an agent calls it"
bench_mcp_remote
echo
echo "the in-process language model"
bench_llm
