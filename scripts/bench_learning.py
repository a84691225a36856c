#!/usr/bin/env python3
"""What memory that learns costs chat, and how soon a stated fact is known.

Starts the service (the built-in responder, the real embedding model) on the given database,
with one tenant and two agents keeping semantic memory: one learning by the rules
(`config.memory_extraction: rules`), one not (`off`). Then:

1. Chat throughput, closed loop (BENCH_LEARNING_CLIENTS clients, default 16): rounds of
   BENCH_LEARNING_SECONDS (default 8) against the `off` agent and the `rules` agent in turn,
   twice, each message stating a new fact ("My name is Ada and I live in City 123."), so every
   exchange of the `rules` agent is learned from (the previous home invalidated, the new one
   added) while the next chats run. Between rounds the extraction backlog is waited out, so a
   round of `off` never pays for the `rules` round before it. Prints chats/s of each and their
   ratio (target: rules at least 0.9x off, extraction being off the request path).
2. Extraction lag at a fixed rate (BENCH_LEARNING_RATE chats/s, default 100, for
   BENCH_LEARNING_LAG_SECONDS, default 20, over 10 `rules` agents): for every exchange, the time
   from its `agent.message.completed` event (the exchange stored) to the `memory.created`
   event of the fact learned from it (written in the transaction that makes the fact
   searchable), read from the events table afterwards; p50, p99 and max.

    scripts/bench_learning.py BINARY DATABASE_URL

Talks to 127.0.0.1 only.
"""

import concurrent.futures
import http.client
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

BINARY, DATABASE_URL = os.path.abspath(sys.argv[1]), sys.argv[2]
CLIENTS = int(os.environ.get("BENCH_LEARNING_CLIENTS", "16"))
SECONDS = float(os.environ.get("BENCH_LEARNING_SECONDS", "8"))
RATE = float(os.environ.get("BENCH_LEARNING_RATE", "100"))
LAG_SECONDS = float(os.environ.get("BENCH_LEARNING_LAG_SECONDS", "20"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, port):
        self.port = port
        self.local = threading.local()

    def conn(self):
        if not hasattr(self.local, "conn"):
            self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        return self.local.conn

    def call(self, method, path, body=None, token=None, form=False):
        headers = {}
        if token:
            headers["authorization"] = f"Bearer {token}"
        if form:
            headers["content-type"] = "application/x-www-form-urlencoded"
            data = "&".join(f"{k}={v}" for k, v in body.items())
        else:
            headers["content-type"] = "application/json"
            data = json.dumps(body) if body is not None else None
        for attempt in range(2):
            try:
                conn = self.conn()
                conn.request(method, path, data, headers)
                response = conn.getresponse()
                raw = response.read()
                return response.status, (json.loads(raw) if raw else None)
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                # A kept-alive connection the server closed while idle: nothing was handled.
                del self.local.conn
                if attempt:
                    raise
        raise AssertionError("unreachable")


def query(sql):
    """Rows of `sql` on the benchmark's database (SQLite's file, or PostgreSQL through psql)."""
    if DATABASE_URL.startswith("sqlite"):
        path = DATABASE_URL.split("://", 1)[1].split("?", 1)[0]
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
            return db.execute(sql).fetchall()
    out = subprocess.run(["psql", DATABASE_URL, "-At", "-F", "\t", "-c", sql],
                         check=True, capture_output=True, text=True).stdout
    return [tuple(line.split("\t")) for line in out.splitlines() if line]


def backlog():
    """Chat exchanges the memory_extraction consumer has not read yet (its cursor is the last
    event it passed; events are ordered by (position, id))."""
    rows = query(
        "SELECT COUNT(*) FROM events e, event_consumers c WHERE c.name = 'memory_extraction' "
        "AND e.event_type = 'agent.message.completed' "
        "AND (e.position > c.after_position OR (e.position = c.after_position AND e.id > c.after_id))")
    return int(rows[0][0])


def wait_for_learning(timeout=600):
    """Until the consumer has read every exchange (and so learned from each)."""
    deadline = time.time() + timeout
    left = backlog()
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = backlog()
    if left:
        raise SystemExit(f"extraction did not catch up: {left} exchanges not read after {timeout} s")


def closed_loop(api, token, agent, seconds, start):
    """Chats from CLIENTS clients for `seconds`; how many completed."""
    stop = time.time() + seconds
    counter = iter(range(start, start + 10_000_000))
    lock = threading.Lock()
    done = [0]

    def client():
        while time.time() < stop:
            with lock:
                n = next(counter)
            status, _ = api.call("POST", f"/api/v1/agents/{agent}/chat",
                                 {"message": f"My name is Ada and I live in City {n}."}, token)
            assert status == 200, status
            with lock:
                done[0] += 1

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0]


def parse_time(raw):
    raw = raw.replace(" ", "T").replace("Z", "+00:00")
    if "+" not in raw[10:] and "-" not in raw[10:]:
        raw += "+00:00"
    return datetime.fromisoformat(raw)


