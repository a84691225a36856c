"""Verifies an Agentry webhook delivery the way a receiver would, both ways it is signed.

- ``X-Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>]``: HMAC-SHA256 keyed with the secret's
  UTF-8 bytes, over ``"<t>.<raw body>"``, compared in constant time (a hand-written check: the
  standard library's ``hmac`` is all it needs);
- the Standard Webhooks headers (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``),
  checked by the reference library ``standardwebhooks`` from PyPI.

Reads ``{"secret": ..., "body": ..., "headers": {...}}`` on stdin and prints
``{"service_signature": bool, "standard_webhooks": bool}``. The API tests run it on a real
delivery, with a wrong secret and with an altered body. As a receiver, call ``verify`` with the
raw body bytes before parsing them, and answer 401 when it fails.
"""

import hashlib
import hmac
import json
import sys
import time

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

TOLERANCE_SECONDS = 300


def verify_service_signature(secret: str, body: bytes, header: str) -> bool:
    parts = [p.split("=", 1) for p in header.split(",") if "=" in p]
    timestamps = [v for k, v in parts if k == "t"]
    signatures = [v for k, v in parts if k == "v1"]
    if len(timestamps) != 1 or not signatures:
        return False
    t = timestamps[0]
    if not t.isdigit() or abs(time.time() - int(t)) > TOLERANCE_SECONDS:
        return False
    expected = hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, s) for s in signatures)


def verify_standard_webhooks(secret: str, body: bytes, headers: dict) -> bool:
    try:
        key = secret if secret.startswith("whsec_") else secret.encode()
        Webhook(key).verify(body, headers)
        return True
    except (WebhookVerificationError, ValueError):
        return False


def main() -> None:
    case = json.load(sys.stdin)
    body = case["body"].encode()
    headers = {k.lower(): v for k, v in case["headers"].items()}
    print(json.dumps({
        "service_signature": verify_service_signature(case["secret"], body, headers.get("x-service-signature", "")),
        "standard_webhooks": verify_standard_webhooks(case["secret"], body, headers),
    }))


if __name__ == "__main__":
    main()
