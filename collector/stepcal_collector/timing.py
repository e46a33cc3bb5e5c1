"""Timing, clocks and the throttle rule.

Device-side work (GEMM, attention, memory, whole steps) is timed with CUDA events around each repeat,
after warm-up, with a spin kernel queued first so the host runs ahead of the GPU and the events
bracket GPU time only; the repeats are reduced by their median. Host-side sweeps (launch, replay,
dispatch) are timed with the host clock (time.perf_counter) because the quantity is CPU time.

In CPU mode every timer is time.perf_counter and "synchronize" is a read-back of the last result.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import time
from typing import Callable, Dict, List, Optional

import torch


class Device:
    """The device under test: `cuda` (CUDA events) or `cpu` (perf_counter)."""

    def __init__(self, kind: str, flush_l2_bytes: int = 0):
        self.kind = kind
        self.is_cuda = kind == "cuda"
        self.torch_device = torch.device("cuda" if self.is_cuda else "cpu")
        self._flush_buf: Optional[torch.Tensor] = None
        if self.is_cuda and flush_l2_bytes > 0:
            self._flush_buf = torch.empty(flush_l2_bytes, dtype=torch.uint8, device=self.torch_device)
        self.has_sleep = self.is_cuda and hasattr(torch.cuda, "_sleep")

    def synchronize(self, last: Optional[torch.Tensor] = None) -> None:
        """Wait for queued work. On CPU the stand-in is a read-back of one element of `last`."""
        if self.is_cuda:
            torch.cuda.synchronize()
        elif last is not None and last.numel() > 0:
            last.reshape(-1)[0].item()

    def flush_l2(self) -> None:
        """Overwrite a buffer larger than L2 so a repeat does not find its operands cached (GPU only)."""
        if self._flush_buf is not None:
            self._flush_buf.zero_()

    def time_device(
        self, fn: Callable[[], object], warmup: int, repeats: int, flush: bool = True, queue_ahead: bool = True
    ) -> float:
        """Median device time of `fn()` in µs over `repeats` runs after `warmup` runs.

        CUDA, queue_ahead (operators): per repeat, [flush L2] → event → fn → event, all queued behind a
        spin kernel so the events measure GPU time rather than the host's launch rate.
        CUDA, not queue_ahead (whole steps): synchronize → event → fn → event → synchronize per repeat,
        so the span includes the GPU idling while the host launches (what a real step pays).
        CPU: perf_counter around fn and a read-back of its result.
        """
        out: object = None
        for _ in range(warmup):
            out = fn()
        self.synchronize(out if isinstance(out, torch.Tensor) else None)
        if self.is_cuda:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
            if queue_ahead and self.has_sleep:
                torch.cuda._sleep(2_000_000)  # ~1 ms of spinning: lets the host queue the repeats
            for i in range(repeats):
                if flush:
                    self.flush_l2()
                if not queue_ahead:
                    torch.cuda.synchronize()
                starts[i].record()
                fn()
                ends[i].record()
            torch.cuda.synchronize()
            return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))
        samples: List[float] = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn()
            self.synchronize(out if isinstance(out, torch.Tensor) else None)
            samples.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(samples)

    def time_host(self, fn: Callable[[], object], warmup: int, repeats: int, sync: bool = True) -> float:
        """Median host wall time of `fn()` (plus one synchronize when `sync`) in µs."""
        for _ in range(warmup):
            out = fn()
            self.synchronize(out if isinstance(out, torch.Tensor) else None)
        samples: List[float] = []
        for _ in range(repeats):
            self.synchronize()
            t0 = time.perf_counter()
            out = fn()
            if sync:
                self.synchronize(out if isinstance(out, torch.Tensor) else None)
            samples.append((time.perf_counter() - t0) * 1e6)
        if not sync:
            self.synchronize()
        return statistics.median(samples)


# ---------------------------------------------------------------------------------------------- clocks


class ClockReader:
    """Reads SM/memory clocks: NVML (pynvml) if importable, else nvidia-smi, else nothing (GPU);
    /proc/cpuinfo MHz (CPU). Every reading is a dict; missing values are absent."""

    def __init__(self, device: Device, index: int = 0):
        self.device = device
        self.index = index
        self.method = "none"
        self._nvml = None
        self._handle = None
        if device.is_cuda:
            try:
                import pynvml  # type: ignore

                pynvml.nvmlInit()
                self._nvml = pynvml
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                self.method = "nvml"
            except Exception:
                self.method = "nvidia-smi" if self._smi() else "none"
        else:
            self.method = "proc-cpuinfo" if self._cpuinfo_mhz() is not None else "none"

    def _smi(self) -> Dict[str, float]:
        fields = "clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw"
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", str(self.index)],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()
        except Exception:
            return {}
        keys = ["sm_mhz", "mem_mhz", "max_sm_mhz", "temp_c", "power_w"]
        res: Dict[str, float] = {}
        for k, v in zip(keys, out.split(",")):
            try:
                res[k] = float(v)
            except ValueError:
                pass
        return res

    @staticmethod
    def _cpuinfo_mhz() -> Optional[float]:
        try:
            with open("/proc/cpuinfo") as f:
                mhz = [float(l.split(":")[1]) for l in f if l.lower().startswith("cpu mhz")]
            return statistics.mean(mhz) if mhz else None
        except Exception:
            return None

    def read(self) -> Dict[str, float]:
        if self.method == "nvml":
            n, h = self._nvml, self._handle
            res: Dict[str, float] = {}
            try:
                res["sm_mhz"] = float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))
                res["mem_mhz"] = float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM))
                res["max_sm_mhz"] = float(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM))
                res["temp_c"] = float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))
                res["power_w"] = n.nvmlDeviceGetPowerUsage(h) / 1000.0
            except Exception:
                pass
            for fn in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
                if hasattr(n, fn):
                    try:
                        res["throttle_reasons"] = float(getattr(n, fn)(h))
                        break
                    except Exception:
                        pass
            return res
        if self.method == "nvidia-smi":
            return self._smi()
        if self.method == "proc-cpuinfo":
            mhz = self._cpuinfo_mhz()
            return {"sm_mhz": mhz} if mhz is not None else {}
        return {}

    def cheap(self) -> bool:
        """Whether a reading is cheap enough to take after every sweep point."""
        return self.method in ("nvml", "proc-cpuinfo")


#: NVML clock-event ("throttle") reason bits that mean the clock was pulled down by heat or a hardware
#: slowdown: HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80.
THERMAL_OR_HW = 0x8 | 0x20 | 0x40 | 0x80
#: Reasons that explain a lower clock without making the numbers unrepeatable: GPU idle 0x1,
#: application clocks setting 0x2, SW power cap 0x4 (the sustained clock every real run also gets),
#: sync boost 0x10.
BENIGN = 0x1 | 0x2 | 0x4 | 0x10


def throttle_verdict(samples: List[Dict[str, float]], max_drop: float) -> Dict[str, object]:
    """The throttle rule, applied to the SM-clock samples taken after each point of a sweep (after its
    warm-up and timed repeats).

    - Where NVML reports clock-event reasons: the sweep is throttled if any sample carries a thermal or
      hardware-slowdown reason (THERMAL_OR_HW), or if the lowest clock among samples with no benign
      reason (BENIGN: idle, power cap, ...) is more than `max_drop` below the highest sample.
    - Where reasons are unreadable (nvidia-smi, CPU): throttled if the lowest SM clock is more than
      `max_drop` (a fraction, e.g. 0.10) below the highest.

    Returns {checked, throttled, min_sm_mhz, max_sm_mhz, drop[, reasons]}; `checked` is False when
    fewer than two SM-clock samples could be read (then nothing is refused, and provenance says so).
    """
    sm = [s for s in samples if s.get("sm_mhz", 0) > 0]
    if len(sm) < 2:
        return {"checked": False, "throttled": False}
    hi = max(s["sm_mhz"] for s in sm)
    lo_all = min(s["sm_mhz"] for s in sm)
    with_reasons = [s for s in sm if "throttle_reasons" in s]
    out: Dict[str, object] = {"checked": True, "min_sm_mhz": round(lo_all, 1), "max_sm_mhz": round(hi, 1),
                              "drop": round(1.0 - lo_all / hi, 4)}
    if len(with_reasons) == len(sm):
        bits = 0
        for s in sm:
            bits |= int(s["throttle_reasons"])
        unexplained = [s["sm_mhz"] for s in sm if not (int(s["throttle_reasons"]) & BENIGN)]
        lo = min(unexplained) if unexplained else hi
        out["reasons"] = hex(bits)
        out["throttled"] = bool(bits & THERMAL_OR_HW) or (1.0 - lo / hi) > max_drop
    else:
        out["throttled"] = (1.0 - lo_all / hi) > max_drop
    return out
