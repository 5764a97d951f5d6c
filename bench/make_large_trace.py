#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds a large Kineto trace for benchmarks out of a real one: its events replicated N times,
each copy shifted in time (after the previous copy's end) and in its ids (correlation, External
id, flow id, ProfilerStep number), so the copies follow one another like later steps of the same
run. The text layout of every event is the source's own; only those numbers change. The result
says what it is in a top-level "gpudiag_synthetic" key. Never write it into the repository.

    bench/make_large_trace.py [--source TRACE] [--copies 20] [--gzip] OUT
"""

from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
from pathlib import Path

DEFAULT_SOURCE = (
    Path(__file__).resolve().parent.parent.parent
    / "shared"
    / "corpus"
    / "kineto_traces"
    / "hta_df_index_resolver.json.gz"
)

TS = re.compile(rb'"ts": (-?\d+)')
IDS = re.compile(rb'"(correlation|External id|id)": (\d+)')
STEP = re.compile(rb"ProfilerStep#(\d+)")


def read_text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def split_events(text: bytes) -> tuple[bytes, bytes, bytes]:
    """(head up to and including the events array's '[', the array body, the rest)."""
    key = text.find(b'"traceEvents"')
    if key < 0:
        sys.exit("the source has no traceEvents array")
    open_at = text.index(b"[", key)
    close_at = text.rindex(b"]")
    while text[:close_at].rstrip()[-1:] != b"}":
        close_at = text.rindex(b"]", 0, close_at)
    return text[: open_at + 1], text[open_at + 1 : close_at], text[close_at:]


def shifts(body: bytes) -> tuple[int, int, int]:
    """Time shift (µs) that puts a copy after the previous one, and the id and step shifts."""
    ts = [int(m.group(1)) for m in TS.finditer(body)]
    ids = [int(m.group(2)) for m in IDS.finditer(body)] or [0]
    steps = [int(m.group(1)) for m in STEP.finditer(body)] or [0]
    return max(ts) - min(ts) + 1000, max(ids) + 1, max(steps) - min(steps) + 1


def shifted_copy(body: bytes, k: int, dt: int, did: int, dstep: int) -> bytes:
    if k == 0:
        return body
    body = TS.sub(lambda m: b'"ts": %d' % (int(m.group(1)) + k * dt), body)
    body = IDS.sub(lambda m: b'"%s": %d' % (m.group(1), int(m.group(2)) + k * did), body)
    return STEP.sub(lambda m: b"ProfilerStep#%d" % (int(m.group(1)) + k * dstep), body)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--gzip", action="store_true", help="compress (gzip -6) as Kineto's .json.gz")
    args = ap.parse_args()

    head, body, tail = split_events(read_text(args.source))
    dt, did, dstep = shifts(body)
    label = (
        b'\n  "gpudiag_synthetic": "SYNTHETIC benchmark input: the events of %s replicated '
        b'%d times, each copy shifted by %d us and its ids by %d",'
        % (args.source.name.encode(), args.copies, dt, did)
    )
    brace = head.index(b"{")
    head = head[: brace + 1] + label + head[brace + 1 :]
    sink = None
    if args.gzip:
        sink = subprocess.Popen(
            ["gzip", "-6", "-c"], stdin=subprocess.PIPE, stdout=args.out.open("wb")
        )
        out = sink.stdin
    else:
        out = args.out.open("wb")
    assert out is not None
    out.write(head)
    for k in range(args.copies):
        if k > 0:
            out.write(b",")
        out.write(shifted_copy(body.rstrip(), k, dt, did, dstep))
    out.write(b"\n  " + tail.lstrip())
    out.close()
    if sink is not None and sink.wait() != 0:
        sys.exit("gzip failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