def main():
    port = free_port()
    work = tempfile.mkdtemp(prefix="agentry-learning-")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AGENTRY_BIND": f"127.0.0.1:{port}",
        "AGENTRY_DATABASE_URL": DATABASE_URL,
        "AGENTRY_AUTO_MIGRATE": "true",
        "AGENTRY_DATA_DIR": os.path.join(work, "data"),
        "AGENTRY_AUTH_RATE_PER_MINUTE": "1000000",
        "AGENTRY_PAYMENT_PROVIDER": "manual",
        "AGENTRY_LLM_PROVIDER": "builtin",
        "AGENTRY_EMBEDDING_PROVIDER": "minilm",
        "AGENTRY_EMBEDDING_MODEL_DIR": os.path.join(ROOT, "data", "models", "all-MiniLM-L6-v2"),
        "AGENTRY_LOG": "warn",
    }
    service = subprocess.Popen([BINARY, "serve"], cwd=work, env=env)
    backend = DATABASE_URL.split(":", 1)[0]
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        api = Api(port)
        email = f"learning-{os.getpid()}-{time.time_ns()}@example.com"
        assert api.call("POST", "/api/v1/auth/register", {"email": email, "password": "correct horse battery",
                                                          "full_name": "Bench"})[0] == 201
        status, tokens = api.call("POST", "/api/v1/auth/login",
                                  {"username": email.replace("@", "%40"), "password": "correct+horse+battery"},
                                  form=True)
        assert status == 200, (status, tokens)
        token = tokens["access_token"]
        _, me = api.call("GET", "/api/v1/auth/me", token=token)
        tenant = me["tenants"][0]["id"]
        subprocess.run([BINARY, "tenant", "set-plan", tenant, "enterprise"], cwd=work, check=True,
                       env=env, stdout=subprocess.DEVNULL)
        assert api.call("POST", "/api/v1/billing/purchases", {"credits": 1_000_000}, token)[0] in (200, 201)

        def agent(mode, name):
            status, body = api.call("POST", "/api/v1/agents", {
                "name": name, "memory_types": ["semantic"], "config": {"memory_extraction": mode}}, token)
            assert status == 201, body
            return body["id"]

        off, rules = agent("off", "bench off"), agent("rules", "bench rules")
        # Both agents remember facts, so every chat of either recalls (embeds its message and
        # searches): the rounds differ only in the extraction that follows the `rules` chats.
        for agent_id in (off, rules):
            for fact in ("The user's name is Ada.", "The user lives in City 0."):
                assert api.call("POST", "/api/v1/memory", {"agent_id": agent_id, "content": fact}, token)[0] == 201
        closed_loop(api, token, off, 2, 0)  # warm-up: connections, caches, the model
        rates = {"off": [], "rules": []}
        wait_for_learning()
        for round_ in range(2):
            for mode, agent_id in (("off", off), ("rules", rules)):
                # Numbers of their own: no message is one the embedder has seen (and cached).
                first = 1_000_000 * (2 * round_ + (mode == "rules") + 1)
                n = closed_loop(api, token, agent_id, SECONDS, first)
                rates[mode].append(n / SECONDS)
                left = backlog()
                waited = time.time()
                wait_for_learning()
                print(f"{backend:10} round {round_ + 1}, {mode:5}: {n} chats; then {left} exchanges not yet "
                      f"read, caught up in {time.time() - waited:.1f} s")
        off_rate, rules_rate = statistics.mean(rates["off"]), statistics.mean(rates["rules"])
        print(f"{backend:10} chat, extraction off    {off_rate:8.1f} chats/s  (rounds {rates['off'][0]:.1f}, {rates['off'][1]:.1f})")
        print(f"{backend:10} chat, extraction rules  {rules_rate:8.1f} chats/s  (rounds {rates['rules'][0]:.1f}, {rates['rules'][1]:.1f})")
        print(f"{backend:10} ratio rules/off         {rules_rate / off_rate:8.2f}x  (target >= 0.90x)")

        # The lag at a fixed rate, over ten agents learning by the rules.
        lag_agents = [agent("rules", f"bench lag {i}") for i in range(10)]
        total = int(RATE * LAG_SECONDS)
        started = time.time()
        failures = [0]

        def one(i):
            status, _ = api.call("POST", f"/api/v1/agents/{lag_agents[i % 10]}/chat",
                                 {"message": f"I live in Town {i}."}, token)
            if status != 200:
                failures[0] += 1

        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
            futures = []
            for i in range(total):
                due = started + i / RATE
                wait = due - time.time()
                if wait > 0:
                    time.sleep(wait)
                futures.append(pool.submit(one, i))
            for f in futures:
                f.result()
        sent_for = time.time() - started
        wait_for_learning()
        assert failures[0] == 0, f"{failures[0]} chats failed"
        agent_list = ",".join(f"'{a}'" for a in lag_agents)
        if backend == "sqlite":
            completed = query("SELECT json_extract(data, '$.message_id'), created_at FROM events "
                              "WHERE event_type = 'agent.message.completed' "
                              f"AND json_extract(data, '$.agent_id') IN ({agent_list})")
            created = query("SELECT json_extract(data, '$.source_message_ids[1]'), created_at FROM events "
                            "WHERE event_type = 'memory.created' "
                            f"AND json_extract(data, '$.agent_id') IN ({agent_list})")
        else:
            completed = query("SELECT data->>'message_id', created_at FROM events "
                              "WHERE event_type = 'agent.message.completed' "
                              f"AND data->>'agent_id' IN ({agent_list})")
            created = query("SELECT data->'source_message_ids'->>1, created_at FROM events "
                            "WHERE event_type = 'memory.created' "
                            f"AND data->>'agent_id' IN ({agent_list})")
        stored = {reply: parse_time(at) for reply, at in completed}
        lags = sorted((parse_time(at) - stored[reply]).total_seconds() * 1000
                      for reply, at in created if reply in stored)
        assert len(lags) == total, f"{len(lags)} facts for {total} exchanges"
        p = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]  # noqa: E731
        print(f"{backend:10} extraction lag at {total / sent_for:.0f} chats/s ({total} exchanges, 10 agents): "
              f"p50 {p(0.50):.1f} ms, p99 {p(0.99):.1f} ms, max {lags[-1]:.1f} ms")
    finally:
        service.terminate()
        service.wait()


if __name__ == "__main__":
    main()
