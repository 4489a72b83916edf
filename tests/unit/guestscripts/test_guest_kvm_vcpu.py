"""tests/guest/arm64-kvm/10-kvm-vcpu.sh on the host, against fakes of kvmspin (which
moves cpu1's check counters as the driver would while the vCPU runs), the readers,
modprobe/rmmod, /dev/kvm and the command line: how many of the checks on cpu1 must have
been deferred (all but two; three in four on a debug kernel, spmu.debug=1), that only
the others may grant access, and that cpu1 reads again afterwards.

What this cannot show is the guest's: that the driver really defers (and does not write
PMUSERENR_EL0) while KVM holds it, and how many checks a real debug kernel defers."""

from pathlib import Path

from .test_guest_scripts import GUEST, fake, run_script_text, stage

SCRIPT = "arm64-kvm/10-kvm-vcpu.sh"
PRODUCTION = "console=ttyAMA0 spmu.mode=test maxcpus=1"
DEBUG = PRODUCTION + " spmu.debug=1"


def kvm_vcpu(tmp: Path, checks: int, deferred: int, interventions: int = 0,
             cmdline: str = PRODUCTION, kvm: bool = True, spin: str | None = None,
             read_rc: int = 0):
    """cpu1's counters start at (checks 7, kvm_deferrals 5, interventions 2); kvmspin adds
    `checks`, `deferred` and `interventions` to them and prints `spin` (by default a clean
    run: runs=40 exits_mmio=40). pmuread exits read_rc. /dev/kvm is a character device
    unless `kvm` is false. Calls of the fakes go to tmp/calls."""
    bindir = stage(tmp)
    sysfs = tmp / "sysfs"
    (sysfs / "recheck_ms").write_text("100\n")
    (sysfs / "cpu1").mkdir()
    start = {"checks": 7, "kvm_deferrals": 5, "interventions": 2}
    for attr, n in start.items():
        (sysfs / "cpu1" / attr).write_text(f"{n}\n")
    (tmp / "cmdline").write_text(cmdline + "\n")
    log = f'echo "$(basename $0) $*" >> {tmp}/calls\n'
    adds = "".join(f"f={sysfs}/cpu1/{attr}; echo $(($(cat $f) + {n})) > $f\n"
                   for attr, n in (("checks", checks), ("kvm_deferrals", deferred),
                                   ("interventions", interventions)))
    fake(bindir, "kvmspin", log + adds + f"echo '{spin or 'runs=40 exits_mmio=40'}'\n")
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "modprobe", log)
    fake(bindir, "rmmod", log)
    fake(bindir, "pmuspin", log + "echo ok\n")
    fake(bindir, "pmuread", log + f"echo cpu=$1 result={'ok' if not read_rc else 'sigill'}\n"
                                  f"exit {read_rc}\n")
    text = (GUEST / SCRIPT).read_text()
    assert text.count("/proc/cmdline") == 1 and text.count("[ -c /dev/kvm ]") == 1
    text = text.replace("/proc/cmdline", str(tmp / "cmdline")).replace(
        "[ -c /dev/kvm ]", f"[ -c {'/dev/null' if kvm else tmp / 'no-kvm'} ]")
    return run_script_text(tmp, text)


def last(r) -> str:
    return r.stdout.strip().splitlines()[-1]


