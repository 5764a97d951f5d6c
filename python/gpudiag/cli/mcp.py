# SPDX-License-Identifier: Apache-2.0
"""``gpudiag mcp``: gpudiag's diagnosis as Model Context Protocol tools for coding agents."""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import sys

from gpudiag._errors import UnavailableError

NAME = "mcp"
HELP = "serve gpudiag's diagnosis to coding agents (Model Context Protocol, stdio or HTTP)"
DESCRIPTION = """\
Run an MCP server that coding agents call: tools analyze (files to findings with figures),
explain (a finding's rule, evidence, sites and advice), whatif (a snapshot under other allocator
settings), compare (two runs), live_report and dump (a running session's HTTP control endpoint),
and the findings and units docs as resources. It talks over stdin/stdout unless --http is given;
an agent runner starts it, e.g. {"command": "gpudiag", "args": ["mcp"]}. docs/agents.md has more.
Needs the MCP Python SDK: pip install 'gpudiag[mcp]' (Python 3.10 or newer).

  gpudiag mcp
  gpudiag mcp --http 127.0.0.1:8765      # streamable HTTP at http://127.0.0.1:8765/mcp"""

_SDK_MISSING = (
    "gpudiag mcp needs the MCP Python SDK 2.x (Python 3.10 or newer): pip install 'gpudiag[mcp]'"
)


def loopback_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) on a loopback address: the server reads any file
    its user can, so it is never offered to the network."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"not HOST:PORT with a port 1-65535: {text!r}")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise argparse.ArgumentTypeError(
                f"{host!r} is not a loopback address: the server reads any file its user can, "
                "so it serves only this machine (127.0.0.1, ::1 or localhost)"
            )
    return host, int(port)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--http",
        type=loopback_address,
        metavar="HOST:PORT",
        default=None,
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (loopback only)",
    )


def run(args: argparse.Namespace) -> int:
    if sys.version_info < (3, 10):
        raise UnavailableError(_SDK_MISSING)
    try:
        mcp_server = importlib.import_module("gpudiag.mcp_server")
    except ImportError as e:  # not installed, or an SDK of another major version
        if (e.name or "").split(".")[0] == "mcp":
            raise UnavailableError(_SDK_MISSING) from None
        raise
    mcp_server.serve(http=args.http)
    return 0
