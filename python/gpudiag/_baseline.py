# SPDX-License-Identifier: Apache-2.0
"""Named baselines: a run's report kept under a name, to compare later runs with.

A baseline is the report's JSON document (never the trace it came from) in a folder the user
names: ``directory=`` / ``--dir``, else ``$GPUDIAG_BASELINE_DIR``, else ``./.gpudiag-baselines``.
``NAME.json`` there is baseline NAME. A name is a plain file name (letters, digits, ``.``, ``_``,
``-``, starting with a letter or digit), so it can never reach outside its folder, and an
argument holding a path separator (``./main``) is always a path, never a name.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from gpudiag._errors import GpudiagError, InvalidArgumentError, NotFoundError
from gpudiag._report import Report

PathLike = Union[str, Path]

ENV_DIR = "GPUDIAG_BASELINE_DIR"
DEFAULT_DIR = ".gpudiag-baselines"
SUFFIX = ".json"
MAX_NAME = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def baseline_dir(directory: PathLike | None = None) -> Path:
    """The baselines' folder: ``directory``, else $GPUDIAG_BASELINE_DIR, else
    ./.gpudiag-baselines."""
    if directory is not None and str(directory):
        return Path(directory)
    return Path(os.environ.get(ENV_DIR) or DEFAULT_DIR)


def is_name(text: str) -> bool:
    """True when ``text`` can name a baseline."""
    return len(text) <= MAX_NAME and _NAME.fullmatch(text) is not None


def check_name(name: str) -> str:
    """``name`` when it can name a baseline; InvalidArgumentError saying why otherwise."""
    if not isinstance(name, str) or not is_name(name):
        raise InvalidArgumentError(
            f"not a baseline name: {name!r} (a name is up to {MAX_NAME} letters, digits, "
            "'.', '_' or '-', starting with a letter or digit; no path)"
        )
    return name


def baseline_path(name: str, directory: PathLike | None = None) -> Path:
    """Where baseline ``name`` is kept."""
    return baseline_dir(directory) / (check_name(name) + SUFFIX)


def baseline_exists(name: str, directory: PathLike | None = None) -> bool:
    return is_name(name) and baseline_path(name, directory).is_file()


def save_baseline(
    name: str, report: Report, directory: PathLike | None = None, *, replace: bool = False
) -> Path:
    """Keeps ``report`` as baseline ``name`` and returns its file. The file appears whole or not
    at all (written beside it, then renamed over it); an existing baseline is replaced only
    with ``replace``."""
    path = baseline_path(name, directory)
    if path.exists() and not replace:
        raise InvalidArgumentError(
            f"baseline {name!r} exists ({path}); replace it explicitly to overwrite it"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    text = report.to_json() + "\n"
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from a team's CI user
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def load_baseline(name: str, directory: PathLike | None = None) -> Report:
    """Baseline ``name``'s report; NotFoundError naming the folder and what it holds."""
    path = baseline_path(name, directory)
    if not path.is_file():
        raise NotFoundError(_missing(name, baseline_dir(directory)))
    try:
        return Report.load(path)
    except GpudiagError as e:
        raise type(e)(f"baseline {name!r} ({path}): {e}") from None


def _missing(name: str, folder: Path) -> str:
    names = [b.name for b in list_baselines(folder)]
    held = f"it holds {', '.join(names)}" if names else "it holds none"
    return f"no baseline {name!r} in {folder} ({held})"


@dataclass(frozen=True)
class Baseline:
    """A kept baseline: its ``name``, ``path`` and when it was ``saved`` (the file's time)."""

    name: str
    path: Path
    saved: dt.datetime

    def report(self) -> Report:
        return Report.load(self.path)


def list_baselines(directory: PathLike | None = None) -> list[Baseline]:
    """The baselines kept in the folder, by name ([] when it does not exist)."""
    folder = baseline_dir(directory)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*" + SUFFIX)):
        name = path.name[: -len(SUFFIX)]
        if not is_name(name) or not path.is_file():
            continue
        saved = dt.datetime.fromtimestamp(path.stat().st_mtime, tz=dt.timezone.utc)
        found.append(Baseline(name, path, saved))
    return found


__all__ = [
    "DEFAULT_DIR",
    "ENV_DIR",
    "Baseline",
    "baseline_dir",
    "baseline_exists",
    "baseline_path",
    "check_name",
    "is_name",
    "list_baselines",
    "load_baseline",
    "save_baseline",
]
