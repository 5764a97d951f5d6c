# SPDX-License-Identifier: Apache-2.0
"""The entry-point matrix's PyTorch workload: one small training loop with a planted problem,
run the way one entry point runs it (tests/matrix/cells.py lists the cells).

    python workload.py PROBLEM ENTRY --out DIR [--device cpu|cuda]

PROBLEM  input90 input40 keepup sync growth crash crash_early clean
ENTRY    plain      no gpudiag call (for `gpudiag run script.py` and `gpudiag run -- python`)
         explicit   gpudiag.session and gpudiag.step() after each batch
         auto       gpudiag.session, steps left to the optimizer hook
         nested     like explicit: the script opens its own session (run under `gpudiag run`)
         lightning  a Lightning Trainer with gpudiag.lightning_callback(), in a session
         hf         a Hugging Face Trainer with gpudiag.hf_callback(), in a session

It writes DIR/truth.json, what the loop measured of itself (its own input-wait share), and, when it
opened the session itself, DIR/report.json. The `%%gpudiag` row imports it and calls prepare() and
train_loop() from a cell (notebook_cell.py). Lightning and transformers are imported only by their
entries.

The planted input wait is a sleep in the Dataset, sized from the step's compute measured here
(a 2-core machine under load computes at half speed or worse, so a fixed sleep would not give a
fixed share).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

PROBLEMS = ("input90", "input40", "keepup", "sync", "growth", "crash", "crash_early", "clean")
ENTRIES = ("plain", "explicit", "auto", "nested", "lightning", "hf")
# Share of each step the loop should wait for its batch, per problem.
WAIT_SHARE = {"input90": 0.90, "input40": 0.40}
LOOP_S = 1.2  # target length of the loop; the step count follows from it
BATCH, FEATURES, HIDDEN, CLASSES = 32, 512, 1024, 10
# Workers that keep up: a step computes about 7x longer (the hidden layers' cost grows with the
# square of their width). Handing a batch over from a worker (a queue, a shared-memory tensor,
# the threads each wakes) costs a millisecond or two on a loaded 2-core machine however ready
# the batch is; against this compute it stays a small share of the step.
KEEPUP_HIDDEN = 3072
HF_HIDDEN = 2048  # about 3x the compute
GROWTH_BYTES = 1 << 20  # memory kept per step by the growth problem (16x that on a GPU)


class PlantedCrash(RuntimeError):
    """The crash the crash problems plant: the program's own failure, not gpudiag's."""


@dataclass
class Plan:
    problem: str
    device: str = "cpu"
    steps: int = 20
    wait_s: float = 0.0  # sleep per batch in the Dataset
    workers: int = 0
    compute_s: float = 0.0  # measured compute of one step
    crash_at: int = -1  # the iteration that raises (-1: none)
    steps_run: int = 0  # iterations whose optimizer step ran
    hidden: int = HIDDEN  # the model's hidden width: its compute per step
    fetches: list[tuple[float, float]] = field(default_factory=list)  # in-process fetches only


def _torch() -> Any:
    import torch

    # One thread: two cells run at once on a 2-core machine, and the shares stay stable.
    torch.set_num_threads(1)
    return torch


def make_model(device: str, hidden: int = HIDDEN) -> Any:
    torch = _torch()
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, CLASSES),
    ).to(device)


def measure_compute(device: str, hidden: int) -> float:
    """Seconds of one training step: forward, backward and a hand-written SGD update. Not the
    optimizer's step(): under gpudiag the first optimizer to step marks the steps."""
    torch = _torch()
    model = make_model(device, hidden)
    x = torch.randn(BATCH, FEATURES, device=device)
    y = torch.randint(0, CLASSES, (BATCH,), device=device)
    times = []
    for i in range(5):
        t0 = time.perf_counter()
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.01)
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 2:  # the first passes warm the allocator and the kernels
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def prepare(problem: str, device: str = "cpu", hidden: int = HIDDEN) -> Plan:
    """The plan for `problem`; `hidden` the model's width where the entry needs more compute
    per step than the default (keepup always takes KEEPUP_HIDDEN)."""
    plan = Plan(problem, device, hidden=KEEPUP_HIDDEN if problem == "keepup" else hidden)
    plan.compute_s = measure_compute(device, plan.hidden)
    share = WAIT_SHARE.get(problem, 0.0)
    plan.wait_s = plan.compute_s * share / (1.0 - share)
    if problem == "keepup":
        # Workers that keep up: batches cost them next to nothing, 16 are prefetched, and each
        # step computes for far longer than a hand-over takes.
        plan.workers, plan.wait_s = 2, 0.0
    plan.steps = max(12, min(60, round(LOOP_S / (plan.compute_s + plan.wait_s))))
    if problem == "crash":
        plan.crash_at = plan.steps // 2
    settle()
    return plan


