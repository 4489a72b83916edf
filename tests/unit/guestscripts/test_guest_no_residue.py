"""tests/guest/arm64/41-no-residue.sh on the host, against a small model of cpu1's PMU, the
module and perf (fakes of modprobe, rmmod, perfhold, pmuspin, pmuraw): it must pass with
the driver that zeroes unheld counters at every check, on 5.10 and 6.12, and fail where
the guest showed a broken driver fails (no zeroing: both; zeroing at grant only: 5.10),
and when what it relies on is missing (perfhold's counters not seen, access not open
again, perfhold's events not all counting, perfhold failing). Each check of the script is
then removed or broken in turn (MUTATIONS): a scenario here must notice.

The model (WORLD): N=6 event counters and PMCCNTR (31). The module holds PMCCNTR and the
event counters in `events`; perfhold's four cycles events take the next four free event
counters and read 2^31 + 1 and up (where arm_pmu starts a counting event; on PMUv3p5, as
QEMU's, the upper half is set too: the guests print 18446744071...). Perf withdraws
user access when it installs or releases an event from 5.17 (`withdraws`), never on 5.10.
A check of the module's (a pmuspin on cpu1 of at least recheck_ms) opens access and zeroes
released counters as `driver` says: every-check (this commit), at-grant (the code before:
only when it opens access again), never, no-regrant (access stays as perf left it),
skip-K (zeroes all but counter K), stops-after-release (checks do nothing once perfhold's
events are gone), clobbers-held (zeroes perfhold's live counters too)."""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .test_guest_scripts import GUEST, fake, run_script_text, stage

SCRIPT = "arm64/41-no-residue.sh"
TEXT = (GUEST / SCRIPT).read_text()

WORLD = r'''
import fcntl, json, os, shutil, sys
from contextlib import contextmanager
from pathlib import Path

T = Path(sys.argv[1])
CFG = json.loads((T / "world.json").read_text())
SYSFS, ST = T / "sysfs", T / "state.json"
N, PERF_AT = CFG["n"], CFG["perf_counters"]


@contextmanager
def state():
    # settle runs two pmuspins at once: one state change at a time.
    with open(T / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        s = json.loads(ST.read_text()) if ST.exists() else {
            "access": "closed", "perf": "none", "zeroed": []}
        yield s
        ST.write_text(json.dumps(s))


def modlog(what):
    with open(T / "modlog", "a") as f:
        f.write(what + "\n")


def check(s):
    # The module's check on cpu1 (drivers/arm64/pmu_access.c, spmu_arch_sync_access).
    drv = CFG["driver"]
    if not SYSFS.is_dir() or drv == "no-regrant" or (
            drv == "stops-after-release" and s["perf"] == "released"):
        return
    granting = s["access"] == "closed"
    s["access"] = "open"
    if drv == "clobbers-held" and s["perf"] == "live":
        s["clobbered"] = True  # zeroed the counters perfhold's events hold
    zero = (drv in ("every-check", "stops-after-release") or drv.startswith("skip-")
            or (drv == "at-grant" and granting))
    if zero and s["perf"] == "released":
        skip = int(drv[5:]) if drv.startswith("skip-") else None
        s["zeroed"] = [c for c in PERF_AT if c != skip]


def raw(s, n):
    words = []
    for c in [*range(n), 31]:
        if s["access"] != "open":
            v = "sigill"
        elif c in CFG["held"]:
            v = 5000 + c  # the module's own counters count
        elif c in PERF_AT and s["perf"] == "live":
            v = 2147483649 + c if CFG["perf_visible"] else 0
            v = 1200 + c if v and s.get("clobbered") else v  # counted since the zeroing
        elif c in PERF_AT and s["perf"] == "released" and c not in s["zeroed"]:
            v = 2147490000 + c  # what perfhold's event left there
        else:
            v = 0
        words.append(f"{c}={v}")
    return " ".join(words)


def perfhold(args):
    with state() as s:
        offline = (T / "cpu" / "cpu1" / "online").read_text().strip() == "0"
        if CFG["perfhold_open_fails"] or offline:
            os.close(0)  # gone before the script's trap writes to it
            print("perfhold: perf_event_open: No such device", file=sys.stderr)
            sys.exit(2)
        if args != ["1", "4", "on"]:
            sys.exit(9)
        s["perf"] = "live"
        if CFG["withdraws"]:
            s["access"] = "closed"
    print("opened 4", flush=True)
    for line in iter(sys.stdin.readline, ""):
        if line.startswith("state"):
            print(f"running={CFG['running']} of 4", flush=True)
        elif line.startswith("quit"):
            with state() as s:
                s["perf"] = "released"
                if CFG["withdraws"]:
                    s["access"] = "closed"
            sys.exit(CFG["perfhold_rc"])
        else:
            print("unknown", flush=True)


def main(tool, args):
    if tool == "perfhold":
        return perfhold(args)
    with state() as s:
        if tool == "modprobe":
            modlog("modprobe " + " ".join(args))
            for c in (0, 1):
                d = SYSFS / f"cpu{c}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "cycle_index").write_text(f"{CFG['cycle_index']}\n")
                (d / "event_index").write_text(CFG["event_index"] + "\n")
            (SYSFS / "recheck_ms").write_text("100\n")
            (SYSFS / "num_counters").write_text(f"{N}\n")
            s["access"] = "open"  # granted at load (unheld counters zeroed then)
        elif tool == "rmmod":
            modlog("rmmod " + " ".join(args))
            shutil.rmtree(SYSFS, ignore_errors=True)
            s["access"] = "closed"
        elif tool == "pmuspin":
            rech = int((SYSFS / "recheck_ms").read_text()) if SYSFS.is_dir() else 100
            if args[0] == "1" and int(args[1]) >= rech:
                check(s)
            print("ok=1 sigill=0")
        elif tool == "pmuraw":
            if args[0] != "1":
                print(f"pmuraw: want cpu1, got {args}", file=sys.stderr)
                sys.exit(2)
            print(raw(s, int(args[1])))


main(sys.argv[2], sys.argv[3:])
'''


