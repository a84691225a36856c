#!/usr/bin/env python3
"""The console walked in headless Chromium (Debian's chromium and chromium-driver, through
selenium) as a person uses it, on a fresh service of the given binary:

- sign in with the password form;
- create an agent with the memory_search tool;
- add a memory and find it by a paraphrase, with its explanation (vector and word ranks);
- chat in the playground: the reply streams in piece by piece, the tool call and its result
  show inline, and the credits charged;
- add a core memory block and set the agent to learn by the rules; after two chats the fact the
  second replaced is struck through, and its page shows its history and source exchange;
- create and run a workflow and watch its steps complete on the live timeline;
- subscribe a loopback receiver and see a delivery; retry a failed one;
- create an API key (shown once) and use it; invite a member (mailed over SMTP);
- look at billing with its chart;
- create a knowledge base, upload a PDF and a Markdown file at once and watch them become
  indexed, search it, attach it to the agent, ask, and follow the reply's citation to its chunk;
- every read page again with JavaScript off;
- on every page: no content-security-policy violation and no console error; a screenshot of
  each is kept in target/console-screenshots/ (also at 390 px wide).

    scripts/console_browser.py [path/to/agentry]     (default: target/release/agentry)

The language model is a small OpenAI-compatible server this script runs: it asks for one
memory_search call, then streams its answer word by word. Everything talks to 127.0.0.1 only.
"""

import http.server
import json
import pathlib
import re
import sys
import threading
import time

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from browser_pages import PASSWORD, Service_, SmtpSink, browser, call  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHOTS = ROOT / "target" / "console-screenshots"
ANSWER = "From memory: the customer's favourite colour is teal, so I would suggest the teal edition."
# Given sources from a knowledge base, the model answers from the first and cites it.
CITED = "Refunds for annual plans are paid back within fourteen days of cancellation [1]."
QUESTION = "Within how many days are refunds for annual plans paid after cancellation?"
FIXTURES = ROOT / "crates" / "documents" / "tests" / "fixtures"


