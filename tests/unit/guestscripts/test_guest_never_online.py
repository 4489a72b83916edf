"""tests/guest/arm64-kvm/05-never-online.sh on the host, against fakes of the module's sysfs
(what it publishes for cpu1 before and after cpu1 first comes online), pmuread, modprobe and
rmmod: it must fail when a never-online CPU publishes anything but -1 (the 0 of a fresh
per-CPU area: the guest showed it with the unpublish removed), when cpu1 gets no counters
or no access once online, when the guest did not boot with cpu1 offline, and it must bring
cpu1 online whatever happens (10-kvm-vcpu after it needs two CPUs)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from .test_guest_scripts import GUEST, fake, run_script_text, stage

SCRIPT = "arm64-kvm/05-never-online.sh"
TEXT = (GUEST / SCRIPT).read_text()
C1_LINE = "C1=/sys/devices/system/cpu/cpu1\n"


@dataclass
class Cpu1:
    before: tuple[str, str, str] = ("-1", "-1", "0")  # cycle_index, event_index, user_access
    after: tuple[str, str, str] = ("31", "0", "1")  # once cpu1 is online
    readable: bool = True  # pmuread 1 once cpu1 is online
    online_at_boot: str | None = "0"  # None: no cpu1/online at all
    rmmod_rc: int = 0


def run05(tmp: Path, cpu1: Cpu1, text: str = TEXT):
    bindir = stage(tmp, {} if cpu1.online_at_boot is None else {1: int(cpu1.online_at_boot)})
    sysfs, online = tmp / "sysfs", tmp / "cpu" / "cpu1" / "online"
    sysfs.rmdir()
    files = "".join(
        f"echo '{v}' > {sysfs}/cpu1/{name}\necho '{w}' > {sysfs}/cpu1/{name}.online\n"
        for name, v, w in zip(("cycle_index", "event_index", "user_access"), cpu1.before,
                              cpu1.after, strict=True))
    fake(bindir, "modprobe", f'echo "modprobe $*" >> {tmp}/modlog\n'
         f"mkdir -p {sysfs}/cpu0 {sysfs}/cpu1\necho 100 > {sysfs}/recheck_ms\n"
         f"echo 31 > {sysfs}/cpu0/cycle_index\necho 0 > {sysfs}/cpu0/event_index\n{files}")
    fake(bindir, "rmmod", f'echo "rmmod $*" >> {tmp}/modlog\nexit {cpu1.rmmod_rc}\n')
    # What the module publishes for cpu1 depends on whether cpu1 came online since the
    # load (its online callback): the `.online` values once the online file says 1.
    fake(bindir, "cat", f'case "$1" in {sysfs}/cpu1/*)\n'
         f'\t[ "$(/bin/cat {online})" = 1 ] && [ -e "$1.online" ] && set -- "$1.online" ;;\n'
         f'esac\nexec /bin/cat "$@"\n')
    fake(bindir, "pmuread",
         f'[ "$1" = 1 ] && [ "$(/bin/cat {online})" = 1 ] && {"true" if cpu1.readable else "false"}'
         ' && { echo "cpu=1 result=ok first=1 second=2"; exit 0; }\n'
         'echo "cpu=$1 result=sigill"; exit 1\n')
    fake(bindir, "pmuspin", "echo ok=1 sigill=0\n")
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "dmesg", "")
    assert text.count(C1_LINE) == 1
    return run_script_text(tmp, text.replace(C1_LINE, f"C1={tmp / 'cpu' / 'cpu1'}\n"))


def online_now(tmp: Path) -> str:
    return (tmp / "cpu" / "cpu1" / "online").read_text().strip()


def test_passes_when_cpu1_publishes_minus_one_until_online(tmp_path):
    r = run05(tmp_path, Cpu1())
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == ("cpu1 never online: cycle_index -1, event_index -1, "
                                         "closed; online: 31/0, readable")
    assert online_now(tmp_path) == "1"
    assert (tmp_path / "modlog").read_text().splitlines() == ["modprobe simple-pmu",
                                                              "rmmod simple-pmu"]


@pytest.mark.parametrize(("before", "why"), [
    (("0", "0", "0"), "cycle_index '0', event_index '0' (want -1 and -1)"),
    (("-1", "0", "0"), "cycle_index '-1', event_index '0' (want -1 and -1)"),
    (("0", "-1", "0"), "cycle_index '0', event_index '-1' (want -1 and -1)"),
    (("-1", "-1", "1"), "cpu1, never online: user_access 1"),
], ids=["fresh-per-cpu-area", "event-only", "cycles-only", "open"])
def test_fails_when_the_never_online_cpu_publishes_a_counter(tmp_path, before, why):
    r = run05(tmp_path, Cpu1(before=before))
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr
    assert online_now(tmp_path) == "1"  # the EXIT trap: 10-kvm-vcpu needs cpu1


@pytest.mark.parametrize(("after", "readable", "why"), [
    (("-1", "-1", "0"), True, "cpu1 online: cycle_index '-1', event_index '-1'"),
    (("31", "-1", "1"), True, "cpu1 online: cycle_index '31', event_index '-1'"),
    (("31", "0", "1"), False, "cpu1 online: not readable: cpu=1 result=sigill"),
], ids=["not-published", "event-not-published", "not-readable"])
def test_fails_when_cpu1_is_not_served_once_online(tmp_path, after, readable, why):
    r = run05(tmp_path, Cpu1(after=after, readable=readable))
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr


def test_fails_when_the_guest_did_not_boot_with_maxcpus_1(tmp_path):
    r = run05(tmp_path, Cpu1(online_at_boot="1"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: cpu1 is online: the guest did not boot with maxcpus=1" in r.stdout
    assert not (tmp_path / "modlog").exists()


def test_fails_without_a_second_cpu(tmp_path):
    r = run05(tmp_path, Cpu1(online_at_boot=None))
    assert r.returncode == 1 and "this guest needs a second, hotpluggable CPU" in r.stdout


def test_fails_when_rmmod_fails(tmp_path):
    r = run05(tmp_path, Cpu1(rmmod_rc=1))
    assert r.returncode == 1 and "FAIL: rmmod" in r.stdout, r.stdout + r.stderr


# (name, OLD replaced by NEW, the cpu1 that notices). The real script fails there, the
# mutant passes; "trap-dropped" is noticed by cpu1 left offline after a failure.
MUTATIONS = [
    ("before-check-dropped", '[ "$ci" = -1 ] && [ "$ei" = -1 ] ||', ": ||",
     Cpu1(before=("0", "0", "0"))),
    ("before-event-check-dropped", '[ "$ci" = -1 ] && [ "$ei" = -1 ] ||', '[ "$ci" = -1 ] ||',
     Cpu1(before=("-1", "0", "0"))),
    ("after-check-dropped", '[ "$ci" -ge 0 ] && [ "$ei" -ge 0 ] ||', ": ||",
     Cpu1(after=("-1", "-1", "0"))),
    ("readable-check-dropped", 'out=$(pmuread 1) || fail', 'out=$(pmuread 1) || :',
     Cpu1(readable=False)),
    ("rmmod-unchecked", 'rmmod $MOD || fail "rmmod"', "rmmod $MOD", Cpu1(rmmod_rc=1)),
]


@pytest.mark.parametrize(("name", "old", "new", "cpu1"), MUTATIONS,
                         ids=[m[0] for m in MUTATIONS])
def test_mutation_is_noticed(tmp_path, name, old, new, cpu1):
    assert TEXT.count(old) == 1, f"{name}: {old!r} not once in 05"
    (tmp_path / "real").mkdir()
    (tmp_path / "mutant").mkdir()
    real = run05(tmp_path / "real", cpu1)
    mutant = run05(tmp_path / "mutant", cpu1, TEXT.replace(old, new))
    assert real.returncode == 1, real.stdout + real.stderr
    assert mutant.returncode == 0, f"{name} not noticed: " + mutant.stdout + mutant.stderr


def test_trap_brings_cpu1_online_after_a_failure(tmp_path):
    """Without the EXIT trap, a failure before the online step leaves cpu1 offline for
    10-kvm-vcpu."""
    trap = "trap 'echo 1 > $C1/online 2>/dev/null' EXIT\n"
    assert TEXT.count(trap) == 1
    r = run05(tmp_path, Cpu1(before=("0", "0", "0")), TEXT.replace(trap, ""))
    assert r.returncode == 1 and online_now(tmp_path) == "0"
