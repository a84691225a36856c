#!/usr/bin/env python3
"""`make bench-knowledge`: how fast knowledge files are ingested and searched, against the
bounds measured in the same run.

    python3 scripts/bench_knowledge.py BINARY BASELINE_EXAMPLE [POSTGRES_URL]

Ingestion (SQLite, the real embedding model): a 200-page PDF (fpdf2) and a 2 MB Word file
(python-docx), written here from seeded random text, each uploaded to a fresh service and
waited for until `indexed`. Printed per file: pages (or sections) and chunks per second, the
time of each stage (the service's `agentry_knowledge_stage_duration_seconds`), and the ratio
to the embedding model's own throughput on the same chunks (the file's chunks, read back
through the API, embedded by BASELINE_EXAMPLE in batches of 32 as ingestion embeds them, with
no service around it): the model is the bound, the target 0.8 or more. Peak resident memory
of the service during the PDF's ingestion is printed beside the file's size and the service's
resident memory with the model loaded, before the upload.

Search (both databases): 20,000 chunks in one base, ingested with the `hashing` embedder
(384 dimensions, as the model's vectors: the vector scan costs the same; query embedding is
measured by `make bench-memory`), then `POST /knowledge-bases/{id}/search` for 10 s by wrk
with 1 and with 64 connections over 16 different questions: requests per second, p50, p99,
and the ratio to `GET /healthz` on the same service in the same run.

Everything runs on 127.0.0.1.
"""

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

from docx import Document
from fpdf import FPDF

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.abspath(sys.argv[1])
BASELINE = os.path.abspath(sys.argv[2])
PG_URL = sys.argv[3] if len(sys.argv) > 3 else "postgres://postgres@127.0.0.1:5432/agentry_bench"
MODEL_DIR = os.environ.get("AGENTRY_EMBEDDING_MODEL_DIR", os.path.join(ROOT, "data/models/all-MiniLM-L6-v2"))
PASSWORD = "correct horse battery"
WORDS = (
    "invoice customer shipping refund colour meeting flight hotel password account manager project "
    "deadline budget report contract delivery warranty schedule office printer laptop subscription "
    "discount payment order support ticket release server backup policy travel expense approval "
    "holiday salary training security incident network database migration feature customer review "
    "quarter revenue forecast supplier inventory warehouse pricing renewal onboarding handbook audit "
    "compliance privacy retention encryption vendor license upgrade outage latency capacity region"
).split()
QUESTIONS = [
    "How long do refunds for annual plans take?", "What is the travel expense policy for hotels?",
    "Who approves a budget over the quarterly limit?", "When is the database migration scheduled?",
    "How are laptops encrypted and backed up?", "What does the warranty cover for printers?",
    "Which supplier handles warehouse inventory?", "How do I report a security incident?",
    "What is the retention period for audit logs?", "When does the subscription renewal happen?",
    "How is latency measured in each region?", "What training do new managers get?",
    "How are support tickets escalated?", "What is the pricing for the enterprise license?",
    "Who signs vendor contracts?", "How is capacity planned for the next quarter?",
]


def sentences(rng, count):
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
        out.append(" ".join(words).capitalize() + ".")
    return out


def make_pdf(path, pages):
    rng = random.Random(7)
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=False)
    for page in range(pages):
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=14)
        pdf.cell(0, 10, f"Section {page + 1}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10)
        for _ in range(3):
            pdf.multi_cell(0, 5, " ".join(sentences(rng, 9)), new_x="LMARGIN", new_y="NEXT")
    pdf.output(path)


def make_docx(path, target_bytes, work):
    """A Word file as people send them: 60 chapters of text with a figure in every sixth, the
    figures (noise, which no compression shrinks) making up the rest of the 2 MB."""
    from PIL import Image

    rng = random.Random(11)
    doc = Document()
    sections = 60
    figures = sections // 6
    side = int(((target_bytes * 0.97 / figures) / 3) ** 0.5)
    for chapter in range(1, sections + 1):
        doc.add_heading(f"Chapter {chapter}", level=1)
        for _ in range(5):
            doc.add_paragraph(" ".join(sentences(rng, 7)))
        if chapter % 6 == 0:
            figure = os.path.join(work, f"figure-{chapter}.png")
            Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(figure)
            doc.add_picture(figure)
    doc.save(path)
    assert os.path.getsize(path) >= target_bytes * 0.95, os.path.getsize(path)
    return sections


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(method, url, body=None, token=None, form=None, raw=None, content_type=None):
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    if form is not None:
        data = "&".join(f"{k}={urllib.request.quote(v)}" for k, v in form.items()).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    if raw is not None:
        data, headers["content-type"] = raw, content_type
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=600) as response:
        text = response.read()
        return json.loads(text) if response.headers.get("content-type", "").startswith("application/json") else text


