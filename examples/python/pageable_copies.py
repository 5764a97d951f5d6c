# SPDX-License-Identifier: Apache-2.0
"""Host-to-device copies from pageable (unpinned) memory inside the loop.

Pageable copies stage through a driver bounce buffer and block the host. gpudiag should report
`pageable_memcpy` with the bytes, the count and the achieved bandwidth.
"""

from __future__ import annotations

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=30)
    torch = require_cuda()
    model = torch.nn.Linear(4096, 4096).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    host_batches = [torch.randn(8192, 4096) for _ in range(4)]  # 128 MiB each, not pinned
    with diagnosed(args, "pageable_copies"):
        for step in range(args.steps):
            x = host_batches[step % len(host_batches)].cuda()  # pageable -> synchronous copy
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
