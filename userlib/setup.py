"""Build simple_pmu._native from include/cycles.h of the simple-pmu checkout.

Everything else is in pyproject.toml; only the C extension needs code: it includes
../include/cycles.h, so build from a checkout (pip builds in place since pip 21.3).
"""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parent / "include"

if not (INCLUDE / "cycles.h").is_file():
    raise SystemExit(
        f"simple-pmu-userlib: {INCLUDE / 'cycles.h'} not found. The extension is built from "
        "the C header of the simple-pmu checkout: run 'pip install .' in userlib/ of a full "
        "checkout (include/ next to userlib/), not from a copy of userlib/ alone."
    )

setup(
    ext_modules=[
        Extension(
            "simple_pmu._native",
            sources=["simple_pmu/_native.c"],
            include_dirs=[str(INCLUDE)],
            depends=[str(INCLUDE / "cycles.h")],
        )
    ]
)
