# SPDX-License-Identifier: Apache-2.0
"""``gpudiag mcp``: gpudiag's diagnosis served to coding agents over the Model Context Protocol.

The tools wrap the public API (``gpudiag.analyze``, ``gpudiag.whatif``, ``gpudiag.compare``) and
a running session's HTTP control endpoint (docs/agents.md). Every finding, its wording and the
trimming of a report too large for one answer come from C++ (``render_json_line``); this module
only bounds the size of what it hands back and turns gpudiag's errors into tool errors, so a bad
path or a corrupt file is an answer the agent can read, never a stopped server.

Needs the MCP Python SDK (``pip install 'gpudiag[mcp]'``, Python 3.10 or newer).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Sequence
from importlib import resources
from typing import Annotated, Any, Callable, Optional, ParamSpec, TypeVar, Union

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.types import ToolAnnotations
from pydantic import Field

import gpudiag
from gpudiag import _core
from gpudiag._errors import GpudiagError
from gpudiag._report import Report

# An answer's default bound: the JSON log line's (about 4,000 tokens of an agent's context),
# enough for every finding with its figures of the reports the corpus gives; an agent that wants
# more asks for it, up to MAX_BYTES.
DEFAULT_MAX_BYTES = 16384
MIN_MAX_BYTES = 2048
MAX_BYTES = 1 << 20
# A session's HTTP endpoint rebuilds its report at most once a second and times out a request
# after 5 s; a dump writes the window synchronously. 30 s covers both with room to spare.
HTTP_TIMEOUT_S = 30.0
# A live report's JSON is bounded by the library's caps; this bounds what is read regardless.
HTTP_MAX_ANSWER_BYTES = 64 << 20
# explain's answer after analyze's: the last few reports stay, so one input is analysed once.
REPORT_CACHE_SIZE = 4
# The environment variable gpudiag run reads the session's token from (docs/api.md).
TOKEN_ENV = "GPUDIAG_HTTP_TOKEN"

DOCS = {
    "findings.md": "Every finding id: when it is raised and at which severity (the catalog).",
    "names.md": "Every stable name: figure units, severities, evidence kinds, input formats.",
    "api.md": "The API, the JSON report's schema, units and figures, the command line.",
    "timeline.md": "The timeline and job figures: GPU idle by cause, steps, the critical path.",
    "memory.md": "The memory figures: the ledger, leaks, fragmentation, out-of-memory causes.",
    "capture.md": "Capture levels and the GPU health figures (NVML).",
    "whatif.md": "The caching-allocator what-if: what it replays and how exact it is.",
    "compare.md": "Comparing two runs: the verdict, the deltas and their noise.",
    "http.md": "A running session's HTTP control endpoint (what live_report and dump ask).",
}

P = ParamSpec("P")
R = TypeVar("R")

# Parameter types as the tools' input schemas describe them to the agent (module-level, so
# Union and Optional: pydantic evaluates them at run time).
_PATHS = (
    "files, folders, tar archives or glob patterns of one job: Kineto traces (.json/.json.gz), "
    "torch memory snapshots (.pickle), Nsight Systems SQLite exports, gpudiag recordings "
    "(.gpudiag) or saved JSON reports; absolute paths, or relative to the server's working "
    "directory"
)
Paths = Annotated[Union[str, list[str]], Field(description=_PATHS)]
OptionalPaths = Annotated[
    Optional[Union[str, list[str]]],
    Field(description=f"{_PATHS}; without them, only the rule is explained"),
]
Window = Annotated[
    str,
    Field(description="'steps' (complete steps only), 'hta' (HTA's window) or 'all'"),
]
Rank = Annotated[int, Field(description="with several rank files, only this rank (-1: all)")]
MaxBytes = Annotated[
    int,
    Field(
        description=f"the most bytes the answer may take ({MIN_MAX_BYTES}..{MAX_BYTES}); a "
        "larger report is trimmed, least important parts first, and says what was dropped"
    ),
]
Endpoint = Annotated[
    str,
    Field(
        description="the session's HTTP control endpoint: a port (127.0.0.1 is meant), "
        "HOST:PORT or http://HOST:PORT, as gpudiag.session(http=...) or GPUDIAG_HTTP set it"
    ),
]
Token = Annotated[
    Optional[str],
    Field(description=f"the endpoint's bearer token, if it has one (default: ${TOKEN_ENV})"),
]


def _tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turns gpudiag's errors and the OS's into tool errors with their message: the agent reads
    what is wrong with its input, and the server keeps answering."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (GpudiagError, OSError) as e:
            raise ToolError(str(e)) from e

    return wrapper


def _bound(max_bytes: int) -> int:
    return max(MIN_MAX_BYTES, min(MAX_BYTES, int(max_bytes)))


def _compact(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _as_list(paths: str | Sequence[str]) -> list[str]:
    return [paths] if isinstance(paths, str) else [str(p) for p in paths]


class _ReportCache:
    """The last few reports analysed, keyed by their inputs and the files' sizes and times, so
    that explain after analyze does not analyse again (and a rewritten file is read anew)."""

    def __init__(self, size: int = REPORT_CACHE_SIZE) -> None:
        self._size = size
        self._reports: OrderedDict[tuple[Any, ...], Report] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(path: str) -> Any:
        try:
            if os.path.isdir(path):  # a file rewritten in a folder leaves the folder's time
                entries = [(e.path, e.stat()) for e in os.scandir(path)]
                return tuple(sorted((p, s.st_mtime_ns, s.st_size) for p, s in entries))
            st = os.stat(path)
        except OSError:
            return None  # a glob pattern, or a missing file analyze will name
        return (path, st.st_mtime_ns, st.st_size)

    def get(self, paths: list[str], window: str, rank: int) -> Report:
        key = (tuple(paths), window, rank, tuple(self._stamp(p) for p in paths))
        with self._lock:
            if key in self._reports:
                self._reports.move_to_end(key)
                return self._reports[key]
        report = gpudiag.analyze(paths, window=window, rank=rank)
        with self._lock:
            self._reports[key] = report
            while len(self._reports) > self._size:
                self._reports.popitem(last=False)
        return report


def _report_line(report: Report, max_bytes: int) -> str:
    """The compact JSON report within ``max_bytes``, trimmed by C++ (render_json_line)."""
    line = _core.render_json_line(report.native(), _bound(max_bytes)).rstrip("\n")
    if not line:
        raise ToolError(
            f"not even the report's headline and counts fit in {max_bytes} bytes: ask for more"
        )
    return line


def _fit(document: dict[str, Any], max_bytes: int, lists: Sequence[str]) -> str:
    """``document`` as compact JSON within ``max_bytes``: items leave the end of each of
    ``lists`` (dotted paths into the document, the least needed first) until it fits, and a
    "truncated" object says how many left each list."""
    limit = _bound(max_bytes)
    text = _compact(document)
    if len(text.encode()) <= limit:
        return text
    full = len(text.encode())
    dropped: dict[str, int] = {}
    for dotted in lists:
        *parents, leaf = dotted.split(".")
        holder: Any = document
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        items = holder.get(leaf) if isinstance(holder, dict) else None
        while isinstance(items, list) and items:
            items.pop()
            dropped[dotted] = dropped.get(dotted, 0) + 1
            document["truncated"] = {"full_bytes": full, "dropped": dropped}
            text = _compact(document)
            if len(text.encode()) <= limit:
                return text
    raise ToolError(f"the answer does not fit in {max_bytes} bytes even trimmed: ask for more")


# ---- the docs (package data) -------------------------------------------------------------------


def _docs_dir() -> Any:
    return resources.files("gpudiag") / "data" / "docs"


def _doc_text(name: str) -> str:
    path = _docs_dir() / name
    if not path.is_file():
        raise ToolError(f"docs/{name} is not installed with this gpudiag")
    return str(path.read_text(encoding="utf-8"))


_ROW = re.compile(r"^\| `([a-z0-9_]+)` \| (.*) \| ([^|]*) \|$")


@functools.lru_cache(maxsize=1)
def _catalog() -> dict[str, dict[str, str]]:
    """Each finding id's rule as docs/findings.md states it: the table that the findings
    catalog (libgpudiag/src/analysis/findings) writes, so the text is C++'s."""
    rules: dict[str, dict[str, str]] = {}
    area = ""
    for line in _doc_text("findings.md").splitlines():
        if line.startswith("## "):
            area = line[3:].strip()
        match = _ROW.match(line)
        if match:
            rules[match[1]] = {
                "area": area,
                "raised_when": match[2].strip(),
                "severity": match[3].strip(),
                "doc": "gpudiag://docs/findings.md",
            }
    return rules


