#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the browser test, when they are missing. Idempotent.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq chromium chromium-driver >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }
