"""test-qemu's logic without kernels or QEMU: the guest runner replaced by fakes that
print what a guest would print on its console."""

import threading
import time
from pathlib import Path

import pytest

from pmubuild import commands
from pmubuild.common.errors import PipelineError
from pmubuild.guests import guest, matrixrun, qemu
from pmubuild.trees import kernels, matrix

RELEASES = {"bullseye": "5.10.0-46", "bookworm": "6.1.0-57", "bookworm-backports": "6.12.0-0",
            "trixie": "6.12.0-40", "sid": "7.0.0-1"}


def console_of(names, verdicts=None, after_done="", missing=(), extra=()):
    """What the init prints for a guest reporting `names` (minus `missing`, plus `extra`)."""
    verdicts = verdicts or {}
    lines = ["[    0.0] Booting Linux", "@@SPMU BOOTED release=x machine=y cpus=2"]
    for n in [*(n for n in names if n not in missing), *extra]:
        v = verdicts.get(n, "PASS")
        if v == "FAIL":
            lines.append(f"@@SPMU OUT {n} | FAIL: {n} broke")
        lines.append(f"@@SPMU TEST {n} {v} {n} said so")
    lines += ["@@SPMU DMESG-BEGIN", "@@SPMU DMESG-END", "@@SPMU DONE"]
    return "\n".join(lines) + "\n" + after_done


class FakeSteps:
    """Steps whose guests report what `guest_says(suite, arch, profile, names)` returns."""

    def __init__(self, guest_says=None, prepare_error=None, delays=None, root=None):
        self.guest_says = guest_says or (lambda s, a, p, names: console_of(names))
        self.prepare_error = prepare_error or {}
        self.delays = delays or {}
        self.root = root or guest.GUEST_TESTS
        self.boots = []  # (release, profile, params)
        self.lock = threading.Lock()

    def steps(self) -> matrixrun.Steps:
        return matrixrun.Steps(prepare=self.prepare, initramfs=self.initramfs,
                               boot=self.boot, manifest=self.manifest)

    def manifest(self, arch, profile):
        return guest.manifest(arch, profile, root=self.root)

    def prepare(self, apt, suite, arch):
        if (suite.name, arch) in self.prepare_error:
            raise PipelineError(self.prepare_error[(suite.name, arch)])
        time.sleep(self.delays.get((suite.name, arch), 0))
        release = f"{RELEASES[suite.name]}-{arch}"
        fk = kernels.FetchedKernel(suite.name, arch, release, "1", Path("/k"),
                                   Path(f"/img/{release}"))
        return fk, Path(f"/build/{release}/simple-pmu.ko")

    def initramfs(self, spec, apt, out):
        return Path(f"{out}:{spec.release}:{spec.profile}")

    def boot(self, arch, image, initrd, mode, timeout, *, icount, el2, params):
        _, release, profile = str(initrd).split(":")
        with self.lock:
            self.boots.append((release, profile, params))
        suite = next(s for s, r in RELEASES.items() if release.startswith(r))
        text = self.guest_says(suite, arch, profile, guest.manifest(arch, profile, root=self.root))
        times = [float(i) for i in range(text.count("\n") + 1)]
        return qemu.GuestRun.of(text, 3.0, False, 0, times, start=-0.5)


def combo(name, arch):
    return (matrix.SUITES[name], arch)


def test_clean_arm64_kernel_runs_three_guests_and_reports_every_script():
    fake = FakeSteps()
    r = matrixrun.run_combo(object(), *combo("bookworm", "arm64"), 600, 50, fake.steps())
    assert r.ok and r.error is None and r.release == "6.1.0-57-arm64"
    assert [p for _, p, _ in fake.boots] == ["", "stress", "kvm"]
    # The kvm guest boots with cpu1 never online (its 05-never-online checks that).
    assert [params for _, _, params in fake.boots] == [
        "spmu.stress_cycles=50", "spmu.stress_cycles=50", "spmu.stress_cycles=50 maxcpus=1"]
    names = [t.name for t in r.results]
    assert "load" in names and "stress/load-unload-cycles" in names and "kvm/kvm-vcpu" in names
    assert names.count("kernel-log-clean") == 1 and "stress/kernel-log-clean" in names
    assert [n for n, _ in r.timings] == [
        "prepare", *(f"{g} guest{part}" for g in ("main", "stress", "kvm")
                     for part in ("", ": initramfs", ": boot"))]
    assert dict(r.timings)["kvm guest: boot"] == 1.5  # BOOTED at 1.0, QEMU started at -0.5
    assert all(t.seconds == 1.0 for t in r.results)  # one line apart on the fake clock


