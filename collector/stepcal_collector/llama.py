"""A random-weight Llama-style decoder with the exact shapes of a shipped model config (llama-3.1-8b
by default), for whole-step timings: decode steps over (batch, context) and prefill steps over tokens,
eager and under a CUDA graph.

The forward pass is the standard one (RMSNorm → fused QKV → RoPE → KV-cache write → GQA attention →
O proj → residual → RMSNorm → fused gate/up → SiLU·up → down → residual; final norm; LM head on the
last token of each request). No sampling, no tokenizer, no scheduler: measured_us is the forward pass.

Reductions, all recorded in provenance and in each row's `flags`: `layers` (fewer decoder layers than
the model has) and `width_div` (hidden, intermediate, vocab and head counts divided by this factor; the
head_dim is kept). Nothing is scaled back up.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from .sweeps import BF16, Skip, Sweep, attend

#: Llama-3.1-8B shapes (meta-llama/Llama-3.1-8B config.json), used when the catalog file is absent.
LLAMA_31_8B_FALLBACK = dict(hidden=4096, intermediate=14336, layers=32, n_q=32, n_kv=8, head_dim=128,
                            vocab=128256, rms_eps=1e-5, rope_theta=500000.0)


@dataclass
class Shapes:
    hidden: int
    intermediate: int
    layers: int
    n_q: int
    n_kv: int
    head_dim: int
    vocab: int
    rms_eps: float
    rope_theta: float


def load_shapes(repo_root: str, model: str) -> Tuple[Shapes, str]:
    """Shapes from `catalog/models/<model>/config.json` (HF config keys); the built-in Llama-3.1-8B
    numbers if that file is missing and model is llama-3.1-8b. Returns (shapes, where they came from)."""
    path = os.path.join(repo_root, "catalog", "models", model, "config.json")
    if os.path.exists(path):
        with open(path) as f:
            c = json.load(f)
        n_q = int(c["num_attention_heads"])
        hd = int(c.get("head_dim") or c["hidden_size"] // n_q)
        return Shapes(
            hidden=int(c["hidden_size"]), intermediate=int(c["intermediate_size"]),
            layers=int(c["num_hidden_layers"]), n_q=n_q, n_kv=int(c.get("num_key_value_heads", n_q)),
            head_dim=hd, vocab=int(c["vocab_size"]), rms_eps=float(c.get("rms_norm_eps", 1e-5)),
            rope_theta=float(c.get("rope_theta", 10000.0)),
        ), f"catalog/models/{model}/config.json"
    if model == "llama-3.1-8b":
        return Shapes(**LLAMA_31_8B_FALLBACK), "built-in Llama-3.1-8B numbers (catalog config.json not found)"
    raise SystemExit(f"error: no catalog/models/{model}/config.json and no built-in shapes for {model}")


def reduce_shapes(s: Shapes, layers: Optional[int], width_div: int) -> Shapes:
    """Apply the plan's reductions: `layers` decoder layers (≤ the model's) and width ÷ `width_div`."""
    r = Shapes(**asdict(s))
    if layers:
        r.layers = min(int(layers), s.layers)
    if width_div > 1:
        r.n_q = max(1, s.n_q // width_div)
        r.n_kv = max(1, s.n_kv // width_div)
        if r.n_q % r.n_kv:
            r.n_kv = 1
        r.hidden = r.n_q * s.head_dim
        r.intermediate = max(16, s.intermediate // width_div)
        r.vocab = max(16, s.vocab // width_div)
    return r


class RandomLlama:
    """Random bf16 weights of the given shapes on `device`; `decode()` and `prefill()` steps."""

    def __init__(self, s: Shapes, device: torch.device, max_pos: int, seed: int = 0):
        self.s = s
        g = torch.Generator(device="cpu").manual_seed(seed)
        torch.manual_seed(seed)

        def w(*shape):
            t = torch.empty(*shape, device=device, dtype=BF16)
            return t.normal_(0.0, 0.02)

        hd, nq, nkv, H, I = s.head_dim, s.n_q, s.n_kv, s.hidden, s.intermediate
        self.embed = w(s.vocab, H)
        self.layers = []
        for _ in range(s.layers):
            self.layers.append({
                "n1": torch.ones(H, device=device, dtype=BF16),
                "qkv": w((nq + 2 * nkv) * hd, H),
                "o": w(H, nq * hd),
                "n2": torch.ones(H, device=device, dtype=BF16),
                "gu": w(2 * I, H),
                "down": w(H, I),
            })
        self.norm = torch.ones(H, device=device, dtype=BF16)
        self.lm_head = w(s.vocab, H)
        inv = 1.0 / (s.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv)
        self.cos = ang.cos().to(device=device, dtype=BF16)
        self.sin = ang.sin().to(device=device, dtype=BF16)
        del g

    def param_bytes(self) -> int:
        n = self.embed.numel() + self.lm_head.numel() + self.norm.numel()
        for l in self.layers:
            n += sum(t.numel() for t in l.values())
        return 2 * n

    def _norm(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.s.rms_eps)).to(BF16) * w

    @staticmethod
    def _rope(x, cos, sin):
        # x [..., hd]; cos/sin broadcastable [..., hd/2]; rotate-half convention
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def _mlp_residual(self, x, L):
        h = self._norm(x, L["n2"])
        g, u = F.linear(h, L["gu"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, L["down"])

    def decode(self, tokens, pos, cache, ctx: int):
        """One decode step: tokens [B] at position ctx-1, attending over ctx cached tokens.
        cache [layers, 2, B, n_kv, ctx, hd]. Returns logits [B, vocab]."""
        s = self.s
        B = tokens.shape[0]
        x = self.embed[tokens]
        cos = self.cos[pos][:, None, :]
        sin = self.sin[pos][:, None, :]
        for i, L in enumerate(self.layers):
            qkv = F.linear(self._norm(x, L["n1"]), L["qkv"])
            q, k, v = qkv.split([s.n_q * s.head_dim, s.n_kv * s.head_dim, s.n_kv * s.head_dim], dim=-1)
            q = self._rope(q.view(B, s.n_q, s.head_dim), cos, sin)
            k = self._rope(k.view(B, s.n_kv, s.head_dim), cos, sin)
            cache[i, 0, :, :, ctx - 1] = k
            cache[i, 1, :, :, ctx - 1] = v.view(B, s.n_kv, s.head_dim)
            o, _ = attend(q.view(B, s.n_q, 1, s.head_dim), cache[i, 0], cache[i, 1], False)
            x = x + F.linear(o.reshape(B, s.n_q * s.head_dim), L["o"])
            x = self._mlp_residual(x, L)
        return F.linear(self._norm(x, self.norm), self.lm_head)

    def prefill(self, tokens, cache):
        """One prefill step: tokens [B, T] with no cached prefix; writes cache[..., :T, :]. Returns the
        logits of each request's last token [B, vocab]."""
        s = self.s
        B, T = tokens.shape
        x = self.embed[tokens.reshape(-1)]
        cos = self.cos[:T][None, :, None, :]
        sin = self.sin[:T][None, :, None, :]
        for i, L in enumerate(self.layers):
            qkv = F.linear(self._norm(x, L["n1"]), L["qkv"])
            q, k, v = qkv.split([s.n_q * s.head_dim, s.n_kv * s.head_dim, s.n_kv * s.head_dim], dim=-1)
            q = self._rope(q.view(B, T, s.n_q, s.head_dim), cos, sin).transpose(1, 2)
            k = self._rope(k.view(B, T, s.n_kv, s.head_dim), cos, sin).transpose(1, 2)
            v = v.view(B, T, s.n_kv, s.head_dim).transpose(1, 2)
            cache[i, 0, :, :, :T] = k
            cache[i, 1, :, :, :T] = v
            o, _ = attend(q, k, v, True)
            x = x + F.linear(o.transpose(1, 2).reshape(B * T, s.n_q * s.head_dim), L["o"])
            x = self._mlp_residual(x, L)
        last = x.view(B, T, -1)[:, -1]
        return F.linear(self._norm(last, self.norm), self.lm_head)


