# SPDX-License-Identifier: Apache-2.0
"""The HTML report of a CPU session: a real torch loop starved by its DataLoader draws each step
split into its input wait and the rest, the one chart a host-only run can honestly show (it had
no chart at all), and opens with the headline that names what a CPU run cannot see."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")

import gpudiag

WAIT_S = 0.02
STEPS = 8


class SlowItems(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return STEPS + 2

    def __getitem__(self, i: int):
        time.sleep(WAIT_S)
        return torch.full((16,), float(i))


def test_a_starved_cpu_loop_draws_its_steps_input_wait() -> None:
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowItems(), batch_size=1)
    with gpudiag.session(capture_gpu=False, nvml_hz=0) as s:
        for batch in loader:
            opt.zero_grad()
            model(batch).sum().backward()
            opt.step()
            gpudiag.step()
    report = s.report()
    section = report.section("timeline")
    assert section is not None
    split = next(t for t in section["tables"] if t["id"] == "step_host_breakdown")
    assert split["kind"] == "partition"
    assert len(split["rows"]) >= STEPS - 2
    for _, wait, rest in split["rows"]:
        assert wait >= WAIT_S * 1e9 * 0.9  # each step's fetch sleeps 20 ms
        assert rest >= 0
    html = report.to_html()
    caption = "Step time: waiting for input, and the rest of the step"
    assert caption in html
    assert html.index(caption) < html.index("<svg", html.index(caption))
    assert report.headline in html
    assert "not observed" in report.headline