def settle() -> None:
    """Takes the garbage collector out of the loop. Its collections over the objects made at
    start-up (torch's, a trainer's) take tens of milliseconds on a loaded machine and fall where
    the loop allocates most, its fetch of the next batch above all: stalls of the collector's
    making, not the problem a cell plants. The loop is short and makes little garbage."""
    gc.collect()
    gc.freeze()
    gc.disable()


class Batches:
    """A Dataset of whole batches (DataLoader batch_size=None) that waits before each."""

    def __init__(self, plan: Plan, per_item: bool = False) -> None:
        torch = _torch()
        g = torch.Generator().manual_seed(1)
        self.plan = plan
        self.per_item = per_item  # the Hugging Face Trainer batches items itself
        self.n = plan.steps * (BATCH if per_item else 1)
        self.x = torch.randn(8, BATCH, FEATURES, generator=g)
        self.y = torch.randint(0, CLASSES, (8, BATCH), generator=g)
        self.wait_s = plan.wait_s / BATCH if per_item else plan.wait_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        t0 = time.perf_counter()
        if self.wait_s > 0:
            time.sleep(self.wait_s)
        if self.per_item:
            item = {"x": self.x[i % 8, i % BATCH], "labels": self.y[i % 8, i % BATCH]}
        else:
            item = (self.x[i % 8], self.y[i % 8])
        self.plan.fetches.append((t0, time.perf_counter()))
        return item


def make_loader(plan: Plan) -> Any:
    from torch.utils.data import DataLoader

    # persistent_workers: a loader without it shuts its workers down inside the __next__ that
    # ends the epoch, and that wait (tens of ms, no batch) would be timed as the last fetch.
    extra = {"prefetch_factor": 8, "persistent_workers": True} if plan.workers > 0 else {}
    return DataLoader(Batches(plan), batch_size=None, num_workers=plan.workers, **extra)


class Planted:
    """What each problem adds to a step (called after the optimizer step)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.losses: list[float] = []
        self.kept: list[Any] = []

    def after_step(self, i: int, loss: Any) -> None:
        self.plan.steps_run = i + 1
        if self.plan.problem == "sync" and loss is not None:
            self.losses.append(loss.item())  # a host synchronization every step
        elif self.plan.problem == "growth":
            torch = _torch()
            size = GROWTH_BYTES * (16 if self.plan.device == "cuda" else 1) // 4
            self.kept.append(torch.ones(size, device=self.plan.device))
        if i == self.plan.crash_at:
            raise PlantedCrash(f"planted crash at iteration {i}")


def train_loop(plan: Plan, step: Callable[[], None] | None = None) -> dict[str, Any]:
    """The plain loop; `step` (gpudiag.step) is called after each batch when given. Returns
    what the loop measured of itself."""
    torch = _torch()
    model = make_model(plan.device, plan.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    planted = Planted(plan)
    # On a GPU the step also gives the device work of its own, about as long as the host's: a
    # sync then holds the host back for a while.
    square = torch.randn(4096, 4096, device=plan.device) if plan.device == "cuda" else None
    truth: dict[str, Any] = {"waits": [], "computes": []}
    prev = time.perf_counter()
    for i, (batch, labels) in enumerate(make_loader(plan)):
        start = time.perf_counter()
        x, y = batch.to(plan.device), labels.to(plan.device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if square is not None:
            for _ in range(8):
                square = torch.tanh(square @ square)
        planted.after_step(i, loss)
        if step is not None:
            step()
        end = time.perf_counter()
        truth["waits"].append(start - prev)
        truth["computes"].append(end - start)
        prev = end
    return truth


def loop_share(truth: dict[str, Any]) -> float | None:
    """The loop's own input-wait share, without its first fetch (before the first step)."""
    waits, computes = truth.get("waits", [])[1:], truth.get("computes", [])[1:]
    total = sum(waits) + sum(computes)
    return sum(waits) / total if total > 0 else None


