"""The guest's simple_pmu._native must not need a newer glibc than the guest's libc6:
pyguest.glibc_needed reads what a shared object needs, checked against objdump."""

import concurrent.futures
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.guests import pyguest

SRC = """\
#define _GNU_SOURCE
#include <stdlib.h>
#include <stdio.h>
long parse(const char *s) { char *e; return strtol(s, &e, 0) + (long)printf("%s", e); }
"""


def objdump_newest(so):
    out = subprocess.run(["objdump", "-T", str(so)], capture_output=True, text=True,
                         check=True).stdout
    found = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"\(GLIBC_([\d.]+)\)", out)]
    return max(found)


@pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("gcc") is None,
                    reason="needs gcc and binutils")
def test_glibc_needed_agrees_with_objdump(tmp_path):
    (tmp_path / "x.c").write_text(SRC)
    so = tmp_path / "x.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "x.c")],
                   check=True)
    assert pyguest.glibc_needed(so) == objdump_newest(so) >= (2, 2)


def test_glibc_needed_of_an_object_without_versions(tmp_path):
    (tmp_path / "x.c").write_text("int f(int a) { return a + 1; }\n")
    so = tmp_path / "x.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-nostdlib", "-o", str(so),
                    str(tmp_path / "x.c")], check=True)
    assert pyguest.glibc_needed(so) == ()


def test_upstream_version_of_a_debian_libc6():
    assert pyguest._upstream("2.36-9+deb12u10") == (2, 36)
    assert pyguest._upstream("2.41-12") == (2, 41)
    # The comparison extension() makes: trixie's __isoc23_strtol is too new for bookworm.
    assert pyguest._upstream("2.36-9+deb12u10") < (2, 38)
    assert pyguest._upstream("2.36-9+deb12u10") >= (2, 17)


def test_two_builds_at_once_each_land(monkeypatch, tmp_path):
    """test-qemu prepares two kernels' guests at once, and both may build the extension
    into the same build/guest-ARCH: neither may lose its file to the other's rename (a cold
    CI run died with FileNotFoundError on a shared temporary name)."""
    out = tmp_path / "guest-arm64"
    inc = tmp_path / "inc"
    inc.mkdir()
    monkeypatch.setattr(pyguest, "_newest", lambda apt, name, arch: type(
        "P", (), {"version": "2.36-9+deb12u10"})())
    monkeypatch.setattr(pyguest, "headers", lambda apt, arch: inc)
    # Reads the file as the real check does; needs nothing newer than the guest's glibc.
    monkeypatch.setattr(pyguest, "glibc_needed", lambda so: (so.read_bytes(), ())[1])
    both_compiled = threading.Barrier(2)
    outputs = []
    inodes = []

    def fake_cc(argv, **kwargs):
        target = Path(argv[argv.index("-o") + 1])
        outputs.append(target)
        target.write_bytes(b"\x7fELF built")
        inodes.append(target.stat().st_ino)
        both_compiled.wait(timeout=10)  # both compilers done before either goes on
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(pyguest.subprocess, "run", fake_cc)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: pyguest.extension(None, "arm64", out), range(2)))
    so = out / "_native.cpython-311-aarch64-linux-gnu.so"
    assert results == [so, so] and so.read_bytes() == b"\x7fELF built"
    assert len(set(outputs)) == 2  # each build wrote a file of its own
    assert so.stat().st_ino in inodes  # renamed into place whole, not copied
    assert sorted(p.name for p in out.iterdir()) == [so.name]  # no temporary left


def test_a_failed_build_leaves_no_temporary(monkeypatch, tmp_path):
    out = tmp_path / "guest-arm64"
    monkeypatch.setattr(pyguest, "_newest", lambda apt, name, arch: type(
        "P", (), {"version": "2.36-9+deb12u10"})())
    monkeypatch.setattr(pyguest, "headers", lambda apt, arch: tmp_path)
    monkeypatch.setattr(pyguest, "glibc_needed", lambda so: (2, 38))
    monkeypatch.setattr(pyguest.subprocess, "run", lambda argv, **kw: (
        Path(argv[argv.index("-o") + 1]).write_bytes(b"x"),
        subprocess.CompletedProcess(argv, 0, "", ""))[1])
    with pytest.raises(PipelineError, match="needs GLIBC_2.38, newer than the guest's libc6"):
        pyguest.extension(None, "arm64", out)
    assert list(out.iterdir()) == []