# ---- the tools ---------------------------------------------------------------------------------


def _analyze_tool(cache: _ReportCache) -> Callable[..., str]:
    @_tool_errors
    def analyze(
        paths: Paths,
        window: Window = "steps",
        rank: Rank = -1,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> str:
        """Diagnose one job's files: the JSON report (schema: gpudiag://docs/api.md), its
        headline first, then findings ranked what-to-fix-first with figures, sites, evidence and
        advice, then sections and notes. `input.complete` false means part of the input could
        not be read; `observed` lists the evidence the input had (what is not listed was not
        seen: no all-clear for it). A report over max_bytes is trimmed and ends with
        "truncated": what was dropped, and the whole report's headline (the top-level one then
        counts only the findings kept); explain gives one finding whole."""
        return _report_line(cache.get(_as_list(paths), window, rank), max_bytes)

    return analyze


def _explain_tool(cache: _ReportCache) -> Callable[..., str]:
    @_tool_errors
    def explain(
        finding_id: Annotated[str, Field(description="a finding id, e.g. 'gpu_idle'")],
        paths: OptionalPaths = None,
        window: Window = "steps",
        rank: Rank = -1,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> str:
        """Explain one finding: its rule (when gpudiag raises it and at which severity) and,
        given the input's paths, the finding as this input raised it, whole: title, summary,
        figures, every site, evidence and advice, the ranks of a job that have it. A finding
        the input did not raise is said to be so, with the report's headline (which names the
        evidence the input lacked)."""
        rule = _rule(finding_id)
        answer: dict[str, Any] = {"id": finding_id, "rule": rule}
        if paths is None:
            if rule is None:
                raise ToolError(_unknown_finding(finding_id))
            return _fit(answer, max_bytes, ())
        report = cache.get(_as_list(paths), window, rank)
        finding = report.finding(finding_id)
        on_ranks = [r.source.get("rank") for r in report.ranks if r.finding(finding_id)]
        if finding is None and on_ranks:
            finding = next(f for f in report.all_findings() if f.id == finding_id)
        if finding is None:
            if rule is None:
                raise ToolError(_unknown_finding(finding_id))
            answer["raised"] = False
            answer["headline"] = report.headline
            return _fit(answer, max_bytes, ())
        answer["raised"] = True
        answer["finding"] = finding.to_dict()
        if report.ranks:
            answer["on_ranks"] = on_ranks
        return _fit(answer, max_bytes, ("finding.sites", "finding.evidence", "on_ranks"))

    return explain


def _rule(finding_id: str) -> dict[str, str] | None:
    try:
        return _catalog().get(finding_id)
    except ToolError:
        return None  # the docs are not installed: the finding itself still answers


def _unknown_finding(finding_id: str) -> str:
    try:
        known = ", ".join(sorted(_catalog()))
    except ToolError as e:
        return f"{finding_id!r} is not a finding of this input, and {e}"
    return f"{finding_id!r} is not a finding id gpudiag raises; the ids: {known}"


@_tool_errors
def whatif(
    path: Annotated[
        str,
        Field(
            description="a torch memory snapshot taken with its history "
            "(torch.cuda.memory._record_memory_history()) or a gpudiag recording"
        ),
    ],
    settings: Annotated[
        list[str] | None,
        Field(
            description="allocator settings to try, all together, over the recorded ones: "
            "PYTORCH_CUDA_ALLOC_CONF names as 'key:value' or 'key=value' (expandable_segments, "
            "max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions, "
            "max_non_split_rounding_mb, per_process_memory_fraction)"
        ),
    ] = None,
    capacity: Annotated[
        str | None,
        Field(description="memory the allocator can obtain in total, e.g. '79GiB'"),
    ] = None,
    device_total: Annotated[
        str | None,
        Field(description="the device's memory, which per_process_memory_fraction is taken of"),
    ] = None,
    sweep: Annotated[bool, Field(description="also try the usual settings one at a time")] = True,
    device: Annotated[
        int | None, Field(description="the device to replay (default: the busiest)")
    ] = None,
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
) -> str:
    """Replay a snapshot's allocations through a model of PyTorch's caching allocator: how
    exactly it reproduces the recording, then per setting the peak reserved memory, memory
    stranded in split segments, cudaMalloc/cudaFree calls and whether an OOM recurs, and advice
    (gpudiag://docs/whatif.md)."""
    result = gpudiag.whatif(
        path,
        settings=settings or (),
        capacity=capacity,
        device_total=device_total,
        sweep=sweep,
        device=device,
    )
    return _fit(json.loads(result.to_json()), max_bytes, ("outcomes", "notes"))


def _compare_function() -> Callable[..., Any] | None:
    """gpudiag.compare, which newer gpudiags have; None before."""
    return getattr(gpudiag, "compare", None)


@_tool_errors
def compare(
    before: Annotated[
        str | list[str],
        Field(
            description="the run before the change: its files (as analyze takes them) or the "
            "name of a baseline kept with gpudiag baseline save"
        ),
    ],
    after: Annotated[str | list[str], Field(description="the run after the change, as before")],
    window: Window = "steps",
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
) -> str:
    """Compare two runs: one verdict (improvement, regression, mixed, unchanged,
    inconclusive) for time, memory and health, the figures that decided it judged against the
    runs' own noise, the findings that appeared or were resolved, and why the runs cannot be
    compared one to one where they cannot (gpudiag://docs/compare.md)."""
    function = _compare_function()
    if function is None:
        raise ToolError("this gpudiag has no gpudiag.compare")
    comparison = function(before, after, window=window)
    document = json.loads(comparison.to_json(compact=True))
    return _fit(document, max_bytes, ("deltas", "findings", "notes", "not_compared"))


# ---- a running session's HTTP control endpoint --------------------------------------------------


def _endpoint_url(endpoint: str, path: str) -> str:
    text = str(endpoint).strip()
    if text.isdigit():
        text = f"127.0.0.1:{text}"
    if "://" not in text:
        text = f"http://{text}"
    parts = urllib.parse.urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ToolError(f"not an endpoint: {endpoint!r} (a port, HOST:PORT or http://HOST:PORT)")
    return f"http://{parts.netloc}{path}"


# Never through a proxy from the environment: the endpoint is on this machine or the caller's
# network, and a proxy would see the token.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(method: str, endpoint: str, path: str, token: str | None) -> bytes:
    url = _endpoint_url(endpoint, path)
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    token = token or os.environ.get(TOKEN_ENV)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _OPENER.open(request, timeout=HTTP_TIMEOUT_S) as answer:
            body: bytes = answer.read(HTTP_MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise ToolError(_http_error(url, e)) from None
    except urllib.error.URLError as e:
        raise ToolError(
            f"nothing answers at {url} ({e.reason}): is a gpudiag session serving HTTP there "
            "(gpudiag.session(http=...), or GPUDIAG_HTTP under gpudiag run)?"
        ) from None
    except TimeoutError:
        raise ToolError(f"{url} did not answer within {HTTP_TIMEOUT_S:g} s") from None
    if len(body) > HTTP_MAX_ANSWER_BYTES:
        raise ToolError(f"{url} answered more than {HTTP_MAX_ANSWER_BYTES} bytes")
    return body


def _http_error(url: str, error: urllib.error.HTTPError) -> str:
    try:
        why = json.loads(error.read(4096)).get("error", "")
    except (ValueError, AttributeError, OSError):
        why = ""
    text = f"{url} answered {error.code} {error.reason}" + (f": {why}" if why else "")
    if error.code == 401:
        text += f" (pass its token, or set ${TOKEN_ENV})"
    return text


@_tool_errors
def live_report(
    endpoint: Endpoint, token: Token = None, max_bytes: MaxBytes = DEFAULT_MAX_BYTES
) -> str:
    """The diagnosis so far of a running program whose gpudiag session serves HTTP control
    (GET /report): the same JSON report as analyze, trimmed the same way."""
    body = _http("GET", endpoint, "/report?compact=1", token)
    report = Report.from_json(body.decode("utf-8", errors="replace"))
    return _report_line(report, max_bytes)


@_tool_errors
def dump(endpoint: Endpoint, token: Token = None) -> str:
    """Make a running session write its window of events now (POST /dump): answers the file
    written, which analyze then reads. The session must keep a window (GPUDIAG_WINDOW, or
    gpudiag run --window)."""
    body = _http("POST", endpoint, "/dump", token).decode("utf-8", errors="replace")
    try:
        return _compact(json.loads(body))
    except ValueError:
        raise ToolError(f"not a gpudiag session's answer: {body[:200]!r}") from None


# ---- the server --------------------------------------------------------------------------------


def _doc_resource(name: str, description: str) -> FunctionResource:
    def read() -> str:
        return _doc_text(name)

    return FunctionResource.from_function(
        read,
        uri=f"gpudiag://docs/{name}",
        name=name,
        description=description,
        mime_type="text/markdown",
    )


def skill_text() -> str:
    """The agent skill file shipped with gpudiag (gpudiag/data/agent-skill.md)."""
    return str((resources.files("gpudiag") / "data" / "agent-skill.md").read_text("utf-8"))


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _add_tool(server: MCPServer[Any], fn: Callable[..., str], annotations: ToolAnnotations) -> None:
    # Plain text answers (the JSON documents C++ renders), described by the docstring as written.
    description = inspect.cleandoc(fn.__doc__ or "")
    server.add_tool(fn, description=description, annotations=annotations, structured_output=False)


def build_server() -> MCPServer[Any]:
    """The MCP server: its tools and the docs as resources."""
    server: MCPServer[Any] = MCPServer(
        "gpudiag",
        title="gpudiag: GPU memory and utilization diagnostics",
        version=gpudiag.__version__,
        instructions=skill_text().rpartition("\n---\n")[2].strip(),  # without its front matter
        log_level="WARNING",
    )
    cache = _ReportCache()
    tools: list[Callable[..., str]] = [_analyze_tool(cache), _explain_tool(cache), whatif]
    if _compare_function() is not None:  # gpudiag.compare is newer than this server
        tools.append(compare)
    tools.append(live_report)
    for fn in tools:
        _add_tool(server, fn, _READ_ONLY)
    # A dump writes a file beside the session's recording, and only adds.
    _add_tool(server, dump, ToolAnnotations(read_only_hint=False, destructive_hint=False))
    for name, description in DOCS.items():
        if (_docs_dir() / name).is_file():
            server.add_resource(_doc_resource(name, description))
    server.add_resource(
        FunctionResource.from_function(
            skill_text,
            uri="gpudiag://skill",
            name="agent-skill.md",
            description="What each gpudiag tool is for, for agent runners.",
            mime_type="text/markdown",
        )
    )
    return server


def serve(http: tuple[str, int] | None = None) -> None:
    """Serves over stdio, or streamable HTTP at ``http`` (host, port) under /mcp."""
    server = build_server()
    if http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host=http[0], port=http[1])


__all__ = ["DEFAULT_MAX_BYTES", "build_server", "serve", "skill_text"]
