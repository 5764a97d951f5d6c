# SPDX-License-Identifier: Apache-2.0
"""gpudiag's samples join dcgm-exporter's: the label names a current exporter (4.10) writes, read
from an exposition sample written for these tests in its documented format
(tests/data/dcgm_exporter_4.10_sample.prom, where its header says how), against the labels
gpudiag writes for real inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpudiag
from gpudiag import cli, prometheus

parser = pytest.importorskip("prometheus_client.parser")

ROOT = Path(__file__).resolve().parents[3]
DCGM_SAMPLE = ROOT / "tests" / "data" / "dcgm_exporter_4.10_sample.prom"
SICK_NODE = ROOT / "tests" / "data" / "sick_node.gpudiag"
# Labels of gpudiag's own: what is diagnosed, not which GPU or host it is about.
OWN_LABELS = {"id", "severity", "kind", "rank", "source"}


def _label_names(text: str) -> dict[str, set[str]]:
    """Each metric's label names."""
    out: dict[str, set[str]] = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def _gpu_samples(text: str) -> list[dict[str, str]]:
    return [
        s.labels
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
        if "gpu" in s.labels
    ]


@pytest.fixture(scope="module")
def dcgm_labels() -> set[str]:
    names = _label_names(DCGM_SAMPLE.read_text(encoding="utf-8"))
    assert "DCGM_FI_DEV_GPU_UTIL" in names
    assert "DCGM_FI_DEV_FB_USED" in names
    return set.union(*names.values())


@pytest.fixture(scope="module")
def node_text() -> str:
    return prometheus.exposition(gpudiag.analyze([str(SICK_NODE)]))


def test_the_sample_names_the_host_as_exporters_since_4_8_3_do(dcgm_labels: set[str]) -> None:
    assert "hostname" in dcgm_labels
    assert "Hostname" not in dcgm_labels
    assert {"gpu", "UUID", "pci_bus_id", "modelName"} <= dcgm_labels


def test_every_identity_label_of_a_gpu_sample_is_one_dcgm_exporter_writes(
    dcgm_labels: set[str], node_text: str
) -> None:
    samples = _gpu_samples(node_text)
    assert samples, "the simulated node's exposition has per-GPU samples"
    for labels in samples:
        identity = set(labels) - OWN_LABELS - {"Hostname"}  # the legacy name, kept on purpose
        assert identity <= dcgm_labels, sorted(identity - dcgm_labels)
        assert {"gpu", "UUID", "hostname"} <= identity, labels
        assert labels["hostname"] == labels["Hostname"]


def test_the_legacy_label_alone_or_the_new_one_alone(node_text: str) -> None:
    report = gpudiag.analyze([str(SICK_NODE)])
    legacy = _gpu_samples(prometheus.exposition(report, host_labels="Hostname"))
    new = _gpu_samples(prometheus.exposition(report, host_labels="hostname"))
    assert legacy
    assert all("Hostname" in s and "hostname" not in s for s in legacy)
    assert new
    assert all("hostname" in s and "Hostname" not in s for s in new)
    assert len(legacy) == len(new) == len(_gpu_samples(node_text))
    with pytest.raises(ValueError, match="host_labels"):
        prometheus.exposition(report, host_labels="HOSTNAME")


def test_export_writes_the_host_labels_asked_for(tmp_path: Path, capsys) -> None:
    out = tmp_path / "legacy.prom"
    args = ["export", str(SICK_NODE), "--prometheus", str(out), "--host-labels", "Hostname"]
    assert cli.main(args) == 0
    legacy = _gpu_samples(out.read_text())
    assert legacy
    assert all("Hostname" in s and "hostname" not in s for s in legacy)
    assert cli.main(["export", str(SICK_NODE), "--prometheus", "-"]) == 0
    both = _gpu_samples(capsys.readouterr().out)
    assert all(s["hostname"] == s["Hostname"] for s in both)
    assert cli.main(["export", str(SICK_NODE), "--prometheus", "-", "--host-labels", "x"]) != 0
