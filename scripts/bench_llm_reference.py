#!/usr/bin/env python3
"""llama.cpp itself (llama-cpp-python) on the same GGUF file, threads, context and prompt tokens
as Agentry's figures in FIGURES (written by `crates/llm/examples/llm_bench.rs`), and the table of
both with their ratios and the targets of docs/performance.md.

    python3 scripts/bench_llm_reference.py FIGURES.json
"""
import json
import statistics
import sys
import time


def resident():
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("RssFile", "RssAnon"):
                fields[name] = int(value.split()[0]) * 1024
    return fields.get("RssFile", 0), fields.get("RssAnon", 0)


def main():
    ours = json.load(open(sys.argv[1]))
    from llama_cpp import Llama  # installed by scripts/bench.sh, pinned

    before = resident()
    started = time.perf_counter()
    llm = Llama(model_path=ours["model"], n_ctx=2048, n_batch=512, n_threads=ours["threads"],
                n_threads_batch=ours["threads"], verbose=False)
    load = time.perf_counter() - started

    prompt = ours["prompt"]
    llm.reset()
    llm.eval(prompt)  # warm-up: every weight read once
    after = resident()
    prefill = []
    for _ in range(7):
        llm.reset()
        started = time.perf_counter()
        llm.eval(prompt)
        llm.sample(temp=0.0, repeat_penalty=1.1)
        prefill.append(time.perf_counter() - started)
    prefill = statistics.median(prefill)

    story = ours["story_prompt"]
    n = max(ours["decoded"], 16)
    rates = []
    for _ in range(3):
        llm.reset()
        llm.eval(story)
        started = time.perf_counter()
        for _ in range(n - 1):
            token = llm.sample(temp=0.0, repeat_penalty=1.1)
            llm.eval([token])
        rates.append((n - 1) / (time.perf_counter() - started))
    decode = statistics.median(rates)

    weights = after[0] - before[0]
    rows = [
        ("load, ms", ours["load_s"] * 1000, load * 1000, "≤ 500 ms",
         ours["load_s"] <= 0.5),
        (f"prefill of {len(prompt)} tokens, ms", ours["prefill_s"] * 1000, prefill * 1000, "≤ 1.2×",
         ours["prefill_s"] <= 1.2 * prefill),
        ("decode, tokens/s", ours["decode_tps"], decode, "≥ 0.8×", ours["decode_tps"] >= 0.8 * decode),
        ("weights resident, MB", ours["weights_bytes"] / 1e6, weights / 1e6, "≤ 1.5× the file",
         ours["weights_bytes"] <= 1.5 * ours["file_bytes"]),
        ("cache and buffers, MB", ours["working_bytes"] / 1e6, (after[1] - before[1]) / 1e6, "", True),
    ]
    print(f"{'':28} {'Agentry':>10} {'llama.cpp':>10} {'ratio':>7}  target")
    for name, a, b, target, met in rows:
        ratio = a / b if b else float("nan")
        mark = ("met" if met else "MISSED") if target else ""
        print(f"{name:28} {a:10.1f} {b:10.1f} {ratio:6.2f}×  {target} {mark}")
    print(f"file: {ours['file_bytes'] / 1e6:.0f} MB; weights resident {ours['weights_bytes'] / ours['file_bytes']:.2f}× the file")
    for chats, rate in ours["aggregate"]:
        print(f"Agentry, {chats} concurrent chat(s): {rate:.1f} tokens/s in all")


if __name__ == "__main__":
    main()
