// Progressive enhancement of the password-reset, magic-link and invitation pages: with JavaScript the
// form talks to the JSON API and the answer appears in place; without it, the form posts to
// the page and the service answers with a new page. The API's answers come in either envelope
// (bare, or {success, data | error}).
"use strict";

function payload(body) {
  if (body && typeof body.success === "boolean") {
    return body.success ? body.data : body.error;
  }
  return body;
}

function show(kind, text) {
  const out = document.getElementById("result");
  out.className = kind;
  out.textContent = text;
}

async function call(method, url, json) {
  const init = { method, headers: { accept: "application/json" } };
  if (json !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(json);
  }
  const response = await fetch(url, init);
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  return { ok: response.ok, body: payload(body) || {} };
}

async function resetPassword(form) {
  const data = new FormData(form);
  if (data.get("new_password") !== data.get("confirm_password")) {
    show("error", "The two passwords differ.");
    return;
  }
  const { ok, body } = await call("POST", "/api/v1/auth/reset-password", {
    token: data.get("token"),
    new_password: data.get("new_password"),
  });
  if (ok) {
    form.hidden = true;
    show("ok", body.message || "Password changed.");
  } else {
    show("error", body.message || "The password could not be changed.");
  }
}

// Signs the console in too (a session of its own; see POST /console/session) and offers it.
async function openConsole(accessToken) {
  try {
    const response = await fetch("/console/session", {
      method: "POST",
      headers: { authorization: "Bearer " + accessToken },
      credentials: "same-origin",
    });
    if (!response.ok) return;
  } catch (_) {
    return;
  }
  const link = document.getElementById("open-console");
  if (link) link.hidden = false;
}

async function signIn(form) {
  const token = new FormData(form).get("token");
  const { ok, body } = await call("GET", "/api/v1/auth/magic-link/" + encodeURIComponent(token));
  if (!ok) {
    show("error", body.message || "This link cannot sign you in.");
    return;
  }
  form.hidden = true;
  show("ok", "You are signed in. Your access token is valid for " + body.expires_in + " seconds.");
  document.getElementById("access_token").value = body.access_token;
  document.getElementById("refresh_token").value = body.refresh_token;
  document.getElementById("tokens").hidden = false;
  await openConsole(body.access_token);
}

async function acceptInvitation(form) {
  const data = new FormData(form);
  const confirm = data.get("confirm_password");
  if (confirm !== null && confirm !== data.get("password")) {
    show("error", "The two passwords differ.");
    return;
  }
  const body = { token: data.get("token"), password: data.get("password") };
  if (data.get("full_name") !== null) {
    body.full_name = data.get("full_name");
  }
  const { ok, body: answer } = await call("POST", "/api/v1/auth/invitations/accept", body);
  if (!ok) {
    show("error", answer.message || "The invitation could not be accepted.");
    return;
  }
  form.hidden = true;
  const tenant = document.getElementById("tenant").textContent;
  const role = document.getElementById("role").textContent;
  show("ok", "You joined " + tenant + " as " + role + ". You are signed in; your access token is valid for " +
    answer.expires_in + " seconds.");
  document.getElementById("access_token").value = answer.access_token;
  document.getElementById("refresh_token").value = answer.refresh_token;
  document.getElementById("tokens").hidden = false;
  await openConsole(answer.access_token);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-api]")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      try {
        if (form.dataset.api === "reset") {
          await resetPassword(form);
        } else if (form.dataset.api === "invitation") {
          await acceptInvitation(form);
        } else {
          await signIn(form);
        }
      } catch (error) {
        show("error", "The service could not be reached: " + error);
      } finally {
        button.disabled = false;
      }
    });
  }
});
