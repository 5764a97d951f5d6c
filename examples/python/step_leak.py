# SPDX-License-Identifier: Apache-2.0
"""A per-step leak: every step keeps 4 MiB of activations alive in a Python list (the classic
`losses.append(loss)` without `.item()`, here made explicit).

gpudiag should report `memory_leak` with a rate of about 4 MiB/step and the allocation site.
"""

from __future__ import annotations

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=60)
    torch = require_cuda()
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    with diagnosed(args, "step_leak"):
        for _ in range(args.steps):
            x = torch.randn(1024, 1024, device="cuda")  # 4 MiB
            out = model(x)
            loss = out.square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            kept.append(out.detach())  # the leak: 4 MiB per step, never released
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
