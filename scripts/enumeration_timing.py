#!/usr/bin/env python3
"""Does the time of forgot-password or magic-link tell whether an address has an account?

Starts the service on the given database, registers one address, then sends requests for that
known address and for an unknown one, interleaved, over one kept-alive connection each, and
prints the median time of each. The known address's hourly mail budget is spent after its
first few requests, so most of them also measure the "budget spent" path. A ratio near 1.00
means the timing reveals nothing.

    scripts/enumeration_timing.py BINARY DATABASE_URL [REQUESTS]

Talks to 127.0.0.1 only.
"""

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BINARY, DATABASE_URL = os.path.abspath(sys.argv[1]), sys.argv[2]
REQUESTS = int(sys.argv[3]) if len(sys.argv) > 3 else 1000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    port = free_port()
    work = tempfile.mkdtemp(prefix="agentry-timing-")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AGENTRY_BIND": f"127.0.0.1:{port}",
        "AGENTRY_DATABASE_URL": DATABASE_URL,
        "AGENTRY_AUTO_MIGRATE": "true",
        "AGENTRY_DATA_DIR": os.path.join(work, "data"),
        "AGENTRY_AUTH_RATE_PER_MINUTE": "1000000",
        "AGENTRY_LOG": "warn",
    }
    service = subprocess.Popen([BINARY], cwd=work, env=env)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        known = f"timing-{os.getpid()}-{time.time_ns()}@example.com"
        unknown = f"nobody-{os.getpid()}-{time.time_ns()}@example.com"
        setup = http.client.HTTPConnection("127.0.0.1", port)
        setup.request("POST", "/api/v1/auth/register",
                      json.dumps({"email": known, "password": "correct horse battery", "full_name": "T"}),
                      {"content-type": "application/json"})
        assert setup.getresponse().read() and True
        backend = DATABASE_URL.split(":", 1)[0]
        for route in ("/api/v1/auth/forgot-password", "/api/v1/auth/magic-link"):
            connections = {a: http.client.HTTPConnection("127.0.0.1", port) for a in (known, unknown)}
            times = {known: [], unknown: []}
            for i in range(REQUESTS + 20):
                for address in (known, unknown) if i % 2 == 0 else (unknown, known):
                    body = json.dumps({"email": address})
                    conn = connections[address]
                    started = time.perf_counter()
                    conn.request("POST", route, body, {"content-type": "application/json"})
                    response = conn.getresponse()
                    response.read()
                    elapsed = (time.perf_counter() - started) * 1000
                    assert response.status == 202, response.status
                    if i >= 20:  # warm-up
                        times[address].append(elapsed)
            k, u = statistics.median(times[known]), statistics.median(times[unknown])
            print(f"{backend:10} {route:32} known {k:6.3f} ms   unknown {u:6.3f} ms   "
                  f"ratio {k / u:5.3f}   (median of {REQUESTS} each)")
    finally:
        service.terminate()
        service.wait(timeout=30)


if __name__ == "__main__":
    main()
