# SPDX-License-Identifier: Apache-2.0
"""``gpudiag mcp`` end to end: a real ``python -m gpudiag mcp`` driven by the MCP SDK's own client
over stdio (and once over streamable HTTP), on every input of the corpus. Each answer is checked
against what the public API makes of the same input in this process, and the raw JSON-RPC of one
session against the SDK's schema of the protocol revision it negotiated. A server costs seconds to
start (the SDK's imports), so each test runs one and asks it everything."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("mcp", reason="the MCP Python SDK is not installed (pip install gpudiag[mcp])")

import anyio
from mcp import Client, StdioServerParameters
from mcp_types.methods import parse_server_result

import gpudiag
from conftest import CORPUS, RANK_TRACES, SNAPSHOT, STARVED_TRACE, corpus_file
from gpudiag.mcp_server import DEFAULT_MAX_BYTES

# Every input of the corpus gpudiag reads (the .csv files beside the SQLite exports are Pipit's
# own tables, not an input of gpudiag's).
CORPUS_INPUTS = sorted(
    [
        *CORPUS.glob("kineto_traces/*"),
        *CORPUS.glob("memory_snapshots/*"),
        *CORPUS.glob("nsight_sqlite/*.sqlite"),
    ]
)
OTHER_SNAPSHOT = "memory_snapshots/bcrafton_cs336a2_memory_snapshot.pickle"
NO_HISTORY_SNAPSHOT = "memory_snapshots/verl_megatron_vllm_init.pickle"
DIFF_TRACES = (
    "kineto_traces/hta_trace_diff_control.json.gz",
    "kineto_traces/hta_trace_diff_test.json.gz",
)
# The handshake revision most agent runners speak today; the SDK's client negotiates its newest.
HANDSHAKE_VERSION = "2025-11-25"


def _server_env() -> dict[str, str]:
    """The SDK starts a server with a minimal environment: add where this gpudiag came from."""
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stdio() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gpudiag", "mcp"], env=_server_env()
    )


def _with_client(server: Any, body: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with Client(server, read_timeout_seconds=120) as client:
            await body(client)

    anyio.run(main)


async def _call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    assert len(result.content) == 1, result
    return bool(result.is_error), str(result.content[0].text)


def _expected(paths: Path | list[str]) -> gpudiag.Report | gpudiag.GpudiagError:
    try:
        return gpudiag.analyze(paths)
    except gpudiag.GpudiagError as e:
        return e


def _check_analyze(name: str, expected: Any, error: bool, text: str) -> None:
    if isinstance(expected, gpudiag.GpudiagError):
        assert error, f"{name}: gpudiag.analyze failed ({expected}), the tool did not"
        assert str(expected) in text
        return
    assert not error, f"{name}: {text}"
    assert len(text.encode()) <= DEFAULT_MAX_BYTES
    answer = json.loads(text)
    assert answer.get("truncated", answer)["headline"] == expected.headline
    if "truncated" not in answer:
        assert answer == expected.to_dict(), name  # the whole report, as C++ renders it
        return
    # Trimmed by render_json_line: the findings kept are the first ones, the rest counted.
    ids = [f.id for f in expected.findings]
    kept = [f["id"] for f in answer["findings"]]
    assert kept == ids[: len(kept)], name
    assert len(kept) + answer["truncated"]["findings_dropped"] == len(ids), name
    full = expected.to_json(compact=True) + "\n"
    assert answer["truncated"]["full_bytes"] == len(full.encode())


async def _check_explain(client: Client, paths: list[str], expected: gpudiag.Report) -> None:
    """explain on every finding the input raised (on one it did not, without findings)."""
    ids = list(dict.fromkeys(f.id for f in expected.all_findings())) or ["gpu_idle"]
    for finding_id in ids:
        error, text = await _call(client, "explain", finding_id=finding_id, paths=paths)
        assert not error, f"{paths} {finding_id}: {text}"
        answer = json.loads(text)
        assert answer["rule"] is not None, f"{finding_id} is not in docs/findings.md"
        assert answer["rule"]["raised_when"]
        raised = next((f for f in expected.all_findings() if f.id == finding_id), None)
        if raised is None:
            assert answer["raised"] is False
            assert answer["headline"] == expected.headline
            continue
        assert answer["raised"] is True
        finding = (expected.finding(finding_id) or raised).to_dict()
        if "truncated" not in answer:
            assert answer["finding"] == finding
        else:  # only sites and evidence leave, from the end
            assert answer["finding"]["figures"] == finding["figures"]
            assert answer["finding"]["advice"] == finding["advice"]
        if expected.ranks:
            on_ranks = [r.source["rank"] for r in expected.ranks if r.finding(finding_id)]
            assert answer["on_ranks"] == on_ranks


def test_analyze_and_explain_every_corpus_input(record_property: Any) -> None:
    if not CORPUS_INPUTS:
        pytest.skip(f"the corpus is absent: {CORPUS}")
    jobs = [[str(p)] for p in CORPUS_INPUTS]
    jobs.append([str(corpus_file(name)) for name in RANK_TRACES])  # two ranks: one job report
    expected = {tuple(job): _expected(job) for job in jobs}
    took: list[float] = []

    async def body(client: Client) -> None:
        started = time.monotonic()
        for job in jobs:
            report = expected[tuple(job)]
            error, text = await _call(client, "analyze", paths=job)
            _check_analyze(" ".join(job), report, error, text)
            if isinstance(report, gpudiag.Report):
                await _check_explain(client, job, report)
        took.append(time.monotonic() - started)

    _with_client(_stdio(), body)
    record_property("corpus_inputs", len(CORPUS_INPUTS))
    record_property("seconds", round(took[0], 1))
    print(f"{len(jobs)} corpus jobs analysed and explained through MCP in {took[0]:.1f} s")


def test_whatif_compare_docs_and_errors_that_keep_the_server_answering(tmp_path: Path) -> None:
    snapshot = str(corpus_file(SNAPSHOT))
    other_snapshot = corpus_file(OTHER_SNAPSHOT)
    no_history = str(corpus_file(NO_HISTORY_SNAPSHOT))
    before, after = (str(corpus_file(name)) for name in DIFF_TRACES)
    expected = json.loads(gpudiag.whatif(snapshot, settings=["expandable_segments:True"]).to_json())
    with pytest.raises(gpudiag.FailedPreconditionError) as no_history_error:
        gpudiag.whatif(no_history)
    compare = getattr(gpudiag, "compare", None)

    async def body(client: Client) -> None:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"analyze", "explain", "whatif", "live_report", "dump"} | (
            {"compare"} if compare else set()
        )
        error, text = await _call(
            client, "whatif", path=snapshot, settings=["expandable_segments:True"]
        )
        assert not error, text
        assert json.loads(text) == expected
        if compare is not None:
            error, text = await _call(client, "compare", before=before, after=after)
            assert not error, text
            answer, comparison = json.loads(text), compare(before, after).to_dict()
            assert answer["headline"] == comparison["headline"]
            assert answer.pop("truncated", None) or answer == comparison
        await _check_errors(client, snapshot, no_history, str(no_history_error.value))
        await _check_docs(client)
        await _check_trimmed(client, str(corpus_file(STARVED_TRACE)))
        await _check_rewritten_file(client, tmp_path / "snapshot.pickle", snapshot, other_snapshot)

    _with_client(_stdio(), body)


async def _check_errors(client: Client, snapshot: str, no_history: str, why: str) -> None:
    """gpudiag's errors come back as tool errors with their message, and the server goes on."""
    error, text = await _call(client, "whatif", path=no_history)
    assert error
    assert why in text
    missing = "/nonexistent/gpudiag-mcp-test.json"
    error, text = await _call(client, "analyze", paths=missing)
    assert error
    assert f"{missing}: no such file" in text
    error, text = await _call(client, "analyze", paths=snapshot, window="sideways")
    assert error
    assert "window must be one of" in text
    error, text = await _call(client, "explain", finding_id="no_such_finding")
    assert error
    assert "gpu_idle" in text  # it lists the ids it knows
    error, text = await _call(client, "live_report", endpoint=str(_free_port()))
    assert error
    assert "nothing answers at http://127.0.0.1:" in text
    error, text = await _call(client, "dump", endpoint="not an endpoint")
    assert error
    assert "not an endpoint" in text
    error, text = await _call(client, "explain", finding_id="memory_leak")
    assert not error, text
    assert json.loads(text)["rule"]["area"].startswith("Why memory runs out")
    error, text = await _call(client, "analyze", paths=snapshot)
    assert not error
    assert json.loads(text)["headline"] == gpudiag.analyze(snapshot).headline