@dataclass
class World:
    kernel: str = "5.10"  # "6.12": perf withdraws access at an install and a release
    driver: str = "every-check"
    events: tuple[int, ...] = (0,)  # the event counters the module's events hold
    cycle_index: int = 31
    n: int = 6
    running: int = 4
    perf_visible: bool = True
    perfhold_rc: int = 0
    perfhold_open_fails: bool = False
    loaded: bool = False  # loaded before 41 (else 41 loads and unloads it)
    cpu1_online: int = 1  # perfhold cannot open its events on an offline cpu1 (ENODEV)

    def perf_counters(self) -> list[int]:
        return [c for c in range(self.n) if c not in self.events][:4]

    def config(self) -> dict:
        held = [c for c in (self.cycle_index, *self.events) if c >= 0]
        return {
            "driver": self.driver, "withdraws": self.kernel != "5.10", "n": self.n,
            "held": held, "perf_counters": self.perf_counters(),
            "cycle_index": self.cycle_index,
            "event_index": " ".join(map(str, self.events)), "running": self.running,
            "perf_visible": self.perf_visible, "perfhold_rc": self.perfhold_rc,
            "perfhold_open_fails": self.perfhold_open_fails}


def run41(tmp: Path, world: World, text: str = TEXT):
    bindir = stage(tmp, {1: world.cpu1_online})
    (tmp / "sysfs").rmdir()
    (tmp / "world.py").write_text(WORLD)
    (tmp / "world.json").write_text(json.dumps(world.config()))
    for tool in ("modprobe", "rmmod", "pmuspin", "pmuraw", "perfhold"):
        fake(bindir, tool, f'exec {sys.executable} {tmp / "world.py"} {tmp} {tool} "$@"\n')
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "dmesg", "")
    if world.loaded:
        subprocess.run([str(bindir / "modprobe"), "simple-pmu"], check=True)
        (tmp / "modlog").write_text("")
    assert text.count("/tmp/res.") == 8
    return run_script_text(tmp, text.replace("/tmp/res.", f"{tmp}/res."))


def modlog(tmp: Path) -> list[str]:
    p = tmp / "modlog"
    return p.read_text().splitlines() if p.exists() else []


# --- the driver as committed passes; a driver that leaves residue fails -----------------

@pytest.mark.parametrize("kernel", ["5.10", "6.12"])
def test_passes_with_zeroing_at_every_check(tmp_path, kernel):
    r = run41(tmp_path, World(kernel=kernel))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].startswith(
        "cpu1: perfhold's counters read 1=2147483650 2=2147483651 3=2147483652 "
        "4=2147483653 while it ran;")
    # 41 loaded the module: it unloads it.
    assert modlog(tmp_path) == ["modprobe simple-pmu", "rmmod simple-pmu"]


