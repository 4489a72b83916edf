"""pmubuild.pkgtest without chroots: the stage manifest against the stage script, the
script's syntax under dash (the chroots' /bin/sh), and the apt sources it writes."""

import os
import re
import shutil
import subprocess
import threading

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


# A stand-in for one unit's process: prints a block of output around a sleep (so that
# two units overlap), then its combinations' verdicts as test_unit does; "FAIL" in the
# suite name fails it, "NONE" prints no verdict.
FAKE_UNIT = r"""
import sys, time
for a in sys.argv[1:]:
    suite, arch = a.split("/")
    print(f"{a}: first line", flush=True)
    time.sleep(0.5)
    print(f"{a}: last line", flush=True)
for a in sys.argv[1:]:
    suite, arch = a.split("/")
    if "NONE" not in suite:
        print(f"test-package {suite:<8} {arch}: {'FAIL' if 'FAIL' in suite else 'PASS'} (1s)")
sys.exit(1 if any("FAIL" in a or "NONE" in a for a in sys.argv[1:]) else 0)
"""


def run_fake_units(tmp_path, monkeypatch, capsys, units, lanes=2, more_after=None):
    fake = tmp_path / "unit.py"
    fake.write_text(FAKE_UNIT)
    monkeypatch.setattr(pkgtest, "REPO", tmp_path)
    monkeypatch.setattr(pkgtest, "WORKER", (shutil.which("python3"), str(fake)))
    monkeypatch.setattr(pkgtest, "UNITS", units)
    monkeypatch.setattr(pkgtest, "ALL", tuple(c for u in units for c in u))
    if more_after is not None:  # as `invoke test` does when test-qemu has ended
        threading.Timer(more_after, os.kill, (os.getpid(), pkgtest.MORE_LANES)).start()
    ok = pkgtest.test_all(lanes=lanes)
    return ok, capsys.readouterr().err.splitlines()


def test_units_run_two_at_a_time_and_their_output_is_never_interleaved(
        tmp_path, monkeypatch, capsys):
    units = ((("a", "amd64"), ("b", "amd64")), (("c", "arm64"),), (("d", "amd64"),))
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units)
    assert ok
    body = [x for x in out if not x.startswith(("==>", "test-package"))]
    # Each unit's block whole: a unit's lines are adjacent in its order.
    blocks = ["a/amd64: first line", "a/amd64: last line", "b/amd64: first line",
              "b/amd64: last line"]
    i = body.index(blocks[0])
    assert body[i:i + 4] == blocks
    j = body.index("c/arm64: first line")
    assert body[j + 1] == "c/arm64: last line"
    # The verdicts at the end, in the order of ALL, each once.
    assert out[-4:] == [f"test-package {s:<8} {a}: PASS (1s)"
                        for s, a in pkgtest.ALL]
    assert sum(x.startswith("test-package ") for x in out) == 4
    # Two lanes: the first two units were started before either ended.
    starts = [n for n, x in enumerate(out) if x.endswith("started, output in "
                                                          + str(tmp_path / "build" / "pkgtest"
                                                                / "logs" / "c-arm64.log"))]
    assert starts and starts[0] < out.index("a/amd64: first line")


@pytest.mark.parametrize("suite, why", [("xFAIL", "FAIL (1s)"), ("xNONE", "FAIL (no verdict")])
def test_a_failed_unit_or_one_without_a_verdict_fails_the_whole(
        tmp_path, monkeypatch, capsys, suite, why):
    units = ((("a", "amd64"),), ((suite, "amd64"),))
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units)
    assert not ok
    assert out[-1].startswith(f"test-package {suite:<8} amd64: {why}")
    assert out[-2] == "test-package a        amd64: PASS (1s)"


def test_a_unit_argument_outside_the_list_is_refused(capsys):
    assert pkgtest.main(["bullseye/arm64"]) == 2
    assert "'bullseye/arm64' is not one of" in capsys.readouterr().err


def test_omitted_stages_are_neither_expected_nor_run():
    assert set(pkgtest.STAGES_FULL) - set(pkgtest.expected_stages("bookworm", True)) == {
        "no-headers", "autopkgtest"}
    assert pkgtest.expected_stages("sid", True) == pkgtest.STAGES_FULL
    assert pkgtest.expected_stages("trixie", True) == pkgtest.STAGES_FULL
    assert pkgtest.expected_stages("bookworm", False) == pkgtest.STAGES_INSTALL
    # The issue-25 checks run on trixie and sid: nothing may be omitted there.
    assert not set(pkgtest.OMIT) & {"trixie", "sid"}
    assert set(pkgtest.SPLIT_SUITES) >= {"trixie", "sid"}
    # The script's own gate, as dash runs it.
    text = pkgtest.STAGES.read_text()
    runs = re.search(r"^runs\(\) \{.*?^\}", text, re.M | re.S).group(0)

    def gate(stage, full, omit):
        script = f'{runs}\nFULL="{full}"; OMIT="{omit}"; runs {stage}'
        return subprocess.run(["dash", "-c", script]).returncode == 0

    assert gate("no-headers", "1", "")
    assert not gate("no-headers", "1", "no-headers autopkgtest")
    assert not gate("autopkgtest", "1", "no-headers autopkgtest")
    assert gate("autopkgtest", "1", "no-headers")
    assert not gate("autopkgtest", "", "")
    assert re.search(r"^if runs no-headers; then", text, re.M)
    assert re.search(r"^if runs autopkgtest; then", text, re.M)


def started(out, name):
    return next(n for n, x in enumerate(out) if x.startswith(f"==> test-package {name}: started"))


def test_one_lane_until_told_then_two(tmp_path, monkeypatch, capsys):
    """--lanes=1 beside pytest and test-qemu; MORE_LANES (test-qemu ended) widens to two."""
    units = ((("a", "amd64"),), (("b", "amd64"),), (("c", "amd64"),), (("d", "amd64"),))
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units, lanes=1)
    assert ok
    # One at a time: each unit starts after the one before it has ended (its lines).
    for before, after in (("a", "b"), ("b", "c"), ("c", "d")):
        assert out.index(f"{before}/amd64: last line") < started(out, f"{after}-amd64")
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units, lanes=1, more_after=0.2)
    assert ok
    # Two at a time after it: c started while b still ran (before b's lines came).
    assert started(out, "c-amd64") < out.index("b/amd64: first line")
    assert out[-4:] == [f"test-package {x:<8} amd64: PASS (1s)" for x in "abcd"]
    assert pkgtest.main(["--lanes=3"]) == 2 and pkgtest.main(["--lanes=x"]) == 2
