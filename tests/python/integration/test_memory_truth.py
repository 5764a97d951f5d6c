# SPDX-License-Identifier: Apache-2.0
"""Memory figures checked against direct counts from the corpus files, and exports made from what
the analyzer really emits (corpus files, the demo recording, a recording a live session wrote)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import gpudiag
from gpudiag import _core, prometheus

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
SNAPSHOTS = sorted((CORPUS / "memory_snapshots").glob("*.pickle")) if CORPUS.exists() else []
DEMO = Path(gpudiag.__file__).with_name("data") / "demo.gpudiag"
MiB = 1 << 20
GiB = 1 << 30


class _DataOnly(pickle.Unpickler):
    """Snapshots are pure data (corpus SOURCES.md): refuse anything else."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: snapshots hold data only")


def _load(path: Path) -> Any:
    with path.open("rb") as f:
        return _DataOnly(f).load()


# ---- the site rule of torch_snapshot.hpp (frames_to_site), written again from its description --
def _is_torch(file: str) -> bool:
    return "/torch/" in file or "\\torch\\" in file or file.startswith("torch/")


def _third_party(file: str) -> bool:
    return any(w in file for w in ("site-packages", "dist-packages", "<frozen ", "/lib/python"))


def _internal(name: str, file: str) -> bool:
    return (
        name.startswith(("torch::unwind", "torch::CapturedTraceback", "c10::", "at::"))
        or any(
            w in name
            for w in (
                "CUDACachingAllocator",
                "empty_strided",
                "empty_cuda",
                "empty_generic",
                "wrap_kernel_functor",
                "(anonymous namespace)",
            )
        )
        or "CUDACachingAllocator" in file
        or "memory_snapshot.cpp" in file
    )


def _short(file: str) -> str:
    parts = file.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def _site(frames: list[dict[str, Any]]) -> str:
    user = python = native = None
    for f in frames:
        file, name = f.get("filename", ""), f.get("name", "")
        if file.endswith(".py"):
            if python is None and not _is_torch(file):
                python = f
            if not _is_torch(file) and not _third_party(file):
                user = f
                break
        elif native is None and name and not _internal(name, file):
            native = f
    pick = user or python or native
    if pick is None:
        pick = next((f for f in frames if f.get("filename", "").endswith(".py")), None)
    if pick is None:
        return "<unknown site>"
    file, line, name = pick.get("filename", ""), pick.get("line", 0), pick.get("name", "")
    out = "" if file in ("", "??") else _short(file)
    if out and line > 0:
        out += f":{line}"
    return f"{out} {name[:160]}".strip() if name else out


def _peak_by_site(snapshot: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """The peak of allocated (active blocks) on device 0 and its blocks' bytes by site, counted
    directly: the state before the trace is found by walking the trace backwards from the final
    state (no assumption about what came before it), then the trace is replayed forwards."""
    live: dict[int, tuple[int, str, bool]] = {}  # address -> (size, site, active)
    for seg in snapshot["segments"]:
        if seg.get("device", 0) != 0:
            continue
        for b in seg["blocks"]:
            if b["state"] != "inactive":
                live[b["address"]] = (
                    b["size"],
                    _site(b.get("frames", [])),
                    b["state"] == "active_allocated",
                )
    trace = snapshot.get("device_traces", [[]])[0]
    for e in reversed(trace):  # undo each entry: the state before it
        action, addr = e["action"], e.get("addr")
        if action == "alloc":
            live.pop(addr, None)
        elif action == "free_requested" and addr in live:
            size, site, _ = live[addr]
            live[addr] = (size, site, True)
        elif action == "free_completed":
            # Freed in the trace: allocated before it (site unknown) unless the trace allocated it.
            live.setdefault(addr, (e["size"], "<unknown site>", False))
    allocated = sum(size for size, _, active in live.values() if active)
    peak, at_peak = allocated, dict(live)
    for e in trace:
        action, addr = e["action"], e.get("addr")
        if action == "alloc":
            live[addr] = (e["size"], _site(e.get("frames", [])), True)
            allocated += e["size"]
        elif action == "free_requested" and addr in live and live[addr][2]:
            size, site, _ = live[addr]
            live[addr] = (size, site, False)
            allocated -= size
        elif action == "free_completed" and addr in live:
            size, _, active = live.pop(addr)
            allocated -= size if active else 0
        else:
            continue
        if allocated > peak:  # the first moment of the peak, as the ledger keeps it
            peak, at_peak = allocated, dict(live)
    by_site: dict[str, int] = defaultdict(int)
    for size, site, active in at_peak.values():
        if active:
            by_site[site] += size
    return peak, dict(by_site)


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name.split("_")[0])
def test_peak_composition_matches_a_direct_count(path: Path) -> None:
    peak, by_site = _peak_by_site(_load(path))
    report = gpudiag.analyze([str(path)]).to_dict()
    memory = next(s for s in report["sections"] if s["id"] == "memory")
    assert memory["figures"]["peak_live_bytes"]["value"] == peak
    assert memory["figures"]["peak_allocated_bytes"]["value"] == peak
    table = next(t for t in memory["tables"] if t["id"] == "peak_sites")
    bytes_column = table["units"].index("bytes")  # the table declares its numbers' units
    reported: dict[str, float] = defaultdict(float)
    for row in table["rows"]:
        reported[row[0]] += row[bytes_column]
    # Every site the report names carries the bytes the direct count gives it, the largest first.
    named = {site: value for site, value in reported.items() if not site.startswith("<")}
    assert named
    for site, value in named.items():
        assert value == pytest.approx(by_site.get(site, 0)), site
    largest = max(by_site.items(), key=lambda kv: kv[1])
    assert reported.get(largest[0], reported.get("<unknown site>")) == pytest.approx(largest[1])
    assert sum(reported.values()) == pytest.approx(peak)


