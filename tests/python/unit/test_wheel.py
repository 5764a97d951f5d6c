# SPDX-License-Identifier: Apache-2.0
"""An installed manylinux wheel is self-contained: its native modules load nothing from outside the
wheel but the C and C++ runtime, so no Debian package is needed where it runs.

Runs where gpudiag was installed from a repaired wheel (tools/build_wheel.sh; tools/check.sh tests
that install); skipped for a build tree or a `pip install .`, whose wheel links the system's
libraries."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

import gpudiag

# What a wheel may take from the system: glibc's libraries, the C++ runtime and the dynamic
# loader. Not zlib, though every manylinux policy allows it: gpudiag links zlib statically, and its
# HTTP control's cpp-httplib is compiled in without TLS or compression.
RUNTIME = re.compile(
    r"(linux-vdso|ld-linux(-[\w-]+)?|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)"
    r"\.so[.\d]*"
)
# "name => path (0x...)", "name => not found", "/path/ld-linux.so (0x...)", "linux-vdso.so.1 (0x...)"
LDD_LINE = re.compile(r"\s*(?P<name>\S+)(\s+=>\s+(?P<path>not found|\S+))?(\s+\(0x[0-9a-f]+\))?\s*")


def _manylinux_distribution() -> metadata.Distribution:
    """The distribution the imported gpudiag came from, when that was a manylinux wheel."""
    try:
        dist = metadata.distribution("gpudiag")
    except metadata.PackageNotFoundError:
        pytest.skip("gpudiag is not installed (a build tree)")
    installed = Path(str(dist.locate_file("gpudiag/__init__.py"))).resolve()
    if installed != Path(gpudiag.__file__).resolve():
        pytest.skip(f"gpudiag is imported from {gpudiag.__file__}, not from its installed wheel")
    tags = [
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    if not any("manylinux" in tag for tag in tags):
        pytest.skip(f"installed from a wheel tagged {tags}, not a repaired manylinux one")
    return dist


def _libraries(module: Path) -> list[tuple[str, str]]:
    """(name, resolved path or '') of each library ldd says the module loads."""
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("ldd is not installed")
    out = subprocess.run([ldd, str(module)], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        match = LDD_LINE.fullmatch(line)
        assert match, f"unexpected ldd line for {module.name}: {line!r}"
        path = match["path"] or (match["name"] if match["name"].startswith("/") else "")
        found.append((Path(match["name"]).name, path))
    return found


def test_native_modules_load_only_the_wheels_libraries_and_the_c_runtime() -> None:
    dist = _manylinux_distribution()
    files = {Path(str(dist.locate_file(f))).resolve() for f in dist.files or []}
    modules = sorted(f for f in files if re.search(r"\.so(\.|$)", f.name))
    assert any(m.name.startswith("_core.") for m in modules), sorted(files)
    assert any(m.name == "libgpudiag.so" for m in modules), sorted(files)
    for module in modules:
        for name, path in _libraries(module):
            assert path != "not found", f"{module.name} needs {name}, which is not found"
            inside = bool(path) and Path(path).resolve() in files
            assert inside or RUNTIME.fullmatch(name), (
                f"{module.name} loads {name} from {path or 'the kernel'}: neither in the wheel nor "
                "part of the C/C++ runtime the manylinux policy allows"
            )


def test_the_wheel_serves_the_http_control(tmp_path: Path) -> None:
    _manylinux_distribution()
    s = gpudiag.session(
        tmp_path / "run.gpudiag", capture_gpu=False, nvml_hz=0, torch=False, http="127.0.0.1:0"
    )
    s.start()
    try:
        assert s.http_url is not None, s.http_status()["reason"]
        with urllib.request.urlopen(s.http_url + "/healthz", timeout=10) as r:  # loopback only
            assert r.status == 200
    finally:
        s.stop()
