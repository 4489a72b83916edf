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


def matrix_tree(suite: str, arch: str) -> str:
    proc = invoke("kdir", "--kernel", suite, "--arch", arch)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.kernels
def test_verify_and_sign_errors(tmp_path):
    kdir = matrix_tree("bookworm", "amd64")
    cases = [
        (("verify", "--kdir", "/etc"), "/etc is not a kernel build tree"),
        (("verify", "--kdir", kdir, "--ko", str(tmp_path / "no.ko")), "no.ko: no such file"),
        (("verify", "--kdir", kdir, "--ko", "/etc/passwd"), "not an ELF file"),
        (("sign", "--kdir", kdir, "--key", "/etc/passwd"), "give both --key and --cert"),
        (("sign", "--kdir", kdir, "--key", str(tmp_path / "k"), "--cert", "/etc/passwd"),
         "--key " + str(tmp_path / "k") + ": no such file"),
    ]
    for args, message in cases:
        proc = invoke(*args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2 and message in out and "Traceback" not in out, (args, out)


@pytest.mark.kernels
def test_verify_table_and_exit_code(tmp_path):
    ok = invoke("verify", "--kdir", matrix_tree("bookworm", "arm64"))
    if "no module built" in ok.stderr:
        assert invoke("build", "--kdir", matrix_tree("bookworm", "arm64")).returncode == 0
        ok = invoke("verify", "--kdir", matrix_tree("bookworm", "arm64"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for row in ("machine", "vermagic", "license", "symbols", "policy", "crcs", "signature"):
        assert f"  {row} " in ok.stdout
    ko = next(ln.split()[0] for ln in ok.stdout.splitlines() if ln.endswith(")"))
    bad = invoke("verify", "--kdir", matrix_tree("bookworm", "amd64"), "--ko", ko)
    assert bad.returncode == 2
    assert "built for EM_AARCH64, the target kernel is amd64 (EM_X86_64)" in bad.stderr