KINETO_2021 = (
    CORPUS
    / "kineto_traces"
    / "kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
)


@pytest.mark.skipif(not KINETO_2021.exists(), reason="corpus absent")
def test_kineto_events_without_addresses_give_the_running_sum() -> None:
    with gzip.open(KINETO_2021, "rt") as f:
        events = json.load(f)["traceEvents"]
    level = peak = 0
    for e in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"]):
        args = e.get("args", {})
        if args.get("Device Type", 0) <= 0:
            continue  # host memory
        level = max(0, level + int(args.get("Bytes", 0)))
        peak = max(peak, level)
    assert 2.4 * GiB < peak < 2.8 * GiB  # "a peak of about 2.6 GiB" (the issue)
    report = gpudiag.analyze([str(KINETO_2021)]).to_dict()
    memory = next(s for s in report["sections"] if s["id"] == "memory")
    assert memory["figures"]["peak_allocated_bytes"]["value"] == peak
    assert "reserved_bytes" not in memory["figures"]
    metrics = prometheus.exposition(gpudiag.analyze([str(KINETO_2021)]))
    # Unmeasured (no segments), so not exported as 0.
    assert "gpudiag_memory_external_fragmentation_ratio" not in metrics
    assert "gpudiag_memory_inactive_split_bytes" not in metrics


# ---- exports from what the analyzer emits --------------------------------------------------------
def _leak_samples(text: str) -> list[str]:
    """The memory section's leak rate, which the exporter names by its declared unit."""
    return [
        line
        for line in text.splitlines()
        if line.startswith(
            ("gpudiag_memory_leak_rate_bytes_per_step", "gpudiag_memory_leak_rate_bytes_per_second")
        )
    ]


