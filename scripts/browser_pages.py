#!/usr/bin/env python3
"""The pages behind the e-mailed links, driven in headless Chromium (Debian's chromium and
chromium-driver, through selenium):

- the reset link's page changes the password, with JavaScript on and with it off;
- the magic link's page signs in (the token it shows works on /auth/me), and its "Open the
  console" link opens the console signed in;
- an invitation's page registers a new address into the tenant with the invited role, with
  JavaScript on and with it off, on SQLite and, when AGENTRY_TEST_DATABASE_URL names a
  PostgreSQL server, on a fresh database there too;
- the docs page renders under its content security policy, with an "Authorize" button;
- no page breaks its content security policy.

    scripts/browser_pages.py [path/to/agentry]     (default: target/release/agentry)

Every e-mail goes through a real SMTP conversation with a small server this script runs.
Everything talks to 127.0.0.1 only.
"""

import email
import email.policy
import json
import os
import pathlib
import re
import socket
import socketserver
import subprocess
import threading
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

BINARY = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/release/agentry").resolve()
PASSWORD = "correct horse battery"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, body=None, form=None, token=None):
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request) as r:
            return r.status, json.loads(r.read() or b"null"), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), e.headers


def browser(javascript):
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
    ):
        options.add_argument(flag)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def csp_violations(driver):
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


class SmtpSink:
    """An SMTP server on a free local port that keeps every message it is given."""

    def __init__(self):
        self.messages = []
        self.lock = threading.Lock()
        sink = self

        class Conversation(socketserver.StreamRequestHandler):
            def reply(self, line):
                self.wfile.write(line.encode() + b"\r\n")
                self.wfile.flush()

            def handle(self):
                self.reply("220 localhost ESMTP test sink")
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    command = line.decode(errors="replace").strip().upper()
                    if command.startswith("EHLO"):
                        self.reply("250-localhost")
                        self.reply("250 8BITMIME")
                    elif command.startswith("DATA"):
                        self.reply("354 end with <CRLF>.<CRLF>")
                        lines = []
                        while True:
                            data = self.rfile.readline()
                            if data in (b".\r\n", b".\n", b""):
                                break
                            lines.append(data[1:] if data.startswith(b"..") else data)
                        with sink.lock:
                            sink.messages.append(b"".join(lines))
                        self.reply("250 OK")
                    elif command.startswith("QUIT"):
                        self.reply("221 bye")
                        return
                    else:
                        self.reply("250 OK")

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Conversation)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"smtp://127.0.0.1:{self.server.server_address[1]}"

    def received(self):
        with self.lock:
            return list(self.messages)


