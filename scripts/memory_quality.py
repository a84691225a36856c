#!/usr/bin/env python3
"""Retrieval quality of memory search: recall@5 of the labelled set in
crates/server/tests/data/memory_recall.json (60 facts, 60 paraphrased questions, most sharing no
content word with their fact), through the HTTP API of a running service, for each search
mode (hybrid, vector alone, lexical alone).

    memory_quality.py BASE_URL LABEL [TOKEN]
        prints one line per mode: "LABEL mode recall@5 recall@1". With TOKEN (of a tenant whose
        plan does not limit the ~250 calls, as make bench makes), it works in that tenant;
        without, it registers an account.
"""
import json
import sys
import urllib.request
import uuid
from pathlib import Path

base, label = sys.argv[1], sys.argv[2]
data = json.loads((Path(__file__).parent.parent / "crates/server/tests/data/memory_recall.json").read_text())


def call(method, path, body=None, token=None, form=None):
    headers = {}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    if form is not None:
        payload = "&".join(f"{k}={urllib.request.quote(v)}" for k, v in form.items()).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    if token:
        headers["authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, data=payload, headers=headers, method=method)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")


if len(sys.argv) > 3:
    token = sys.argv[3]
else:
    email = f"quality-{uuid.uuid4().hex}@example.com"
    call("POST", "/api/v1/auth/register", {"email": email, "password": "correct horse battery", "full_name": "Q"})
    token = call("POST", "/api/v1/auth/login", form={"username": email, "password": "correct horse battery"})["access_token"]
agent = call("POST", "/api/v1/agents", {"name": "quality"}, token)["id"]
ids = {}
for fact in data["facts"]:
    ids[call("POST", "/api/v1/memory", {"agent_id": agent, "content": fact["content"]}, token)["id"]] = fact["id"]

for mode in ("hybrid", "vector", "lexical"):
    at5 = at1 = 0
    for q in data["questions"]:
        hits = call("POST", "/api/v1/memory/search", {"agent_id": agent, "query": q["question"], "top_k": 5, "mode": mode}, token)["results"]
        found = [ids.get(h["id"]) for h in hits]
        at5 += q["fact"] in found
        at1 += bool(found) and found[0] == q["fact"]
    n = len(data["questions"])
    print(f"{label:<28} {mode:<8} recall@5 {at5 / n:.3f}   recall@1 {at1 / n:.3f}")
