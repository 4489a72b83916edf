"""pmubuild.debian.pkgtest without chroots: the stage manifest against the stage script, the
script's syntax under dash (the chroots' /bin/sh), and the apt sources it writes."""

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pmubuild.debian import pkgtest


def untimed(lines: list[str]) -> list[str]:
    """The runner's lines with each unit's time as the fake's 1 s: on a loaded machine
    the same fake takes 2 or 3."""
    return [re.sub(r"\(\d+s\)$", "(1s)", x) for x in lines]


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
    # The mirrors are the machine's (pmubuild.trees.apt.mirrors, tested in test_apt_mirrors);
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
    from pmubuild.common import seeds

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

    from pmubuild.debian import package

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


# A stand-in for one unit's process. No timing: units wait for each other through marker
# files. Each combination: marks itself started, says which other combinations are running
# ("overlap: ..."), prints a first line; a suite named with "SIGNAL" sends the runner
# MORE_LANES (as `invoke test` does when test-qemu ends); one with "WAITFOR" + X waits
# until combination X has started (20 s at most, then says so and fails); then a last
# line, marked ended. Verdicts at the end as test_unit prints them: "FAIL" in the suite
# name fails it, "NONE" prints none; "EXIT1" passes but exits 1.
FAKE_UNIT = r"""
import os, signal, sys, time
from pathlib import Path
marks = Path(__file__).parent / "marks"
marks.mkdir(exist_ok=True)
for a in sys.argv[1:]:
    suite, arch = a.split("/")
    # Who runs, seen before this unit says it started: one waiting for it cannot end
    # in between (it did under load, between the touch and the glob).
    others = sorted(m.stem for m in marks.glob("*.started")
                    if m.stem != suite and not (marks / f"{m.stem}.ended").exists())
    (marks / f"{suite}.started").touch()
    print(f"{a}: overlap: {' '.join(others) or 'none'}", flush=True)
    print(f"{a}: first line", flush=True)
    if "SIGNAL" in suite:
        os.kill(os.getppid(), signal.SIGUSR1)
    if "WAITFOR" in suite:
        other = suite.split("WAITFOR")[1]
        for _ in range(2000):
            if (marks / f"{other}.started").exists():
                break
            time.sleep(0.01)
        else:
            print(f"{a}: {other} never started", flush=True)
            sys.exit(1)
    print(f"{a}: last line", flush=True)
    (marks / f"{suite}.ended").touch()
for a in sys.argv[1:]:
    suite, arch = a.split("/")
    if "NONE" not in suite:
        print(f"test-package {suite:<8} {arch}: {'FAIL' if 'FAIL' in suite else 'PASS'} (1s)")
sys.exit(1 if any(x in a for a in sys.argv[1:] for x in ("FAIL", "NONE", "EXIT1")) else 0)
"""


def run_fake_units(tmp_path, monkeypatch, capsys, units, lanes=2):
    fake = tmp_path / "unit.py"
    fake.write_text(FAKE_UNIT)
    monkeypatch.setattr(pkgtest, "REPO", tmp_path)
    monkeypatch.setattr(pkgtest, "WORKER", (shutil.which("python3"), str(fake)))
    monkeypatch.setattr(pkgtest, "UNITS", units)
    monkeypatch.setattr(pkgtest, "ALL", tuple(c for u in units for c in u))
    ok = pkgtest.test_all(lanes=lanes)
    return ok, capsys.readouterr().err.splitlines()


