# SPDX-License-Identifier: Apache-2.0
"""``gpudiag whatif``: replay a program's allocations under other caching-allocator settings."""

from __future__ import annotations

import argparse
import sys

from gpudiag._whatif import whatif

NAME = "whatif"
HELP = "predict peak memory and OOMs under other PyTorch allocator settings"
DESCRIPTION = """\
Replays the allocation history of a torch memory snapshot (taken with
torch.cuda.memory._record_memory_history()) or a gpudiag recording holding the caching
allocator's events (a recording with only CUPTI's cudaMalloc-level records is refused, saying
what to record) through a model of PyTorch's CUDA caching allocator. It first reproduces the recording under its own settings and says how
exactly, then predicts the peak reserved memory, the memory stranded in split segments, the
cudaMalloc/cudaFree calls and whether an out-of-memory failure recurs under the settings you
choose and the usual ones.

  gpudiag whatif snapshot.pickle
  gpudiag whatif snapshot.pickle --set expandable_segments=True --capacity 79GiB
  gpudiag whatif snapshot.pickle --set max_split_size_mb=256 --no-sweep --format json
  gpudiag whatif run.gpudiag"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="FILE", help="a torch memory snapshot or a gpudiag recording")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an allocator setting to try (PYTORCH_CUDA_ALLOC_CONF names: "
        "expandable_segments, max_split_size_mb, garbage_collection_threshold, "
        "roundup_power2_divisions, max_non_split_rounding_mb, "
        "per_process_memory_fraction); repeat for several, all applied together",
    )
    p.add_argument(
        "--capacity",
        metavar="BYTES",
        help="memory the allocator can obtain in total, e.g. 79GiB (default: "
        "unlimited, except at the recording's own OOM failures)",
    )
    p.add_argument(
        "--device-total",
        metavar="BYTES",
        help="the device's memory, which per_process_memory_fraction is taken of "
        "(default: the capacity)",
    )
    p.add_argument(
        "--device",
        type=int,
        default=None,
        help="device to replay (default: the one with the most allocations)",
    )
    p.add_argument(
        "--torch-version",
        metavar="X.Y",
        default=None,
        help="the torch release whose allocator to follow (default: the one the input "
        "records, else the newest the model covers)",
    )
    p.add_argument(
        "--no-sweep",
        dest="sweep",
        action="store_false",
        help="only the recorded and the chosen settings, not the usual ones",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def run(args: argparse.Namespace) -> int:
    result = whatif(
        args.input,
        settings=args.settings,
        capacity=args.capacity,
        device_total=args.device_total,
        sweep=args.sweep,
        device=args.device,
        torch_version=args.torch_version,
    )
    sys.stdout.write(result.to_json() if args.format == "json" else result.text())
    return 0