class Service:
    def __init__(self, database_url, embedder):
        self.dir = tempfile.mkdtemp()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ, AGENTRY_BIND=f"127.0.0.1:{self.port}", AGENTRY_DATABASE_URL=database_url,
                        AGENTRY_AUTO_MIGRATE="true", AGENTRY_LOG="warn", AGENTRY_EMBEDDING_PROVIDER=embedder,
                        AGENTRY_EMBEDDING_MODEL_DIR=MODEL_DIR)
        self.process = subprocess.Popen([BINARY], cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=open(os.path.join(self.dir, "service.log"), "w"))
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{self.base}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        email = f"bench-{uuid.uuid4().hex[:8]}@example.com"
        call("POST", f"{self.base}/api/v1/auth/register",
             {"email": email, "password": PASSWORD, "full_name": "Bench", "company": "Bench"})
        self.token = call("POST", f"{self.base}/api/v1/auth/login",
                          form={"username": email, "password": PASSWORD})["access_token"]
        tenant = call("GET", f"{self.base}/api/v1/auth/me", token=self.token)["tenants"][0]["id"]
        subprocess.run([BINARY, "tenant", "set-plan", tenant, "enterprise"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, cwd=self.dir)

    def api(self, method, path, body=None):
        return call(method, f"{self.base}/api/v1{path}", body, token=self.token)

    def base_with(self, chunking=None):
        body = {"name": f"bench {uuid.uuid4().hex[:6]}"}
        if chunking:
            body["chunking"] = chunking
        return self.api("POST", "/knowledge-bases", body)["id"]

    def upload(self, kb, name, data):
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        answer = call("POST", f"{self.base}/api/v1/knowledge-bases/{kb}/files", token=self.token, raw=body,
                      content_type=f"multipart/form-data; boundary={boundary}")
        return answer["files"][0]["id"]

    def wait_indexed(self, kb, file_id):
        while True:
            f = self.api("GET", f"/knowledge-bases/{kb}/files/{file_id}")
            if f["status"] in ("indexed", "failed"):
                assert f["status"] == "indexed", f
                return f
            time.sleep(0.02)

    def stages(self):
        text = urllib.request.urlopen(f"{self.base}/metrics").read().decode()
        sums = {}
        for m in re.finditer(r'agentry_knowledge_stage_duration_seconds_sum\{stage="(\w+)"\} ([0-9.e+-]+)', text):
            sums[m.group(1)] = float(m.group(2))
        return sums

    def memory_mib(self):
        status = open(f"/proc/{self.process.pid}/status").read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024
        peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024
        return rss, peak

    def chunk_texts(self, kb, file_id):
        texts, skip = [], 0
        while True:
            page = self.api("GET", f"/knowledge-bases/{kb}/files/{file_id}/chunks?skip={skip}&limit=100")
            texts += [c["text"] for c in page["items"]]
            skip += 100
            if skip >= page["total"]:
                return texts

    def stop(self):
        self.process.terminate()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def baseline(texts):
    """The model alone on `texts`: (seconds, peak resident MiB)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
    out = subprocess.run([BASELINE, MODEL_DIR, f.name, "32"], check=True, capture_output=True, text=True).stdout
    os.unlink(f.name)
    answer = json.loads(out)
    return answer["seconds"], answer["peak_rss_mib"]


def ingestion(work):
    print("ingestion (SQLite, all-MiniLM-L6-v2; ratio: the model's own throughput on the same chunks = 1.0)")
    pdf, docx = os.path.join(work, "report.pdf"), os.path.join(work, "manual.docx")
    make_pdf(pdf, 200)
    sections = make_docx(docx, 2 * 1024 * 1024, work)
    print(f"  {'file':<12} {'bytes':>9} {'units':>10} {'chunks':>7} {'total s':>8} {'units/s':>8} "
          f"{'read':>6} {'parse':>6} {'chunk':>6} {'embed':>7} {'index':>6} {'model s':>8} {'ratio':>6}")
    for path, units, unit in [(pdf, 200, "pages"), (docx, sections, "sections")]:
        service = Service(f"sqlite://{tempfile.mkdtemp()}/bench.db", "minilm")
        try:
            kb = service.base_with()
            # The model loads and warms up on a first search, before the clock starts.
            service.api("POST", f"/knowledge-bases/{kb}/search", {"query": "warm up"})
            rss_before, _ = service.memory_mib()
            before = service.stages()
            data = open(path, "rb").read()
            started = time.monotonic()
            file_id = service.upload(kb, os.path.basename(path), data)
            shown = service.wait_indexed(kb, file_id)
            total = time.monotonic() - started
            _, peak = service.memory_mib()
            after = service.stages()
            stage = {k: after.get(k, 0) - before.get(k, 0) for k in ["read", "parse", "chunk", "embed", "index"]}
            model, model_peak = baseline(service.chunk_texts(kb, file_id))
            print(f"  {os.path.basename(path):<12} {len(data):>9} {units:>5} {unit:<4} {shown['chunks']:>7} "
                  f"{total:>8.2f} {units / total:>8.1f} {stage['read']:>6.2f} {stage['parse']:>6.2f} "
                  f"{stage['chunk']:>6.2f} {stage['embed']:>7.2f} {stage['index']:>6.2f} {model:>8.2f} "
                  f"{model / total:>6.2f}")
            bound = 2 * len(data) / 2**20 + model_peak
            print(f"  {'':<12} memory: service {rss_before:.0f} MiB before the upload, peak {peak:.0f} MiB; the "
                  f"model alone on these chunks peaks at {model_peak:.0f} MiB; file {len(data) / 2**20:.1f} MiB; "
                  f"peak / (2 x file + model) = {peak / bound:.2f} (target < 1)")
        finally:
            service.stop()


WRK_LUA = """
local questions = %s
local kb, token = "%s", "%s"
local n = 0
request = function()
    n = n + 1
    local body = '{"query": "' .. questions[(n %% #questions) + 1] .. '", "top_k": 5}'
    return wrk.format("POST", "/api/v1/knowledge-bases/" .. kb .. "/search",
        {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token}, body)
end
"""


def wrk(url, connections, script=None):
    args = ["wrk", "--latency", f"-t{min(connections, 2)}", f"-c{connections}", "-d10s"]
    if script:
        args += ["-s", script]
    out = subprocess.run(args + [url], check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    p50 = re.search(r"\s50%\s+(\S+)", out).group(1)
    p99 = re.search(r"\s99%\s+(\S+)", out).group(1)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert not errors, out
    return rps, p50, p99


def search(work):
    print("search over 20,000 chunks (hashing vectors, 384 dimensions; ratio: GET /healthz in the same run)")
    rng = random.Random(3)
    files = []
    for i in range(20):
        text = "\n\n".join(f"## Topic {i}-{j}\n\n" + " ".join(sentences(rng, 7)) for j in range(1000))
        files.append((f"notes-{i}.md", text.encode()))
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-v", "ON_ERROR_STOP=1"]
    subprocess.run(psql + ["-c", "DROP DATABASE IF EXISTS agentry_bench WITH (FORCE)",
                           "-c", "CREATE DATABASE agentry_bench"], check=True)
    print(f"  {'database':<10} {'clients':>7} {'req/s':>9} {'p50':>9} {'p99':>9} {'healthz/s':>10} {'ratio':>6}")
    for name, url in [("sqlite", f"sqlite://{tempfile.mkdtemp()}/search.db"), ("postgres", PG_URL)]:
        service = Service(url, "hashing")
        try:
            kb = service.base_with({"max_tokens": 200, "overlap_tokens": 0})
            ids = [service.upload(kb, n, data) for n, data in files]
            chunks = sum(service.wait_indexed(kb, i)["chunks"] for i in ids)
            assert chunks >= 20000, chunks
            script = os.path.join(work, "search.lua")
            questions = "{" + ", ".join(json.dumps(q) for q in QUESTIONS) + "}"
            open(script, "w").write(WRK_LUA % (questions, kb, service.token))
            service.api("POST", f"/knowledge-bases/{kb}/search", {"query": QUESTIONS[0]})
            for clients in (1, 64):
                health, _, _ = wrk(f"{service.base}/healthz", clients)
                rps, p50, p99 = wrk(service.base, clients, script)
                print(f"  {name:<10} {clients:>7} {rps:>9.0f} {p50:>9} {p99:>9} {health:>10.0f} {rps / health:>6.3f}")
            print(f"  {name:<10} ({chunks} chunks in {len(files)} files)")
        finally:
            service.stop()


def main():
    if shutil.which("wrk") is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, stdout=subprocess.DEVNULL)
    work = tempfile.mkdtemp()
    try:
        ingestion(work)
        search(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
