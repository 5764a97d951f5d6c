#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes monitoring/grafana/gpudiag.json, the Grafana dashboard for gpudiag's exporter.

The dashboard is generated so that its panels stay uniform (units, variables, layout) and its
queries are listed in one place; tests/python/integration/test_monitoring.py checks that every
metric a query names is in the exporter's output for real inputs.

    tools/make_dashboard.py          rewrite the dashboard
    tools/make_dashboard.py --check  fail if the committed file differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "monitoring" / "grafana" / "gpudiag.json"
# The host is `hostname` (dcgm-exporter >= 4.8.3) or `Hostname` (older; gpudiag writes both by
# default, either can be left out). Queries below name it HOST; either() makes each selector
# match on whichever label a series carries, and gives every result `hostname`.
SEL = 'HOST=~"$host", gpu=~"$gpu"'
HOST = 'HOST=~"$host"'
SELECTOR = re.compile(
    r"rate\((?P<rate>gpudiag_\w+)\{(?P<rate_matchers>[^}]*)\}(?P<range>\[\w+\])\)"
    r"|(?P<metric>gpudiag_\w+)\{(?P<matchers>[^}]*)\}"
)


def either(expr: str) -> str:
    """`expr` with each selector on HOST made `(new or label_replace(old))`: a series with both
    labels comes once (`or` drops a right-hand series whose labels the left already has)."""

    def one(m: re.Match[str]) -> str:
        matchers = m["rate_matchers"] if m["rate"] else m["matchers"]
        if "HOST" not in matchers:
            return m[0]

        def selector(label: str, extra: str = "") -> str:
            inner = f"{m['rate'] or m['metric']}{{{matchers.replace('HOST', label)}{extra}}}"
            return f"rate({inner}{m['range']})" if m["rate"] else inner

        new = selector("hostname", ', hostname!=""')
        old = selector("Hostname")
        return f'({new} or label_replace({old}, "hostname", "$1", "Hostname", "(.+)"))'

    return SELECTOR.sub(one, expr)


# (title, unit, kind, [(legend, query)], width)
PANELS: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    ("Findings", "none", "table", [("", f"gpudiag_finding{{{SEL}}} == 1")], 16),
    (
        "Findings by severity",
        "none",
        "stat",
        [("{{severity}}", 'sum by (severity) (gpudiag_findings{HOST=~"$host"})')],
        8,
    ),
    (
        "GPU idle time, by cause (share of the window)",
        "percentunit",
        "timeseries",
        [
            ("input wait {{gpu}}", f"gpudiag_timeline_idle_input_ratio{{{SEL}}}"),
            ("host sync {{gpu}}", f"gpudiag_timeline_idle_sync_ratio{{{SEL}}}"),
            ("kernel launch {{gpu}}", f"gpudiag_timeline_idle_launch_ratio{{{SEL}}}"),
            ("copies {{gpu}}", f"gpudiag_timeline_idle_copy_ratio{{{SEL}}}"),
            ("host CPU work {{gpu}}", f"gpudiag_timeline_idle_cpu_ratio{{{SEL}}}"),
            ("idle in all {{gpu}}", f"gpudiag_timeline_idle_ratio{{{SEL}}}"),
        ],
        12,
    ),
    (
        "Step time",
        "s",
        "timeseries",
        [
            ("mean {{gpu}}", f"gpudiag_timeline_step_time_seconds{{{SEL}}}"),
            ("longest {{gpu}}", f"gpudiag_timeline_step_time_max_seconds{{{SEL}}}"),
            (
                "input wait per step {{gpu}}",
                f"gpudiag_timeline_input_wait_per_step_seconds{{{SEL}}}",
            ),
        ],
        12,
    ),
    (
        "Device memory",
        "bytes",
        "timeseries",
        [
            ("allocated {{gpu}}", f"gpudiag_memory_allocated_rounded_bytes{{{SEL}}}"),
            ("reserved {{gpu}}", f"gpudiag_memory_reserved_bytes{{{SEL}}}"),
            ("peak in use {{gpu}}", f"gpudiag_memory_peak_used_bytes{{{SEL}}}"),
            ("capacity {{gpu}}", f"gpudiag_memory_capacity_bytes{{{SEL}}}"),
        ],
        12,
    ),
    (
        "Memory leak: growth per step, time until full",
        "bytes",
        "timeseries",
        [
            ("leak per step {{gpu}}", f"gpudiag_memory_leak_rate_bytes_per_step{{{SEL}}}"),
            ("growth since onset {{gpu}}", f"gpudiag_memory_leak_growth_bytes{{{SEL}}}"),
        ],
        12,
    ),
    (
        "Time until the device is full (leak rate x step time)",
        "s",
        "stat",
        [
            (
                "{{gpu}}",
                (
                    f"gpudiag_finding_memory_leak_steps_until_full{{{SEL}}}"
                    f" * gpudiag_timeline_step_time_seconds{{{SEL}}}"
                ),
            )
        ],
        8,
    ),
    (
        "Cache: fragmentation and what empty_cache() returns",
        "bytes",
        "timeseries",
        [
            (
                "free in partly used segments {{gpu}}",
                f"gpudiag_memory_inactive_split_bytes{{{SEL}}}",
            ),
            ("releasable {{gpu}}", f"gpudiag_memory_releasable_bytes{{{SEL}}}"),
            ("largest free block {{gpu}}", f"gpudiag_memory_largest_free_block_bytes{{{SEL}}}"),
        ],
        8,
    ),
    (
        "External fragmentation",
        "percentunit",
        "timeseries",
        [("{{gpu}}", f"gpudiag_memory_external_fragmentation_ratio{{{SEL}}}")],
        8,
    ),
    (
        "Throttled share of busy samples",
        "percentunit",
        "timeseries",
        [
            ("thermal {{gpu}}", f"gpudiag_health_thermal_throttle_ratio{{{SEL}}}"),
            ("power {{gpu}}", f"gpudiag_health_power_throttle_ratio{{{SEL}}}"),
        ],
        8,
    ),
    (
        "Temperature, utilization",
        "none",
        "timeseries",
        [
            ("max temperature (C) {{gpu}}", f"gpudiag_health_max_temperature_celsius{{{SEL}}}"),
            (
                "mean utilization (0-1) {{gpu}}",
                f"gpudiag_health_mean_gpu_utilization_ratio{{{SEL}}}",
            ),
        ],
        8,
    ),
    (
        "Busy or computing: utilization against SM activity (GPM, Hopper on)",
        "percentunit",
        "timeseries",
        [
            ("utilization {{hostname}}", f"gpudiag_health_mean_gpu_utilization_ratio{{{SEL}}}"),
            ("SMs with work {{hostname}}", f"gpudiag_health_mean_sm_active_ratio{{{SEL}}}"),
            ("tensor pipes {{hostname}}", f"gpudiag_health_mean_tensor_active_ratio{{{SEL}}}"),
            ("DRAM bandwidth {{hostname}}", f"gpudiag_health_mean_dram_active_ratio{{{SEL}}}"),
        ],
        8,
    ),
    (
        "Memory held by other processes",
        "bytes",
        "timeseries",
        [("{{gpu}}", f"gpudiag_health_max_foreign_memory_bytes{{{SEL}}}")],
        8,
    ),
    (
        "Capture: events lost (per second)",
        "short",
        "timeseries",
        [
            (
                "lost {{hostname}}",
                'rate(gpudiag_capture_dropped_events_total{HOST=~"$host"}[5m])',
            ),
            (
                "captured {{hostname}}",
                'rate(gpudiag_capture_events_total{HOST=~"$host"}[5m])',
            ),
        ],
        8,
    ),
]


