# SPDX-License-Identifier: Apache-2.0
"""``python -m gpudiag`` and the ``gpudiag`` console script."""

from __future__ import annotations

import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    from gpudiag.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
