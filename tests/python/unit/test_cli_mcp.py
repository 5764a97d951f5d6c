# SPDX-License-Identifier: Apache-2.0
"""``gpudiag mcp``'s command line: its arguments, the loopback-only HTTP address, and the error
it gives where the MCP SDK is not installed (the server itself: integration/test_mcp.py)."""

from __future__ import annotations

import sys

import pytest

from gpudiag import cli
from gpudiag._errors import EXIT_UNAVAILABLE, EXIT_USAGE


def test_stdio_by_default_and_http_on_a_loopback_address() -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["mcp"]).http is None
    assert parser.parse_args(["mcp", "--http", "127.0.0.1:8765"]).http == ("127.0.0.1", 8765)
    assert parser.parse_args(["mcp", "--http", "[::1]:80"]).http == ("::1", 80)
    assert parser.parse_args(["mcp", "--http", "localhost:9"]).http == ("localhost", 9)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("0.0.0.0:8765", "not a loopback address"),
        ("192.168.1.10:8765", "not a loopback address"),
        ("example.com:8765", "not a loopback address"),
        ("127.0.0.1", "not HOST:PORT"),
        ("127.0.0.1:0", "not HOST:PORT"),
        ("127.0.0.1:70000", "not HOST:PORT"),
    ],
)
def test_an_http_address_off_this_machine_is_a_usage_error(
    address: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["mcp", "--http", address]) == EXIT_USAGE
    assert why in capsys.readouterr().err


def test_without_the_sdk_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # None in sys.modules makes an import fail as if the package were not installed (each
    # submodule too: an import finds one already imported without asking its package).
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "gpudiag.mcp_server", raising=False)
    assert cli.main(["mcp"]) == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "needs the MCP Python SDK" in err
    assert "pip install 'gpudiag[mcp]'" in err


def test_help_names_the_tools_and_the_exit_code_for_a_missing_sdk(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["mcp", "--help"])
    out = capsys.readouterr().out
    for tool in ("analyze", "explain", "whatif", "compare", "live_report", "dump"):
        assert tool in out
    assert f"\n  {EXIT_UNAVAILABLE} " in out
    assert "MCP Python SDK not installed" in out
