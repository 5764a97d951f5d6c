#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds a large torch memory snapshot for benchmarks out of a real one: its device trace (and
its annotations) replicated N times, copy k shifted in time after copy k-1 and in address by k
times the trace's address span (each copy gets its own range, above the one before, as a heap
that keeps growing), and the final segments shifted with the last copy, so the copies follow one
another like later iterations of the same run and the last one ends in the snapshot's final
state. Structure is what torch writes: every copy has its own entry dicts and frame lists (an
allocation shares its list with its frees, as in the source), and all copies share the source's
frame dicts, as torch's symbolizer interns frames. The root dict says what the file is under
"gpudiag_synthetic". Never write it into the repository.

    bench/make_large_snapshot.py [--source SNAPSHOT] [--copies 100] [--gzip] OUT
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import sys
from pathlib import Path

DEFAULT_SOURCE = (
    Path(__file__).resolve().parent.parent.parent
    / "shared"
    / "corpus"
    / "memory_snapshots"
    / "decomfl_memory.pickle"
)
ADDRESS_ALIGN = 1 << 30
TIME_GAP_US = 1000


class DataOnlyUnpickler(pickle.Unpickler):
    """A snapshot is plain data: refuse anything that would import a Python object."""

    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"a snapshot should not reference {module}.{name}")


def load(path: Path) -> tuple[dict, int]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:1] != b"\x80":
        sys.exit(f"{path}: not a binary pickle")
    data = DataOnlyUnpickler(__import__("io").BytesIO(raw)).load()
    if not isinstance(data, dict) or not any(data.get("device_traces") or []):
        sys.exit(f"{path}: a snapshot with a device trace is needed")
    return data, raw[1]


def shifts(trace: list[dict], segments: list[dict]) -> tuple[int, int]:
    """Time shift (us) that puts a copy after the previous one; address shift between copies."""
    times = [e.get("time_us", 0) for e in trace]
    ends = [e.get("addr", 0) + e.get("size", 0) for e in trace if e.get("action") != "oom"]
    ends += [s["address"] + s["total_size"] for s in segments]
    starts = [e.get("addr", 0) for e in trace if e.get("action") != "oom"]
    starts += [s["address"] for s in segments]
    span = max(ends) - min(starts)
    return max(times) - min(times) + TIME_GAP_US, (span // ADDRESS_ALIGN + 1) * ADDRESS_ALIGN


def shifted_trace(trace: list[dict], dt: int, da: int) -> list[dict]:
    lists: dict[int, list] = {}  # the source's frame list -> this copy's, keeping the sharing
    out = []
    for e in trace:
        c = dict(e)
        if "time_us" in c:
            c["time_us"] += dt
        if da and "addr" in c and c.get("action") != "oom":
            c["addr"] += da
        frames = e.get("frames")
        if isinstance(frames, list):
            c["frames"] = lists.setdefault(id(frames), list(frames))
        out.append(c)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--gzip", action="store_true", help="compress the pickle (gzip -6)")
    args = ap.parse_args()

    data, protocol = load(args.source)
    traces = data["device_traces"]
    device = next(i for i, t in enumerate(traces) if t)
    trace = traces[device]
    dt, da = shifts(trace, [s for s in data["segments"] if s.get("device", device) == device])
    last = args.copies - 1
    replicated: list[dict] = []
    for k in range(args.copies):
        replicated += shifted_trace(trace, k * dt, k * da)
    traces[device] = replicated
    for seg in data["segments"]:
        if seg.get("device", device) != device:
            continue
        seg["address"] += last * da
        for block in seg.get("blocks", []):
            if "address" in block:
                block["address"] += last * da
    annotations = data.get("external_annotations") or []
    if annotations:
        data["external_annotations"] = [
            dict(a, time_us=a.get("time_us", 0) + k * dt)
            for k in range(args.copies)
            for a in annotations
        ]
    data["gpudiag_synthetic"] = (
        f"SYNTHETIC benchmark input: the device trace of {args.source.name} replicated "
        f"{args.copies} times, copy k shifted by k*{dt} us and by k*{da:#x} in address; "
        f"the final segments shifted with the last copy"
    )
    opener = gzip.open if args.gzip else open
    with opener(args.out, "wb") as f:
        pickle.dump(data, f, protocol=max(protocol, 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
