"""Build simple_pmu._native against cycles.h; everything else is in pyproject.toml.

cycles.h has one copy in the repository, include/cycles.h at its top: it is the C API,
and the header tests and the guests' cross build use it there. So userlib/ holds no copy
that could drift from it. Instead:

- built from a checkout (`pip install ./userlib`, a Debian package build), the extension
  includes ../include/cycles.h;
- `sdist` writes include/cycles.h and LICENSE into the archive beside this file, so the
  sdist, and every wheel built from it, needs nothing outside itself.

The first directory of (this one, its parent) that has include/cycles.h is used: an
unpacked sdist is never mistaken for a checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import setuptools
from setuptools import Extension, setup
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
HEADER = Path("include", "cycles.h")
# Files the sdist takes from the checkout's top directory, at the same relative path.
FROM_CHECKOUT = (HEADER, Path("LICENSE"))
LICENSE_SPDX = "GPL-2.0-only"


def shared_root() -> Path:
    for root in (HERE, HERE.parent):
        if (root / HEADER).is_file():
            return root
    raise SystemExit(
        f"simple-pmu-userlib: {HEADER} found neither in {HERE} (an sdist carries it) nor "
        f"in {HERE.parent} (a simple-pmu checkout has it beside userlib/). Build from the "
        "sdist, or from userlib/ of a full checkout, not from a copy of userlib/ alone."
    )


class SdistWithHeader(sdist):
    """sdist that carries the checkout's cycles.h and LICENSE (see the module docstring)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        root = shared_root()
        for rel in FROM_CHECKOUT:
            dest = Path(base_dir, rel)
            if not dest.exists():  # already there when re-packing an unpacked sdist
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / rel, dest)


def license_metadata() -> dict[str, Any]:
    # PEP 639's License-Expression needs setuptools >= 77; Debian 12 has 66, which only
    # knows the free-text License field. Each gets the field it knows, without the
    # deprecation warnings a TOML table or a classifier draws from new setuptools.
    major = int(setuptools.__version__.split(".")[0])
    return {"license_expression" if major >= 77 else "license": LICENSE_SPDX}


ROOT = shared_root()
setup(
    cmdclass={"sdist": SdistWithHeader},
    ext_modules=[
        Extension(
            "simple_pmu._native",
            sources=["simple_pmu/_native.c"],
            include_dirs=[str(ROOT / HEADER.parent)],
            depends=[str(ROOT / HEADER)],
        )
    ],
    **license_metadata(),
)
