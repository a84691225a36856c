"""Registers N accounts (each a tenant of its own) on a running service, eight at a time, and
prints one line per account: its access token and its tenant id. For the benchmark's traffic
spread over many tenants (scripts/bench.sh)."""

import concurrent.futures
import json
import sys
import urllib.parse
import urllib.request
import uuid


def call(request):
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def account(base, i):
    email = f"bench-{i}-{uuid.uuid4().hex[:12]}@example.com"
    password = "correct horse battery"
    register = json.dumps({"email": email, "password": password, "full_name": "Bench"}).encode()
    call(urllib.request.Request(f"{base}/api/v1/auth/register", data=register,
                                headers={"Content-Type": "application/json"}))
    login = urllib.parse.urlencode({"username": email, "password": password}).encode()
    token = call(urllib.request.Request(f"{base}/api/v1/auth/login", data=login))["access_token"]
    me = call(urllib.request.Request(f"{base}/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"}))
    return token, me["tenants"][0]["id"]


def main():
    base, n = sys.argv[1], int(sys.argv[2])
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for token, tenant in pool.map(lambda i: account(base, i), range(n)):
            print(token, tenant)


if __name__ == "__main__":
    main()
