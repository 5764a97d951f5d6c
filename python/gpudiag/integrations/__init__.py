# SPDX-License-Identifier: Apache-2.0
"""gpudiag inside the frameworks a training program uses; each is imported only when used.

- ``torch``: the PyTorch instrumentation a session installs (steps, DataLoader waits, allocator
  statistics, OOMs, coexisting with torch.profiler);
- ``memory``: what a session does with PyTorch's memory on request (watch actions, snapshots);
- ``distributed``: every rank's report gathered into the job report under torch.distributed;
- ``lightning``, ``transformers``: the trainer callbacks that mark steps
  (``gpudiag.lightning_callback()``, ``gpudiag.hf_callback()``).
"""
