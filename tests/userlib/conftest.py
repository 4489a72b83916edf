"""Fixtures for the userlib tests: the package built two ways, outside the repository.

native_pkg: the extension compiled with the one-line compiler command the arm64 guest
build uses, next to a copy of the pure-Python modules; imported in-process.
venv: a fresh virtual environment with `pip install` of a copy of userlib/ and include/
(the checkout layout), for the console script. Nothing is written inside the repo.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv as venv_mod
from pathlib import Path

import pytest
from userlib_helpers import INCLUDE, PY_INCLUDE, USERLIB, native_build_cmd


@pytest.fixture(scope="session")
def native_pkg(tmp_path_factory):
    """Directory holding an importable simple_pmu with a freshly built _native."""
    root = tmp_path_factory.mktemp("native_pkg")
    pkg = root / "simple_pmu"
    shutil.copytree(USERLIB / "simple_pmu", pkg, ignore=shutil.ignore_patterns(
        "*.c", "*.so", "__pycache__"))
    out = pkg / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    res = subprocess.run(native_build_cmd("gcc", out, [PY_INCLUDE]), capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    return root


@pytest.fixture(scope="session")
def simple_pmu(native_pkg):
    """The package imported in this process (from native_pkg, never from the repo)."""
    for name in [m for m in sys.modules if m == "simple_pmu" or m.startswith("simple_pmu.")]:
        del sys.modules[name]
    sys.path.insert(0, str(native_pkg))
    import simple_pmu as mod

    assert Path(mod.__file__).is_relative_to(native_pkg)
    assert mod.native is not None, mod.native_error
    return mod


@pytest.fixture(scope="session")
def venv(tmp_path_factory):
    """bin/ of a fresh venv where `pip install .` of userlib/ (in a checkout copy) ran."""
    root = tmp_path_factory.mktemp("venv")
    src = root / "checkout"
    shutil.copytree(USERLIB, src / "userlib", ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", "*.so"))
    shutil.copytree(INCLUDE, src / "include")
    env_dir = root / "env"
    venv_mod.create(env_dir, with_pip=True)
    res = subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", "."],
                         cwd=src / "userlib", capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"pip install . failed:\n{res.stdout}\n{res.stderr}"
    return env_dir / "bin"