def test_units_run_two_at_a_time_and_their_output_is_never_interleaved(
        tmp_path, monkeypatch, capsys):
    # a waits until c has started: only a second lane lets c start while a runs.
    units = ((("aWAITFORc", "amd64"), ("b", "amd64")), (("c", "arm64"),), (("d", "amd64"),))
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units)
    assert ok, out
    body = [x for x in out if not x.startswith(("==>", "test-package"))]
    # Each unit's block whole: a unit's lines are adjacent, in its order.
    i = body.index("aWAITFORc/amd64: first line")
    assert body[i:i + 2] == ["aWAITFORc/amd64: first line", "aWAITFORc/amd64: last line"]
    assert body[i + 2].startswith("b/amd64: overlap: ")  # c, if it has not ended yet
    assert body[i + 3:i + 5] == ["b/amd64: first line", "b/amd64: last line"]
    j = body.index("c/arm64: first line")
    assert body[j + 1] == "c/arm64: last line"
    # The verdicts at the end, in the order of ALL, each once.
    assert untimed(out[-4:]) == [f"test-package {s:<8} {a}: PASS (1s)" for s, a in pkgtest.ALL]
    assert sum(x.startswith("test-package ") for x in out) == 4


@pytest.mark.parametrize("suite, why", [("xFAIL", "FAIL (1s)"), ("xNONE", "FAIL (no verdict")])
def test_a_failed_unit_or_one_without_a_verdict_fails_the_whole(
        tmp_path, monkeypatch, capsys, suite, why):
    units = ((("a", "amd64"),), ((suite, "amd64"),))
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units)
    assert not ok
    assert out[-1].startswith(f"test-package {suite:<8} amd64: {why}")
    assert untimed([out[-2]]) == ["test-package a        amd64: PASS (1s)"]


def test_a_unit_that_exits_1_fails_the_whole_despite_its_verdicts(tmp_path, monkeypatch,
                                                                   capsys):
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, ((("xEXIT1", "amd64"),),))
    assert not ok and untimed([out[-1]]) == ["test-package xEXIT1   amd64: PASS (1s)"]


def test_a_unit_argument_outside_the_list_is_refused(capsys):
    assert pkgtest.main(["bullseye/arm64"]) == 2
    assert "'bullseye/arm64' is not one of" in capsys.readouterr().err
    for bad in (["--lanes=3"], ["--lanes=0"], ["--lanes=x"], ["--lanes=1", "sid/amd64"]):
        assert pkgtest.main(bad) == 2, bad