def test_a_script_that_did_not_report_fails_the_kernel():
    fake = FakeSteps(lambda s, a, p, names: console_of(names, missing=("hotplug",)))
    r = matrixrun.run_combo(object(), *combo("bookworm", "arm64"), 600, 50, fake.steps())
    assert all(t.verdict == "PASS" for t in r.results)  # every result it did get is green
    assert not r.ok
    assert "main guest: 1 of" in r.error and "did not report: hotplug" in r.error


def test_unexpected_report_fails_the_kernel():
    fake = FakeSteps(lambda s, a, p, names: console_of(names, extra=("stray.sh",)))
    r = matrixrun.run_combo(object(), *combo("bookworm", "amd64"), 600, 50, fake.steps())
    assert not r.ok and "not in the manifest: stray.sh" in r.error


def copy_guest_tests(root: Path) -> Path:
    for d in ("common", "amd64", "arm64", "arm64-stress", "arm64-kvm"):
        (root / d).mkdir(parents=True)
        for f in (guest.GUEST_TESTS / d).iterdir():
            (root / d / f.name).write_bytes(f.read_bytes())
    return root


@pytest.mark.parametrize("damage", ["empty", "renamed", "misnamed"])
def test_damaged_arm64_test_directory_is_never_green(tmp_path, damage):
    """The guest would report only kernel-log-clean (or nothing): a manifest from the
    damaged directory must not turn that into a green kernel."""
    root = copy_guest_tests(tmp_path / "guest")
    arm64 = root / "arm64"
    if damage == "empty":
        for f in arm64.iterdir():
            f.unlink()
    elif damage == "renamed":
        arm64.rename(root / "arm64-main")
    else:
        (arm64 / "20-load.sh").rename(arm64 / "load.sh")
    fake = FakeSteps(root=root)
    r = matrixrun.run_combo(object(), *combo("bookworm", "arm64"), 600, 50, fake.steps())
    assert not r.ok
    want = {"empty": "holds no test script", "renamed": "no such directory",
            "misnamed": "load.sh: guest test scripts are named NN-name.sh"}[damage]
    assert want in r.error


def test_panic_after_done_fails_the_kernel():
    fake = FakeSteps(lambda s, a, p, names: console_of(
        names, after_done="[   50.0] Kernel panic - not syncing: Attempted to kill init!\n"))
    r = matrixrun.run_combo(object(), *combo("trixie", "amd64"), 600, 50, fake.steps())
    assert not r.ok and "although the run reached its end" in r.error


EARLY_OOPS = ("[    1.4] Oops: int3: 0000 [#1] SMP NOPTI\n"
              "[    1.5] Kernel panic - not syncing: Fatal exception in interrupt\n")


def test_a_crash_before_the_init_boots_once_more_and_says_so(capsys):
    boots = []

    def says(s, a, p, names):
        boots.append(p)
        return EARLY_OOPS if len(boots) == 1 else console_of(names)
    fake = FakeSteps(says)
    r = matrixrun.run_combo(object(), *combo("sid", "amd64"), 600, 50, fake.steps())
    assert r.ok and len(boots) == 2
    assert r.retries == ["main guest: booted again: the kernel crashed before the guest's "
                         "init ([    1.4] Oops: int3: 0000 [#1] SMP NOPTI)"]
    assert any(" NOTE main guest: booted again" in ln for ln in matrixrun.report([r]))


def test_a_crash_before_the_init_twice_fails_the_kernel():
    fake = FakeSteps(lambda s, a, p, names: EARLY_OOPS)
    r = matrixrun.run_combo(object(), *combo("sid", "amd64"), 600, 50, fake.steps())
    assert not r.ok and "guest kernel panicked or oopsed" in r.error
    assert len(fake.boots) == 2


