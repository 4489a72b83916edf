"""./devenv's check of the Debian packages, run against a fake dpkg-query: what Debian 12
and Debian 13 report for the same installed tools (13 renamed libelf1 and libssl3 to
their t64 packages, which provide the old names)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DEVENV = REPO / "devenv"

pytestmark = pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")


def apt_packages() -> list[str]:
    m = re.search(r'APT_PACKAGES="([^"]*)"', DEVENV.read_text())
    assert m, "devenv no longer sets APT_PACKAGES where this test reads it"
    return m.group(1).split()


# Debian 13 (trixie): the t64 packages, each providing the old name.
RENAMED = {"libelf1": "libelf1t64|libelf1 (= 0.192-4)",
           "libssl3": "libssl3t64|libssl3 (= 3.5.1-1), libfoo"}


def dpkg_lines(release: int, leave_out: tuple[str, ...] = ()) -> str:
    lines = []
    for name in apt_packages():
        if name in leave_out:
            continue
        if release == 13 and name in RENAMED:
            lines.append(f"ii |{RENAMED[name]}")
        else:
            lines.append(f"ii |{name}|")
    # Not installed (removed, config files left): provides nothing.
    lines.append("rc |qemu-user-static|")
    return "\n".join(lines) + "\n"


def fake_checkout(tmp: Path, dpkg: str, uid: int) -> tuple[Path, dict[str, str]]:
    """devenv in a directory of its own with a ready .venv, and fakes of dpkg-query, id and
    apt-get (which records that it was called)."""
    root = tmp / "co"
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(DEVENV, root / "devenv")
    (root / "pyproject.toml").write_text("[project]\n")
    stamp = subprocess.run(["sha256sum", "pyproject.toml"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()[0]
    (root / ".venv" / ".stamp").write_text(stamp + "\n")
    py = root / ".venv" / "bin" / "python"
    py.write_text("#!/bin/sh\n")
    py.chmod(0o755)
    fake = tmp / "bin"
    fake.mkdir()
    (tmp / "dpkg.out").write_text(dpkg)
    scripts = {"dpkg-query": f"cat {tmp / 'dpkg.out'}",
               "id": f"echo {uid}",
               "apt-get": f"echo \"$@\" >> {tmp / 'apt-get.calls'}"}
    for name, body in scripts.items():
        (fake / name).write_text(f"#!/bin/sh\n{body}\n")
        (fake / name).chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(tmp)}
    return root, env


def devenv(tmp: Path, dpkg: str, uid: int) -> subprocess.CompletedProcess[str]:
    root, env = fake_checkout(tmp, dpkg, uid)
    return subprocess.run(["sh", str(root / "devenv"), "echo", "ran"], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.parametrize("release", [12, 13])
@pytest.mark.parametrize("uid", [0, 1000])
def test_nothing_missing_installs_nothing(tmp_path, release, uid):
    res = devenv(tmp_path, dpkg_lines(release), uid)
    assert (res.returncode, res.stdout, res.stderr) == (0, "ran\n", "")
    assert not (tmp_path / "apt-get.calls").exists()


def test_nonroot_names_what_is_missing(tmp_path):
    res = devenv(tmp_path, dpkg_lines(13, leave_out=("libssl3", "valgrind")), 1000)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == ("devenv: missing Debian packages: libssl3 valgrind; run as root or "
                          "install them\n")


def test_root_installs_only_what_is_missing(tmp_path):
    """apt-get install resolves the old name to the provider (libssl3t64 on Debian 13)."""
    res = devenv(tmp_path, dpkg_lines(13, leave_out=("libssl3",)), 0)
    assert res.returncode == 0 and res.stdout == "ran\n", res.stderr
    calls = (tmp_path / "apt-get.calls").read_text().splitlines()
    assert calls == ["update -q", "install -y -q --no-install-recommends libssl3"]


def test_a_removed_package_is_missing(tmp_path):
    """'rc' (removed, its configuration left) is not installed."""
    lines = dpkg_lines(12, leave_out=("qemu-user-static",))
    res = devenv(tmp_path, lines, 1000)
    assert res.returncode == 1 and "packages: qemu-user-static;" in res.stderr
