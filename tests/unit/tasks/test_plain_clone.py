"""A plain clone (no seed documents beside it): the checks that need the seeds say SKIP
with their reason, are never counted passed, and `invoke test` ends by listing them."""

import subprocess
import sys
from pathlib import Path

from pmubuild import commands
from pmubuild.common import seeds
from pmubuild.guests import guest


def junit_of(tmp_path, name: str, text: str, rc: int):
    """Runs a pytest module of the given text; its junit report, after checking pytest's
    exit status."""
    (tmp_path / name).write_text(text)
    xml = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--junitxml={xml}", name], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == rc, proc.stdout
    return xml


def test_pytest_skips_reads_each_reason_from_a_real_junit_report(tmp_path):
    xml = junit_of(tmp_path, "test_x.py",
                   "import pytest\n"
                   "def test_runs():\n    pass\n"
                   "def test_needs_seed():\n    pytest.skip('seed document /s/t.c absent')\n"
                   "class TestGroup:\n"
                   "    def test_also(self):\n        pytest.skip('no\\nseeds')\n", 0)
    assert commands.pytest_skips(xml) == [
        "pytest test_x::test_needs_seed: seed document /s/t.c absent",
        "pytest test_x.TestGroup::test_also: no seeds"]


def test_pytest_failures_read_from_a_real_junit_report(tmp_path):
    xml = junit_of(tmp_path, "test_y.py",
                   "import pytest\n"
                   "def test_ok():\n    pass\n"
                   "def test_bad():\n    assert 1 == 2, 'one is not two'\n"
                   "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture broke')\n"
                   "def test_err(broken):\n    pass\n", 1)
    got = commands.pytest_failures(xml)
    assert [g.split(": ")[0] for g in got] == ["pytest test_y::test_bad",
                                               "pytest test_y::test_err"]
    assert "one is not two" in got[0] and "fixture broke" in got[1]
    assert commands.fail_summary([]) == []


LOG = """\
==> bookworm: apt install ...
  SKIP: not a result: test-package's summary lines are its own
test-package bookworm amd64:
  PASS: lintian
  SKIP: userland: tcyc.c: seed documents absent
  NOTE: not run on bookworm (trixie and sid run them): no-headers, autopkgtest
test-package trixie amd64:
  PASS: lintian
  FAIL: upgrade: broke
test-package bookworm amd64: PASS (100s)
test-package trixie   amd64: FAIL (90s)
""".splitlines()


def test_package_summary_keeps_skip_lines():
    assert commands.package_summary(LOG) == [x for x in LOG if not x.startswith("==>")]


def test_package_skips_name_their_chroot():
    assert commands.package_skips(LOG[2:]) == [
        "test-package bookworm amd64: userland: tcyc.c: seed documents absent"]


PKG_FAILS = LOG + """\
test-package sid amd64: error: chroot: debootstrap failed
test-package sid      amd64: FAIL (12s)
""".splitlines() + ["test-package bookworm arm64: FAIL (no verdict: the unit's process ended"
                    " without one, its output above)"]


def test_package_failures_name_their_chroot():
    """A FAIL line with its chroot; an error; a verdict FAIL only for a chroot that said
    nothing else (trixie's verdict repeats its FAIL line: not listed twice)."""
    assert commands.package_failures(PKG_FAILS) == [
        "test-package trixie amd64: upgrade: broke",
        "test-package sid amd64: error: chroot: debootstrap failed",
        "test-package bookworm arm64: FAIL (no verdict: the unit's process ended without one,"
        " its output above)"]


def test_all_failures_name_a_part_that_failed_silently():
    assert commands.all_failures([], 4, [], [], 0) == [
        "pytest: exit status 4, no test named (its output above)"]
    assert commands.all_failures(["pytest a::b: x"], 1, ["test-qemu sid/arm64 c: y"],
                                 [], 1) == [
        "pytest a::b: x", "test-qemu sid/arm64 c: y",
        "test-package: exit status 1, no check named (its log above)"]
    assert commands.all_failures([], 0, [], LOG, 1) == [
        "test-package trixie amd64: upgrade: broke"]
    assert commands.all_failures([], 0, [], LOG, 0) == [
        "test-package trixie amd64: upgrade: broke"]


def test_a_collection_error_names_its_module(tmp_path):
    xml = junit_of(tmp_path, "test_z.py", "import no_such_module_here\n", 2)
    got = commands.pytest_failures(xml)
    assert got == ["pytest test_z: collection failure: ModuleNotFoundError: No module named "
                   "'no_such_module_here'"], got


def test_skip_summary():
    assert commands.skip_summary([]) == ["skipped checks: none"]
    assert commands.skip_summary(["pytest a::b: why", "test-qemu trixie/arm64 c: why"]) == [
        "skipped checks (2; not counted as passed):",
        "  SKIP pytest a::b: why", "  SKIP test-qemu trixie/arm64 c: why"]


def test_without_the_seeds_nothing_is_built_from_them(tmp_path, monkeypatch):
    monkeypatch.setattr(guest, "ARTICLE", tmp_path / "shared" / "article.txt")
    monkeypatch.setattr(seeds, "TCYC", tmp_path / "shared" / "tcyc.c")
    monkeypatch.setattr(guest, "SEED_MHZ", tmp_path / "shared" / "mhz.c")
    assert guest.seed_mhz_missing() == (f"seed document {tmp_path}/shared/mhz.c absent "
                                        "(the seeds sit beside the project's own checkout, "
                                        "not in a clone)")
    assert guest.seed_mhz_program(tmp_path) is None
    assert guest.article_missing() == (f"seed document {tmp_path}/shared/article.txt absent "
                                       "(the seeds sit beside the project's own checkout, "
                                       "not in a clone)")
    assert guest.article_program(tmp_path) is None
    assert seeds.restored_tcyc() is None
    assert list(tmp_path.iterdir()) == []


def test_with_the_seed_the_article_program_is_built(tmp_path, monkeypatch):
    seed = tmp_path / "article.txt"
    seed.write_text("prose\n#define _GNU_SOURCE\nint main(void) { return 0; }\n4 注意事项\n")
    monkeypatch.setattr(guest, "ARTICLE", seed)
    assert guest.article_missing() is None
    src = guest.article_program(tmp_path)
    assert src == tmp_path / "article.c"
    assert src.read_text() == "#define _GNU_SOURCE\nint main(void) { return 0; }\n"


def test_seed_paths_sit_beside_the_checkout():
    """What a plain clone lacks is only ever outside the repository."""
    repo = Path(commands.REPO)
    for path in (guest.ARTICLE, guest.SEED_MHZ, seeds.SEEDS, seeds.TCYC):
        assert not path.is_relative_to(repo) and path.is_relative_to(repo.parent / "shared")
