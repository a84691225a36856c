#!/usr/bin/env python3
"""Does one tenant's load delay another tenant's executions?

Starts the service on the given database (twice: with the default tenant share, and with the
share set as high as the workers, the baseline of the same run) and measures how long another
tenant's one-step workflow takes from `POST /execute` to `completed` (median and worst of 10,
one after the other):

- idle: nothing else runs;
- burst: tenant A has started 100 executions at once, each waiting 3 s on a slow receiver;
- chains: tenant A has started 20 chains at once, each an execution whose agent runs a
  workflow whose agent runs … five deep, the deepest waiting 3 s on the receiver.

    scripts/fairness_bench.py BINARY DATABASE_URL

Talks to 127.0.0.1 only: the service, and the slow receiver this script serves.
"""

import http.client
import http.server
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

BINARY, DATABASE_URL = os.path.abspath(sys.argv[1]), sys.argv[2]
SLOW_SECONDS = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slow(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(SLOW_SECONDS)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


class Api:
    def __init__(self, port):
        self.port = port
        self.token = None

    def call(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"content-type": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, (json.loads(data) if data else None)

    def sign_up(self, email):
        password = "correct horse battery"
        status, _ = self.call("POST", "/api/v1/auth/register",
                              {"email": email, "password": password, "full_name": "Bench"})
        assert status == 201, status
        conn = http.client.HTTPConnection("127.0.0.1", self.port)
        conn.request("POST", "/api/v1/auth/login", f"username={email}&password=correct+horse+battery",
                     {"content-type": "application/x-www-form-urlencoded"})
        self.token = json.loads(conn.getresponse().read())["access_token"]
        _, me = self.call("GET", "/api/v1/auth/me")
        return me["tenants"][0]["id"]

    def workflow(self, steps):
        status, made = self.call("POST", "/api/v1/workflows", {"name": "bench", "steps": steps})
        assert status == 201, made
        return made["id"]

    def agent(self, name, workflow):
        tool = {"type": "run_workflow", "name": "next", "workflow_id": workflow,
                "input_schema": {"type": "object"}, "timeout_seconds": 60}
        status, made = self.call("POST", "/api/v1/agents", {"name": name, "config": {"tools": [tool]}})
        assert status == 201, made
        return made["id"]

    def execute(self, workflow):
        status, started = self.call("POST", f"/api/v1/workflows/{workflow}/execute", {"input": {}})
        assert status == 202, started
        return started["execution_id"]

    def status(self, execution):
        return self.call("GET", f"/api/v1/executions/{execution}")[1]["status"]


def unlimited(database, tenant):
    """The enterprise plan (no request limit) for a tenant, written to the database."""
    if database.startswith("sqlite://"):
        with sqlite3.connect(database[len("sqlite://"):]) as db:
            db.execute("UPDATE tenants SET plan = 'enterprise' WHERE id = ?", (tenant,))
    else:
        subprocess.run(["psql", database, "-q", "-c",
                        f"UPDATE tenants SET plan = 'enterprise' WHERE id = '{tenant}'"], check=True)


def latencies(other, workflow, n=10):
    """Times from execute to completed of `n` executions of `other`'s one-step workflow, in s."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        execution = other.execute(workflow)
        while other.status(execution) == "running":
            time.sleep(0.02)
        times.append(time.perf_counter() - started)
    return times


def run(share, receiver):
    port = free_port()
    work = tempfile.mkdtemp(prefix="agentry-fairness-")
    database = DATABASE_URL
    if database.startswith("sqlite://"):
        database = f"sqlite://{work}/fairness.db"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AGENTRY_BIND": f"127.0.0.1:{port}",
        "AGENTRY_DATABASE_URL": database,
        "AGENTRY_AUTO_MIGRATE": "true",
        "AGENTRY_DATA_DIR": os.path.join(work, "data"),
        "AGENTRY_AUTH_RATE_PER_MINUTE": "1000000",
        "AGENTRY_WEBHOOK_ALLOW_PRIVATE": "true",
        "AGENTRY_WEBHOOK_ALLOW_INSECURE": "true",
        "AGENTRY_LLM_PROVIDER": "builtin",
        "AGENTRY_WORKFLOW_TENANT_SHARE": str(share),
        "AGENTRY_LOG": "error",
    }
    service = subprocess.Popen([BINARY], cwd=work, env=env)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        stamp = time.time_ns()
        busy, other = Api(port), Api(port)
        for api, name in ((busy, "busy"), (other, "other")):
            unlimited(database, api.sign_up(f"{name}-{stamp}@example.com"))
        one_step = other.workflow([{"id": "t", "type": "transform", "output": "{{ 1 + 1 }}"}])
        slow_step = {"id": "wait", "type": "http_request", "method": "POST", "url": receiver, "timeout_seconds": 30}
        slow = busy.workflow([slow_step])
        # A chain five deep: level 1 asks an agent to run level 2, … level 5 waits on the receiver.
        chain = slow
        for level in range(4, 0, -1):
            agent = busy.agent(f"level-{level}-{stamp}", chain)
            chain = busy.workflow([{"id": "ask", "type": "agent_chat", "agent_id": agent,
                                    "message": "Please use next.", "timeout_seconds": 120}])
        results = {"idle": latencies(other, one_step)}
        burst = [busy.execute(slow) for _ in range(100)]
        results["burst"] = latencies(other, one_step)
        while any(busy.status(e) == "running" for e in burst[-5:]):
            time.sleep(0.2)
        chains = [busy.execute(chain) for _ in range(20)]
        results["chains"] = latencies(other, one_step)
        while any(busy.status(e) == "running" for e in chains[-3:]):
            time.sleep(0.2)
        return results
    finally:
        service.terminate()
        service.wait()


def main():
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver = f"http://127.0.0.1:{port}/slow"
    backend = DATABASE_URL.split(":", 1)[0]
    shared = run(8, receiver)
    unshared = run(1000, receiver)
    for load in ("idle", "burst", "chains"):
        a, b = shared[load], unshared[load]
        print(f"{backend:10} {load:7} another tenant's one-step execution: median {statistics.median(a):6.3f} s, "
              f"worst {max(a):6.3f} s with the share (8); median {statistics.median(b):6.3f} s, "
              f"worst {max(b):6.3f} s without it (baseline)")
    server.shutdown()


if __name__ == "__main__":
    main()
