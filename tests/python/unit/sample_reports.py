# SPDX-License-Identifier: Apache-2.0
"""Report documents (the JSON schema) for rendering tests, built the way the analyses emit them."""

from __future__ import annotations

import copy
from typing import Any

GIB = 1024**3


def finding(fid: str, severity: str, title: str, **extra: Any) -> dict[str, Any]:
    f = {"id": fid, "severity": severity, "title": title, "summary": f"{title} (summary)",
         "confidence": 0.9, "rank": -1, "device": -1, "figures": {}, "site_unit": "",
         "sites": [], "evidence": [], "advice": []}
    f.update(extra)
    return f


def full_report() -> dict[str, Any]:
    """A report with memory series, watermarks, a per-step table and findings."""
    steps = 30
    step_s = 0.1
    allocated = [[i * 0.01, (2 + 0.02 * i) * GIB] for i in range(steps * 10)]
    reserved = [[t, v + 1.5 * GIB] for t, v in allocated]
    rows = []
    for s in range(steps):
        busy = 55e6 + (s % 3) * 1e6
        rows.append([float(s), s * step_s, busy, 40e6, 5e6])
    return {
        "schema_version": 1,
        "gpudiag_version": "0.1.0",
        "source": {"producer": "gpudiag-capture", "description": "train.py <b>", "simulated":
                   False, "rank": -1, "world_size": 0, "pid": 4242, "hostname": "node7",
                   "devices": [{"ordinal": 0, "name": "NVIDIA H200",
                                "total_memory_bytes": 141 * GIB, "uuid": "GPU-1"}],
                   "properties": {"example": "x"}},
        "capture": {"events": 12345, "dropped": 7, "truncated": False, "notes": []},
        "findings": [
            finding("input_bound", "critical", "Input-bound: 40 % of step time waiting",
                    figures={"input_wait_share": {"value": 0.4, "unit": "fraction",
                                                  "label": "time waiting for input"}},
                    evidence=["num_workers=0"], advice=["Use DataLoader(num_workers=8)"]),
            finding("memory_leak", "warning", "Memory grows 20 MiB per step",
                    site_unit="bytes",
                    sites=[{"location": "train.py:42 forward", "value": 20 * 1024**2,
                            "share": 1.0, "detail": ""}],
                    figures={"leak_rate_bytes_per_step": {"value": 20 * 1024**2,
                                                          "unit": "bytes/step",
                                                          "label": "growth rate"}}),
        ],
        "sections": [
            {"id": "memory", "title": "Memory",
             "figures": {"peak_allocated": {"value": 8 * GIB, "unit": "bytes",
                                            "label": "peak allocated"},
                         "fragmentation": {"value": 0.25, "unit": "fraction",
                                           "label": "fragmentation"},
                         # the names MemoryAnalyzer emits (memory_section.cpp)
                         "leak_rate_bytes_per_step": {"value": 20 * 1024**2,
                                                      "unit": "bytes/step",
                                                      "label": "memory leak rate (allocated)"}},
             "tables": [],
             "series": [{"id": "allocated", "title": "allocated", "unit": "bytes",
                         "points": allocated},
                        {"id": "reserved", "title": "reserved", "unit": "bytes",
                         "points": reserved}]},
            {"id": "timeline", "title": "Timeline",
             "figures": {"input_wait_share": {"value": 0.4, "unit": "fraction",
                                              "label": "input wait"},
                         "idle_host_wait_share": {"value": 0.05, "unit": "fraction",
                                                  "label": "host wait"},
                         "step_time": {"value": 100e6, "unit": "ns", "label": "step time"}},
             "tables": [{"id": "steps", "title": "Per step",
                         "columns": ["step", "start_s", "busy_ns", "input_wait_ns",
                                     "host_wait_ns"],
                         "rows": rows}],
             "series": []},
            {"id": "health", "title": "Health",
             "figures": {"throttle_power_share": {"value": 0.1, "unit": "fraction",
                                                  "label": "power throttled"}},
             "tables": [], "series": []},
        ],
        "notes": ["a note"],
        "ranks": [],
    }


def without_sections(report: dict[str, Any], *ids: str) -> dict[str, Any]:
    r = copy.deepcopy(report)
    r["sections"] = [s for s in r["sections"] if s["id"] not in ids]
    return r


def empty_report() -> dict[str, Any]:
    return {"schema_version": 1, "source": {}, "capture": {}, "findings": [], "sections": [],
            "notes": [], "ranks": []}