def test_the_worker_and_test_all_run_this_module_by_its_name():
    """WORKER (each unit, `python -m NAME SUITE/ARCH`) and `invoke test`'s background
    test-package (commands.test_all: pkgtest.__name__) name this module. The runner tests
    replace WORKER with a fake, so only this would see a name the module moved away from."""
    assert pkgtest.WORKER[:2] == (sys.executable, "-m")
    assert pkgtest.WORKER[2] == pkgtest.__name__ == "pmubuild.debian.pkgtest"
    spec = importlib.util.find_spec(pkgtest.WORKER[2])
    assert spec is not None and Path(spec.origin).resolve() == Path(pkgtest.__file__).resolve()
    repo = Path(pkgtest.__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([*pkgtest.WORKER, "bullseye/arm64"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    # Run as __main__: the module's own main, which refuses a unit outside its list.
    assert proc.returncode == 2 and "'bullseye/arm64' is not one of" in proc.stdout + proc.stderr


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


def test_one_lane_until_told_then_two(tmp_path, monkeypatch, capsys):
    """--lanes=1 beside pytest and test-qemu: no two units at once; MORE_LANES (test-qemu
    ended) widens to two, and the runner survives it and any later one."""
    units = ((("a", "amd64"),), (("b", "amd64"),), (("c", "amd64"),))
    ok, out = run_fake_units(tmp_path, monkeypatch, capsys, units, lanes=1)
    assert ok, out
    assert [x for x in out if "overlap" in x] == [f"{u}/amd64: overlap: none" for u in "abc"]
    # a tells the runner (as invoke test would) and waits for b, which only a second
    # lane can start meanwhile; c comes after.
    units = ((("aSIGNALWAITFORb", "amd64"),), (("b", "amd64"),), (("c", "amd64"),))
    (tmp_path / "2").mkdir()
    ok, out = run_fake_units(tmp_path / "2", monkeypatch, capsys, units, lanes=1)
    assert ok, out
    assert "b/amd64: overlap: aSIGNALWAITFORb" in out
    assert untimed(out[-3:]) == [f"test-package {x:<8} amd64: PASS (1s)"
                                 for x in ("aSIGNALWAITFORb", "b", "c")]
    # After test_all the signal is ignored, not fatal: a late one kills nobody.
    assert signal.getsignal(pkgtest.MORE_LANES) == signal.SIG_IGN


def fake_test_run(tmp_path, monkeypatch, suite, arch, rc, stages):
    """pkgtest.test() with the builds, the chroot and the boot faked: the stage script
    'prints' a PASS line for each of `stages` and exits rc. (verdict, results said)."""
    from pmubuild.debian import package

    monkeypatch.setattr(pkgtest, "REPO", tmp_path)
    built = []

    def build(suite_, out, version=None, run_lintian=True, kind="full"):
        built.append(out)
        deb = out / ("simple-pmu-dkms_1_all.deb" if kind != "arch" else "python3-x_1_amd64.deb")
        return package.PackageResult(out, out / "x.changes", (deb,), (), True)

    monkeypatch.setattr(package, "build", build)
    monkeypatch.setattr(pkgtest, "split_build", lambda s, k, f: f"PASS: build -{k}: fake")
    monkeypatch.setattr(pkgtest, "PrivateApt", lambda: None)
    monkeypatch.setattr(pkgtest, "kernels_for", lambda apt, s, a: pkgtest.Kernels(
        "linux-headers-k", "k", "linux-headers-k2", "k2", "1"))
    monkeypatch.setattr(pkgtest.seeds, "restored_tcyc", lambda: "")
    monkeypatch.setattr(pkgtest.cache, "ensure_free_space", lambda *a: None)
    monkeypatch.setattr(pkgtest.chroot, "ensure_set", lambda *a: tmp_path / "base")
    monkeypatch.setattr(package, "apt_cache_mounts", lambda *a: [])
    monkeypatch.setattr(package, "run_in_overlay", lambda *a: (
        rc, [f"PASS: {s}: fake" for s in stages]))
    booted = []
    monkeypatch.setattr(pkgtest, "boot", lambda s, a, out: booted.append(1) or "PASS: boot: fake")
    ok = pkgtest.test(suite, arch)
    return ok, built, booted


@pytest.mark.parametrize("suite, arch", [("trixie", "amd64"), ("sid", "amd64"),
                                         ("bookworm", "amd64"), ("bookworm", "arm64")])
def test_a_clean_run_passes_and_a_dead_script_fails(tmp_path, monkeypatch, capsys, suite,
                                                     arch):
    """Every expected stage PASS with exit 0: PASS, booted (bookworm amd64 with its NOTE).
    The script dead after 'setup' (exit 137, no FAIL line): FAIL, not booted."""
    full = arch in pkgtest.FULL_ARCHES
    stages = pkgtest.expected_stages(suite, full)
    ok, built, booted = fake_test_run(tmp_path, monkeypatch, suite, arch, 0, stages)
    said = capsys.readouterr().err
    assert ok and booted == [1], said
    assert ("NOTE: not run on bookworm" in said) == (suite == "bookworm" and full)
    # Each combination builds into directories of its own (units run two at a time).
    assert all(f"{suite}-{arch}" in p.name for p in built), built
    ok, _, booted = fake_test_run(tmp_path, monkeypatch, suite, arch, 137, stages[:1])
    said = capsys.readouterr().err
    assert not ok and booted == [], said
    assert "FAIL: the stages stopped with exit status 137" in said
    ok, _, booted = fake_test_run(tmp_path, monkeypatch, suite, arch, 0, stages[:-1])
    assert not ok and f"FAIL: {stages[-1]}: the stage never reported" in capsys.readouterr().err
