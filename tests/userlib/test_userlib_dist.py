"""The userlib as users outside this repository get it: its sdist and wheel.

One `python -m build` per session, from a copy of the checkout (sdist, then the wheel
built from that sdist, as `build` does by default), with the newest setuptools. Then, in
fresh venvs: pip installs the sdist (isolated build, newest setuptools), the wheel, and
the sdist and the checkout with `--no-build-isolation` under Debian's own
python3-setuptools (66 on Debian 12, 78 on 13): a venv of /usr/bin/python3 with
--system-site-packages, so the build uses exactly what a Debian package build uses, Debian
patches included (PyPI's setuptools of that version would not be that). After each install
`simple-pmu status` must run and `simple_pmu._native` must import from the venv.

pip runs offline (--no-index, no cache, no host pip configuration) on the built artifacts
and a wheelhouse holding the newest setuptools, downloaded once per session, so every
install really builds what it is given. Nothing is written in the repository.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from userlib_helpers import INCLUDE, REPO, USERLIB

DEBIAN_PYTHON = Path("/usr/bin/python3")
DEBIAN_DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")
SYSFS = Path("/sys/devices/system/simple-pmu/simple-pmu0")
LICENSE = REPO / "LICENSE"
HEADER = INCLUDE / "cycles.h"
# What a file of the checkout is called inside the sdist (below its top directory).
SDIST_FROM_CHECKOUT = {"include/cycles.h": HEADER, "LICENSE": LICENSE}


def repo_version() -> str:
    """simple_pmu.__version__ as written in the source (the one place it is written)."""
    tree = ast.parse((USERLIB / "simple_pmu" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
                "__version__"]:
            return ast.literal_eval(node.value)
    raise AssertionError("no __version__ = '...' in simple_pmu/__init__.py")


def run(cmd: list, *, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def output(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"


@dataclass(frozen=True)
class Dists:
    checkout: Path      # a copy of userlib/, include/ and LICENSE: the repository's layout
    sdist: Path
    wheel: Path
    pip_env: dict[str, str]  # offline pip: the wheelhouse only, no cache, no host config
    tmp: Path


@pytest.fixture(scope="session")
def dists(tmp_path_factory) -> Dists:
    tmp = tmp_path_factory.mktemp("dist")
    checkout = tmp / "checkout"
    shutil.copytree(USERLIB, checkout / "userlib", ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", "*.so"))
    shutil.copytree(INCLUDE, checkout / "include")
    shutil.copy(LICENSE, checkout / "LICENSE")

    wheelhouse = tmp / "wheelhouse"
    res = run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:",
               "--dest", wheelhouse, "setuptools>=77"])
    assert res.returncode == 0, output(res)

    pip_tmp = tmp / "piptmp"  # pip unpacks here: nothing of the host's /tmp is beside it
    pip_tmp.mkdir()
    pip_env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
               "PIP_FIND_LINKS": str(wheelhouse), "PIP_NO_CACHE_DIR": "1",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1", "TMPDIR": str(pip_tmp)}
    out = tmp / "out"
    res = run([sys.executable, "-m", "build", "--outdir", out, checkout / "userlib"],
              env=pip_env)
    assert res.returncode == 0, output(res)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dists(checkout, sdist, wheel, pip_env, tmp)


def sdist_members(sdist: Path) -> dict[str, bytes]:
    """Files of an sdist by path below its top directory."""
    with tarfile.open(sdist) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def without(sdist: Path, dest: Path, drop: str) -> Path:
    """A copy of sdist without the member `drop` (below the top directory)."""
    with tarfile.open(sdist) as src, tarfile.open(dest, "w:gz") as out:
        for m in src.getmembers():
            if m.name.split("/", 1)[-1] != drop:
                out.addfile(m, src.extractfile(m) if m.isfile() else None)
    return dest


def fresh_venv(root: Path, debian: bool = False) -> Path:
    """A new venv without pip (installs use the test's pip with --python): of
    /usr/bin/python3 and seeing its dist-packages when debian, else of this Python."""
    if debian:
        res = run([DEBIAN_PYTHON, "-m", "venv", "--system-site-packages", "--without-pip",
                   root])
        assert res.returncode == 0, output(res)
    else:
        venv.create(root, with_pip=False)
    return root


def pip_install(dists: Dists, env_dir: Path, *args: object) -> None:
    res = run([sys.executable, "-m", "pip", "--python", env_dir / "bin" / "python",
               "install", *args], env=dists.pip_env)
    assert res.returncode == 0, output(res)


def check_installed(dists: Dists, env_dir: Path) -> None:
    """The extension imports from the venv, and the console script reports."""
    res = run([env_dir / "bin" / "python", "-c",
               "import simple_pmu, simple_pmu._native as n; print(n.__file__); "
               "print(simple_pmu.__version__)"], cwd=dists.tmp)
    assert res.returncode == 0, output(res)
    so, version = res.stdout.split()
    assert Path(so).is_relative_to(env_dir), so
    assert version == repo_version()

    res = run([env_dir / "bin" / "simple-pmu", "status"], cwd=dists.tmp)
    assert res.returncode == 0, output(res)  # simple-pmu(1): status exits 0 when it reports
    for backend in ("driver", "timer"):
        assert re.search(rf"^{backend}\s+(yes|no)\s", res.stdout, re.M), output(res)
    assert "simple_pmu._native" not in res.stdout + res.stderr  # the "extension missing" note
    if not SYSFS.exists():
        assert "not loaded" in res.stdout, output(res)


def installed_metadata(env_dir: Path) -> str:
    (meta,) = env_dir.glob("lib/python3*/site-packages/simple_pmu_userlib-*.dist-info/METADATA")
    return meta.read_text()


def test_version_in_one_place():
    for pyproject in (REPO / "pyproject.toml", USERLIB / "pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        assert "version" not in project and "version" in project["dynamic"], pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", repo_version())


def test_sdist_carries_header_and_license(dists):
    members = sdist_members(dists.sdist)
    for name, source in SDIST_FROM_CHECKOUT.items():
        assert members.get(name) == source.read_bytes(), f"{name} differs from {source}"
    for src in (USERLIB / "simple_pmu").iterdir():
        if src.is_file() and src.suffix in (".py", ".c", ".pyi", ".typed"):
            assert members.get(f"simple_pmu/{src.name}") == src.read_bytes(), src.name
    assert {"setup.py", "pyproject.toml", "README.md", "PKG-INFO"} <= members.keys()
    pkg_info = members["PKG-INFO"].decode()
    assert f"\nVersion: {repo_version()}\n" in pkg_info
    assert dists.sdist.name == f"simple_pmu_userlib-{repo_version()}.tar.gz"


def test_wheel_from_sdist(dists):
    with zipfile.ZipFile(dists.wheel) as whl:
        names = set(whl.namelist())
        info = f"simple_pmu_userlib-{repo_version()}.dist-info"
        meta = whl.read(f"{info}/METADATA").decode()
        assert whl.read(f"{info}/licenses/LICENSE") == LICENSE.read_bytes()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    assert any(re.fullmatch(r"simple_pmu/_native\.cpython-.*\.so", n) for n in names), names
    assert {"simple_pmu/py.typed", "simple_pmu/_native.pyi", "simple_pmu/cli.py"} <= names
    assert not any(n.endswith((".c", ".h")) for n in names), names
    assert "simple-pmu = simple_pmu.cli:main" in entry_points
    # The newest setuptools writes PEP 639's field; 66 would write "License:".
    assert "\nLicense-Expression: GPL-2.0-only\n" in meta, meta
    assert f"\nVersion: {repo_version()}\n" in meta


def test_install_sdist(dists, tmp_path):
    env_dir = fresh_venv(tmp_path / "env")
    pip_install(dists, env_dir, dists.sdist)
    check_installed(dists, env_dir)


def test_install_wheel(dists, tmp_path):
    env_dir = fresh_venv(tmp_path / "env")
    pip_install(dists, env_dir, dists.wheel)
    check_installed(dists, env_dir)


@pytest.mark.parametrize("source", ["sdist", "checkout"])
def test_install_debian_setuptools(dists, tmp_path, source):
    """`--no-build-isolation` with Debian 12's python3-setuptools, from the sdist and from
    userlib/ of the checkout (what a Debian package build of the repository does)."""
    env_dir = fresh_venv(tmp_path / "env", debian=True)
    res = run([env_dir / "bin" / "python", "-c",
               "import setuptools; print(setuptools.__version__, setuptools.__file__)"])
    assert res.returncode == 0, output(res)
    version, path = res.stdout.split()
    assert version == debian_setuptools() and Path(path).is_relative_to(DEBIAN_DIST_PACKAGES), \
        res.stdout
    target = dists.sdist if source == "sdist" else dists.checkout / "userlib"
    pip_install(dists, env_dir, "--no-build-isolation", target)
    check_installed(dists, env_dir)
    meta = installed_metadata(env_dir)
    # Metadata as Debian's setuptools writes it: the build did not use a newer one.
    # Debian 12's 66 writes "License:"; 77 and later (Debian 13's 78) PEP 639's field.
    if int(version.split(".")[0]) < 77:
        assert meta.startswith("Metadata-Version: 2.1\n") and "\nLicense: GPL-2.0-only\n" in meta, \
            meta
    else:
        assert meta.startswith("Metadata-Version: 2.4\n") and \
            "\nLicense-Expression: GPL-2.0-only\n" in meta, meta


def debian_setuptools() -> str:
    """The upstream version of the installed python3-setuptools (66.1.1 on Debian 12,
    78.1.1 on Debian 13), as dpkg knows it."""
    res = run(["dpkg-query", "-W", "-f=${Version}", "python3-setuptools"])
    assert res.returncode == 0, output(res)
    return re.sub(r"^\d+:|-[^-]*$", "", res.stdout.strip())


def test_sdist_without_header_fails(dists, tmp_path):
    """The check test_install_sdist makes fails on an sdist that lacks cycles.h (as the
    sdist did before setup.py added it), and says what is missing."""
    broken = without(dists.sdist, tmp_path / dists.sdist.name, "include/cycles.h")
    assert "include/cycles.h" not in sdist_members(broken)
    env_dir = fresh_venv(tmp_path / "env")
    with pytest.raises(AssertionError, match=r"include/cycles\.h found neither in"):
        pip_install(dists, env_dir, broken)
    assert not list(env_dir.glob("lib/python3*/site-packages/simple_pmu"))

