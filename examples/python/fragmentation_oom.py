# SPDX-License-Identifier: Apache-2.0
"""An out-of-memory caused by fragmentation: plenty of memory is free, but in holes too small.

The process is capped at a small memory budget; one large cached segment is carved into 128 MiB
blocks, every other block is freed, and a 768 MiB request then fails although about 1 GiB sits
free inside the allocator's segments. gpudiag should explain the OOM as fragmentation and suggest
expandable segments.
"""

from __future__ import annotations

import os

from _common import diagnosed, parse_args, require_cuda


def main() -> None:
    args = parse_args(__doc__ or "", default_steps=1)
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
    torch = require_cuda()
    total = torch.cuda.get_device_properties(0).total_memory
    budget = 3 * 2**30
    torch.cuda.set_per_process_memory_fraction(budget / total)
    mib = 2**20
    with diagnosed(args, "fragmentation_oom"):
        big = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")  # one 2 GiB segment
        del big  # stays cached in the allocator
        blocks = [torch.empty(128 * mib, dtype=torch.uint8, device="cuda") for _ in range(16)]
        for i in range(0, len(blocks), 2):
            blocks[i] = None  # 8 holes of 128 MiB between live blocks
        try:
            torch.empty(768 * mib, dtype=torch.uint8, device="cuda")
            print("the 768 MiB request unexpectedly succeeded")
        except torch.cuda.OutOfMemoryError as e:
            print("OutOfMemoryError:", str(e).splitlines()[0])
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
