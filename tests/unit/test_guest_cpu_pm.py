"""tests/guest/arm64-debug/05-cpu-pm.sh on the host, against fakes of cpuidle's usage
counts, the module's check counters and the reader: CPU PM ran on each CPU (its idle
state above WFI was entered), the PM exits reopened access (interventions beyond the
timer's checks), no read after an idle period faulted; SKIP without an idle state."""

from pathlib import Path

from tests.unit.test_guest_scripts import fake, run_script, stage

SCRIPT = "arm64-debug/05-cpu-pm.sh"


def cpu_pm(tmp: Path, per_sleep: tuple[int, int, int] = (25, 24, 0), states=2,
           read: str = "echo cpu=$1 result=ok first=1 second=2\n",
           per_cpu: dict | None = None, first_sleep_idle: bool = True,
           gen_per_sleep: int = 0, entries_in_2s: int | None = None, width: int = 64):
    """Two CPUs with `states` cpuidle states; each `sleep` adds (idle-state entries,
    interventions, timer checks) to both CPUs and `gen_per_sleep` to the module-wide
    generation; the `sleep 2` of the generation phase adds `entries_in_2s` entries to
    each CPU instead, if given; pmuread runs `read`."""
    bindir = stage(tmp, {0: 1, 1: 1})
    sysfs = tmp / "sysfs"
    (sysfs / "generation").write_text("1000\n")
    (sysfs / "event_width").write_text(f"{width}\n")
    for c in (0, 1):
        (sysfs / f"cpu{c}").mkdir()
        for attr in ("interventions", "checks"):
            (sysfs / f"cpu{c}" / attr).write_text("3\n")
        for s in range(states[c] if isinstance(states, dict) else states):
            d = tmp / "cpu" / f"cpu{c}" / "cpuidle" / f"state{s}"
            d.mkdir(parents=True)
            (d / "usage").write_text("7\n")
    add = "" if entries_in_2s is None else "".join(
        f'[ "$1" = 2 ] && f={tmp / "cpu" / f"cpu{c}" / "cpuidle/state1/usage"} && '
        f'echo $(($(cat $f) + {entries_in_2s})) > $f\n' for c in (0, 1)
    ) + '[ "$1" = 2 ] && exit 0\n'
    add += "" if first_sleep_idle else f'[ -f {tmp}/slept ] || {{ touch {tmp}/slept; exit 0; }}\n'
    add += "".join(
        f'f={f}; [ -f $f ] && echo $(($(cat $f) + {n})) > $f\n'
        for c in (0, 1) for du, di, dk in [(per_cpu or {}).get(c, per_sleep)]
        for f, n in ((sysfs / "generation", gen_per_sleep // 2),
                     (tmp / "cpu" / f"cpu{c}" / "cpuidle/state1/usage", du),
                                     (tmp / "cpu" / f"cpu{c}" / "cpuidle/state0/usage", 99),
                                     (sysfs / f"cpu{c}" / "interventions", di),
                                     (sysfs / f"cpu{c}" / "checks", dk)))
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "modprobe", f'echo "modprobe $*" >> {tmp}/modlog\n')
    fake(bindir, "rmmod", f'echo "rmmod $*" >> {tmp}/modlog\n')
    fake(bindir, "dmesg", "echo kernel says\n")
    fake(bindir, "pmuread", read)
    fake(bindir, "sleep", add)
    return run_script(tmp, SCRIPT)