def panel(
    i: int, x: int, y: int, spec: tuple[str, str, str, list[tuple[str, str]], int]
) -> dict[str, object]:
    title, unit, kind, queries, width = spec
    p: dict[str, object] = {
        "id": i + 1,
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": width, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {
                "refId": chr(ord("A") + k),
                "expr": either(expr),
                "legendFormat": legend,
                "instant": kind == "table",
            }
            for k, (legend, expr) in enumerate(queries)
        ],
    }
    if kind == "table":
        p["transformations"] = [{"id": "labelsToFields", "options": {}}]
    return p


def dashboard() -> dict[str, object]:
    panels, x, y = [], 0, 0
    for i, spec in enumerate(PANELS):
        if x + spec[4] > 24:
            x, y = 0, y + 8
        panels.append(panel(i, x, y, spec))
        x += spec[4]

    def variable(name: str, query: str) -> dict[str, object]:
        return {
            "name": name,
            "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": name},
            "definition": query,
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "refresh": 2,
            "current": {"text": "All", "value": "$__all"},
        }

    def host_variable() -> dict[str, object]:
        # The values of whichever host label a series has, from one query.
        v = variable("host", "query_result(count by (hostname, Hostname) (gpudiag_findings))")
        v["regex"] = '/[hH]ostname="([^"]+)"/'
        v["label"] = "host"
        return v

    def gpu_variable() -> dict[str, object]:
        query = either('gpudiag_finding{HOST=~"$host"}')
        v = variable("gpu", f"query_result(count by (gpu) ({query}))")
        v["regex"] = '/gpu="([^"]+)"/'
        return v

    return {
        "title": "gpudiag: why the GPU idles, why memory runs out, card health",
        "uid": "gpudiag",
        "description": "Diagnoses from gpudiag's Prometheus exporter; joins dcgm-exporter's "
        "panels on the labels gpu, UUID, pci_bus_id, modelName and hostname (Hostname before "
        "dcgm-exporter 4.8.3).",
        "tags": ["gpudiag", "gpu"],
        "timezone": "",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                host_variable(),
                gpu_variable(),
            ]
        },
        "panels": panels,
        "annotations": {"list": []},
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(dashboard(), indent=2) + "\n"
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run tools/make_dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
