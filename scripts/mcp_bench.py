"""/mcp tools/call against the REST route it stands for, in one run with the same client
(scripts/bench.sh mcp): memory_search against POST /memory/search, chat_<agent> against
POST /agents/{id}/chat.

    python3 scripts/mcp_bench.py BASE TOKEN AGENT [REQUESTS] [CONCURRENCY]

Each of CONCURRENCY threads keeps one HTTP/1.1 connection and sends REQUESTS/CONCURRENCY
requests. Prints requests/s and p50/p99 latency of each, and the MCP figure's ratio to its
REST route's measured here.
"""

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlparse

base, token, agent = sys.argv[1], sys.argv[2], sys.argv[3]
requests = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
concurrency = int(sys.argv[5]) if len(sys.argv) > 5 else 8
url = urlparse(base)
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def call(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status not in (200, 201):
        sys.exit(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data) if data else None


setup = http.client.HTTPConnection(url.hostname, url.port)
agent_name = call(setup, "GET", f"/api/v1/agents/{agent}")["name"]
chat_tool = "chat_" + "".join(c if c.isalnum() or c in "_-" else "_" for c in agent_name)
facts = ["The customer's favourite colour is teal.", "Invoices are sent monthly.", "Support answers within a day.",
         "The office is closed on Sundays.", "Refunds take five working days."]
for i in range(50):
    call(setup, "POST", "/api/v1/memory", {"content": f"{facts[i % len(facts)]} (note {i})"})
setup.close()
search = {"query": "when are invoices sent", "top_k": 5}
message = "How do I reset my password? I tried twice already."


def mcp(name, arguments):
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def run(path, body):
    """(requests/s, latencies) over `requests` requests."""
    latencies, failures = [], []
    lock = threading.Lock()
    encoded = json.dumps(body)

    def worker(n):
        conn = http.client.HTTPConnection(url.hostname, url.port)
        mine = []
        for _ in range(n):
            started = time.perf_counter()
            conn.request("POST", path, body=encoded, headers=headers)
            response = conn.getresponse()
            data = response.read()
            if response.status != 200 or (path == "/mcp" and b'"isError":true' in data):
                with lock:
                    failures.append((response.status, data[:200]))
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)
        conn.close()

    per = requests // concurrency
    threads = [threading.Thread(target=worker, args=(per,)) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if failures:
        sys.exit(f"{path}: {len(failures)} failed answers, e.g. {failures[0]}")
    return per * concurrency / elapsed, latencies


def ms(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


pairs = [
    ("memory search", ("/api/v1/memory/search", search), ("/mcp", mcp("memory_search", search))),
    ("chat", (f"/api/v1/agents/{agent}/chat", {"message": message}), ("/mcp", mcp(chat_tool, {"message": message}))),
]
print(f"{requests} requests, {concurrency} connections, one Python client for both sides")
print(f"{'operation':<16} {'route':<10} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs REST':>8}")
for name, rest, over_mcp in pairs:
    run(*rest)  # warm-up
    rest_rps, rest_lat = run(*rest)
    mcp_rps, mcp_lat = run(*over_mcp)
    print(f"{name:<16} {'REST':<10} {rest_rps:8.0f} {ms(rest_lat, 0.5):8.1f} {ms(rest_lat, 0.99):8.1f} {1:7.2f}x")
    print(f"{'':<16} {'MCP':<10} {mcp_rps:8.0f} {ms(mcp_lat, 0.5):8.1f} {ms(mcp_lat, 0.99):8.1f} {mcp_rps / rest_rps:7.2f}x")
