#!/usr/bin/env python3
"""stepcal measurement collector.

    python collector/collect.py --plan quick --out measurements/<chip>/ [--device cuda|cpu] [--chip NAME]

Runs the plan's sweeps (GEMM, decode/prefill attention, memory bandwidth, eager launch, graph replay,
host dispatch, whole llama-3.1-8b steps) with PyTorch and writes stepcal's canonical measurement files
with provenance into --out. Progress and an ETA go to stderr. See docs/collector.md.

Exit status: 0 all sweeps recorded; 2 usage error; 3 at least one sweep refused (clock throttled) or
failed; its rows are not written and provenance says why.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import torch  # noqa: E402
import yaml  # noqa: E402

from stepcal_collector.estimate import estimate_plan  # noqa: E402
from stepcal_collector.llama import StepSweep  # noqa: E402
from stepcal_collector.output import sha256_file, write_family  # noqa: E402
from stepcal_collector.sweeps import (  # noqa: E402
    AttentionDecodeSweep, AttentionPrefillSweep, GemmSweep, HostSweep, MemorySweep, Skip, Sweep,
)
from stepcal_collector.timing import ClockReader, Device, throttle_verdict  # noqa: E402

KNOWN_CHIPS = ["gb200", "gb300", "b200", "b300", "h200", "h100", "h20", "a100", "l40s", "l40", "l4", "a10g"]


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def chip_from_gpu_name(name: str) -> str:
    """`NVIDIA H200` → `h200`; unknown names become a lower-case slug."""
    low = name.lower()
    for c in KNOWN_CHIPS:
        if re.search(rf"(^|[^a-z0-9]){c}([^a-z0-9]|$)", low):
            return c
    slug = re.sub(r"[^a-z0-9]+", "-", low.replace("nvidia", "")).strip("-")
    return slug or "gpu"


def lane_name() -> str:
    """`torch-<public version>` (local suffix such as +cu124 dropped; CUDA goes in provenance)."""
    return "torch-" + torch.__version__.split("+")[0]


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "collector"], cwd=REPO, capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty and sha else "")
    except Exception:
        return ""


def environment(dev: Device) -> Dict:
    env: Dict = {
        "device": dev.kind, "torch": torch.__version__, "cuda": torch.version.cuda or "", "python": platform.python_version(),
        "host": platform.node(), "cpu": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads(),
    }
    if dev.is_cuda:
        p = torch.cuda.get_device_properties(0)
        env.update(gpu_name=p.name, sm_count=p.multi_processor_count, gpu_memory_bytes=int(p.total_memory),
                   capability=f"sm_{p.major}{p.minor}")
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
                                 capture_output=True, text=True, timeout=10).stdout.strip()
            env["driver"] = out
        except Exception:
            env["driver"] = ""
    return env


def load_plan(arg: str) -> (Dict, str):
    path = arg if arg.endswith((".yaml", ".yml")) or os.sep in arg else os.path.join(HERE, "plans", f"{arg}.yaml")
    if not os.path.exists(path):
        log(f"error: plan {arg!r} not found (looked at {path}); plans: "
            + ", ".join(sorted(f[:-5] for f in os.listdir(os.path.join(HERE, 'plans')) if f.endswith('.yaml'))))
        sys.exit(2)
    with open(path) as f:
        return yaml.safe_load(f), path


def build_sweeps(plan: Dict, dev: Device, only: List[str]) -> List[Sweep]:
    w, r = int(plan.get("warmup", 3)), int(plan.get("repeats", 10))
    sweeps: List[Sweep] = []
    if "gemm" in plan:
        sweeps.append(GemmSweep(dev, plan["gemm"], w, r))
    if "attention_decode" in plan:
        sweeps.append(AttentionDecodeSweep(dev, plan["attention_decode"], w, r))
    if "attention_prefill" in plan:
        sweeps.append(AttentionPrefillSweep(dev, plan["attention_prefill"], w, r))
    if "memory" in plan:
        sweeps.append(MemorySweep(dev, plan["memory"], w, r))
    host = plan.get("host", {})
    for what in ("eager_launch", "graph_replay", "dispatch"):
        if what in host:
            cfg = dict(host.get("defaults", {}))
            cfg.update(host[what])
            sweeps.append(HostSweep(dev, cfg, w, r, what))
    if "steps" in plan:
        sweeps.append(StepSweep(dev, plan["steps"], w, r, REPO))
    if only:
        sweeps = [s for s in sweeps if s.name in only or s.family in only]
    return sweeps


def describe(p: Dict) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items())


def fmt_s(s: float) -> str:
    s = max(0, int(round(s)))
    return f"{s // 60}:{s % 60:02d}"


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description="stepcal measurement collector (see docs/collector.md)")
    ap.add_argument("--plan", default="quick", help="tiny | quick | full | path/to/plan.yaml")
    ap.add_argument("--out", help="output directory, e.g. measurements/h200-collected/")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda if available")
    ap.add_argument("--chip", default=None, help="stepcal chip name (default: from the GPU name; 'cpu' on CPU)")
    ap.add_argument("--only", default="", help="comma-separated sweep names or families to run")
    ap.add_argument("--throttle-check", choices=["refuse", "warn", "off"], default=None,
                    help="default: refuse on cuda, warn on cpu")
    ap.add_argument("--estimate", action="store_true", help="print the plan's point counts and estimated run time; measure nothing")
    ap.add_argument("--estimate-chip", default="h200", help="catalog chip for --estimate (default h200)")
    a = ap.parse_args(argv)

    plan, plan_path = load_plan(a.plan)
    if a.estimate:
        return estimate_plan(plan, plan_path, REPO, a.estimate_chip, log)
    if not a.out:
        ap.error("--out is required")
    kind = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        log("error: --device cuda but torch.cuda.is_available() is False (use --device cpu --plan tiny)")
        return 2
    torch.set_grad_enabled(False)
    if kind == "cpu" and plan.get("cpu_threads"):
        torch.set_num_threads(int(plan["cpu_threads"]))
    dev = Device(kind, flush_l2_bytes=int(plan.get("flush_l2_bytes", 256 << 20)))
    env = environment(dev)
    chip = a.chip or (chip_from_gpu_name(env.get("gpu_name", "")) if dev.is_cuda else "cpu")
    lane = lane_name()
    mode = a.throttle_check or ("refuse" if dev.is_cuda else "warn")
    th = plan.get("throttle", {})
    max_drop = float(th.get("max_sm_clock_drop", 0.10))
    retries = int(th.get("retries", 1))
    cooldown = float(th.get("cooldown_s", 10))
    only = [s for s in a.only.split(",") if s]
    sweeps = build_sweeps(plan, dev, only)
    clocks = ClockReader(dev)
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    total = sum(len(s.points) for s in sweeps)
    log(f"stepcal collector: plan {plan.get('name', a.plan)} on {env.get('gpu_name', 'cpu')} ({kind}); chip {chip}, lane {lane}; "
        f"{len(sweeps)} sweeps, {total} points; clocks via {clocks.method}; throttle check {mode} (> {max_drop:.0%} SM-clock drop)")

    t_start = time.perf_counter()
    done = 0
    results: Dict[str, Dict] = {}
    clocks_before_run = clocks.read()
    for sw in sweeps:
        attempt = 0
        while True:
            attempt += 1
            rows: List[Dict] = []
            skipped: List[str] = []
            samples: List[Dict] = []
            before = clocks.read()
            t0 = time.perf_counter()
            error = ""
            done_at_start = done
            try:
                for i, p in enumerate(sw.points):
                    try:
                        got = sw.run(p)
                        rows.extend(got)
                        summary = ", ".join(f"{r.get('latency_us', r.get('measured_us')):.1f} µs" for r in got)
                    except Skip as e:
                        skipped.append(f"{describe(p)}: {e}")
                        summary = f"skipped ({e})"
                    # clocks are sampled under load (right after each point's repeats); where a
                    # reading is slow (nvidia-smi) only after the first and the last point
                    if clocks.cheap() or i == 0 or i == len(sw.points) - 1:
                        samples.append(clocks.read())
                    done += 1
                    el = time.perf_counter() - t_start
                    eta = el / done * (total - done) if done else 0.0
                    log(f"[{done:>4}/{total}] {sw.name} {i + 1}/{len(sw.points)} {describe(p)} → {summary} | "
                        f"elapsed {fmt_s(el)} eta {fmt_s(eta)}")
            except Exception as e:  # a sweep that crashes is recorded as failed, the others still run
                error = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
                log(f"error in sweep {sw.name}: {error}\n{traceback.format_exc()}")
            finally:
                sw.teardown()
                if dev.is_cuda:
                    torch.cuda.empty_cache()
            after = clocks.read()
            verdict = throttle_verdict(samples, max_drop)
            info = {
                "attempts": attempt, "points": len(sw.points), "rows": len(rows), "skipped": skipped,
                "elapsed_s": round(time.perf_counter() - t0, 2), "clocks_before": before, "clocks_after": after,
                "clock_samples": len(samples), "throttle": verdict, "kernel_sources": sorted(sw.kernel_sources),
                "sizes": sw.sizes(), "warmup": sw.warmup, "repeats": sw.repeats,
            }
            if error:
                info.update(status="failed", error=error)
                results[sw.name] = {"sweep": sw, "rows": [], "info": info}
                break
            if verdict.get("throttled") and mode == "refuse":
                if attempt <= retries:
                    log(f"sweep {sw.name}: throttled ({verdict}); cooling {cooldown:.0f} s and retrying")
                    time.sleep(cooldown)
                    done = done_at_start
                    continue
                log(f"sweep {sw.name}: REFUSED — throttled in {attempt} attempt(s): {verdict}")
                info["status"] = "refused_throttled"
                results[sw.name] = {"sweep": sw, "rows": [], "info": info}
                break
            if verdict.get("throttled"):
                log(f"sweep {sw.name}: warning — throttled ({verdict}); recorded anyway (--throttle-check {mode})")
            info["status"] = "recorded"
            results[sw.name] = {"sweep": sw, "rows": rows, "info": info}
            break

    # ------------------------------------------------------------------------------------- write files
    plan_rel = os.path.relpath(plan_path, REPO)
    plan_sha = sha256_file(plan_path)
    commit = git_commit()
    by_family: Dict[str, List[Dict]] = {}
    for name, res in results.items():
        by_family.setdefault(res["sweep"].family, []).append(res)
    written = []
    units = {
        "gemm": {"latency_us": "µs, median over repeats of CUDA-event time (perf_counter on CPU)", "m": "rows (tokens)",
                 "n": "output features", "k": "input features"},
        "attention_decode": {"latency_us": "µs, median CUDA-event time", "context_tokens": "tokens attended per request"},
        "attention_prefill": {"latency_us": "µs, median CUDA-event time", "new_tokens": "tokens per request"},
        "memory": {"latency_us": "µs, median CUDA-event time", "bytes": "bytes (buffer size)", "bytes_moved": "bytes read + written"},
        "host": {"latency_us": "µs, median host wall time (perf_counter)", "kernels": "kernels launched or graph nodes"},
        "step": {"measured_us": "µs, median CUDA-event time of one forward step (perf_counter on CPU)"},
    }
    any_bad = False
    os.makedirs(a.out, exist_ok=True)
    for family, group in by_family.items():
        rows = [dict(r) for res in group for r in res["rows"]]
        for r in rows:
            r["chip"] = chip
            if family != "step":
                r["lane"] = lane
            else:
                r["source"] = f"stepcal-collector:{plan.get('name', a.plan)}@{date[:10]}"
        infos = {res["sweep"].name: res["info"] for res in group}
        any_bad |= any(i["status"] != "recorded" for i in infos.values())
        points_in = sum(i["points"] for i in infos.values())
        w = group[0]["sweep"]
        filters = [
            f"each point: {w.warmup} warm-up runs, then median of {w.repeats} timed repeats",
            (f"throttle rule (refuse): a sweep with a thermal/HW-slowdown clock reason, or whose lowest SM clock not explained by "
             f"idle/power cap is more than {max_drop:.0%} below its highest, is re-run "
             f"after {cooldown:.0f} s up to {retries} time(s), then refused (no rows written)") if mode == "refuse" else
            (f"throttle rule ({mode}): clocks sampled and a drop of more than {max_drop:.0%} reported, but no sweep refused"),
        ]
        for n, i in infos.items():
            if i["status"] != "recorded":
                filters.append(f"sweep {n} {i['status']}: {i.get('error') or i['throttle']}")
            if i["skipped"]:
                filters.append(f"sweep {n}: {len(i['skipped'])} point(s) skipped (listed in collector.sweeps.{n}.skipped)")
        notes = []
        if not dev.is_cuda:
            notes.append("CPU mode: timings are CPU timings that exercise the collector's code path; never fit GPU coefficients from them")
            if family == "host":
                notes.append("graph_replay rows on CPU replay a torch.jit.trace of the same N ops (TorchScript interpreter), an emulation of a CUDA graph")
        if family == "step":
            st = group[0]["sweep"]
            notes.append(f"random-weight {st.model_name}; shapes from {st.shapes_source}; layers_run {st.s.layers} of {st.full.layers}; "
                         f"width_div {st.width_div}; rows with flags layers=… or width_div=… are NOT the full model and are not scaled")
        if family == "memory":
            notes.append("sidecar file (not a stepcal family): effective bandwidth = bytes_moved / latency_us; see docs/collector.md")
            notes.extend(memory_summary(rows, chip))
        prov = {
            "family": family, "chip": chip, "lane": lane, "source_repository": "stepcal/collector (measured locally)",
            "source_path": "collector/collect.py", "source_commit": commit, "licence": "Apache-2.0",
            "inputs": [{"file": plan_rel, "sha256": plan_sha, "rows": points_in}], "filters": filters,
            "rows_in": points_in, "rows_out": len(rows), "units": units.get(family, {}), "output_sha256": "",
            "notes": notes,
            "collector": {
                "date": date, "plan": plan.get("name", a.plan), "plan_file": plan_rel, "environment": env,
                "cuda_version": torch.version.cuda or "", "clock_method": clocks.method,
                "clocks_before_run": clocks_before_run, "throttle_check": mode, "max_sm_clock_drop": max_drop,
                "sweeps": {n: {k: v for k, v in i.items()} for n, i in infos.items()},
            },
        }
        if family == "step":
            st = group[0]["sweep"]
            prov["collector"].update(model=st.model_name, layers_run=st.s.layers, model_layers=st.full.layers,
                                     width_div=st.width_div, shapes_source=st.shapes_source)
        if not rows and all(i["status"] != "recorded" for i in infos.values()):
            log(f"{family}: nothing recorded; no file written")
            continue
        path = write_family(a.out, family, lane, rows, prov, steps_name=getattr(group[0]["sweep"], "model_name", ""))
        written.append((path, len(rows)))
    el = time.perf_counter() - t_start
    log(f"done in {fmt_s(el)}; wrote " + ", ".join(f"{os.path.basename(p)} ({n} rows)" for p, n in written))
    if any_bad:
        log("some sweeps were refused or failed; see the provenance files (exit 3)")
        return 3
    return 0


def memory_summary(rows: List[Dict], chip: str) -> List[str]:
    """Best copy/read bandwidth, and its ratio to the catalog datasheet HBM bandwidth where known."""
    out = []
    peak = None
    path = os.path.join(REPO, "catalog", "chips", f"{chip}.yaml")
    if os.path.exists(path):
        with open(path) as f:
            peak = (yaml.safe_load(f) or {}).get("hbm_tb_per_s")
    for op in ("copy", "read"):
        bw = [r["bytes_moved"] / r["latency_us"] * 1e6 for r in rows if r.get("op") == op and r["latency_us"] > 0]
        if not bw:
            continue
        best = max(bw)
        line = f"best {op} bandwidth {best / 1e12:.3f} TB/s"
        if peak:
            line += f" = {best / (peak * 1e12):.3f} of the datasheet {peak} TB/s (hbm_derate estimate)"
        out.append(line)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