def test_a_crash_after_the_init_started_is_never_booted_again():
    def says(s, a, p, names):
        return console_of(names).replace("@@SPMU DMESG-BEGIN", EARLY_OOPS + "@@SPMU DMESG-BEGIN")
    fake = FakeSteps(says)
    r = matrixrun.run_combo(object(), *combo("sid", "amd64"), 600, 50, fake.steps())
    assert not r.ok and not r.retries and len(fake.boots) == 1


def test_prepare_failure_is_the_kernels_error():
    fake = FakeSteps(prepare_error={("sid", "amd64"): "build for 7.0.0-1 failed: boom"})
    r = matrixrun.run_combo(object(), *combo("sid", "amd64"), 600, 50, fake.steps())
    assert not r.ok and r.results == [] and r.release == "?" and "boom" in r.error
    assert fake.boots == []


def test_matrix_keeps_combo_order_and_picks_stress_cycles():
    """Results come back in the order asked, whatever order the kernels finish in; the
    default suite (bookworm) alone gets the full stress cycles."""
    combos = matrix.expand("all", "all")
    # The first combos take longest: with two at a time they finish last.
    delays = {(s.name, a): 0.02 * (len(combos) - i) for i, (s, a) in enumerate(combos)}
    fake = FakeSteps(delays=delays)
    results = matrixrun.test_matrix(combos, jobs=2, steps=fake.steps(), apt=object())
    assert [(r.suite, r.arch) for r in results] == [(s.name, a) for s, a in combos]
    cycles = {(rel, p): params for rel, p, params in fake.boots if p == "stress"}
    assert cycles == {
        ("5.10.0-46-arm64", "stress"): "spmu.stress_cycles=30",
        ("6.1.0-57-arm64", "stress"): "spmu.stress_cycles=200",
        ("6.12.0-0-arm64", "stress"): "spmu.stress_cycles=30",
        ("6.12.0-40-arm64", "stress"): "spmu.stress_cycles=30",
        ("7.0.0-1-arm64", "stress"): "spmu.stress_cycles=30"}
    assert all(r.ok for r in results)


def test_matrix_starts_the_longest_kernels_first():
    """arm64 kernels (three TCG guests each) start before amd64 ones (one short guest),
    the one with the full stress cycles first of all, so that no long kernel runs alone
    at the end; one at a time shows the order they started in."""
    combos = matrix.expand("all", "all")
    fake = FakeSteps()
    results = matrixrun.test_matrix(combos, jobs=1, steps=fake.steps(), apt=object())
    started = list(dict.fromkeys(release for release, _, _ in fake.boots))
    assert started == ["6.1.0-57-arm64", "5.10.0-46-arm64", "6.12.0-0-arm64",
                       "6.12.0-40-arm64", "7.0.0-1-arm64", "5.10.0-46-amd64",
                       "6.1.0-57-amd64", "6.12.0-0-amd64", "6.12.0-40-amd64",
                       "7.0.0-1-amd64"]
    assert [(r.suite, r.arch) for r in results] == [(s.name, a) for s, a in combos]


def run_command(capsys, fake, kernel="all", arch="all"):
    ok = commands.test_qemu(kernel, arch, 600, 2, steps=fake.steps(), apt=object())
    return ok, capsys.readouterr().out


def test_exit_status_clean(capsys):
    ok, out = run_command(capsys, FakeSteps(), "bookworm", "all")
    assert ok
    assert "0 failed" in out and "slowest guest scripts" in out
    # Each test line carries its wall time; each kernel its stages'.
    assert "bookworm            amd64  6.1.0-57-amd64           PASS    1.0s json:" in out
    assert ("time 0s (prepare 0s, main guest 0s [initramfs 0s, boot 2s], stress guest 0s "
            "[initramfs 0s, boot 2s], kvm guest 0s [initramfs 0s, boot 2s])") in out


def test_exit_status_one_failed_script(capsys):
    fake = FakeSteps(lambda s, a, p, names: console_of(
        names, {"exact-counts": "FAIL"} if (s, a, p) == ("sid", "arm64", "") else {}))
    ok, out = run_command(capsys, fake)
    assert not ok
    assert "1 failed" in out
    assert "FAIL    2.0s exact-counts" in out and "| FAIL: exact-counts broke" in out


