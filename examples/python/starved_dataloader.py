# SPDX-License-Identifier: Apache-2.0
"""A training loop starved by its input pipeline: a slow Dataset read with num_workers=0.

gpudiag should report `input_bound`, with the time per step spent waiting for the next batch.
"""

from __future__ import annotations

import time

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=40)
    torch = require_cuda()
    from torch.utils.data import DataLoader, Dataset

    class SlowImages(Dataset):
        """Decoding JPEGs on one core, as it were: 4 ms per sample."""

        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int):
            time.sleep(0.004)
            return torch.randn(3, 64, 64), i % 10

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowImages(), batch_size=16, num_workers=0, pin_memory=False)
    with diagnosed(args, "starved_dataloader"):
        for step, (x_cpu, y_cpu) in enumerate(loader):
            if step >= args.steps:
                break
            x, y = x_cpu.cuda(non_blocking=True), y_cpu.cuda(non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
