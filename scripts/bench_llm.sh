#!/usr/bin/env bash
# `make bench-llm`: the in-process language model against llama.cpp itself (llama-cpp-python,
# pinned, built from source into its own venv once) on the same file, threads, context and
# prompt tokens, in one run: load, prefill, decode, memory, and tokens/s at 1, 2 and 4
# concurrent chats (crates/llm/examples/llm_bench.rs, then scripts/bench_llm_reference.py).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_CPP_PYTHON=0.3.36
bash scripts/fetch-llm.sh >/dev/null
venv=.venv-llm-reference
if ! "$venv/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_PYTHON')" 2>/dev/null; then
    echo "building llama-cpp-python==$LLAMA_CPP_PYTHON from source (once, a few minutes)..."
    python3 -m venv "$venv"
    # The instruction sets llama-cpp-sys-2 builds our llama.cpp for (ggml's portable
    # default: AVX2, FMA, F16C, BMI2), so that the two differ in nothing but the code around
    # the kernels. (Built for this machine's AVX-512/AMX instead, this version crashes in
    # its first batch of more than one token.)
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir --force-reinstall \
        "llama-cpp-python==$LLAMA_CPP_PYTHON"
fi
figures=$(mktemp)
cargo run --release --locked --quiet -p agentry-llm --example llm_bench -- \
    data/models/SmolLM2-135M-Instruct.Q4_1.gguf "$figures"
echo
"$venv/bin/python" scripts/bench_llm_reference.py "$figures"
rm -f "$figures"