def test_pm_exits_that_reopen_access_pass(tmp_path):
    r = cpu_pm(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    # 20 sleeps: state1 only (WFI's own entries are not CPU PM), 20 x 24 interventions.
    assert r.stdout.strip().splitlines()[-1] == (
        "20 reads on each CPU after idle periods, none faulted; cpu0: idle-state entries "
        "500, interventions 480, timer checks 0; cpu1: idle-state entries 500, "
        "interventions 480, timer checks 0; nobody let in: generation unchanged across 50 "
        "idle-state entries")
    assert (tmp_path / "modlog").read_text().splitlines() == [
        "modprobe simple-pmu events=0x11 everyone=1 recheck_ms=10000", "rmmod simple-pmu",
        "modprobe simple-pmu events=0x11 recheck_ms=10000", "rmmod simple-pmu"]


def test_no_idle_state_beyond_wfi_skips(tmp_path):
    r = cpu_pm(tmp_path, states=1)
    assert r.returncode == 77, r.stdout + r.stderr
    assert r.stdout.startswith("SKIP: cpu0 has no idle state beyond WFI")
    assert not (tmp_path / "modlog").exists()


def test_no_cpuidle_at_all_skips(tmp_path):
    assert cpu_pm(tmp_path, states=0).returncode == 77


def test_an_idle_state_never_entered_fails(tmp_path):
    r = cpu_pm(tmp_path, per_sleep=(0, 24, 0))
    assert r.returncode == 1
    assert "FAIL: cpu0 entered its idle states above WFI 0 times in 20 sleeps" in r.stdout
    assert "rmmod simple-pmu" in (tmp_path / "modlog").read_text()


def test_too_few_interventions_beyond_the_timers_fail(tmp_path):
    """Half the idle-state entries (500 in 20 sleeps) must show as interventions the
    timer's checks do not explain."""
    r = cpu_pm(tmp_path, per_sleep=(25, 12, 0))
    assert r.returncode == 1
    assert ("FAIL: cpu0: 240 interventions, 0 timer checks, 500 idle-state entries: the PM "
            "exits did not reopen access") in r.stdout
    (tmp_path / "b").mkdir()
    assert cpu_pm(tmp_path / "b", per_sleep=(25, 13, 0)).returncode == 0
    (tmp_path / "c").mkdir()
    r = cpu_pm(tmp_path / "c", per_sleep=(25, 20, 8))
    assert r.returncode == 1 and "400 interventions, 160 timer checks" in r.stdout


def test_a_read_that_faults_after_idle_fails(tmp_path):
    r = cpu_pm(tmp_path, read='[ "$1" = 1 ] && { echo cpu=1 result=sigill; exit 1; }\n'
                              "echo cpu=$1 result=ok\n")
    assert r.returncode == 1
    assert "FAIL: read 0 on cpu1 after an idle period: cpu=1 result=sigill" in r.stdout


def test_a_fault_after_an_idle_period_fails(tmp_path):
    """The first read passes; the 5th (after 4 sleeps) faults: the reads after idle count."""
    r = cpu_pm(tmp_path, read=f'n=$(cat {tmp_path}/n 2>/dev/null || echo 0); '
                              f'echo $((n + 1)) > {tmp_path}/n\n'
                              '[ $n -ge 8 ] && { echo cpu=$1 result=sigill; exit 1; }\n'
                              'echo cpu=$1 result=ok\n')
    assert r.returncode == 1
    assert "FAIL: read 4 on cpu0 after an idle period: cpu=0 result=sigill" in r.stdout


def test_any_failed_read_fails_not_only_sigill(tmp_path):
    r = cpu_pm(tmp_path, read="echo cpu=$1 result=not-increasing first=2 second=1; exit 3\n")
    assert r.returncode == 1 and "result=not-increasing" in r.stdout


def test_nineteen_idle_entries_in_twenty_sleeps_fail(tmp_path):
    # 19 of the 20 sleeps enter the state once (the first does not).
    r = cpu_pm(tmp_path, per_sleep=(1, 1, 0), first_sleep_idle=False)
    assert r.returncode == 1 and "above WFI 19 times in 20 sleeps" in r.stdout
    (tmp_path / "b").mkdir()
    assert cpu_pm(tmp_path / "b", per_sleep=(1, 1, 0), entries_in_2s=10).returncode == 0


def test_cpu1_checked_too(tmp_path):
    r = cpu_pm(tmp_path, per_cpu={1: (25, 0, 0)})
    assert r.returncode == 1 and "FAIL: cpu1: 0 interventions" in r.stdout
    (tmp_path / "b").mkdir()
    r = cpu_pm(tmp_path / "b", per_cpu={1: (0, 24, 0)})
    assert r.returncode == 1 and "FAIL: cpu1 entered its idle states above WFI 0" in r.stdout


def test_cpu1_without_the_state_skips(tmp_path):
    r = cpu_pm(tmp_path, states={0: 2, 1: 1})
    assert r.returncode == 77 and r.stdout.startswith("SKIP: cpu1 has no idle state")


def test_a_pm_exit_that_reloaded_nothing_must_not_move_the_generation(tmp_path):
    """Nobody let in, 64-bit counters: one new generation in 50 idle-state entries fails."""
    r = cpu_pm(tmp_path, gen_per_sleep=2)
    assert r.returncode == 1
    assert ("FAIL: the generation moved 2 times across 50 idle-state entries (nobody let "
            "in, 64-bit counters): a PM exit with no reload gave a new generation") in r.stdout
    assert (tmp_path / "modlog").read_text().splitlines()[-1] == "rmmod simple-pmu"


def test_32_bit_counters_are_not_this_guests(tmp_path):
    r = cpu_pm(tmp_path, width=32)
    assert r.returncode == 1 and "FAIL: event_width 32: this guest wants 64-bit" in r.stdout


def test_too_few_idle_entries_in_the_generation_phase_fail(tmp_path):
    """At least 10 idle-state entries per CPU in the 2 s sleep: 19 on 2 CPUs fail."""
    r = cpu_pm(tmp_path, entries_in_2s=9)
    assert r.returncode == 1
    assert ("FAIL: 18 idle-state entries in 2 s of sleep on 2 CPUs, nobody let in: CPU PM "
            "hardly ran") in r.stdout
    (tmp_path / "b").mkdir()
    assert cpu_pm(tmp_path / "b", entries_in_2s=10).returncode == 0