def test_all_but_two_checks_deferred_passes(tmp_path):
    r = kvm_vcpu(tmp_path, checks=10, deferred=8, interventions=2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert last(r) == ("vCPU on cpu1 for 2 s (40 runs): 8 of 10 checks deferred, no write; "
                       "readable after")
    # The vCPU ran on cpu1 for 2 s; both CPUs were settled (two check periods, at once:
    # in either order) before the read on cpu1; the module was loaded and unloaded around.
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[:2] == ["modprobe simple-pmu", "kvmspin 1 2"]
    assert sorted(calls[2:4]) == ["pmuspin 0 200", "pmuspin 1 200"]
    assert calls[4:] == ["pmuread 1", "rmmod simple-pmu"]


def test_three_checks_not_deferred_fail_on_a_production_kernel(tmp_path):
    r = kvm_vcpu(tmp_path, checks=10, deferred=7)
    assert r.returncode == 1
    assert last(r) == "FAIL: 7 of 10 checks on cpu1 deferred while the vCPU ran"


def test_a_debug_kernel_wants_three_in_four(tmp_path):
    """The debug kernel's measured 19 of 22 passes there, and not on a production kernel;
    6 of 8 is the least that passes, 5 of 7 fails."""
    for name, cmdline, checks, deferred, ok in (
            ("measured", DEBUG, 22, 19, True), ("production", PRODUCTION, 22, 19, False),
            ("bound", DEBUG, 8, 6, True), ("below", DEBUG, 7, 5, False)):
        (tmp_path / name).mkdir()
        r = kvm_vcpu(tmp_path / name, checks=checks, deferred=deferred, cmdline=cmdline)
        if ok:
            assert r.returncode == 0, (name, r.stdout + r.stderr)
            assert last(r) == (f"vCPU on cpu1 for 2 s (40 runs): {deferred} of {checks} checks "
                               "deferred, no write; readable after")
        elif cmdline == DEBUG:
            assert r.returncode == 1 and last(r) == (
                f"FAIL: {deferred} of {checks} checks on cpu1 deferred while the vCPU ran (3 "
                "in 4 wanted on a debug kernel)"), name
        else:
            assert r.returncode == 1 and last(r) == (
                f"FAIL: {deferred} of {checks} checks on cpu1 deferred while the vCPU ran"), name


def test_a_debug_kernel_still_wants_the_interventions_bounded(tmp_path):
    r = kvm_vcpu(tmp_path, checks=8, deferred=6, interventions=3, cmdline=DEBUG)
    assert r.returncode == 1
    assert last(r) == "FAIL: 3 interventions on cpu1 from 2 checks without a vCPU"


def test_interventions_beyond_the_checks_without_a_vcpu_fail(tmp_path):
    r = kvm_vcpu(tmp_path, checks=10, deferred=9, interventions=2)
    assert r.returncode == 1
    assert last(r) == "FAIL: 2 interventions on cpu1 from 1 checks without a vCPU"


def test_too_few_checks_fail(tmp_path):
    r = kvm_vcpu(tmp_path, checks=4, deferred=4)
    assert r.returncode == 1 and last(r) == "FAIL: only 4 checks on cpu1 in 2 s of a busy vCPU"
    (tmp_path / "b").mkdir()
    assert kvm_vcpu(tmp_path / "b", checks=5, deferred=5).returncode == 0


def test_a_vcpu_that_did_not_run_cleanly_fails(tmp_path):
    for n, spin in enumerate(("runs=40 exits_mmio=39", "runs=0 exits_mmio=0", "oops")):
        (tmp_path / f"{n}").mkdir()
        r = kvm_vcpu(tmp_path / f"{n}", checks=10, deferred=10, spin=spin)
        assert r.returncode == 1
        assert last(r) == f"FAIL: the vCPU did not run cleanly: {spin}"


def test_no_kvm_fails(tmp_path):
    r = kvm_vcpu(tmp_path, checks=10, deferred=10, kvm=False)
    assert r.returncode == 1
    assert last(r) == "FAIL: no /dev/kvm: the kernel did not boot at EL2 with KVM"
    assert not (tmp_path / "calls").exists()


def test_cpu1_unreadable_after_the_vcpu_fails(tmp_path):
    r = kvm_vcpu(tmp_path, checks=10, deferred=10, read_rc=1)
    assert r.returncode == 1
    assert last(r) == "FAIL: cpu1 not readable after the vCPU: cpu=1 result=sigill"
