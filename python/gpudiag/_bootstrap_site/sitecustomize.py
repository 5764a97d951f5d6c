# SPDX-License-Identifier: Apache-2.0
"""``gpudiag run -- <program>`` puts this folder first on PYTHONPATH, so every Python process of
the program runs this file at interpreter start. It runs the sitecustomize it hides (if any),
then starts gpudiag in the process (gpudiag._bootstrap). Written for any Python 3 from 3.6:
nothing that fails here may reach the program, which then runs as it would without gpudiag."""

import json
import os
import sys
from typing import Any


def _run_hidden_sitecustomize() -> None:
    """The sitecustomize that would have run without this folder on the path."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _not_started(options: "dict[str, Any]", why: str) -> None:  # a string: Python 3.6 runs it
    """Leaves a note for gpudiag run and puts the injection back for this process."""
    try:
        for variable in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
            os.environ.setdefault(variable, options["injection"])
        name = os.path.basename(sys.executable or "python")
        note = f"no session in {name} (pid {os.getpid()}), only the CUDA injection: {why}"
        with open(options["notes"].replace("{pid}", str(os.getpid())), "a") as f:
            f.write(note.replace("\n", " ") + "\n")
    except Exception:  # noqa: BLE001, S110 - nowhere left to report it
        pass


def _start_gpudiag() -> None:
    try:
        options = json.loads(os.environ["GPUDIAG_RUN_PYTHON"])
    except Exception:  # noqa: BLE001 - not under gpudiag run (or garbled): nothing to do
        return
    try:
        import gpudiag

        version = getattr(gpudiag, "__version__", "?")
        if version != options.get("version"):
            where = os.path.dirname(getattr(gpudiag, "__file__", None) or "?")
            _not_started(
                options,
                f"{sys.executable} imports gpudiag {version} (from {where}), not "
                f"{options.get('version')} as gpudiag run does",
            )
            return
        from gpudiag import _bootstrap
    except Exception as e:  # noqa: BLE001 - not installed for this interpreter, or broken
        _not_started(options, f"{sys.executable} cannot import gpudiag ({type(e).__name__}: {e})")
        return
    _bootstrap.start(options)


try:
    _run_hidden_sitecustomize()
finally:
    _start_gpudiag()