async def _check_rewritten_file(client: Client, path: Path, first: str, second: Path) -> None:
    """A report is kept for explain, but a file written anew is analysed anew."""
    for source in (Path(first), second):
        shutil.copyfile(source, path)
        error, text = await _call(client, "analyze", paths=str(path), max_bytes=1 << 20)
        assert not error, text
        assert json.loads(text) == gpudiag.analyze(path).to_dict()


async def _check_trimmed(client: Client, trace: str) -> None:
    """Deep down render_json_line's ladder: findings leave last, least important first, and the
    whole report's headline travels with what is left."""
    expected = gpudiag.analyze(trace)
    error, text = await _call(client, "analyze", paths=trace, max_bytes=4096)
    assert not error, text
    assert len(text.encode()) <= 4096
    answer = json.loads(text)
    truncated = answer["truncated"]
    assert truncated["headline"] == expected.headline
    assert "sections" in truncated["dropped"]
    kept = [f["id"] for f in answer["findings"]]
    assert kept == [f.id for f in expected.findings][: len(kept)]
    assert len(kept) + truncated["findings_dropped"] == len(expected.findings)


async def _check_docs(client: Client) -> None:
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"gpudiag://docs/findings.md", "gpudiag://docs/names.md", "gpudiag://skill"} <= uris
    units = (await client.read_resource("gpudiag://docs/names.md")).contents[0]
    assert "## Unit" in units.text
    assert client.instructions is not None
    assert "explain(finding_id, paths)" in client.instructions


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_live_report_and_dump_ask_a_running_session(tmp_path: Path) -> None:
    if "http" not in inspect.signature(gpudiag.Session).parameters:
        pytest.skip("this gpudiag's sessions serve no HTTP control endpoint")
    with gpudiag.session(
        record=tmp_path / "run.gpudiag", record_window_s=60, http="127.0.0.1:0", http_token="t0"
    ) as session:
        url = session.http_url
        if url is None:
            pytest.skip(f"the session serves no HTTP here: {session.http_status()['reason']}")
        for _ in range(3):
            gpudiag.step()
        answers: dict[str, tuple[bool, str]] = {}

        async def body(client: Client) -> None:
            answers["no token"] = await _call(client, "live_report", endpoint=url)
            answers["report"] = await _call(client, "live_report", endpoint=url, token="t0")
            answers["dump"] = await _call(client, "dump", endpoint=url, token="t0")
            path = json.loads(answers["dump"][1])["path"]
            answers["analyze"] = await _call(client, "analyze", paths=path)

        _with_client(_stdio(), body)
        live = session.report()
    error, text = answers["no token"]
    assert error
    assert "401" in text
    assert "token" in text
    error, text = answers["report"]
    assert not error, text
    report = json.loads(text)
    assert report["source"]["pid"] == os.getpid()
    assert [f["id"] for f in report["findings"]] == [f.id for f in live.findings]
    error, text = answers["dump"]
    assert not error, text
    dumped = Path(json.loads(text)["path"])
    assert dumped.parent == tmp_path
    error, text = answers["analyze"]
    assert not error, text
    assert json.loads(text) == gpudiag.analyze(dumped).to_dict()