class Service_:
    def __init__(self, smtp, database_url=None, extra_env=None):
        self.dir = tempfile.mkdtemp(prefix="agentry-pages-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.smtp = smtp
        env = {
            "PATH": os.environ.get("PATH", ""),
            "AGENTRY_BIND": f"127.0.0.1:{self.port}",
            "AGENTRY_LOG": "warn",
            "AGENTRY_SMTP_URL": smtp.url,
        }
        if database_url:
            env["AGENTRY_DATABASE_URL"] = database_url
            env["AGENTRY_AUTO_MIGRATE"] = "true"
        env.update(extra_env or {})
        self.process = subprocess.Popen([str(BINARY)], cwd=self.dir, env=env)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{self.base}/healthz")
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("the service did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)

    def link(self, path, seen):
        """The link to `path` in the newest e-mail received over SMTP that is not in `seen`."""
        for _ in range(100):
            mails = [m for m in self.smtp.received() if m not in seen]
            if mails:
                seen.extend(mails)
                message = email.message_from_bytes(mails[-1], policy=email.policy.default)
                text = message.get_body(preferencelist=("plain",)).get_content()
                return re.search(re.escape(self.base + path) + r"\?token=[A-Za-z0-9_-]+", text).group(0)
            time.sleep(0.1)
        raise AssertionError(f"no e-mail with {path}")


def wait_for_text(driver, element_id, text, timeout=10):
    """Wait until the element shows `text`. A form posted without JavaScript replaces the
    document while we look, so an element found in the old one may be gone before its text is
    read; such a read is retried rather than taken as failure."""
    WebDriverWait(driver, timeout, ignored_exceptions=[WebDriverException]).until(
        ec.text_to_be_present_in_element((By.ID, element_id), text))


def reset_password(service, seen, javascript, new_password):
    assert call("POST", f"{service.base}/api/v1/auth/forgot-password", {"email": "ada@example.com"})[0] == 202
    link = service.link("/reset-password", seen)
    driver = browser(javascript)
    try:
        driver.get(link)
        driver.find_element(By.ID, "new_password").send_keys(new_password)
        driver.find_element(By.ID, "confirm_password").send_keys(new_password)
        driver.find_element(By.ID, "submit").click()
        wait_for_text(driver, "result", "Password changed")
        # With JavaScript the page called the API and stayed; without, the form posted to the page.
        assert ("?token=" in driver.current_url) == javascript, driver.current_url
        assert not csp_violations(driver), csp_violations(driver)
    finally:
        driver.quit()
    status, _, _ = call("POST", f"{service.base}/api/v1/auth/login", form={"username": "ada@example.com", "password": new_password})
    assert status == 200, f"login with the new password: {status}"
    print(f"reset page (JavaScript {'on' if javascript else 'off'}): the password changed")


def magic_link(service, seen):
    assert call("POST", f"{service.base}/api/v1/auth/magic-link", {"email": "ada@example.com"})[0] == 202
    link = service.link("/magic-link", seen)
    driver = browser(True)
    try:
        driver.get(link)
        driver.find_element(By.ID, "submit").click()
        wait_for_text(driver, "result", "signed in")
        assert "?token=" in driver.current_url, "the page called the API in place"
        token = driver.find_element(By.ID, "access_token").get_attribute("value")
        assert not csp_violations(driver), csp_violations(driver)
        # The page signed the console in too: its link opens it.
        WebDriverWait(driver, 10).until(ec.visibility_of_element_located((By.ID, "open-console"))).click()
        WebDriverWait(driver, 10).until(ec.presence_of_element_located((By.ID, "new-agent")))
        assert not csp_violations(driver), csp_violations(driver)
    finally:
        driver.quit()
    status, me, _ = call("GET", f"{service.base}/api/v1/auth/me", token=token)
    assert status == 200 and me["email"] == "ada@example.com", (status, me)
    print("magic-link page: signed in, and into the console")


def invitation(service, seen, javascript, owner, tenant, address):
    """Ada invites `address` as a member; the e-mailed link's page registers it."""
    status, _, _ = call("POST", f"{service.base}/api/v1/tenants/{tenant}/invitations",
                        {"email": address, "role": "member"}, token=owner)
    assert status == 201, f"invite: {status}"
    link = service.link("/invitation", seen)
    driver = browser(javascript)
    try:
        driver.get(link)
        wait_for_text(driver, "tenant", "Analytical Engines")
        driver.find_element(By.ID, "full_name").send_keys("Grace Hopper")
        driver.find_element(By.ID, "password").send_keys(PASSWORD)
        driver.find_element(By.ID, "confirm_password").send_keys(PASSWORD)
        driver.find_element(By.ID, "submit").click()
        wait_for_text(driver, "result", "You joined Analytical Engines as member")
        assert ("?token=" in driver.current_url) == javascript, driver.current_url
        assert driver.find_element(By.ID, "access_token").get_attribute("value"), "the session's token is shown"
        assert not csp_violations(driver), csp_violations(driver)
    finally:
        driver.quit()
    status, login, _ = call("POST", f"{service.base}/api/v1/auth/login",
                            form={"username": address, "password": PASSWORD})
    assert status == 200, f"login of the new member: {status}"
    status, me, _ = call("GET", f"{service.base}/api/v1/auth/me", token=login["access_token"])
    assert status == 200 and me["tenants"] == [{"id": tenant, "name": "Analytical Engines", "role": "member"}], me
    print(f"invitation page (JavaScript {'on' if javascript else 'off'}): {address} joined as member")


def invitations(service, seen):
    """Both invitation flows on `service`: a fresh owner, then two new addresses."""
    status, body, _ = call("POST", f"{service.base}/api/v1/auth/register",
                           {"email": "ada@example.com", "password": PASSWORD, "full_name": "Ada Lovelace",
                            "company": "Analytical Engines"})
    assert status == 201, status
    status, login, _ = call("POST", f"{service.base}/api/v1/auth/login",
                            form={"username": "ada@example.com", "password": PASSWORD})
    assert status == 200, status
    owner, tenant = login["access_token"], body["tenant_id"]
    invitation(service, seen, True, owner, tenant, "grace@example.com")
    invitation(service, seen, False, owner, tenant, "hopper@example.com")


def postgres_database():
    """A fresh database on the server of AGENTRY_TEST_DATABASE_URL (made with psql), or None."""
    url = os.environ.get("AGENTRY_TEST_DATABASE_URL")
    if not url:
        print("invitation pages on PostgreSQL: skipped (AGENTRY_TEST_DATABASE_URL is not set)")
        return None, None
    name = f"agentry_pages_{os.getpid()}"
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    return url, url.rsplit("/", 1)[0] + "/" + name


def docs(service):
    driver = browser(True)
    try:
        driver.get(f"{service.base}/docs/")
        WebDriverWait(driver, 20).until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".swagger-ui .info .title"), "Agentry API"))
        assert driver.find_elements(By.CSS_SELECTOR, "button.authorize"), "an Authorize button"
        assert not csp_violations(driver), csp_violations(driver)
    finally:
        driver.quit()
    print("docs page: rendered under its content security policy, with Authorize")


def main():
    smtp = SmtpSink()
    service = Service_(smtp)
    seen = []
    try:
        status, _, _ = call("POST", f"{service.base}/api/v1/auth/register",
                            {"email": "ada@example.com", "password": PASSWORD, "full_name": "Ada Lovelace"})
        assert status == 201
        reset_password(service, seen, javascript=True, new_password="a new passphrase")
        reset_password(service, seen, javascript=False, new_password="another passphrase")
        magic_link(service, seen)
        docs(service)
    finally:
        service.stop()
    # The invitation flows on a fresh SQLite service, and on a fresh PostgreSQL database.
    service = Service_(smtp)
    try:
        invitations(service, seen)
    finally:
        service.stop()
    admin_url, database_url = postgres_database()
    if database_url:
        service = Service_(smtp, database_url)
        try:
            invitations(service, seen)
        finally:
            service.stop()
            name = database_url.rsplit("/", 1)[1]
            subprocess.run(["psql", admin_url, "-q", "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False)


if __name__ == "__main__":
    main()
