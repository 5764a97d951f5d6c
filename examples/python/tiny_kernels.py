# SPDX-License-Identifier: Apache-2.0
"""Many tiny element-wise kernels: the GPU finishes each before the next one is launched.

gpudiag should report `launch_bound` (median kernel time far below the launch cost).
"""

from __future__ import annotations

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=30)
    torch = require_cuda()
    import gpudiag

    x = torch.randn(256, device="cuda")
    with diagnosed(args, "tiny_kernels"):
        for _ in range(args.steps):
            y = x
            for _ in range(400):  # 400 launches of a 256-element kernel per step
                y = y * 1.0001 + 0.0001
            x = y
            gpudiag.step()  # no optimizer here, so mark steps explicitly
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
