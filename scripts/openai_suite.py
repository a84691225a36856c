"""OpenAI's own Python client against Agentry's OpenAI-compatible endpoint.

Run by the API tests (crates/server/tests/api/openai.rs) against a live test server:

    python scripts/openai_suite.py '{"base_url": ..., "key": ..., "agent": ..., "agent_name": ...,
                                     "poor_key": ..., "poor_agent": ..., "limited_key": ...,
                                     "retry_after": 1}'

`key` and `agent`: a tenant with credits and an agent; `poor_*`: a tenant without credits;
`limited_key`: a tenant whose plan limit this script spends. It also runs the Python example of
docs/agents.md as written. Exits non-zero, with the failing check, on any difference.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import httpx
import openai

cfg = json.loads(sys.argv[1])
client = openai.OpenAI(base_url=cfg["base_url"], api_key=cfg["key"], max_retries=0)


def check(name, condition, detail=""):
    if not condition:
        sys.exit(f"FAILED {name}: {detail}")
    print(f"ok {name}")


# Plain: a completion by agent id, and by `agent:<name>`.
for model in (cfg["agent"], f"agent:{cfg['agent_name']}"):
    done = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hello from the openai package"}]
    )
    reply = done.choices[0].message.content
    check("plain completion", done.object == "chat.completion" and reply, done)
    check("plain usage", done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens, done)
    check("plain finish", done.choices[0].finish_reason in ("stop", "length"), done)
    check("plain model echoed", done.model == model, done)

# Streamed, with the usage chunk: the deltas join to a reply.
pieces, usage, finish = [], None, None
stream = client.chat.completions.create(
    model=cfg["agent"],
    messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}],
    stream=True,
    stream_options={"include_usage": True},
)
for chunk in stream:
    check("chunk object", chunk.object == "chat.completion.chunk", chunk)
    if chunk.usage:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.content:
            pieces.append(choice.delta.content)
        finish = choice.finish_reason or finish
check("streamed pieces", len(pieces) > 3, pieces)
check("streamed finish", finish == "stop", finish)
check("streamed usage", usage is not None and usage.completion_tokens > 0, usage)

# A client tool round trip: the model calls the client's function (the built-in responder calls
# a tool its message names, with the message's JSON as arguments), the client runs it and
# sends the result back; the agent answers with it. Then the same call, streamed.
weather = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
asked = [{"role": "user", "content": 'Use get_weather with {"city": "Paris"} please'}]
called = client.chat.completions.create(model=cfg["agent"], messages=asked, tools=[weather])
choice = called.choices[0]
check("tool call finish", choice.finish_reason == "tool_calls", called)
calls = choice.message.tool_calls or []
check("tool call", len(calls) == 1 and calls[0].function.name == "get_weather", called)
check("tool call arguments", json.loads(calls[0].function.arguments) == {"city": "Paris"}, calls)
answered = client.chat.completions.create(
    model=cfg["agent"],
    tools=[weather],
    messages=asked
    + [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": calls[0].id, "content": json.dumps({"temperature_c": 21})},
    ],
)
reply = answered.choices[0].message.content
check("tool result answered", answered.choices[0].finish_reason == "stop" and "21" in reply, answered)
check("tool result named", "get_weather" in reply, reply)
streamed_calls, finish = [], None
for chunk in client.chat.completions.create(model=cfg["agent"], messages=asked, tools=[weather], stream=True):
    for c in chunk.choices:
        streamed_calls += c.delta.tool_calls or []
        finish = c.finish_reason or finish
check("streamed tool call", finish == "tool_calls" and [c.function.name for c in streamed_calls] == ["get_weather"], streamed_calls)
check("streamed tool call arguments", json.loads(streamed_calls[0].function.arguments) == {"city": "Paris"}, streamed_calls)

# 401: a wrong key.
try:
    openai.OpenAI(base_url=cfg["base_url"], api_key="agk_wrong", max_retries=0).models.list()
    check("401", False, "no error")
except openai.AuthenticationError as e:
    check("401", e.status_code == 401 and e.code == "invalid_api_key", e.body)

# 404: a model that is no agent of the tenant.
try:
    client.chat.completions.create(model="agt_nope", messages=[{"role": "user", "content": "hi"}])
    check("404", False, "no error")
except openai.NotFoundError as e:
    check("404", e.code == "model_not_found", e.body)

# 402: a tenant without credits.
poor = openai.OpenAI(base_url=cfg["base_url"], api_key=cfg["poor_key"], max_retries=0)
try:
    poor.chat.completions.create(model=cfg["poor_agent"], messages=[{"role": "user", "content": "hi"}])
    check("402", False, "no error")
except openai.APIStatusError as e:
    check("402", e.status_code == 402 and e.code == "insufficient_quota" and e.type == "insufficient_quota", e.body)

# 429: spend the plan's minute, then let the library retry once; it must wait Retry-After.
limited = openai.OpenAI(base_url=cfg["base_url"], api_key=cfg["limited_key"], max_retries=0)
for _ in range(1000):
    try:
        limited.models.list()
    except openai.RateLimitError:
        break
else:
    check("429 reached", False, "no 429 in 1000 calls")
attempts = []
hooks = {"request": [lambda request: attempts.append(time.monotonic())]}
retrying = openai.OpenAI(
    base_url=cfg["base_url"],
    api_key=cfg["limited_key"],
    max_retries=1,
    http_client=httpx.Client(event_hooks=hooks),
)
try:
    retrying.models.list()
    check("429", False, "no error")
except openai.RateLimitError as e:
    check("429", e.status_code == 429 and e.code == "rate_limit_exceeded", e.body)
    check("429 Retry-After", e.response.headers.get("retry-after") == str(cfg["retry_after"]), e.response.headers)
check("429 retried once", len(attempts) == 2, attempts)
check("429 waited Retry-After", attempts[1] - attempts[0] >= cfg["retry_after"], attempts)

# The example of docs/agents.md, as written.
docs = pathlib.Path(__file__).resolve().parent.parent / "docs" / "agents.md"
example = re.search(r"<!-- openai-example:start -->\s*```python\n(.*?)```", docs.read_text(), re.S)
check("docs example present", example is not None)
env = dict(os.environ, AGENTRY_URL=cfg["base_url"], AGENTRY_KEY=cfg["key"], AGENTRY_AGENT=cfg["agent"])
ran = subprocess.run([sys.executable, "-c", example.group(1)], env=env, capture_output=True, text=True, timeout=120)
check("docs example runs", ran.returncode == 0 and ran.stdout.strip(), ran.stdout + ran.stderr)
print("all checks passed")
