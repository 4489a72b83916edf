"""The guest's simple_pmu._native must not need a newer glibc than the guest's libc6:
pyguest.glibc_needed reads what a shared object needs, checked against objdump."""

import re
import shutil
import subprocess

import pytest

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
