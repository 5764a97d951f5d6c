# SPDX-License-Identifier: Apache-2.0
"""Comparison HTML for notebooks and files: the verdict, why the runs may not compare, the deltas
that decided it, every delta, the findings that appeared or were resolved.

It lays out the comparison's JSON document as C++ renders it (``_core.render_comparison_json``),
in the report page's style (``reporters.html``); every word and number comes from that document
or C++'s formatter (``_core.format_figure``). Inline CSS only: no scripts, no external resources.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from gpudiag import _core
from gpudiag.reporters.html import _CSS

_Document = dict[str, Any]

# The verdict's colour, as the report's severities: bad red, mixed orange, good green.
_COMPARE_CSS = """
.gpudiag .verdict{display:inline-block;padding:1px 8px;border-radius:3px;color:#fff;
 background:#777;text-transform:uppercase;font-size:12px;margin-left:6px}
.gpudiag .v-improvement{background:#2ca02c}.gpudiag .v-regression{background:#d62728}
.gpudiag .v-mixed{background:#ff9f1c}.gpudiag .v-inconclusive{background:#1f77b4}
.gpudiag .improved{color:#2ca02c}.gpudiag .regressed{color:#d62728}
.gpudiag tr.deciding td{font-weight:bold}.gpudiag td.num{text-align:right}
.gpudiag table.sides{table-layout:fixed;width:100%}.gpudiag table.sides th:first-child{width:80px}
.gpudiag table.sides td{overflow-wrap:anywhere}
"""


def _number(value: Any, unit: str) -> str:
    """A figure by its unit; "n/a" where the document has none (null: no such number)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return str(_core.format_figure(float(value), unit))


def _signed(value: Any, unit: str) -> str:
    text = _number(value, unit)
    return "+" + text if isinstance(value, (int, float)) and value > 0 else text


def _words(name: str) -> str:
    """An enum name as words ("within_noise" -> "within noise")."""
    return name.replace("_", " ")


def _header(doc: _Document) -> list[str]:
    verdict = str(doc["verdict"])
    badge = f'<span class="verdict v-{escape(verdict)}">{escape(verdict)}</span>'
    out = [f"<h2>gpudiag comparison{badge}</h2>"]
    if doc.get("headline"):
        out.append(f'<p class="headline">{escape(doc["headline"])}</p>')
    return out


def _reasons(doc: _Document) -> str:
    """Why the runs do not compare one to one, in the partial-input box's style."""
    if not doc["reasons"]:
        return ""
    items = "".join(
        f"<li>{escape(r['text'])}"
        + (
            f' <span class="note">(can explain: {escape(", ".join(r["explains"]))})</span>'
            if r["explains"]
            else ""
        )
        + "</li>"
        for r in doc["reasons"]
    )
    return f'<div class="partial"><strong>Not comparable one to one:</strong><ul>{items}</ul></div>'


def _devices(devices: list[str]) -> str:
    """Each device once, with how many there are of it (as the text comparison lists them)."""
    counts = dict.fromkeys(devices, 0)
    for device in devices:
        counts[device] += 1
    return "; ".join(d if n == 1 else f"{d} (x{n})" for d, n in counts.items())


def _sides(doc: _Document) -> str:
    before, after = doc["before"], doc["after"]
    rows = [
        ("input", before["description"], after["description"]),
        ("kind", before["producer"], after["producer"]),
        ("devices", _devices(before["devices"]), _devices(after["devices"])),
        ("steps", str(before["steps"]), str(after["steps"])),
    ]
    if before["ranks"] or after["ranks"]:
        rows.append(("ranks", str(before["ranks"]), str(after["ranks"])))
    for key in sorted(set(before["software"]) | set(after["software"])):
        rows.append((key, before["software"].get(key, ""), after["software"].get(key, "")))
    rows.append(("diagnosis", before["headline"], after["headline"]))
    body = "\n".join(
        f"<tr><th>{escape(k)}</th><td>{escape(b)}</td><td>{escape(a)}</td></tr>" for k, b, a in rows
    )
    return f'<table class="sides"><tr><th></th><th>before</th><th>after</th></tr>{body}</table>'


def _delta_row(d: _Document) -> str:
    unit = d["unit"]
    label = d["label"] if d["rank"] < 0 else f"{d['label']} (rank {d['rank']})"
    judgement = str(d["judgement"])
    relative = d["relative_change"]
    cells = [
        escape(label),
        escape(_number(d["before"], unit)),
        escape(_number(d["after"], unit)),
        escape(_signed(d["change"], unit))
        + (f" ({escape(_signed(relative, 'fraction'))})" if relative is not None else ""),
        escape(_number(d["noise"], unit)),
    ]
    row = "".join(
        f'<td class="num">{c}</td>' if 0 < i < 5 else f"<td>{c}</td>" for i, c in enumerate(cells)
    )
    row += f'<td class="{escape(judgement)}">{escape(_words(judgement))}</td>'
    title = f' title="{escape(d["noise_basis"])}"' if d["noise_basis"] else ""
    css = ' class="deciding"' if d["deciding"] else ""
    return f"<tr{css}{title}>{row}</tr>"


def _delta_table(deltas: list[_Document]) -> str:
    head = "".join(
        f"<th>{h}</th>" for h in ("figure", "before", "after", "change", "noise", "judgement")
    )
    rows = "\n".join(map(_delta_row, deltas))
    return f"<table><tr>{head}</tr>\n{rows}</table>"


def _deltas(doc: _Document) -> list[str]:
    deltas = doc["deltas"]
    deciding = [d for d in deltas if d["deciding"]]
    out = ["<h3>What decided it</h3>", _delta_table(deciding)] if deciding else []
    if deltas:
        out.append("<h3>Every figure compared</h3>")
    for area in dict.fromkeys(d["area"] for d in deltas):  # in the document's order
        shown = [d for d in deltas if d["area"] == area]
        out.append(
            f"<details><summary>{escape(_words(area))}: {len(shown)} "
            f"figure{'s' if len(shown) != 1 else ''}</summary>"
            f"{_delta_table(shown)}</details>"
        )
    return out


def _finding_row(f: _Document) -> str:
    severity = f["severity_after"] or f["severity_before"] or ""
    title = f["title_after"] or f["title_before"]
    rank = f" (rank {f['rank']})" if f["rank"] >= 0 else ""
    severities = " \u2192 ".join(s or "none" for s in (f["severity_before"], f["severity_after"]))
    savings = " \u2192 ".join(
        _number(f[k], "ns") if f[k] is not None else "none"
        for k in ("saving_before_ns", "saving_after_ns")
    )
    return (
        f'<div class="finding {escape(severity)}"><div><span class="sev">'
        f"{escape(_words(f['change']))}</span><b>{escape(f['id'])}{escape(rank)}</b>: "
        f"{escape(title)}</div>"
        f'<div class="note">severity {escape(severities)}; predicted saving '
        f"{escape(savings)}</div></div>"
    )


def _findings(doc: _Document) -> list[str]:
    if not doc["findings"]:
        return []
    # Appeared and resolved first: they are what changed.
    order = {"appeared": 0, "resolved": 1}
    ranked = sorted(doc["findings"], key=lambda f: order.get(f["change"], 2))
    note = (
        '<div class="note">Predicted savings are per step, or over the window without steps.</div>'
    )
    return ["<h3>Findings</h3>", note, *map(_finding_row, ranked)]


def _lists(doc: _Document) -> list[str]:
    compared = ", ".join(_words(e) for e in doc["compared"]) or "nothing"
    out = [f'<div class="note">Compared: {escape(compared)}.</div>']
    if doc["not_compared"]:
        items = "".join(f"<li>{escape(n)}</li>" for n in doc["not_compared"])
        out.append(f"<h3>Not compared</h3><ul>{items}</ul>")
    out.extend(f'<div class="note">{escape(n)}</div>' for n in doc["notes"])
    return out


def render_comparison(doc: _Document, *, full_page: bool = False) -> str:
    """The comparison (its JSON document, as Python objects) as HTML: a fragment for notebooks,
    or a whole page."""
    out = [f"<style>{_CSS}{_COMPARE_CSS}</style>", '<div class="gpudiag">', *_header(doc)]
    out.append(_reasons(doc))
    out.append(_sides(doc))
    out.extend(_deltas(doc))
    out.extend(_findings(doc))
    out.extend(_lists(doc))
    out.append("</div>")
    body = "\n".join(part for part in out if part)  # a line per block: readable golden diffs
    if not full_page:
        return body
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>gpudiag comparison</title>'
        f"</head><body>{body}</body></html>"
    )
