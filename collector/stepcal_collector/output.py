"""Writers for stepcal's measurement store, matching src/measurements/store.ts byte for byte in layout:
`<family>.<lane>.csv.gz` (gzip level 9, mtime 0) with header exactly FAMILY_COLUMNS[family] and a
`<family>.<lane>.provenance.yaml` beside it; held-out steps as `<model>.<lane>.steps.csv` with
`<model>.<lane>.steps.provenance.yaml`. Every write goes to a temp file first, then both files are
renamed into place.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import os
import re
from typing import Dict, Iterable, List

import yaml

#: Column order on disk (mirror of FAMILY_COLUMNS in src/measurements/schema.ts; the vitest suite
#: checks the written headers against the TypeScript constant).
FAMILY_COLUMNS: Dict[str, List[str]] = {
    "gemm": ["chip", "lane", "kernel_source", "dtype", "m", "n", "k", "latency_us"],
    "attention_decode": ["chip", "lane", "kernel_source", "batch", "context_tokens", "n_q", "n_kv", "head_dim",
                         "window", "kv_dtype", "latency_us"],
    "attention_prefill": ["chip", "lane", "kernel_source", "batch", "new_tokens", "prefix_tokens", "n_q", "n_kv",
                          "head_dim", "window", "dtype", "kv_dtype", "latency_us"],
    "host": ["chip", "lane", "kernel_source", "what", "kernels", "latency_us"],
    "step": ["model", "chip", "tp", "weight_dtype", "kv_dtype", "cudagraph_mode", "engine", "kind",
             "prefill_requests", "prefill_tokens", "prefill_context_tokens", "decode_requests",
             "decode_context_tokens", "batch", "prompt_tokens", "output_tokens", "measured_us", "group",
             "source", "flags"],
    # Sidecar, not a stepcal family (the store's listMeasurementFiles skips it): bandwidth points for
    # the HBM derate. bytes = buffer size; bytes_moved = bytes read + written by the op.
    "memory": ["chip", "lane", "kernel_source", "op", "bytes", "bytes_moved", "latency_us"],
}


def lane_slug(lane: str) -> str:
    """Same rule as laneSlug() in store.ts."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", lane)


def fmt(v) -> str:
    """Cell text: ints as ints; floats rounded to 1 ns (µs with 3 decimals) in shortest form."""
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = round(v, 3)
        if r == 0.0 and v > 0:
            r = v  # keep tiny positive values positive
        return repr(int(r)) if r == int(r) and abs(r) < 1e15 else repr(r)
    return "" if v is None else str(v)


def rows_to_csv(family: str, rows: Iterable[Dict]) -> str:
    cols = FAMILY_COLUMNS[family]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([fmt(r.get(c)) for c in cols])
    return buf.getvalue()


def _atomic_many(files: List[tuple]) -> None:
    staged = []
    try:
        for path, data in files:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            staged.append((tmp, path))
    except Exception:
        for tmp, _ in staged:
            try:
                os.remove(tmp)
            except OSError:
                pass
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def plain(v):
    """Recursively turn provenance values into YAML-safe builtins (str subclasses such as
    torch.__version__, tuples, sets)."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [plain(x) for x in (sorted(v) if isinstance(v, set) else v)]
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    return str(v)


def write_family(out_dir: str, family: str, lane: str, rows: List[Dict], provenance: Dict, steps_name: str = "") -> str:
    """Write one data file and its provenance; fills `output_sha256`, `rows_out`, `family`, `lane`.
    For family 'step', `steps_name` names the file (`<steps_name>.<lane>.steps.csv`, plain text)."""
    text = rows_to_csv(family, rows)
    if family == "step":
        path = os.path.join(out_dir, f"{steps_name}.{lane_slug(lane)}.steps.csv")
        data = text.encode("utf-8")
    else:
        path = os.path.join(out_dir, f"{family}.{lane_slug(lane)}.csv.gz")
        data = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
    prov = plain(provenance)
    prov["rows_out"] = len(rows)
    prov["output_sha256"] = hashlib.sha256(data).hexdigest()
    prov_path = re.sub(r"\.csv(\.gz)?$", ".provenance.yaml", path)
    _atomic_many([(path, data), (prov_path, yaml.safe_dump(prov, sort_keys=False, allow_unicode=True).encode("utf-8"))])
    return path


def sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