@pytest.mark.parametrize("kernel", ["5.10", "6.12"])
def test_fails_without_zeroing(tmp_path, kernel):
    r = run41(tmp_path, World(kernel=kernel, driver="never"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("FAIL: after perfhold released them, cpu1's counters still read 1=2147490001 "
            "2=2147490002 3=2147490003 4=2147490004 (module holds 31 0 ;") in r.stdout


def test_zeroing_at_grant_only_fails_on_5_10_passes_on_6_12(tmp_path):
    """The old placement: 6.12 withdraws access at the release and the grant zeroes; 5.10
    never withdraws, so nothing zeroes the released counters."""
    (tmp_path / "a").mkdir()
    r = run41(tmp_path / "a", World(kernel="5.10", driver="at-grant"))
    assert r.returncode == 1 and "still read 1=2147490001" in r.stdout, r.stdout + r.stderr
    (tmp_path / "b").mkdir()
    r = run41(tmp_path / "b", World(kernel="6.12", driver="at-grant"))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("skip", [1, 2, 3, 4])
def test_a_single_counter_left_is_found(tmp_path, skip):
    """One released counter not zeroed: found whichever it is (1 and 3 are also digits of
    the 31 in `held`: the matching must be by whole words)."""
    r = run41(tmp_path, World(driver=f"skip-{skip}"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"still read {skip}=214749000{skip} (module holds" in r.stdout


def test_fails_when_access_is_not_open_after_perfhold(tmp_path):
    """Open while perfhold runs, withdrawn at its release (6.12) and not opened again:
    every read faults, which shows no residue but proves nothing: the last check fails."""
    r = run41(tmp_path, World(kernel="6.12", driver="stops-after-release"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: every unheld counter faulted on cpu1" in r.stdout


def test_fails_when_access_never_opens_after_perfholds_install(tmp_path):
    r = run41(tmp_path, World(kernel="6.12", driver="no-regrant"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: perfhold's counters not visible on cpu1" in r.stdout


def test_several_events_are_all_held(tmp_path):
    """Two module events (event_index "0 2"): both counters are the module's, counting,
    and not residue."""
    r = run41(tmp_path, World(events=(0, 2)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(held: 31 0 2 )" in r.stdout


def test_fails_when_perfholds_counters_are_not_seen(tmp_path):
    r = run41(tmp_path, World(perf_visible=False))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: perfhold's counters not visible on cpu1 (held: 31 0 )" in r.stdout


def test_fails_when_perfholds_events_do_not_all_count(tmp_path):
    r = run41(tmp_path, World(running=3))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: perfhold's events are not all counting: running=3 of 4" in r.stdout


def test_fails_when_perfhold_exits_with_an_error(tmp_path):
    r = run41(tmp_path, World(perfhold_rc=3))
    # Not 1: the EXIT trap then dies of SIGPIPE (see the weaknesses below).
    assert r.returncode != 0 and "FAIL: perfhold exited 3" in r.stdout, r.stdout + r.stderr


def test_fails_when_perfhold_cannot_open(tmp_path):
    r = run41(tmp_path, World(perfhold_open_fails=True))
    assert r.returncode != 0, r.stdout + r.stderr
    assert "perf_event_open: No such device" in r.stderr


def test_fails_when_cpu1_is_offline(tmp_path):
    r = run41(tmp_path, World(cpu1_online=0))
    assert r.returncode != 0, r.stdout + r.stderr
    assert ("FAIL: cpu1 is offline" in r.stdout if "cpu1 is offline" in TEXT
            else "perf_event_open: No such device" in r.stderr), r.stdout + r.stderr


def test_leaves_a_loaded_module_loaded(tmp_path):
    r = run41(tmp_path, World(loaded=True))
    assert r.returncode == 0, r.stdout + r.stderr
    assert modlog(tmp_path) == []


# --- the review's findings (SIGPIPE in the trap and in `| grep -q`, live counters zeroed) --

def code_lines(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if not ln.lstrip().startswith("#")]


DEAD = [(World(perfhold_open_fails=True), "FAIL: perfhold: "),
        (World(perfhold_rc=3), "FAIL: perfhold exited 3")]


@pytest.mark.parametrize(("world", "why"), DEAD, ids=["cannot-open", "exit-3"])
def test_a_dead_perfhold_still_unloads_the_module(tmp_path, world, why):
    r = run41(tmp_path, world)
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr
    assert modlog(tmp_path) == ["modprobe simple-pmu", "rmmod simple-pmu"]


def test_no_pipe_into_grep_q():
    """`unheld ... | grep -q` under pipefail: grep leaving at its first match can kill
    unheld's next echo (SIGPIPE, status 141; 4 in 3000 runs under busybox): lib.sh's has()."""
    assert not [ln for ln in code_lines(TEXT) if "| grep -q" in ln]


def test_fails_when_the_module_zeroes_perfholds_live_counters(tmp_path):
    r = run41(tmp_path, World(driver="clobbers-held"))
    assert r.returncode == 1 and "below 2^31" in r.stdout, r.stdout + r.stderr


# --- every check of 41 is needed: broken, a scenario above notices ----------------------

# (name, the one code line holding MARKER, OLD in it replaced by NEW (None: the line
# dropped), the world that notices, what 41 must do there). The mutant does the opposite.
MUTATIONS = [
    ("live-check-dropped", '[ -n "$live" ] ||', '[ -n "$live" ]', ":",
     World(perf_visible=False), "fail"),
    ("left-check-dropped", '[ -z "$left" ] ||', '[ -z "$left" ]', ":",
     World(driver="never"), "fail"),
    ("left-check-inverted", '[ -z "$left" ] ||', '[ -z "$left" ]', '[ -n "$left" ]',
     World(), "pass"),
    ("held-matched-as-substring", '*" ${_kv%%=*} "*)', '*" ${_kv%%=*} "*)',
     '*"${_kv%%=*}"*)', World(driver="skip-1"), "fail"),
    ("held-without-event-index", 'held=" $(cpu_attr 1 cycle_index)',
     " $(cpu_attr 1 event_index)", "", World(), "pass"),
    ("held-first-event-only", 'held=" $(cpu_attr 1 cycle_index)',
     "$(cpu_attr 1 event_index)", "$(published 1 1)", World(events=(0, 2)), "pass"),
    ("open-check-dropped", "every unheld counter faulted", None, None,
     World(kernel="6.12", driver="stops-after-release"), "fail"),
    ("settle-dropped", "=settle", None, None, World(), "pass"),
    ("after-reads-fewer-counters", "after=$(pmuraw 1 $N)", "$N)", "$((N - 2)))",
     World(driver="skip-4"), "fail"),
    ("running-check-dropped", '"running=4 of 4" ]', '[ "$l" = "running=4 of 4" ]', ":",
     World(running=3), "fail"),
    ("perfhold-status-ignored", "wait $hold ||", ' || fail "perfhold exited $?"', "",
     World(perfhold_rc=3), "fail"),
    ("spin-before-read-dropped", "pmuspin 1 $(($(cat $SYSFS/recheck_ms) * 3))", None, None,
     World(kernel="6.12"), "pass"),
]


def mutate(text: str, marker: str, old: str | None, new: str | None) -> str:
    """MARKER "=X": the line that is X alone."""
    lines = text.split("\n")
    at = [i for i, ln in enumerate(lines) if not ln.lstrip().startswith("#") and (
        ln.strip() == marker[1:] if marker.startswith("=") else marker in ln)]
    assert len(at) == 1, f"{marker!r} on {len(at)} code lines of 41"
    line = lines[at[0]]
    if old is None:
        lines[at[0]] = ":"
    else:
        assert line.count(old) == 1, f"{old!r} not once in {line!r}"
        lines[at[0]] = line.replace(old, new)
    return "\n".join(lines)


@pytest.mark.parametrize(("name", "marker", "old", "new", "world", "want"), MUTATIONS,
                         ids=[m[0] for m in MUTATIONS])
def test_mutation_is_noticed(tmp_path, name, marker, old, new, world, want):
    text = mutate(TEXT, marker, old, new)
    (tmp_path / "real").mkdir()
    (tmp_path / "mutant").mkdir()
    real = run41(tmp_path / "real", world)
    mutant = run41(tmp_path / "mutant", world, text)
    assert (real.returncode == 0) == (want == "pass"), real.stdout + real.stderr
    assert (mutant.returncode == 0) != (want == "pass"), \
        f"{name} not noticed: " + mutant.stdout + mutant.stderr
