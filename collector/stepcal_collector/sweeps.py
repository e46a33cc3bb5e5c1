"""Per-operator sweeps. Each sweep is a list of points and a `run(point)` returning canonical rows
(without chip/lane, which the orchestrator adds). A point that cannot run on this device/torch raises
`Skip` with the reason; the orchestrator records skipped points in provenance.
"""
from __future__ import annotations

import math
import statistics
import time
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from .timing import Device

BF16 = torch.bfloat16


class Skip(Exception):
    """This point cannot be measured here (reason in the message)."""


class Sweep:
    """Base: `name` (unique, used in provenance), `family` (output file), `points`."""

    name = ""
    family = ""

    def __init__(self, dev: Device, cfg: Dict, warmup: int, repeats: int):
        self.dev = dev
        self.cfg = cfg
        self.warmup = int(cfg.get("warmup", warmup))
        self.repeats = int(cfg.get("repeats", repeats))
        self.points: List[Dict] = []
        self.kernel_sources: set = set()

    def run(self, point: Dict) -> List[Dict]:
        raise NotImplementedError

    def teardown(self) -> None:
        pass

    def sizes(self) -> Dict:
        """What the plan asked for (for provenance)."""
        return {k: v for k, v in self.cfg.items() if k not in ("warmup", "repeats")}


# ------------------------------------------------------------------------------------------------ GEMM


def fp8_support(dev: Device) -> Tuple[bool, str]:
    """fp8 GEMM needs CUDA sm_89+ and torch._scaled_mm with float8_e4m3fn."""
    if not dev.is_cuda:
        return False, "fp8 GEMM needs CUDA (torch._scaled_mm); CPU mode measures bf16 only"
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return False, f"torch {torch.__version__} has no torch._scaled_mm/float8_e4m3fn"
    cap = torch.cuda.get_device_capability()
    if cap < (8, 9):
        return False, f"device capability sm_{cap[0]}{cap[1]} < sm_89 has no fp8 tensor cores"
    return True, ""


class GemmSweep(Sweep):
    """y = x·Wᵀ with x m×k and W n×k (F.linear convention), over m × (n, k) × dtype."""

    name = "gemm"
    family = "gemm"

    def __init__(self, dev, cfg, warmup, repeats):
        super().__init__(dev, cfg, warmup, repeats)
        self.skipped_dtypes: Dict[str, str] = {}
        dtypes = list(cfg.get("dtypes", ["bf16"]))
        if "fp8" in dtypes:
            ok, why = fp8_support(dev)
            if not ok:
                dtypes.remove("fp8")
                self.skipped_dtypes["fp8"] = why
        for dt in dtypes:
            for n, k in cfg["nk"]:
                for m in cfg["m"]:
                    self.points.append({"dtype": dt, "m": int(m), "n": int(n), "k": int(k)})
        self._key: Optional[Tuple] = None
        self._buf: Dict[str, torch.Tensor] = {}

    def _prepare(self, dt: str, n: int, k: int) -> None:
        key = (dt, n, k)
        if self._key == key:
            return
        self._buf = {}
        if self.dev.is_cuda:
            torch.cuda.empty_cache()
        d = self.dev.torch_device
        m_max = max(p["m"] for p in self.points if (p["dtype"], p["n"], p["k"]) == key)
        w = torch.randn(n, k, device=d, dtype=BF16)
        x = torch.randn(m_max, k, device=d, dtype=BF16)
        if dt == "fp8":
            self._buf = {
                "w": w.to(torch.float8_e4m3fn),
                "x": x.to(torch.float8_e4m3fn),
                "scale": torch.ones((), device=d, dtype=torch.float32),
            }
        else:
            self._buf = {"w": w, "x": x}
        self._key = key

    def run(self, p):
        self._prepare(p["dtype"], p["n"], p["k"])
        x = self._buf["x"][: p["m"]]
        w = self._buf["w"]
        if p["dtype"] == "fp8":
            s = self._buf["scale"]
            wt = w.t()  # column-major k×n, as _scaled_mm wants

            def fn():
                out = torch._scaled_mm(x, wt, scale_a=s, scale_b=s, out_dtype=BF16)
                return out[0] if isinstance(out, tuple) else out

            src = "torch._scaled_mm(cublasLt,e4m3,per-tensor)"
            try:
                fn()
            except Exception as e:  # shape constraints (e.g. m not a multiple of 16) differ by version
                raise Skip(f"_scaled_mm rejected m={p['m']} n={p['n']} k={p['k']}: {str(e).splitlines()[0][:160]}")
        else:
            def fn():
                return F.linear(x, w)

            src = "F.linear(cublas)" if self.dev.is_cuda else "F.linear(cpu)"
        self.kernel_sources.add(src)
        us = self.dev.time_device(fn, self.warmup, self.repeats)
        return [{"kernel_source": src, "dtype": p["dtype"], "m": p["m"], "n": p["n"], "k": p["k"], "latency_us": us}]

    def teardown(self):
        self._buf = {}
        self._key = None

    def sizes(self):
        s = super().sizes()
        if self.skipped_dtypes:
            s["skipped_dtypes"] = dict(self.skipped_dtypes)
        return s


