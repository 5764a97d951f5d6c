# SPDX-License-Identifier: Apache-2.0
"""The Lightning and Hugging Face callbacks on real trainers (CPU): the framework owns the step
clock, its step numbers are the trainer's global step, and no step is counted twice by the
optimizer hooks that also fire. tools/check.sh installs both frameworks (the `frameworks` extra);
elsewhere these tests skip and say which package is missing."""

from __future__ import annotations

import pytest

pytestmark = [
    pytest.mark.torch,
    # The frameworks' own deprecation and set-up warnings (a tiny CPU run trips several) are
    # shown, not turned into failures: these tests are about gpudiag's callbacks.
    pytest.mark.filterwarnings("default::DeprecationWarning"),
    pytest.mark.filterwarnings("default::FutureWarning"),
    pytest.mark.filterwarnings("default::UserWarning"),
]

torch = pytest.importorskip("torch")

import gpudiag
from gpudiag import torch_integration
from gpudiag.integrations import _callbacks
from gpudiag.integrations.lightning import lightning_callback
from gpudiag.integrations.transformers import hf_callback

MAX_STEPS = 5


def _step_calls(backend) -> list[tuple[str, int]]:
    return [(name, args[0]) for name, _, args in backend.calls if name.startswith("step_")]


def _expected_steps(last: int) -> list[tuple[str, int]]:
    # One step per optimizer step, from its first batch's start to the end of the batch that
    # advanced the trainer's global step, numbered by the global step the trainer had during it;
    # the optimizer hook inside adds nothing, and no step is left open after the last.
    out: list[tuple[str, int]] = []
    for n in range(last):
        out += [("step_begin", n), ("step_end", n)]
    return out


def _tiny_lightning_module(lightning):
    """A one-layer LightningModule class, trained with SGD on random batches."""

    class Tiny(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):  # noqa: ARG002 - Lightning's signature
            return self.layer(batch).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny


def test_lightning_callback_marks_each_training_step(fake_backend) -> None:
    lightning = pytest.importorskip("lightning", reason="Lightning is not installed")

    Tiny = _tiny_lightning_module(lightning)
    data = torch.utils.data.DataLoader(torch.randn(40, 4), batch_size=4)
    with gpudiag.session(_backend_factory=fake_backend) as s:
        trainer = lightning.Trainer(
            accelerator="cpu",
            max_steps=MAX_STEPS,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[lightning_callback()],
        )
        trainer.fit(Tiny(), data)
        owner = s.step_clock.owner
    assert trainer.global_step == MAX_STEPS
    assert owner == "framework"
    assert _step_calls(fake_backend.last) == _expected_steps(MAX_STEPS)


def test_hf_callback_counts_optimizer_steps_not_micro_batches(fake_backend, tmp_path) -> None:
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("accelerate", reason="accelerate (needed by transformers.Trainer)")

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.layer(x).squeeze(-1)
            return {"loss": ((out - labels) ** 2).mean(), "logits": out}

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int):
            return {"x": torch.full((4,), float(i)), "labels": torch.tensor(float(i % 3))}

    # Two micro-batches per optimizer step: a step is what the optimizer sees, not a batch.
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=MAX_STEPS,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    with gpudiag.session(_backend_factory=fake_backend) as s:
        trainer = transformers.Trainer(
            model=Tiny(),
            args=args,
            train_dataset=Data(),
            callbacks=[hf_callback()],
        )
        trainer.train()
        owner = s.step_clock.owner
    assert trainer.state.global_step == MAX_STEPS
    assert owner == "framework"
    assert _step_calls(fake_backend.last) == _expected_steps(MAX_STEPS)


def test_callbacks_say_what_is_missing(monkeypatch) -> None:
    import sys

    for name in (
        "lightning",
        "lightning.pytorch",
        "lightning.pytorch.callbacks",
        "pytorch_lightning",
        "pytorch_lightning.callbacks",
        "transformers",
    ):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with pytest.raises(gpudiag.UnavailableError, match="Lightning is not installed"):
        lightning_callback()
    with pytest.raises(gpudiag.UnavailableError, match="transformers is not installed"):
        hf_callback()


def test_lightning_steps_in_a_real_session_are_the_trainers() -> None:
    # The same trainer in a real (CPU-only) session: the per-step table has one row per training
    # step, numbered by the global step, none of them empty.
    lightning = pytest.importorskip("lightning", reason="Lightning is not installed")

    Tiny = _tiny_lightning_module(lightning)
    data = torch.utils.data.DataLoader(torch.randn(40, 4), batch_size=4)
    with gpudiag.session(capture_gpu=False, nvml_hz=0) as s:
        trainer = lightning.Trainer(
            accelerator="cpu",
            max_steps=MAX_STEPS,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[lightning_callback()],
        )
        trainer.fit(Tiny(), data)
    table = next(t for t in s.report().section("timeline")["tables"] if t["id"] == "steps")
    number, duration = table["columns"].index("step"), table["columns"].index("duration_ns")
    assert [int(row[number]) for row in table["rows"]] == list(range(MAX_STEPS))
    assert all(row[duration] > 0 for row in table["rows"])


def test_a_callback_without_a_session_says_it_marks_nothing(monkeypatch) -> None:
    # Exported from gpudiag itself; outside a session it warns once, then stays quiet.
    lightning = pytest.importorskip("lightning", reason="Lightning is not installed")
    assert gpudiag.lightning_callback is lightning_callback is torch_integration.lightning_callback
    assert gpudiag.hf_callback is hf_callback is torch_integration.hf_callback
    monkeypatch.setattr(_callbacks, "_callbacks_warned", set())
    assert gpudiag.current_session() is None

    Tiny = _tiny_lightning_module(lightning)
    trainer = lightning.Trainer(
        accelerator="cpu",
        max_steps=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[gpudiag.lightning_callback()],
    )
    with pytest.warns(RuntimeWarning, match="Lightning callback has no gpudiag session") as seen:
        trainer.fit(Tiny(), torch.utils.data.DataLoader(torch.randn(16, 4), batch_size=4))
    ours = [w for w in seen if "gpudiag session" in str(w.message)]
    assert len(ours) == 1  # said once, not at every batch
