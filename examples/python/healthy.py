# SPDX-License-Identifier: Apache-2.0
"""A healthy, GPU-bound loop: large matrix multiplications on data already on the GPU, no host
syncs, no copies. gpudiag should find nothing to complain about.
"""

from __future__ import annotations

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=40)
    torch = require_cuda()
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(4)]).cuda().half()
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.half)
    with diagnosed(args, "healthy"):
        for _ in range(args.steps):
            loss = model(x).float().square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