# ------------------------------------------------------------------------------------------- attention

_SDPA = getattr(F, "scaled_dot_product_attention", None)
_GQA_OK: Optional[bool] = None


def sdpa_gqa_supported() -> bool:
    """Whether this torch's SDPA accepts enable_gqa (torch ≥ 2.5)."""
    global _GQA_OK
    if _GQA_OK is None:
        if _SDPA is None:
            _GQA_OK = False
        else:
            try:
                q = torch.zeros(1, 2, 1, 8)
                kv = torch.zeros(1, 1, 1, 8)
                _SDPA(q, kv, kv, enable_gqa=True)
                _GQA_OK = True
            except Exception:
                _GQA_OK = False
    return _GQA_OK


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> Tuple[torch.Tensor, str]:
    """Attention with q [B, Hq, Tq, D] and k, v [B, Hkv, Tk, D] (Hq a multiple of Hkv); returns
    ([B, Hq, Tq, D], kernel_source).

    Decode (Tq = 1, no mask) folds the query heads of each KV group into the query length, which is
    exact for GQA and reads each KV head once. Prefill uses SDPA's enable_gqa where torch has it, else
    expands KV heads (an extra copy, recorded in kernel_source). Without SDPA (torch < 2.0): explicit
    matmul → softmax(fp32) → matmul.
    """
    B, Hq, Tq, D = q.shape
    Hkv = k.shape[1]
    g = Hq // Hkv
    if Tq == 1 and not causal and g > 1:
        qg = q.reshape(B, Hkv, g, D)
        out, src = attend(qg, k, v, False)
        return out.reshape(B, Hq, 1, D), src + "+gqa_fold"
    if _SDPA is not None:
        if g == 1:
            return _SDPA(q, k, v, is_causal=causal), "sdpa"
        if sdpa_gqa_supported():
            return _SDPA(q, k, v, is_causal=causal, enable_gqa=True), "sdpa(enable_gqa)"
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        return _SDPA(q, k, v, is_causal=causal), "sdpa+expand_kv"
    if g > 1:
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)).float() * (1.0 / math.sqrt(D))
    if causal:
        Tk = k.shape[2]
        mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).triu(Tk - Tq + 1)
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)
    return torch.matmul(p, v), "matmul-softmax" + ("+expand_kv" if g > 1 else "")