def fetch_share(plan: Plan, end: float, per_batch: int = 1) -> float | None:
    """For a trainer's loop: time in the Dataset's fetches (in the process: no workers)
    against the time from the end of the first batch's fetch to the end of training."""
    if plan.workers > 0 or len(plan.fetches) <= per_batch:
        return None
    first_end = plan.fetches[per_batch - 1][1]
    waited = sum(b - a for a, b in plan.fetches[per_batch:])
    return waited / (end - first_end)


# ---- trainers ------------------------------------------------------------------------------------


def run_lightning(plan: Plan, callbacks: list[Any]) -> dict[str, Any]:
    import lightning as L

    torch = _torch()
    planted = Planted(plan)
    counter = {"i": 0}

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model("cpu", plan.hidden)

        def training_step(self, batch: Any, _index: int) -> Any:
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def on_train_batch_end(self, outputs: Any, _batch: Any, _index: int) -> None:
            i = counter["i"]
            counter["i"] += 1
            planted.after_step(i, outputs["loss"])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    trainer = L.Trainer(
        max_epochs=1,
        accelerator="gpu" if plan.device == "cuda" else "cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
    )
    module, loader = Module(), make_loader(plan)
    settle()
    trainer.fit(module, loader)
    return {"share": fetch_share(plan, time.perf_counter())}


def run_hf(plan: Plan, callbacks: list[Any], out: Path) -> dict[str, Any]:
    from transformers import Trainer, TrainingArguments

    torch = _torch()
    planted = Planted(plan)
    counter = {"i": 0}

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model("cpu", plan.hidden)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    from transformers import TrainerCallback

    class Planting(TrainerCallback):  # the planted problem, after each optimizer step
        def on_step_end(self, *_args: Any, **_kwargs: Any) -> None:
            i = counter["i"]
            counter["i"] += 1
            planted.after_step(i, None)  # the sync is the Trainer's own (logging_steps=1)

    args = TrainingArguments(
        output_dir=str(out / "hf_out"),
        per_device_train_batch_size=BATCH,
        num_train_epochs=1,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=plan.device == "cpu",
        dataloader_num_workers=plan.workers,
        dataloader_prefetch_factor=8 if plan.workers > 0 else None,
        dataloader_persistent_workers=plan.workers > 0,
        disable_tqdm=True,
    )
    if plan.problem == "sync":  # the loss the Trainer logs, read each step
        args.logging_strategy, args.logging_steps = "steps", 1
    trainer = Trainer(
        model=Model(), args=args, train_dataset=Batches(plan, per_item=True), callbacks=callbacks
    )
    trainer.add_callback(Planting())
    settle()
    trainer.train()
    return {"share": fetch_share(plan, time.perf_counter(), per_batch=BATCH)}


# ---- entries -------------------------------------------------------------------------------------


def run_entry(plan: Plan, entry: str, out: Path) -> dict[str, Any]:
    """Runs the plan through `entry`; saves the session's report (also after a crash)."""
    if entry == "plain":
        return finish_truth(train_loop(plan))
    import gpudiag

    session = gpudiag.session(record=str(out / "session.gpudiag"))
    try:
        with session:
            if plan.problem == "crash_early":
                raise PlantedCrash("planted crash before the first batch")
            if entry in ("explicit", "nested"):
                return finish_truth(train_loop(plan, step=gpudiag.step))
            if entry == "auto":
                return finish_truth(train_loop(plan))
            if entry == "lightning":
                return run_lightning(plan, [gpudiag.lightning_callback()])
            return run_hf(plan, [gpudiag.hf_callback()], out)
    finally:
        report = session.report()
        if report is not None:
            report.save(out / "report.json")


def finish_truth(truth: dict[str, Any]) -> dict[str, Any]:
    truth["share"] = loop_share(truth)
    return truth


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("problem", choices=PROBLEMS)
    p.add_argument("entry", choices=ENTRIES)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.problem == "crash_early" and a.entry == "plain":
        raise PlantedCrash("planted crash before any work")  # before torch is even imported
    # The Trainer batches 32 items and collates them itself (about half a millisecond a batch):
    # a wider model keeps that a small share of its step.
    plan = prepare(a.problem, a.device, HF_HIDDEN if a.entry == "hf" else HIDDEN)
    truth: dict[str, Any] = {
        "plan": {
            "steps": plan.steps,
            "wait_s": plan.wait_s,
            "compute_s": plan.compute_s,
            "workers": plan.workers,
        }
    }
    try:
        truth.update(run_entry(plan, a.entry, a.out))
    finally:
        truth["steps_run"], truth["fetches"] = plan.steps_run, len(plan.fetches)
        (a.out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