def test_failures_are_handed_on_with_the_end_of_their_output(capsys):
    """A CI log keeps only its tail: `invoke test` repeats each failure there, with the
    last lines of the failing script's output."""
    fake = FakeSteps(lambda s, a, p, names: console_of(
        names, {"exact-counts": "FAIL"} if (s, a, p) == ("sid", "arm64", "") else {}))
    fails: list[str] = []
    ok = commands.test_qemu("all", "all", 600, 2, steps=fake.steps(), apt=object(),
                            fails=fails)
    capsys.readouterr()
    assert not ok
    assert fails[0].startswith("test-qemu sid/arm64 exact-counts: ")
    assert "    | FAIL: exact-counts broke" in fails[1:]
    assert all(f.startswith("    | ") for f in fails[1:])
    assert commands.fail_summary(fails)[:2] == ["failed checks (1):",
                                                 f"  FAIL {fails[0]}"]


def test_a_guest_error_of_several_lines_is_listed_whole():
    r = matrixrun.ComboResult("sid", "arm64", "7.2", [], "main guest: hung\n"
                              "stress guest: 1 of 1 scripts reported", 1.0)
    assert matrixrun.failed([r]) == ["test-qemu sid/arm64 (guest): main guest: hung",
                                     "    | stress guest: 1 of 1 scripts reported"]


def test_a_skipped_script_is_neither_passed_nor_failed(capsys):
    """A guest script that cannot run here (exit 77: e.g. the article's seed absent from a
    plain clone) reports SKIP with its reason: the run stays green, the script is counted
    skipped, not passed, and its reason is handed on for `invoke test`'s summary."""
    fake = FakeSteps(lambda s, a, p, names: console_of(
        names, {"article-program": "SKIP"} if a == "arm64" else {}))
    skips: list[str] = []
    ok = commands.test_qemu("trixie", "all", 600, 2, steps=fake.steps(), apt=object(),
                            skips=skips)
    out = capsys.readouterr().out
    assert ok
    total = len(guest.manifest("amd64")) + sum(len(guest.manifest("arm64", p.name))
                                               for p in guest.PROFILES["arm64"])
    assert f"{total - 1} passed, 0 failed, 1 skipped" in out
    assert "SKIP  " in out and "article-program: article-program said so" in out
    assert skips == ["test-qemu trixie/arm64 article-program: article-program said so"]


def test_exit_status_missing_report_only(capsys):
    """Every result PASS, but one guest left a script out: the command fails."""
    fake = FakeSteps(lambda s, a, p, names: console_of(
        names, missing=("json",) if (s, a) == ("bullseye", "amd64") else ()))
    ok, out = run_command(capsys, fake)
    assert not ok
    assert "1 failed" in out and "FAIL (guest): main guest: 1 of 5" in out


def test_exit_status_prepare_failure(capsys):
    fake = FakeSteps(prepare_error={("trixie", "arm64"): "signing failed"})
    ok, out = run_command(capsys, fake, "trixie", "all")
    assert not ok and "signing failed" in out


def test_manifest_of_the_repository():
    """The real directories: what the host expects each guest to report, in run order."""
    m = guest.manifest("arm64")
    assert m[0] == "sigill-before-load" and m[-1] == "kernel-log-clean"
    assert "load" in m and "unload" in m and len(m) == len(set(m))
    assert guest.manifest("arm64", "stress") == ("load-unload-cycles", "kernel-log-clean")


def test_two_scripts_with_one_name_are_refused(tmp_path):
    root = copy_guest_tests(tmp_path / "guest")
    (root / "amd64" / "77-refuse-without-perfmon.sh").write_text("exit 0\n")
    with pytest.raises(PipelineError, match="share a name: refuse-without-perfmon"):
        guest.manifest("amd64", root=root)


def test_manifest_problem():
    assert guest.manifest_problem(("a", "b"), ["a", "b"]) is None
    assert guest.manifest_problem(("a", "b"), ["b", "a", "a"]) == "reported more than once: a"
    assert guest.manifest_problem(("a", "b", "c"), ["a", "x"]) == (
        "2 of 3 expected guest scripts did not report: b, c; "
        "reported but not in the manifest: x")