class AttentionDecodeSweep(Sweep):
    """One decode token per request over a contiguous bf16 KV cache of `context` tokens."""

    name = "attention_decode"
    family = "attention_decode"

    def __init__(self, dev, cfg, warmup, repeats):
        super().__init__(dev, cfg, warmup, repeats)
        cap = int(cfg.get("max_kv_tokens", 1 << 62))
        for nq, nkv in cfg["heads"]:
            for b in cfg["batch"]:
                for c in cfg["context"]:
                    if b * c <= cap:
                        self.points.append({"batch": int(b), "context": int(c), "n_q": int(nq), "n_kv": int(nkv)})

    def run(self, p):
        d, hd = self.dev.torch_device, int(self.cfg.get("head_dim", 128))
        B, C, nq, nkv = p["batch"], p["context"], p["n_q"], p["n_kv"]
        q = torch.randn(B, nq, 1, hd, device=d, dtype=BF16)
        k = torch.randn(B, nkv, C, hd, device=d, dtype=BF16)
        v = torch.randn(B, nkv, C, hd, device=d, dtype=BF16)
        src = attend(q, k, v, False)[1]
        self.kernel_sources.add(src)
        us = self.dev.time_device(lambda: attend(q, k, v, False)[0], self.warmup, self.repeats)
        return [{"kernel_source": src, "batch": B, "context_tokens": C, "n_q": nq, "n_kv": nkv, "head_dim": hd,
                 "window": 0, "kv_dtype": "bf16", "latency_us": us}]


class AttentionPrefillSweep(Sweep):
    """Causal self-attention over `tokens` new tokens per request, no cached prefix."""

    name = "attention_prefill"
    family = "attention_prefill"

    def __init__(self, dev, cfg, warmup, repeats):
        super().__init__(dev, cfg, warmup, repeats)
        for nq, nkv in cfg["heads"]:
            for b in cfg.get("batch", [1]):
                for t in cfg["tokens"]:
                    self.points.append({"batch": int(b), "tokens": int(t), "n_q": int(nq), "n_kv": int(nkv)})

    def run(self, p):
        d, hd = self.dev.torch_device, int(self.cfg.get("head_dim", 128))
        B, T, nq, nkv = p["batch"], p["tokens"], p["n_q"], p["n_kv"]
        q = torch.randn(B, nq, T, hd, device=d, dtype=BF16)
        k = torch.randn(B, nkv, T, hd, device=d, dtype=BF16)
        v = torch.randn(B, nkv, T, hd, device=d, dtype=BF16)
        src = attend(q, k, v, True)[1]
        self.kernel_sources.add(src)
        us = self.dev.time_device(lambda: attend(q, k, v, True)[0], self.warmup, self.repeats)
        return [{"kernel_source": src, "batch": B, "new_tokens": T, "prefix_tokens": 0, "n_q": nq, "n_kv": nkv,
                 "head_dim": hd, "window": 0, "dtype": "bf16", "kv_dtype": "bf16", "latency_us": us}]


# ---------------------------------------------------------------------------------------------- memory


