"""pmubuild.pkgtest without chroots: the stage manifest against the stage script, the
script's syntax under dash (the chroots' /bin/sh), and the apt sources it writes."""

import re
import shutil
import subprocess

import pytest

from pmubuild import pkgtest


def test_every_expected_stage_is_reported_by_the_script():
    text = pkgtest.STAGES.read_text()
    reported = set(re.findall(r'^\s*pass "([a-z-]+):', text, re.M))
    assert set(pkgtest.STAGES_FULL) == reported
    assert set(pkgtest.STAGES_INSTALL) < reported


def test_missing_stages_are_failures():
    results = ["PASS: lintian: ok", "PASS: setup: x", "FAIL: install: y"]
    assert pkgtest.missing_stages(results, ("setup", "install", "purge")) == [
        "FAIL: purge: the stage never reported"]
    assert pkgtest.missing_stages(results, ("setup", "install")) == []


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_stage_script_parses(shell):
    if not shutil.which(shell):
        pytest.fail(f"{shell} is not installed")
    res = subprocess.run([shell, "-n", str(pkgtest.STAGES)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_sources_name_every_apt_suite_of_the_kernel(monkeypatch):
    # The mirrors are the machine's (pmubuild.apt.mirrors, tested in test_apt_mirrors);
    # made-up ones here.
    monkeypatch.setenv("SIMPLE_PMU_DEBIAN_MIRROR", "http://mirror.invalid/debian")
    monkeypatch.setenv("SIMPLE_PMU_SECURITY_MIRROR", "http://mirror.invalid/debian-security")
    assert pkgtest.sources("bookworm").splitlines() == [
        "deb http://mirror.invalid/debian bookworm main",
        "deb http://mirror.invalid/debian-security bookworm-security main"]
    assert pkgtest.sources("sid").splitlines() == ["deb http://mirror.invalid/debian sid main"]


def test_stage_script_fails_in_the_shell_not_a_subshell():
    """signed_module must stop the run: never called inside $(...)."""
    assert not re.search(r"\$\(\s*signed_module", pkgtest.STAGES.read_text())
