"""Paths and build commands shared by the userlib tests and their fixtures."""

from __future__ import annotations

import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USERLIB = REPO / "userlib"
INCLUDE = REPO / "include"
PY_INCLUDE = sysconfig.get_paths()["include"]


def native_build_cmd(cc: str, out: Path, py_include: list[str]) -> list[str]:
    return [cc, "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
            "-Wno-missing-field-initializers", "-Werror", "-shared", "-fPIC",
            *(f"-I{d}" for d in py_include), f"-I{INCLUDE}",
            str(USERLIB / "simple_pmu" / "_native.c"), "-o", str(out)]