class MemorySweep(Sweep):
    """Device-to-device copy (reads and writes `bytes`: bytes_moved = 2·bytes) and read-only
    reduction (torch.sum over fp32: bytes_moved = bytes) over buffer sizes."""

    name = "memory"
    family = "memory"

    def __init__(self, dev, cfg, warmup, repeats):
        super().__init__(dev, cfg, warmup, repeats)
        for op in cfg.get("ops", ["copy", "read"]):
            for b in cfg["bytes"]:
                self.points.append({"op": op, "bytes": int(b)})

    def run(self, p):
        d = self.dev.torch_device
        n = max(1, p["bytes"] // 4)
        src_t = torch.randn(n, device=d, dtype=torch.float32)
        if p["op"] == "copy":
            dst = torch.empty_like(src_t)
            fn: Callable[[], torch.Tensor] = lambda: dst.copy_(src_t)
            moved, ks = 2 * n * 4, "Tensor.copy_"
        else:
            fn = lambda: src_t.sum()
            moved, ks = n * 4, "torch.sum(fp32)"
        self.kernel_sources.add(ks)
        us = self.dev.time_device(fn, self.warmup, self.repeats)
        return [{"kernel_source": ks, "op": p["op"], "bytes": n * 4, "bytes_moved": moved, "latency_us": us}]


# ------------------------------------------------------------------------------------------------ host


def _empty_launch(dev: Device, x: torch.Tensor) -> Tuple[Callable[[], None], str]:
    """The cheapest kernel launch available: torch.cuda._sleep(0) (a spin kernel of zero cycles), else
    an in-place add on a one-element tensor (also the CPU stand-in)."""
    if dev.has_sleep:
        return (lambda: torch.cuda._sleep(0)), "torch.cuda._sleep(0)"
    if dev.is_cuda:
        return (lambda: x.add_(1)), "Tensor.add_(1 elem)"
    return (lambda: x.add_(1)), "cpu:Tensor.add_(1 elem)"


class HostSweep(Sweep):
    """Host overheads. `what` selects the quantity:

    - eager_launch: host time to launch N empty kernels one by one, then synchronize once;
    - graph_replay: host time to replay a captured graph of N empty-kernel nodes, then synchronize
      (CUDA graph on GPU; on CPU a torch.jit.trace of the same N ops, replayed by TorchScript's
      interpreter: an emulation, flagged in kernel_source);
    - dispatch: host time to issue N ordinary framework ops through torch's Python API (an
      out-of-place add on an 8×64 tensor: argument parsing, dispatcher, output allocation, launch),
      then synchronize once. One op kind, so every N costs the same per op and t = a + b·N holds.
    """

    family = "host"

    def __init__(self, dev, cfg, warmup, repeats, what: str):
        super().__init__(dev, cfg, warmup, repeats)
        self.what = what
        self.name = f"host_{what}"
        for n in cfg["kernels"]:
            self.points.append({"kernels": int(n)})
        self.x = torch.zeros(1, device=dev.torch_device)
        self._measured: Optional[Dict[int, Tuple[float, str]]] = None

    def _graph(self, n: int):
        launch, src = _empty_launch(self.dev, self.x)
        if self.dev.is_cuda:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(n):
                    launch()
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(n):
                    launch()
            torch.cuda.synchronize()
            return g.replay, g, "cuda_graph:" + src
        x = self.x

        def body(t):
            for _ in range(n):
                t.add_(1)
            return t

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(body, (x,), check_trace=False)
        return (lambda: traced(x)), traced, "cpu-emulated:jit_trace_replay:Tensor.add_(1 elem)"

    def _callable(self, n: int):
        """The timed call for N kernels or ops, what it keeps alive, and its kernel source."""
        x = self.x
        if self.what == "eager_launch":
            launch, src = _empty_launch(self.dev, x)

            def fn():
                for _ in range(n):
                    launch()
                return x

            return fn, None, src
        if self.what == "graph_replay":
            replay, keep, src = self._graph(n)

            def fn():
                replay()
                return x

            return fn, keep, src
        a = torch.randn(8, 64, device=self.dev.torch_device)

        def fn():
            t = a
            for _ in range(n):
                t = torch.add(t, a)
            return t

        return fn, None, "torch.add(8x64 fp32, out-of-place)"

    def _measure_all(self) -> Dict[int, Tuple[float, str]]:
        """Median host time of every N, its repeats interleaved across the N values (one call of each
        N per round): a burst of load from another process then lands on every N alike instead of
        shifting one N's median, which bent the fitted line (t = a + b·N) on busy CI runners."""
        ns = [p["kernels"] for p in self.points]
        calls = {n: self._callable(n) for n in ns}
        for n in ns:
            for _ in range(self.warmup):
                out = calls[n][0]()
                self.dev.synchronize(out if isinstance(out, torch.Tensor) else None)
        samples: Dict[int, List[float]] = {n: [] for n in ns}
        for _ in range(self.repeats):
            for n in ns:
                self.dev.synchronize()
                t0 = time.perf_counter()
                out = calls[n][0]()
                self.dev.synchronize(out if isinstance(out, torch.Tensor) else None)
                samples[n].append((time.perf_counter() - t0) * 1e6)
        return {n: (statistics.median(samples[n]), calls[n][2]) for n in ns}

    def run(self, p):
        # Every N is measured on the first point's call (interleaved, _measure_all); later points read it.
        if self._measured is None:
            self._measured = self._measure_all()
        n = p["kernels"]
        us, src = self._measured[n]
        self.kernel_sources.add(src)
        return [{"kernel_source": src, "what": self.what, "kernels": n, "latency_us": us}]
