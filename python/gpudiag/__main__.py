# SPDX-License-Identifier: Apache-2.0
"""``python -m gpudiag`` and the ``gpudiag`` console script."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from gpudiag.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