class StepSweep(Sweep):
    """Whole forward steps of a RandomLlama, each point timed eager and under a graph.

    GPU: eager = CUDA events around one step with a synchronize before it (the span includes the GPU
    waiting on kernel launches); graph = the same step captured once per point in a CUDA graph, timed
    around `replay()`. CPU: eager = perf_counter; graph = a torch.jit.trace of the step replayed by
    TorchScript (emulation, flagged `cpu_emulated_graph`).
    """

    name = "steps"
    family = "step"

    def __init__(self, dev, cfg, warmup, repeats, repo_root: str):
        super().__init__(dev, cfg, warmup, repeats)
        self.model_name = cfg.get("model", "llama-3.1-8b")
        full, self.shapes_source = load_shapes(repo_root, self.model_name)
        self.full = full
        self.width_div = int(cfg.get("width_div", 1))
        self.s = reduce_shapes(full, cfg.get("layers"), self.width_div)
        self.engines = list(cfg.get("engines", ["eager", "graph"]))
        cap = int(cfg.get("max_kv_tokens", 1 << 62))
        dec = cfg.get("decode", {})
        for c in dec.get("context", []):
            for b in dec.get("batch", []):
                if b * c <= cap:
                    self.points.append({"phase": "decode", "batch": int(b), "context": int(c)})
        pre = cfg.get("prefill", {})
        for b in pre.get("batch", [1]):
            for t in pre.get("tokens", []):
                if b * t <= cap:
                    self.points.append({"phase": "prefill", "batch": int(b), "tokens": int(t)})
        max_pos = max([p.get("context", 0) for p in self.points] + [p.get("tokens", 0) for p in self.points] + [1])
        self.model: Optional[RandomLlama] = None
        self.max_pos = max_pos
        self.flags = []
        if self.s.layers < full.layers:
            self.flags.append(f"layers={self.s.layers}")
        if self.width_div > 1:
            self.flags.append(f"width_div={self.width_div}")

    def _model(self) -> RandomLlama:
        if self.model is None:
            self.model = RandomLlama(self.s, self.dev.torch_device, self.max_pos, seed=int(self.cfg.get("seed", 0)))
        return self.model

    def _graph_fn(self, step, args):
        """Capture `step(*args)` (CUDA graph) or trace it (CPU emulation); returns (replay fn, keep-alive)."""
        if self.dev.is_cuda:
            st = torch.cuda.Stream()
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                for _ in range(2):
                    step(*args)
            torch.cuda.current_stream().wait_stream(st)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = step(*args)
            torch.cuda.synchronize()
            return (lambda: (g.replay(), out)[1]), g
        with warnings.catch_warnings():  # TracerWarnings about Python ints are expected: shapes are static per point
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(step, tuple(args), check_trace=False)
        return (lambda: traced(*args)), traced

    def run(self, p):
        m = self._model()
        s, d = self.s, self.dev.torch_device
        B = p["batch"]
        T = p["context"] if p["phase"] == "decode" else p["tokens"]
        try:
            cache = torch.zeros(s.layers, 2, B, s.n_kv, T, s.head_dim, device=d, dtype=BF16)
        except RuntimeError as e:  # out of memory
            raise Skip(f"KV cache for batch={B} tokens={T} does not fit: {str(e).splitlines()[0][:120]}")
        if p["phase"] == "decode":
            tokens = torch.randint(0, s.vocab, (B,), device=d)
            pos = torch.full((B,), T - 1, device=d, dtype=torch.long)

            def step(tk, ps, ch):
                return m.decode(tk, ps, ch, T)

            args = [tokens, pos, cache]
        else:
            tokens = torch.randint(0, s.vocab, (B, T), device=d)

            def step(tk, ch):
                return m.prefill(tk, ch)

            args = [tokens, cache]
        rows = []
        for eng in self.engines:
            flags = list(self.flags)
            if eng == "graph":
                fn, keep = self._graph_fn(step, args)
                if not self.dev.is_cuda:
                    flags.append("cpu_emulated_graph")
            else:
                fn, keep = (lambda: step(*args)), None
            with torch.no_grad():
                us = self.dev.time_device(fn, self.warmup, self.repeats, flush=False, queue_ahead=False)
            del keep
            row = {
                "model": self.model_name, "tp": 1, "weight_dtype": "bf16", "kv_dtype": "bf16",
                "cudagraph_mode": "FULL" if eng == "graph" else "NONE", "engine": f"torch-{eng}", "kind": "step",
                "prefill_requests": 0, "prefill_tokens": 0, "prefill_context_tokens": 0,
                "decode_requests": 0, "decode_context_tokens": 0, "batch": 0, "prompt_tokens": 0,
                "output_tokens": 0, "measured_us": us, "flags": ";".join(flags),
            }
            if p["phase"] == "decode":
                row.update(decode_requests=B, decode_context_tokens=B * T, group=f"decode_ctx{T}_{eng}")
            else:
                row.update(prefill_requests=B, prefill_tokens=B * T, group=f"prefill_b{B}_{eng}")
            rows.append(row)
        del cache
        if self.dev.is_cuda:
            torch.cuda.empty_cache()
        return rows

    def teardown(self):
        self.model = None

    def sizes(self):
        out = super().sizes()
        out.update(
            model=self.model_name, shapes_source=self.shapes_source, model_layers=self.full.layers,
            layers_run=self.s.layers, width_div=self.width_div, shapes_run=asdict(self.s),
            row_flags=";".join(self.flags),
        )
        return out