def test_prometheus_leak_rate_from_the_demo_recording() -> None:
    report = gpudiag.analyze([str(DEMO)])
    assert any(f["id"] == "memory_leak" for f in report.to_dict()["findings"])
    text = prometheus.exposition(report)
    samples = _leak_samples(text)
    assert len(samples) == 1
    assert float(samples[0].rsplit(" ", 1)[1]) == pytest.approx(8 * MiB)
    # The finding's own rate figure too, by its declared unit.
    assert any(
        line.startswith("gpudiag_finding_memory_leak_leak_rate_bytes_per_step")
        for line in text.splitlines()
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(gpudiag.__file__).parents[1]), env.get("PYTHONPATH", "")) if p
    )
    return subprocess.run(
        [sys.executable, "-m", "gpudiag", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_cli_export_has_a_leak_rate_for_every_report_with_a_leak() -> None:
    out = _cli("export", str(DEMO), "--prometheus", "-")
    assert out.returncode == 0, out.stderr
    assert _leak_samples(out.stdout)


def _driver_event(kind: Any, t: int, address: int, size: int, site: int) -> Any:
    e = _core.Event()
    e.kind = kind
    e.device = 0
    e.start_ns = e.end_ns = t
    e.memory.address = address
    e.memory.bytes = size
    e.memory.site = site
    return e


@pytest.mark.skipif(not hasattr(_core, "Session"), reason="no live sessions in this build")
def test_a_live_session_recording_of_a_service_leak_exports_its_rate(tmp_path: Path) -> None:
    """A step-less service (time-compressed: one request a minute for 12 hours) leaking 4 MiB of
    driver-level memory a request: the recording the session wrote, exported, has the rate."""
    record = tmp_path / "service.gpudiag"
    with gpudiag.session(record=record, torch=False, capture_gpu=False, nvml_hz=0) as s:
        native = s.native
        site = native.intern("svc.cpp:88 Engine::bind_output (cudaMalloc)")
        workspace = native.intern("svc.cpp:61 Engine::run (cudaMalloc)")
        t0 = 10**12
        for minute in range(12 * 60):
            t = t0 + minute * 60 * 10**9
            for e in (
                _driver_event(
                    _core.EventKind.device_alloc, t, 0x7E0000000000, 256 * MiB, workspace
                ),
                _driver_event(
                    _core.EventKind.device_alloc,
                    t + 1000,
                    0x7A0000000000 + minute * 4 * MiB,
                    4 * MiB,
                    site,
                ),
                _driver_event(_core.EventKind.device_free, t + 2000, 0x7E0000000000, 0, workspace),
            ):
                while not native.record(e):
                    pass
    live = s.report().to_dict()
    leak = next(f for f in live["findings"] if f["id"] == "memory_leak")
    assert leak["sites"][0]["location"] == "svc.cpp:88 Engine::bind_output (cudaMalloc)"
    assert leak["figures"]["leak_rate_bytes_per_hour"]["value"] == pytest.approx(
        240 * MiB, rel=0.05
    )
    out = _cli("export", str(record), "--prometheus", "-")
    assert out.returncode == 0, out.stderr
    samples = [line for line in _leak_samples(out.stdout) if "per_second" in line]
    assert len(samples) == 1
    assert float(samples[0].rsplit(" ", 1)[1]) == pytest.approx(240 * MiB / 3600, rel=0.05)


# ---- the one OOM explainer, called from Python ----------------------------------------------------
def test_python_oom_notes_come_from_the_cpp_explainer() -> None:
    from gpudiag.integrations import torch as torch_integration

    stats = {
        "allocated_bytes.all.current": 3 * GiB,
        "reserved_bytes.all.current": 5 * GiB,
        "inactive_split_bytes.all.current": int(1.5 * GiB),
    }
    fragmented = {"device": 0, "alloc": 2 * GiB, "total": 80 * GiB, "free": 1 * GiB, "stats": stats}
    state = torch_integration.oom_state(fragmented)
    assert _core.explain_oom_state(state).cause == _core.OomCause.fragmentation
    note = torch_integration.oom_note(fragmented, expandable_segments=True)
    assert note.startswith("gpudiag: fragmentation:")
    assert "expandable_segments:True" not in note  # already on: the advice names what pins
    full = dict(fragmented, alloc=4 * GiB, free=0)
    assert torch_integration.oom_note(full).startswith("gpudiag: too_little_memory:")
    assert not hasattr(torch_integration, "explain_oom")  # the Python copy is gone


@pytest.mark.skipif(not SNAPSHOTS, reason="corpus absent")
def test_explain_oom_in_snapshot_is_bound() -> None:
    magma = next(p for p in SNAPSHOTS if p.name.startswith("magma27"))
    x = _core.explain_oom_in_snapshot(str(magma), GiB)
    assert x.cause == _core.OomCause.bloated_cache
    assert x.evidence


@pytest.mark.skipif(not SNAPSHOTS, reason="corpus absent")
def test_html_plots_the_peak_stacked_by_site() -> None:
    magma = next(p for p in SNAPSHOTS if p.name.startswith("magma27"))
    html = gpudiag.analyze([str(magma)]).to_html()
    assert "Live at the peak" in html
    assert "model.py:39 forward" in html  # the largest site, in the stacked bar's legend
