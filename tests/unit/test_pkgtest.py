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


def test_a_skipped_check_counts_as_reported_and_is_no_failure():
    results = ["PASS: setup: x", "SKIP: tcyc: the seed documents are not there"]
    assert pkgtest.missing_stages(results, ("setup", "tcyc")) == []


def test_the_tcyc_check_skips_with_a_reason_and_never_passes_without_the_seeds():
    """pkgtest.sh: without tcyc.c the check says SKIP (with $TCYC_SKIP), never PASS; with
    neither the file nor a reason it fails."""
    text = pkgtest.STAGES.read_text()
    block = text[text.index("# --- tcyc:"):text.index("# --- upgrade:")]
    no_seed = block[block.index("else"):block.index("fi\n", block.index("else"))]
    assert 'skip "tcyc: the 2011 tcyc.c check: $TCYC_SKIP"' in no_seed
    assert "pass " not in no_seed
    assert 'fail "tcyc: no $OUT/tcyc.c and no reason' in no_seed


def test_seeds_absent_reason(tmp_path, monkeypatch):
    from pmubuild import seeds

    missing = tmp_path / "nowhere"
    monkeypatch.setattr(seeds, "SEEDS", missing)
    monkeypatch.setattr(seeds, "TCYC", missing / "simple-pmu-2011" / "tcyc.c")
    assert seeds.absent_reason() == (
        f"the seed documents are not beside the checkout ({missing} does not exist)")
    assert seeds.restored_tcyc() is None
    missing.mkdir()
    assert "hold no simple-pmu-2011/tcyc.c" in (seeds.absent_reason() or "")
    seeds.TCYC.parent.mkdir()
    seeds.TCYC.write_text("#include\n#include\n#include\nint main(void) { return 0; } 64 |\n")
    assert seeds.absent_reason() is None
    assert seeds.restored_tcyc() == ("#include <stdio.h>\n#include <stdlib.h>\n"
                                     "#include <unistd.h>\nint main(void) { return 0; }\n")


def test_split_builds_must_build_exactly_their_share_and_pass_lintian(tmp_path, monkeypatch):
    from pathlib import Path

    from pmubuild import package

    def result(names, lintian_ok=True):
        files = tuple(Path(tmp_path, n) for n in names)
        return package.PackageResult(tmp_path, files[0], files, (), lintian_ok)

    full = result(["s_1.dsc", "a_1_all.deb", "b_1_all.deb", "p_1_amd64.deb",
                   "p-dbgsym_1_amd64.ddeb"])
    built = {"indep": result(["s_1_all.changes", "a_1_all.deb", "b_1_all.deb"]),
             "arch": result(["s_1_amd64.changes", "p_1_amd64.deb", "p-dbgsym_1_amd64.ddeb"])}
    seen = []

    def fake_build(suite, out, kind="full", **kw):
        seen.append((suite, kind))
        return built[kind]

    monkeypatch.setattr(package, "build", fake_build)
    assert pkgtest.split_build("trixie", "indep", full) == (
        "PASS: build -A: dpkg-buildpackage -A built a_1_all.deb b_1_all.deb; lintian: no "
        "errors or warnings")
    assert pkgtest.split_build("trixie", "arch", full).startswith("PASS: build -B: ")
    assert seen == [("trixie", "indep"), ("trixie", "arch")]
    built["arch"] = result(["s_1_amd64.changes", "p_1_amd64.deb", "a_1_all.deb"])
    assert pkgtest.split_build("trixie", "arch", full) == (
        "FAIL: build -B: built a_1_all.deb p_1_amd64.deb, want p_1_amd64.deb")
    built["indep"] = result(["s_1_all.changes", "a_1_all.deb", "b_1_all.deb"], lintian_ok=False)
    assert pkgtest.split_build("trixie", "indep", full).startswith("FAIL: build -A: lintian")
