# SPDX-License-Identifier: Apache-2.0
"""`.item()` and an explicit synchronize in every step drain the GPU's launch queue.

gpudiag should report `host_sync_stall`.
"""

from __future__ import annotations

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=60)
    torch = require_cuda()
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(512, 2048, device="cuda")
    history = []
    with diagnosed(args, "sync_in_loop"):
        for _ in range(args.steps):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            history.append(loss.item())  # host waits for the whole step, every step
            torch.cuda.synchronize()
            # some CPU work while the GPU has nothing queued
            _ = sum(i * i for i in range(20_000))


if __name__ == "__main__":
    main()
