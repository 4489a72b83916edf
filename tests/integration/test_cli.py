"""invoke tasks as a user runs them: exit codes and messages of the CLI."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def invoke(*args, env=None, timeout=300):
    return subprocess.run(["./devenv", "invoke", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_unknown_suite():
    proc = invoke("kdir", "--kernel", "jessie", "--arch", "arm64")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "jessie" in out
    for s in ("bullseye", "bookworm", "bookworm-backports", "trixie", "sid"):
        assert s in out
    assert "Traceback" not in out


def test_unknown_arch():
    proc = invoke("kdir", "--kernel", "bookworm", "--arch", "riscv64")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "riscv64" in out and "amd64" in out and "arm64" in out
    assert "Traceback" not in out


def test_build_kdir_not_a_tree():
    proc = invoke("build", "--kdir", "/etc")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "/etc" in out and "Makefile" in out and ".config" in out
    assert "Traceback" not in out


@pytest.mark.kernels
def test_registry_unreachable(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    proc = invoke("kdir", "--kernel", "bookworm", "--arch", "arm64", env={
        "SIMPLE_PMU_CACHE": str(cache),
        "SIMPLE_PMU_DEBIAN_MIRROR": "http://127.0.0.1:9/debian",
        "SIMPLE_PMU_SECURITY_MIRROR": "http://127.0.0.1:9/debian-security",
    })
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "could not download the Debian package index" in out
    assert "127.0.0.1:9" in out
    assert "Traceback" not in out
    kernels_dir = cache / "kernels"
    assert not kernels_dir.exists() or list(kernels_dir.iterdir()) == []
