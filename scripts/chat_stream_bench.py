"""Streamed chat against unstreamed chat, and the OpenAI-compatible endpoint against chat, in one
run with the same client (scripts/bench.sh chat).

    python3 scripts/chat_stream_bench.py BASE TOKEN AGENT [REQUESTS] [CONCURRENCY]

Each of CONCURRENCY threads keeps one HTTP/1.1 connection and sends REQUESTS/CONCURRENCY
requests. Prints requests/s, p50/p99 latency, for the streamed reply the time to its first event,
and each figure's ratio to plain chat measured here.
"""

import http.client
import json
import statistics
import sys
import threading
import time
from urllib.parse import urlparse

base, token, agent = sys.argv[1], sys.argv[2], sys.argv[3]
requests = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
concurrency = int(sys.argv[5]) if len(sys.argv) > 5 else 8
url = urlparse(base)
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
message = "How do I reset my password? I tried twice already."


def chat_body(stream):
    return json.dumps({"message": message, "stream": stream})


def openai_body():
    return json.dumps({"model": agent, "messages": [{"role": "user", "content": message}]})


def run(path, body, streamed):
    """(requests/s, latencies, first-event latencies) over `requests` requests."""
    latencies, firsts, failures = [], [], []
    lock = threading.Lock()

    def worker(n):
        conn = http.client.HTTPConnection(url.hostname, url.port)
        mine, my_firsts = [], []
        for _ in range(n):
            started = time.perf_counter()
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            if streamed:
                # readline on the response decodes the chunked body as it arrives.
                first = None
                while line := response.readline():
                    if first is None and line.startswith(b"event:"):
                        first = time.perf_counter() - started
                response.read()
                my_firsts.append(first if first is not None else float("nan"))
            else:
                response.read()
            if response.status != 200:
                with lock:
                    failures.append(response.status)
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)
            firsts.extend(my_firsts)
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
        sys.exit(f"{path}: {len(failures)} answers were not 200: {sorted(set(failures))}")
    return per * concurrency / elapsed, latencies, firsts


def ms(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


chat_path = f"/api/v1/agents/{agent}/chat"
run(chat_path, chat_body(False), False)  # warm-up
plain = run(chat_path, chat_body(False), False)
streamed = run(chat_path, chat_body(True), True)
openai = run("/api/v1/chat/completions", openai_body(), False)
print(f"{requests} requests, {concurrency} connections, one Python client for all three")
print(f"{'route':<28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'first ev p50':>13} {'p99':>6} {'vs chat':>8}")
for name, (rps, lat, firsts) in [("chat", plain), ("chat, streamed", streamed), ("openai chat/completions", openai)]:
    first = f"{ms(firsts, 0.5):13.1f} {ms(firsts, 0.99):6.1f}" if firsts else f"{'':13} {'':6}"
    print(f"{name:<28} {rps:8.0f} {ms(lat, 0.5):8.1f} {ms(lat, 0.99):8.1f} {first} {rps / plain[0]:7.2f}x")
