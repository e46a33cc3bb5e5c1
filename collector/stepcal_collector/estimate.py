"""`--estimate`: how long a plan should take on a chip, from its sweep sizes and the catalog datasheet.

A deliberately rough roofline: each timed op costs max(FLOPs / (0.7·peak), bytes / (0.8·HBM)) + 5 µs;
every repeat also pays the 256 MiB L2 flush and ~15 µs of launches; every point pays ~20 ms of Python,
allocation and clock reading; host sweeps cost ~6 µs per launched kernel; each whole-step point pays a
CUDA-graph capture of three extra steps plus 0.3 s. The figure is a planning number, not a promise.
"""
from __future__ import annotations

import os
from typing import Callable, Dict

import yaml

from .llama import load_shapes, reduce_shapes


def estimate_plan(plan: Dict, plan_path: str, repo: str, chip: str, log: Callable[[str], None]) -> int:
    with open(os.path.join(repo, "catalog", "chips", f"{chip}.yaml")) as f:
        c = yaml.safe_load(f)
    peak = {k: float(v) * 1e12 for k, v in c["peak_tflops"].items()}
    bw = float(c["hbm_tb_per_s"]) * 1e12
    W, R = int(plan.get("warmup", 3)), int(plan.get("repeats", 10))
    flush_s = int(plan.get("flush_l2_bytes", 256 << 20)) / (0.8 * bw)
    per_point = 0.02

    def op_s(flops: float, nbytes: float, dtype: str = "bf16") -> float:
        return max(flops / (0.7 * peak.get(dtype, peak["bf16"])), nbytes / (0.8 * bw)) + 5e-6

    def reps(cfg):
        return int(cfg.get("warmup", W)) + int(cfg.get("repeats", R))

    total, lines = 0.0, []

    def add(name, n, s):
        nonlocal total
        total += s
        lines.append(f"  {name:<18} {n:>5} points  ~{s:7.1f} s")

    if "gemm" in plan:
        g = plan["gemm"]
        s, n = 0.0, 0
        for dt in g.get("dtypes", ["bf16"]):
            eb = 1 if dt == "fp8" else 2
            for nn, k in g["nk"]:
                for m in g["m"]:
                    n += 1
                    t = op_s(2 * m * nn * k, eb * (m * k + nn * k) + 2 * m * nn, dt)
                    s += reps(g) * (t + flush_s + 15e-6) + per_point
        add("gemm", n, s)
    if "attention_decode" in plan:
        a = plan["attention_decode"]
        cap = int(a.get("max_kv_tokens", 1 << 62))
        s, n = 0.0, 0
        for nq, nkv in a["heads"]:
            for b in a["batch"]:
                for ctx in a["context"]:
                    if b * ctx <= cap:
                        n += 1
                        s += reps(a) * (op_s(4 * b * ctx * nq * 128, 4 * b * ctx * nkv * 128) + flush_s + 15e-6) + per_point
        add("attention_decode", n, s)
    if "attention_prefill" in plan:
        a = plan["attention_prefill"]
        s, n = 0.0, 0
        for nq, nkv in a["heads"]:
            for b in a.get("batch", [1]):
                for t in a["tokens"]:
                    n += 1
                    s += reps(a) * (op_s(2 * b * t * t * nq * 128, 8 * b * t * nq * 128) + flush_s + 15e-6) + per_point
        add("attention_prefill", n, s)
    if "memory" in plan:
        m = plan["memory"]
        ops = m.get("ops", ["copy", "read"])
        s = sum(reps(m) * (op_s(0, (2 if op == "copy" else 1) * b) + flush_s) + per_point for op in ops for b in m["bytes"])
        add("memory", len(ops) * len(m["bytes"]), s)
    host = plan.get("host", {})
    for what in ("eager_launch", "graph_replay", "dispatch"):
        if what in host:
            cfg = dict(host.get("defaults", {}))
            cfg.update(host[what])
            per_k = {"eager_launch": 6e-6, "graph_replay": 1e-6, "dispatch": 10e-6}[what]
            s = sum(reps(cfg) * (k * per_k + 20e-6) + per_point + (k * 20e-6 if what == "graph_replay" else 0) for k in cfg["kernels"])
            add(f"host_{what}", len(cfg["kernels"]), s)
    if "steps" in plan:
        st = plan["steps"]
        full, _ = load_shapes(repo, st.get("model", "llama-3.1-8b"))
        sh = reduce_shapes(full, st.get("layers"), int(st.get("width_div", 1)))
        per_layer = (sh.n_q + 2 * sh.n_kv) * sh.head_dim * sh.hidden + sh.hidden * sh.n_q * sh.head_dim + 3 * sh.hidden * sh.intermediate
        params = sh.layers * per_layer + sh.vocab * sh.hidden
        kv_tok = sh.layers * 2 * sh.n_kv * sh.head_dim * 2
        cap = int(st.get("max_kv_tokens", 1 << 62))
        engines = len(st.get("engines", ["eager", "graph"]))
        s, n = 1.0 + 2 * params / 20e9, 0  # model init
        for ctx in st.get("decode", {}).get("context", []):
            for b in st.get("decode", {}).get("batch", []):
                if b * ctx <= cap:
                    n += 1
                    step = max(op_s(2 * params * b, 2 * params + kv_tok * b * ctx), sh.layers * 16 * 6e-6)
                    s += engines * (reps(st) + 3) * step + 0.3 * engines + per_point
        for b in st.get("prefill", {}).get("batch", [1]):
            for t in st.get("prefill", {}).get("tokens", []):
                n += 1
                step = op_s(2 * params * b * t + 2 * sh.layers * b * t * t * sh.n_q * sh.head_dim, 2 * params)
                s += engines * (reps(st) + 3) * step + 0.3 * engines + per_point
        add("steps", n, s)
    log(f"estimate for plan {plan.get('name')} ({os.path.basename(plan_path)}) on {chip}:")
    for l in lines:
        log(l)
    log(f"  total ~{total:.0f} s ({total / 60:.1f} min) + ~30 s start-up (CUDA context, cuBLAS handles)")
    return 0