def test_the_raw_json_rpc_of_a_session_fits_the_sdks_schema() -> None:
    """What the server writes to stdout is JSON-RPC, line by line and nothing else, whose results
    validate against the SDK's schema of the revision the session negotiated."""
    snapshot = str(corpus_file(SNAPSHOT))
    initialize = {
        "protocolVersion": HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "gpudiag-test", "version": "0"},
    }
    requests: list[tuple[str, dict[str, Any]]] = [
        ("tools/list", {}),
        ("resources/list", {}),
        ("tools/call", {"name": "analyze", "arguments": {"paths": [snapshot]}}),
        ("tools/call", {"name": "analyze", "arguments": {"paths": ["/nonexistent"]}}),
        ("tools/call", {"name": "explain", "arguments": {"finding_id": "fragmentation"}}),
        ("resources/read", {"uri": "gpudiag://docs/findings.md"}),
    ]
    with subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **_server_env()},
    ) as server:
        _ask_raw(server, initialize, requests)


def _ask_raw(
    server: subprocess.Popen[str],
    initialize: dict[str, Any],
    requests: list[tuple[str, dict[str, Any]]],
) -> None:
    assert server.stdin is not None
    assert server.stdout is not None

    def ask(message: dict[str, Any]) -> dict[str, Any] | None:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        server.stdin.flush()
        if "id" not in message:
            return None
        answer: dict[str, Any] = json.loads(server.stdout.readline())
        assert answer["jsonrpc"] == "2.0"
        assert answer["id"] == message["id"]
        assert "error" not in answer, answer
        return answer

    try:
        answer = ask({"id": 0, "method": "initialize", "params": initialize})
        assert answer is not None
        result = parse_server_result("initialize", HANDSHAKE_VERSION, answer["result"])
        assert result.protocol_version == HANDSHAKE_VERSION
        ask({"method": "notifications/initialized"})
        results = []
        for i, (method, params) in enumerate(requests, start=1):
            answer = ask({"id": i, "method": method, "params": params})
            assert answer is not None
            results.append(parse_server_result(method, HANDSHAKE_VERSION, answer["result"]))
        assert [r.is_error for r in results[2:5]] == [False, True, False]
        server.stdin.close()
        assert server.wait(timeout=30) == 0, server.stderr.read()
        assert server.stdout.read() == ""  # nothing but the answers
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_streamable_http_on_loopback() -> None:
    snapshot = str(corpus_file(SNAPSHOT))
    port = _free_port()
    with subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "mcp", "--http", f"127.0.0.1:{port}"],
        env={**os.environ, **_server_env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as server:
        try:
            _wait_for_port(port, server)

            async def body(client: Client) -> None:
                error, text = await _call(client, "analyze", paths=snapshot)
                assert not error, text
                assert json.loads(text)["headline"] == gpudiag.analyze(snapshot).headline

            _with_client(f"http://127.0.0.1:{port}/mcp", body)
        finally:
            server.terminate()
            server.wait(timeout=30)


def _wait_for_port(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            stderr = server.stderr.read().decode() if server.stderr else ""
            pytest.fail(f"gpudiag mcp --http exited: {stderr}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"gpudiag mcp --http did not listen on {port} within 60 s")
