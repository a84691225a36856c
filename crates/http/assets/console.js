// The console's only script. Every page works without it; with it, chat replies stream token
// by token, running executions refresh in place, secrets get a copy button, and a chosen text
// file fills the document form. Served from /assets under `script-src 'self'`: no inline code.
"use strict";

(function () {
  const csrf = () => {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  };

  // What an error page says, from its HTML.
  const errorText = (html, status) => {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const message = doc.getElementById("error-message");
    const fields = Array.from(doc.querySelectorAll(".field-errors li")).map((li) => li.textContent);
    return (message ? message.textContent : "Error " + status) + (fields.length ? " " + fields.join("; ") : "");
  };

  // "Go back" on error pages.
  document.querySelectorAll("[data-back]").forEach((link) => {
    link.addEventListener("click", (e) => {
      if (window.history.length > 1) {
        e.preventDefault();
        window.history.back();
      }
    });
  });

  // The tenant switcher moves on choice; its button stays for keyboards and no script.
  const switcher = document.getElementById("tenant-switch");
  if (switcher) {
    switcher.addEventListener("change", () => switcher.form.submit());
  }

  // Copy buttons beside shown-once secrets and trigger URLs.
  document.querySelectorAll("[data-copy]").forEach((source) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "secondary copy";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy " + (source.getAttribute("data-copy") || "the value"));
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(source.textContent.trim());
        button.textContent = "Copied";
      } catch (_) {
        const range = document.createRange();
        range.selectNodeContents(source);
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
        button.textContent = "Selected: press Ctrl+C";
      }
    });
    source.insertAdjacentElement("afterend", button);
  });

  // A text or Markdown file chosen for a document fills its form.
  document.querySelectorAll("input[type=file][data-fill]").forEach((input) => {
    input.addEventListener("change", async () => {
      const file = input.files && input.files[0];
      if (!file) return;
      const target = document.getElementById(input.getAttribute("data-fill"));
      const title = document.getElementById(input.getAttribute("data-title"));
      target.value = await file.text();
      if (title && !title.value) title.value = file.name;
    });
  });

  // Chat: the reply streams in as server-sent events.
  const chatForm = document.querySelector("form[data-stream]");
  if (chatForm) {
    const transcript = document.getElementById("transcript");
    const status = document.getElementById("chat-status");
    const sessionInput = document.getElementById("session_id");
    const send = chatForm.querySelector("button[type=submit]");
    const entry = (role, label) => {
      const li = document.createElement("li");
      li.className = "msg " + role;
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = label || role;
      li.appendChild(who);
      transcript.appendChild(li);
      return li;
    };
    const block = (parent, tag, className, text) => {
      const el = document.createElement(tag);
      el.className = className;
      el.textContent = text;
      parent.appendChild(el);
      return el;
    };
    chatForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      const body = new URLSearchParams(new FormData(chatForm));
      const message = chatForm.querySelector("textarea[name=message]");
      const user = entry("user");
      block(user, "div", "text", message.value);
      let reply = entry("assistant");
      let text = block(reply, "div", "text", "");
      send.disabled = true;
      status.textContent = "The agent is answering…";
      try {
        const response = await fetch(chatForm.action, {
          method: "POST",
          headers: { "Accept": "text/event-stream", "X-CSRF-Token": csrf() },
          body,
          credentials: "same-origin",
        });
        if (response.status === 401) {
          window.location.reload();
          return;
        }
        if (!response.ok || !response.body) {
          status.textContent = errorText(await response.text(), response.status);
          status.className = "error";
          reply.remove();
          return;
        }
        message.value = "";
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        const handle = (event, data) => {
          if (event === "message.delta") {
            if (!text) {
              reply = entry("assistant");
              text = block(reply, "div", "text", "");
            }
            text.textContent += data.content;
          } else if (event === "tool.call") {
            const call = block(reply, "div", "tool-call", "calls ");
            block(call, "strong", "", data.name);
            block(call, "code", "", " " + data.arguments);
            text = null;
          } else if (event === "tool.result") {
            const result = document.createElement("li");
            result.className = "msg tool";
            const details = block(result, "details", "", "");
            block(details, "summary", "", "Result of " + data.name);
            block(details, "pre", "code", data.error ? "error: " + data.error : JSON.stringify(data.output, null, 2));
            transcript.appendChild(result);
          } else if (event === "citation") {
            // A source of the agent's knowledge bases the reply cites, linked to its chunk.
            let list = reply.querySelector("ol.citations");
            if (!list) list = block(reply, "ol", "citations", "");
            const item = document.createElement("li");
            const link = document.createElement("a");
            const base = chatForm.getAttribute("action").split("/agents/")[0];
            link.href = base + "/knowledge/cited/" + encodeURIComponent(data.file_id) + "?chunk=" + encodeURIComponent(data.chunk_id);
            link.title = data.snippet;
            link.textContent = "[" + data.index + "] " + data.file_name + (data.page === null ? "" : ", page " + data.page);
            item.appendChild(link);
            list.appendChild(item);
          } else if (event === "message.completed") {
            if (text) text.textContent = data.content;
            if (data.finish_reason === "length") block(reply, "div", "finish note", "Cut off at the token limit");
            block(reply, "div", "usage", data.usage.total_tokens + " tokens");
            sessionInput.value = data.session_id;
            status.className = "note";
            status.textContent = "Charged " + data.credits.charged + " credit" + (data.credits.charged === 1 ? "" : "s") +
              "; " + data.credits.remaining + " left. Conversation " + data.session_id + ".";
            status.setAttribute("data-done", "true");
          } else if (event === "error") {
            status.className = "error";
            status.textContent = data.message || data.error;
            status.setAttribute("data-done", "true");
          }
        };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const raw = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let event = "message";
            const data = [];
            raw.split("\n").forEach((line) => {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
            });
            if (data.length) handle(event, JSON.parse(data.join("\n")));
          }
        }
      } catch (err) {
        status.className = "error";
        status.textContent = "The reply was interrupted: " + err.message;
      } finally {
        send.disabled = false;
      }
    });
  }

  // Parts marked data-live (a running execution's timeline) are fetched again every second
  // until the server renders them without the mark.
  const live = () => {
    const part = document.querySelector("[data-live]");
    if (!part) return;
    window.setTimeout(async () => {
      try {
        const response = await fetch(window.location.href, {
          headers: { "X-CSRF-Token": csrf() },
          credentials: "same-origin",
        });
        if (response.status === 401) {
          window.location.reload();
          return;
        }
        if (response.ok) {
          const doc = new DOMParser().parseFromString(await response.text(), "text/html");
          const fresh = doc.getElementById(part.id);
          if (fresh) part.replaceWith(document.importNode(fresh, true));
        }
      } catch (_) {
        // A missed refresh is retried on the next tick.
      }
      live();
    }, 1000);
  };
  live();
})();
