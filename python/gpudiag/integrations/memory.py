# SPDX-License-Identifier: Apache-2.0
"""What a session does with PyTorch's memory on request: the built-in watch actions (free the
cache, dump a snapshot, save the report) and memory snapshots analysed by the C++ reader."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudiag._errors import UnavailableError

if TYPE_CHECKING:
    from gpudiag._report import Report


def run_watch_action(session: Any, name: str, folder: Path | None, n: int) -> tuple[bool, int, str]:
    """Does one built-in watch action; returns (ok, bytes freed, detail: a path or the reason it
    failed). Never raises: it runs on the session's thread."""
    try:
        if name == "report":
            path = _watch_file(folder, n, ".report.json")
            session.report().save(path)
            return True, 0, str(path)
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_initialized():
            return False, 0, f"{name}: PyTorch with CUDA is not initialised in this process"
        if name == "empty_cache":
            import gc

            before = int(torch.cuda.memory_reserved())
            gc.collect()
            torch.cuda.empty_cache()
            return True, max(0, before - int(torch.cuda.memory_reserved())), ""
        if name == "snapshot":
            path = _watch_file(folder, n, ".pickle")
            torch.cuda.memory._dump_snapshot(str(path))
            return True, 0, str(path)
        return False, 0, f"unknown watch action {name!r}"
    except Exception as e:  # noqa: BLE001 - reported with the crossing instead
        return False, 0, f"{name} failed: {type(e).__name__}: {e}"


def _watch_file(folder: Path | None, n: int, suffix: str) -> Path:
    base = folder if folder is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    return base / f"gpudiag-watch-{os.getpid()}-{n}{suffix}"


def snapshot_report(session: Any, path: str | Path | None = None) -> Report:
    """Dumps PyTorch's memory snapshot and analyses it with the C++ reader (never unpickled here)."""
    from gpudiag._analyze import analyze

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        raise UnavailableError("a memory snapshot needs PyTorch with CUDA initialised")
    if path is None:
        fd, tmp = tempfile.mkstemp(prefix="gpudiag-snapshot-", suffix=".pickle")
        os.close(fd)
        path = tmp
    torch.cuda.memory._dump_snapshot(str(path))
    if session is not None and session.running:
        session.annotate(f"snapshot:{path}")
    return analyze([str(path)])
