# SPDX-License-Identifier: Apache-2.0
"""Shared plumbing for the classic-problem examples: argument parsing, the session, the verdict."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def parse_args(description: str, default_steps: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=default_steps, help="training steps to run")
    parser.add_argument(
        "--record",
        default=os.environ.get("GPUDIAG_EXAMPLE_RECORD", ""),
        help="write the gpudiag recording here",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser.parse_args()


def require_cuda() -> object:
    """Returns the torch module, or exits with status 77 (skipped) when no GPU is present."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: this example needs PyTorch and a CUDA GPU")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("no CUDA GPU: this example needs one (its recorded run replays on CPU in tests)")
        sys.exit(77)
    return torch


@contextmanager
def diagnosed(args: argparse.Namespace, name: str) -> Iterator[object]:
    """Runs the body under a gpudiag session and prints gpudiag's verdict afterwards."""
    import gpudiag

    record = args.record or None
    with gpudiag.session(record=record, properties={"example": name}) as session:
        yield session
    report = session.report()
    if args.json:
        print(report.to_json())
    else:
        print(report.summary())
    ids = sorted({f.id for f in report.findings})
    serious = sorted({f.id for f in report.findings if f.severity in ("warning", "critical")})
    print("VERDICT " + json.dumps({"example": name, "findings": ids, "serious": serious}))