class FakeModel:
    """An OpenAI-compatible chat server on a free local port. Without a tool result in the
    conversation it asks for memory_search; with one, it streams ANSWER word by word, slowly
    enough for a person (and this script) to see the reply grow."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_):
                pass

            def do_POST(self):  # noqa: N802 (the standard library's name)
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if any("Sources from your knowledge bases" in (m.get("content") or "") for m in body["messages"]):
                    return self.cite(bool(body.get("stream")))
                tool_result = any(m.get("role") == "tool" for m in body["messages"])
                if body.get("stream"):
                    self.stream(tool_result)
                else:
                    self.whole(tool_result)

            def cite(self, streamed):
                if not streamed:
                    data = json.dumps({"choices": [{"message": {"role": "assistant", "content": CITED},
                                                    "finish_reason": "stop"}],
                                       "usage": {"prompt_tokens": 300, "completion_tokens": 20}}).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for payload in [json.dumps({"choices": [{"delta": {"content": CITED}, "finish_reason": None}]}),
                                json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
                                json.dumps({"choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 20}}),
                                "[DONE]"]:
                    line = f"data: {payload}\n\n".encode()
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def whole(self, tool_result):
                message = ({"role": "assistant", "content": ANSWER} if tool_result else
                           {"role": "assistant", "content": None, "tool_calls": [{
                               "id": "call_1", "type": "function",
                               "function": {"name": "memory_search", "arguments": json.dumps({"query": "colour"})}}]})
                data = json.dumps({"choices": [{"message": message,
                                                "finish_reason": "stop" if tool_result else "tool_calls"}],
                                   "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def stream(self, tool_result):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()

                def send(payload):
                    line = f"data: {payload}\n\n".encode()
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()

                if tool_result:
                    for i, word in enumerate(ANSWER.split(" ")):
                        piece = word if i == 0 else " " + word
                        send(json.dumps({"choices": [{"delta": {"content": piece}, "finish_reason": None}]}))
                        time.sleep(0.12)
                    send(json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]}))
                else:
                    send(json.dumps({"choices": [{"delta": {"tool_calls": [{
                        "index": 0, "id": "call_1",
                        "function": {"name": "memory_search", "arguments": json.dumps({"query": "colour"})}}]},
                        "finish_reason": None}]}))
                    send(json.dumps({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}))
                send(json.dumps({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 12,
                                                          "total_tokens": 52}}))
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


class Receiver:
    """A webhook receiver on a free local port. It answers the statuses in `answers` in turn
    (the last one repeats) and keeps what it gets."""

    def __init__(self, answers):
        self.received = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_):
                pass

            def do_POST(self):  # noqa: N802
                receiver.received.append(self.rfile.read(int(self.headers["content-length"])))
                status = answers[min(len(receiver.received), len(answers)) - 1]
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


class SlowApi:
    """A JSON API on a free local port that takes two seconds to answer: a workflow step that
    calls it stays running long enough to be watched."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_):
                pass

            def do_GET(self):  # noqa: N802
                time.sleep(2)
                data = json.dumps({"answer": "forty-two"}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/answer"


class Walk:
    """One browser session through the console, checking each page it sees."""

    def __init__(self, service):
        self.service = service
        self.driver = browser(True)
        self.driver.set_window_size(1280, 1000)
        self.pages = []
        SHOTS.mkdir(parents=True, exist_ok=True)

    def wait(self, condition, timeout=20):
        try:
            return WebDriverWait(self.driver, timeout).until(condition)
        except TimeoutException:
            # Say where the walk stood: the address and what the page showed.
            shown = self.driver.find_elements(By.TAG_NAME, "main")
            text = shown[0].text[:2000] if shown else self.driver.page_source[:2000]
            raise AssertionError(f"waited {timeout} s in vain on {self.driver.current_url}:\n{text}")

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def fill(self, element_id, text):
        field = self.driver.find_element(By.ID, element_id)
        field.clear()
        field.send_keys(text)

    def check(self, name, narrow=False):
        """The page as it is now: no CSP violation, no console error, a screenshot (and one at
        390 px wide when asked); its address is kept for the walk without JavaScript."""
        problems = [e["message"] for e in self.driver.get_log("browser")
                    if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
        assert not problems, f"{name}: {problems}"
        assert self.driver.find_elements(By.CSS_SELECTOR, "main h1"), f"{name}: a main heading"
        self.driver.save_screenshot(str(SHOTS / f"{name}.png"))
        if narrow:
            self.driver.set_window_size(390, 900)
            width, room = self.driver.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            wide = self.driver.execute_script(
                "return Array.from(document.querySelectorAll('body *')).filter(e => "
                "e.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && "
                "!e.closest('.table-wrap, nav.sections')).slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className)")
            assert width <= room, f"{name}: the page is {width} px wide in a {room} px window: {wide}"
            self.driver.save_screenshot(str(SHOTS / f"{name}-390.png"))
            self.driver.set_window_size(1280, 1000)
        self.pages.append((name, self.driver.current_url))
        print(f"console: {name}")

    def sign_in(self):
        self.driver.get(f"{self.service.base}/console")
        self.wait(ec.presence_of_element_located((By.ID, "sign-in")))
        self.check("sign-in", narrow=True)
        self.fill("email", "ada@example.com")
        self.fill("password", PASSWORD)
        self.find("#sign-in").click()
        self.wait(ec.presence_of_element_located((By.ID, "new-agent")))
        self.check("agents", narrow=True)

    def create_agent(self):
        self.fill("name", "Concierge")
        self.fill("config.tools", '[{"type": "memory_search"}]')
        self.find("#create-agent").click()
        self.wait(ec.presence_of_element_located((By.ID, "chat-form")))
        self.agent_url = self.driver.current_url
        self.check("agent", narrow=True)

    def memory(self):
        self.find("#memory-link").click()
        self.wait(ec.presence_of_element_located((By.ID, "add-memory")))
        self.fill("content", "The customer's favourite colour is teal.")
        self.fill("tags", "preferences")
        self.find("#add-memory-button").click()
        self.wait(ec.text_to_be_present_in_element((By.ID, "entries"), "teal"))
        # A paraphrase that shares no word with the memory: the vector search finds it.
        self.fill("q", "Which hue does the client prefer?")
        self.find("#search").click()
        self.wait(ec.text_to_be_present_in_element((By.ID, "hits"), "teal"))
        first = self.find("#hits .hit").text
        assert "vector rank 1" in first, first
        assert "word rank —" in first, first
        self.check("memory", narrow=True)

    def chat(self):
        self.driver.get(self.agent_url)
        self.fill("message", "What colour does the customer like?")
        self.find("#send").click()
        # The reply grows while it streams: watch its length change before it is complete.
        seen = set()
        deadline = time.time() + 30
        while time.time() < deadline:
            replies = self.driver.find_elements(By.CSS_SELECTOR, "#transcript .msg.assistant .text")
            text = replies[-1].text if replies else ""
            if text and text != ANSWER:
                seen.add(len(text))
            if self.find("#chat-status").get_attribute("data-done"):
                break
            time.sleep(0.03)
        status = self.find("#chat-status").text
        assert "Charged" in status, status
        assert len(seen) >= 3, f"the reply did not stream: lengths seen {sorted(seen)}"
        transcript = self.find("#transcript").text
        assert "memory_search" in transcript, transcript
        assert "teal" in self.find("#transcript .msg.tool pre").get_attribute("textContent"), "the tool's result"
        assert ANSWER in transcript, transcript
        self.check("chat")
        # The conversation is kept: reloaded from the server, it shows the same exchange.
        session = re.search(r"Conversation (\S+)\.", status).group(1)
        self.driver.get(f"{self.agent_url}?session={session}")
        history = self.find("#transcript").text
        assert "memory_search" in history and ANSWER in history, history
        self.check("chat-history")

    def core_memory_and_learning(self):
        """The agent page's blocks editor and extraction setting; then, after two chats, the
        memory page strikes through the fact the second replaced and the fact's page shows its
        history and the exchange it was learned from."""
        self.driver.get(self.agent_url)
        self.fill("new-block-label", "human")
        self.fill("new-block-value", "Name: Ada.")
        self.fill("new-block-limit", "200")
        form = self.find("#new-block")
        self.find("#add-block").click()
        self.wait(ec.staleness_of(form))
        assert self.driver.find_elements(By.ID, "block-human"), self.find("main").text
        shown = self.find("#block-human").text
        assert "10 of 200 characters" in shown and "version 1" in shown, shown
        Select(self.find("#config\\.memory_extraction")).select_by_value("rules")
        semantic = self.find("input[name=memory_types][value=semantic]")
        if not semantic.is_selected():
            semantic.click()
        form = self.find("#edit-agent")
        self.find("#save-agent").click()
        self.wait(ec.staleness_of(form))
        assert self.driver.find_elements(By.ID, "block-human"), self.find("main").text
        chosen = Select(self.find("#config\\.memory_extraction")).first_selected_option.get_attribute("value")
        assert chosen == "rules", chosen
        self.check("agent-core-memory", narrow=True)
        for message in ["I live in Lyon.", "Good news: I moved to Porto!"]:
            self.fill("message", message)
            self.find("#send").click()
            self.wait(lambda d: self.find("#chat-status").get_attribute("data-done"), timeout=30)
            self.driver.get(self.agent_url)
        memory = self.agent_url + "/memory?invalid=on"
        self.driver.get(memory)
        self.reload_until("#entries", "Porto")
        struck = [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, "#entries tr.invalidated s")]
        assert struck == ["The user lives in Lyon."], struck
        self.check("memory-learned", narrow=True)
        # Followed by its address: a click right after the window is resized back from 390 px
        # can land on the reflowing row's other controls.
        self.open(self.find("#entries tr.invalidated a").get_attribute("href"))
        self.wait(ec.presence_of_element_located((By.ID, "history")))
        history = self.find("#history").text
        assert "added" in history and "invalidated" in history, history
        assert "I live in Lyon." in self.find(".exchange").text
        self.check("memory-entry", narrow=True)

    def workflow(self, slow_url):
        """A workflow made in the editor and run: its timeline refreshes by itself while the
        slow step runs, until both steps show completed."""
        self.find("nav.sections a[href$='/workflows']").click()
        self.wait(ec.presence_of_element_located((By.ID, "definition")))
        self.check("workflows", narrow=True)
        definition = {
            "name": "Lookup",
            "steps": [
                {"id": "ask", "type": "http_request", "method": "GET", "url": slow_url},
                {"id": "say", "type": "transform", "output": {"answer": "{{ steps.ask.output.body.answer }}"}},
            ],
        }
        field = self.driver.find_element(By.ID, "definition")
        field.clear()
        field.send_keys(json.dumps(definition))
        self.find("#create-workflow").click()
        self.wait(ec.presence_of_element_located((By.ID, "run-workflow")))
        self.check("workflow", narrow=True)
        self.find("#run-workflow").click()
        self.wait(ec.presence_of_element_located((By.ID, "timeline")))
        live = bool(self.driver.find_elements(By.CSS_SELECTOR, "#timeline[data-live]"))
        assert live, "the running execution's timeline refreshes itself"
        self.check("execution-running")
        # No reload from here: the page's script brings the steps in as they complete.
        self.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline li.completed")) == 2, timeout=60)
        self.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-live]"), timeout=30)
        timeline = self.find("#timeline").text
        assert "forty-two" in timeline, timeline
        self.check("execution", narrow=True)

    def section(self, path, ready_id):
        self.find(f"nav.sections a[href$='/{path}']").click()
        self.wait(ec.presence_of_element_located((By.ID, ready_id)))

    def reload_until(self, css, text, timeout=60):
        """Background work (a delivery, a learned fact) shows on the page after it happens:
        reload until it does, less and less often, within the tenant's rate limit (Starter: 60
        requests a minute, which the rest of the walk spends too)."""
        deadline = time.time() + timeout
        pause = 0.5
        while time.time() < deadline:
            found = self.driver.find_elements(By.CSS_SELECTOR, css)
            if found and text in found[0].text:
                return found[0].text
            time.sleep(pause)
            pause = min(pause * 2, 3)
            self.driver.refresh()
            self.within_rate_limit()
        shown = [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]
        raise AssertionError(f"{css} never showed {text!r}: {shown} on {self.driver.current_url}")

    def open(self, url):
        self.driver.get(url)
        self.within_rate_limit()

    def within_rate_limit(self):
        """A page answered 429 (the walk outran its tenant's limit, as a person clicking fast
        can): wait as long as it says, as that person would, and load it again. Its refused
        requests are dropped from the browser's log, so that the page checked next is judged
        on its own."""
        for _ in range(3):
            text = self.driver.find_element(By.TAG_NAME, "body").text
            wait = re.search(r"rate limit exceeded; retry in (\d+) s", text)
            if not wait:
                return
            time.sleep(int(wait.group(1)) + 1)
            self.driver.get_log("browser")
            self.driver.refresh()

    def webhooks(self, receiver):
        """A loopback receiver that fails first: its test delivery is logged with the 500,
        retried from the log, and then delivered with a 200."""
        self.section("webhooks", "new-webhook")
        self.check("webhooks", narrow=True)
        self.fill("url", receiver.url)
        self.find("#new-webhook input[name=events][value='*']").click()
        self.fill("description", "Loopback receiver")
        self.find("#create-webhook").click()
        secret = self.wait(ec.presence_of_element_located((By.ID, "signing-secret"))).text
        assert secret.startswith("whsec_"), secret
        self.check("webhook-secret")
        self.find("#to-subscription").click()
        self.wait(ec.presence_of_element_located((By.ID, "send-test")))
        subscription = self.driver.current_url
        self.find("#send-test").click()
        # The answer is the test delivery's own page, with its attempts.
        self.wait(ec.url_contains("/deliveries/"))
        self.reload_until("main", "500")
        self.check("webhook-delivery")
        self.driver.get(subscription)
        self.reload_until("#delivery-log tbody tr", "500")
        self.check("webhook-failed")
        self.find("#delivery-log tbody tr button").click()
        # The retry's answer is the delivery's page too: both attempts, the 500 then the 200.
        self.wait(ec.url_contains("/deliveries/"))
        self.reload_until("#delivery-status", "delivered")
        attempts = self.find("#attempts").text
        assert "500" in attempts and "200" in attempts, attempts
        self.driver.get(subscription)
        row = self.reload_until("#delivery-log tbody tr", "delivered")
        assert "200" in row, row
        assert len(receiver.received) == 2, "sent twice: the failure and the retry"
        assert self.driver.find_elements(By.CSS_SELECTOR, "svg.chart"), "the 24-hour chart"
        self.check("webhook", narrow=True)

    def keys(self):
        """A key made in the console is shown once and works on the API."""
        self.section("keys", "new-key")
        self.fill("name", "ci pipeline")
        self.find("#new-key input[name=scopes][value='agents:read']").click()
        self.find("#create-key").click()
        key = self.wait(ec.presence_of_element_located((By.ID, "api-key"))).text
        self.check("key-created")
        status, body, _ = call("GET", f"{self.service.base}/api/v1/agents", token=key)
        assert status == 200 and body["total"] == 1, (status, body)
        self.find("#to-keys").click()
        self.wait(ec.text_to_be_present_in_element((By.ID, "keys"), "ci pipeline"))
        assert key not in self.driver.page_source, "the key is shown once"
        self.check("keys", narrow=True)

    def team(self, smtp, seen):
        """An invitation sent from the console goes out over SMTP and waits in the list."""
        self.section("team", "invite")
        self.fill("email", "grace@example.com")
        self.find("#send-invitation").click()
        self.wait(ec.text_to_be_present_in_element((By.ID, "invitations"), "grace@example.com"))
        self.service.link("/invitation", seen)
        self.check("team", narrow=True)

    def billing(self):
        """The balance the API reports, the 30-day chart and the ledger with the chat's charge."""
        self.section("billing", "balance")
        token = call("POST", f"{self.service.base}/api/v1/auth/login",
                     form={"username": "ada@example.com", "password": PASSWORD})[1]["access_token"]
        _, billing, _ = call("GET", f"{self.service.base}/api/v1/billing", token=token)
        balance = self.find("#balance").text
        assert balance == str(billing["credits"]), (balance, billing)
        assert self.driver.find_elements(By.CSS_SELECTOR, "svg.chart"), "the 30-day chart"
        rows = self.driver.find_elements(By.CSS_SELECTOR, "#ledger tbody tr")
        assert len(rows) >= 2, "the welcome grant and the chat's charge"
        self.check("billing", narrow=True)

    def knowledge(self):
        """A base filled with two files at once, indexed while the page watches, searched with
        its explanations, attached to the agent, and a cited reply followed to its chunk."""
        self.section("knowledge", "new-base")
        self.check("knowledge", narrow=True)
        self.fill("name", "Handbook")
        self.find("#create-base").click()
        self.wait(ec.presence_of_element_located((By.ID, "upload")))
        self.find("#file").send_keys(f"{FIXTURES / 'handbook.pdf'}\n{FIXTURES / 'notes.md'}")
        self.find("#upload-files").click()
        # No reload from here: the list refreshes itself until both files are indexed.
        self.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#files [data-status=indexed]")) == 2, timeout=60)
        self.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-live]"), timeout=30)
        self.check("knowledge-base", narrow=True)
        self.fill("q", QUESTION)
        self.find("#search-button").click()
        self.wait(ec.presence_of_element_located((By.ID, "results")))
        first = self.find("#results li").text
        assert "handbook.pdf, page 2" in first and "by meaning" in first, first
        self.check("knowledge-search", narrow=True)
        self.driver.get(self.agent_url)
        self.find("#agent-knowledge input[name=knowledge_bases]").click()
        self.find("#save-knowledge").click()
        self.wait(ec.url_contains("#knowledge"))
        assert self.find("#agent-knowledge input[name=knowledge_bases]").is_selected()
        self.fill("message", QUESTION)
        self.find("#send").click()
        self.wait(lambda d: d.find_element(By.ID, "chat-status").get_attribute("data-done"), timeout=30)
        link = self.wait(ec.presence_of_element_located((By.CSS_SELECTOR, "#transcript ol.citations a")))
        assert link.text == "[1] handbook.pdf, page 2", link.text
        self.check("knowledge-chat")
        link.click()
        self.wait(ec.url_contains("#chunk-"))
        chunk = self.driver.current_url.split("#", 1)[1]
        cited = self.wait(ec.presence_of_element_located((By.ID, chunk)))
        assert "fourteen days" in cited.text, "the cited chunk is in view"
        self.check("knowledge-citation", narrow=True)

    def without_javascript(self):
        """Every read page seen, again with JavaScript off: each renders its heading."""
        driver = browser(False)
        try:
            driver.get(f"{self.service.base}/console/sign-in")
            driver.find_element(By.ID, "email").send_keys("ada@example.com")
            driver.find_element(By.ID, "password").send_keys(PASSWORD)
            driver.find_element(By.ID, "sign-in").click()
            WebDriverWait(driver, 20).until(ec.presence_of_element_located((By.ID, "new-agent")))
            for name, url in self.pages:
                if name == "sign-in":
                    continue
                driver.get(url)
                assert driver.find_elements(By.CSS_SELECTOR, "main h1"), f"{name} without JavaScript"
                assert not [e for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
            print(f"console: {len(self.pages) - 1} pages read again with JavaScript off")
        finally:
            driver.quit()

    def quit(self):
        self.driver.quit()


def main():
    smtp = SmtpSink()
    model = FakeModel()
    slow = SlowApi()
    env = {
        # Workflow steps and webhooks reach this script's servers on 127.0.0.1 and over http.
        "AGENTRY_WEBHOOK_ALLOW_PRIVATE": "true",
        "AGENTRY_WEBHOOK_ALLOW_INSECURE": "true",
        "AGENTRY_LLM_PROVIDER": "openai",
        "AGENTRY_LLM_BASE_URL": model.url,
        "AGENTRY_LLM_API_KEY": "sk-local",
        "AGENTRY_EMBEDDING_MODEL_DIR": str(ROOT / "data" / "models" / "all-MiniLM-L6-v2"),
        "AGENTRY_EMBEDDING_PROVIDER": "minilm",
    }
    service = Service_(smtp, extra_env=env)
    walk = None
    try:
        status, _, _ = call("POST", f"{service.base}/api/v1/auth/register",
                            {"email": "ada@example.com", "password": PASSWORD, "full_name": "Ada Lovelace",
                             "company": "Analytical Engines"})
        assert status == 201, status
        walk = Walk(service)
        walk.sign_in()
        walk.create_agent()
        walk.memory()
        walk.chat()
        walk.workflow(slow.url)
        walk.webhooks(Receiver([500, 200]))
        walk.keys()
        walk.team(smtp, [])
        walk.billing()
        walk.knowledge()
        walk.core_memory_and_learning()
        walk.without_javascript()
        print(f"console: screenshots in {SHOTS}")
    finally:
        if walk:
            walk.quit()
        service.stop()


if __name__ == "__main__":
    main()
