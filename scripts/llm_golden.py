#!/usr/bin/env python3
"""Writes the golden file the local model's tests compare against: llama.cpp's own tokenizer
(llama-cpp-python, the version `make bench-llm` pins) on 20 strings, and its greedy decoding of a
fixed ChatML prompt on SmolLM2-135M-Instruct, 32 tokens, no repetition penalty.

    .venv-llm-reference/bin/python scripts/llm_golden.py MODEL.gguf OUT.json
"""
import json
import sys

from llama_cpp import Llama, __version__

STRINGS = [
    "Hello, world!",
    "The year 2026 has 365 days; 1234567890.",
    "3.14159 × 2 = 6.28318",
    "naïve café déjà vu — Ünïcödé",
    "日本語のテキストと中文",
    "emoji 🎉🚀 and ZWJ 👩‍💻",
    "<|im_start|>user\nHi<|im_end|>\n",
    "<|im_start|>assistant\n",
    "text with <|im_end|> inside",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\n\n",
    "snake_case_identifier and camelCaseIdentifier",
    "https://example.com/path?query=1&b=2",
    "P-01234 and INV-2026-0042",
    "def f(x):\n    return x ** 2",
    '{"json": [1, 2, 3], "ok": true}',
    "Ça va? ¿Qué tal? Привет!",
    "a" * 40,
    "العربية والعبرية עברית",
    "1,000,000.50 € or $1.5k",
]

SYSTEM = "You are a helpful assistant."
QUESTION = "Describe the water cycle in a few sentences."


def main():
    path, out = sys.argv[1], sys.argv[2]
    llm = Llama(model_path=path, n_ctx=2048, n_threads=2, verbose=False)
    tokenize = [{"text": s, "ids": llm.tokenize(s.encode(), add_bos=False, special=True)} for s in STRINGS]
    prompt_text = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{QUESTION}<|im_end|>\n"
                   "<|im_start|>assistant\n")
    prompt = llm.tokenize(prompt_text.encode(), add_bos=False, special=True)
    llm.reset()
    # Token by token: this version's batched decode gives other logits on this machine when
    # built for AVX2 (its first greedy token is "La", not "The"; one at a time gives "The
    # capital of France is Paris.") and crashes when built for the machine's AVX-512/AMX.
    for token in prompt:
        llm.eval([token])
    tokens = []
    for _ in range(32):
        token = llm.sample(temp=0.0, repeat_penalty=1.0)
        if llm.token_eos() == token or token == llm.tokenize(b"<|im_end|>", add_bos=False, special=True)[0]:
            break
        tokens.append(token)
        llm.eval([token])
    text = llm.detokenize(tokens).decode("utf-8", errors="replace")
    golden = {
        "reference": f"llama-cpp-python {__version__}",
        "tokenize": tokenize,
        "greedy": {"system": SYSTEM, "question": QUESTION, "prompt": prompt, "tokens": tokens, "text": text},
    }
    with open(out, "w") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
