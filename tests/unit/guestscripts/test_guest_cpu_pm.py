"""tests/guest/arm64-debug/05-cpu-pm.sh on the host, against fakes of cpuidle's usage
counts, the module's check counters and generations, the reader, modprobe/rmmod and the
command line: CPU PM ran on each CPU (its idle state above WFI was entered), the PM exits
reopened access (interventions beyond the timer's checks), no read after an idle period
faulted; then, nobody let in, no idle-state entry moved the module-wide generation. SKIP
without an idle state, FAIL if the guest booted with one (spmu.idle_states=1).

What this cannot show is the guest's: that the fakes' numbers are what cpuidle and the
module really count (see the audit's report, and the guest run)."""

from pathlib import Path

from .test_guest_scripts import GUEST, fake, run_script_text, stage

SCRIPT = "arm64-debug/05-cpu-pm.sh"
# The debug run's command line for arm64 (pmubuild/guests/debugrun.py), less the idle-state flag
# the tests that want it add.
CMDLINE = "console=ttyAMA0 spmu.debug=1 initcall_debug"
DMESG = """\
[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]
[    0.011000] psci: PSCIv1.1 detected in firmware.
[    0.520000] cpuidle: using governor menu
[    9.000000] simple-pmu: version 1
"""


def cpu_pm(tmp: Path, per_sleep: tuple[int, int, int] = (25, 24, 0), states=2,
           read: str = "echo cpu=$1 result=ok first=1 second=2\n",
           per_cpu: dict | None = None, first_sleep_idle: bool = True,
           gen_per_sleep: int = 0, entries_in_2s: int | dict | None = None, width: int = 64,
           cmdline: str = CMDLINE, first_sleep: tuple[int, int, int] = (0, 0, 0),
           gen_per_read_sleep: int = 0, gen_moves_in_2s: dict | None = None,
           modprobe_rc: tuple[int, int] = (0, 0), rmmod_rc: int = 0):
    """Two CPUs with `states` cpuidle states; each `sleep 0.1` (the reads' sleeps) adds
    (idle-state entries, interventions, timer checks) to each CPU (`first_sleep` once more
    at the first) and moves its generation `gen_per_sleep // 2 + gen_per_read_sleep`
    times; the `sleep 2` of the generation phase adds `entries_in_2s` entries to each CPU
    (an int, or one per CPU; by default the per-sleep count) and moves each CPU's
    generation `gen_per_sleep // 2` times plus `gen_moves_in_2s[cpu]`. A move gives the
    CPU's cpuN/generation a new, higher number, which the module-wide generation (the
    largest) takes. Any other sleep does nothing. pmuread runs `read`; the n-th modprobe
    exits modprobe_rc[n], rmmod exits rmmod_rc; /proc/cmdline reads `cmdline`. The calls
    of pmuread and sleep go to tmp/calls, of modprobe and rmmod to tmp/modlog."""
    bindir = stage(tmp, {0: 1, 1: 1})
    sysfs = tmp / "sysfs"
    (sysfs / "generation").write_text("1000\n")
    (sysfs / "event_width").write_text(f"{width}\n")
    (tmp / "cmdline").write_text(cmdline + "\n")
    for c in (0, 1):
        (sysfs / f"cpu{c}").mkdir()
        for attr in ("interventions", "checks"):
            (sysfs / f"cpu{c}" / attr).write_text("3\n")
        (sysfs / f"cpu{c}" / "generation").write_text(f"{1000 - c}\n")
        for s in range(states[c] if isinstance(states, dict) else states):
            d = tmp / "cpu" / f"cpu{c}" / "cpuidle" / f"state{s}"
            d.mkdir(parents=True)
            (d / "usage").write_text("7\n")

    def add(f: Path, n: int) -> str:
        return f'f={f}; [ -f $f ] && echo $(($(cat $f) + {n})) > $f\n'

    def moves(c: int, n: int) -> str:
        return (f'for _ in $(seq 1 {n}); do n=$(($(cat {sysfs}/generation) + 1)); '
                f'echo $n > {sysfs}/generation; echo $n > {sysfs}/cpu{c}/generation; done\n')

    def usage(c: int, s: int) -> Path:
        return tmp / "cpu" / f"cpu{c}" / "cpuidle" / f"state{s}" / "usage"

    reads, in_2s = "", ""
    if not first_sleep_idle:
        reads += f'[ -f {tmp}/slept ] || {{ touch {tmp}/slept; exit 0; }}\n'
    for c in (0, 1):
        du, di, dk = (per_cpu or {}).get(c, per_sleep)
        once = f'[ -f {tmp}/once ] || {{ {add(usage(c, 1), first_sleep[0]).strip()}; ' \
               f'{add(sysfs / f"cpu{c}" / "interventions", first_sleep[1]).strip()}; ' \
               f'{add(sysfs / f"cpu{c}" / "checks", first_sleep[2]).strip()}; }}\n'
        reads += (once + add(usage(c, 1), du) + add(usage(c, 0), 99)
                  + add(sysfs / f"cpu{c}" / "interventions", di)
                  + add(sysfs / f"cpu{c}" / "checks", dk)
                  + moves(c, gen_per_sleep // 2 + gen_per_read_sleep))
        e = (du if entries_in_2s is None else entries_in_2s if isinstance(entries_in_2s, int)
             else entries_in_2s[c])
        in_2s += (add(usage(c, 1), e) + add(usage(c, 0), 99)
                  + moves(c, gen_per_sleep // 2 + (gen_moves_in_2s or {}).get(c, 0)))
    reads += f"touch {tmp}/once\n"
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "modprobe", f'echo "modprobe $*" >> {tmp}/modlog\n'
                             f'n=$(grep -c ^modprobe {tmp}/modlog)\n'
                             f'[ $n = 1 ] && exit {modprobe_rc[0]}\nexit {modprobe_rc[1]}\n')
    fake(bindir, "rmmod", f'echo "rmmod $*" >> {tmp}/modlog\n'
                          + (f'echo "rmmod: ERROR: could not remove module $1: Operation not '
                             f'permitted" >&2\nexit {rmmod_rc}\n' if rmmod_rc else ""))
    (tmp / "dmesg.out").write_text(DMESG)
    fake(bindir, "dmesg", f"cat {tmp / 'dmesg.out'}\n")
    fake(bindir, "pmuread", f'echo "pmuread $*" >> {tmp}/calls\n' + read)
    fake(bindir, "sleep", f'echo "sleep $*" >> {tmp}/calls\n'
                          f'case "$1" in\n0.1)\n{reads};;\n2)\n{in_2s};;\nesac\n')
    text = (GUEST / SCRIPT).read_text()
    assert text.count("/proc/cmdline") == 1
    return run_script_text(tmp, text.replace("/proc/cmdline", str(tmp / "cmdline")))


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
    # Each of the 20 rounds reads on every CPU, then idles 0.1 s; then one 2 s idle.
    assert (tmp_path / "calls").read_text().splitlines() == [
        "pmuread 0", "pmuread 1", "sleep 0.1"] * 20 + ["sleep 2"]


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
    """At least 10 idle-state entries on each CPU in the 2 s sleep: 9 on each fail (cpu0
    named first), 10 on each pass; 10 and 9 fail too, and 20 and 0 (see
    test_nineteen_idle_entries_in_the_generation_phase_fail)."""
    r = cpu_pm(tmp_path, entries_in_2s=9)
    assert r.returncode == 1
    assert ("FAIL: cpu0: 9 idle-state entries in 2 s of sleep, nobody let in: CPU PM "
            "hardly ran") in r.stdout
    (tmp_path / "b").mkdir()
    assert cpu_pm(tmp_path / "b", entries_in_2s=10).returncode == 0


def test_no_idle_state_though_booted_with_one_fails(tmp_path):
    """The debug run boots arm64 with the idle-state tree and says so (spmu.idle_states=1):
    cpuidle not taking the state is then a failure, not a SKIP."""
    r = cpu_pm(tmp_path, states=1, cmdline=CMDLINE + " spmu.idle_states=1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.strip() == (
        "FAIL: cpu0 has no idle state beyond WFI, yet the guest booted with one "
        "(spmu.idle_states=1): cpuidle-psci did not take it: [    0.011000] psci: PSCIv1.1 "
        "detected in firmware.\n[    0.520000] cpuidle: using governor menu")
    assert not (tmp_path / "modlog").exists()
    # debugrun passes spmu.idle_states=0 where it gives no tree: a SKIP there.
    (tmp_path / "b").mkdir()
    r = cpu_pm(tmp_path / "b", states=1, cmdline=CMDLINE + " spmu.idle_states=0")
    assert r.returncode == 77 and r.stdout.startswith("SKIP: cpu0 has no idle state")


def test_booted_with_the_idle_state_and_having_it_passes(tmp_path):
    r = cpu_pm(tmp_path, cmdline=CMDLINE + " spmu.idle_states=1")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_failed_first_load_fails_and_unloads_nothing(tmp_path):
    r = cpu_pm(tmp_path, modprobe_rc=(1, 0))
    assert r.returncode == 1
    # The log's last three lines.
    assert r.stdout == ("FAIL: modprobe events=0x11 everyone=1 recheck_ms=10000: "
                        + "".join(DMESG.splitlines(keepends=True)[1:]))
    assert (tmp_path / "modlog").read_text().splitlines() == [
        "modprobe simple-pmu events=0x11 everyone=1 recheck_ms=10000"]


def test_a_failed_reload_fails_and_unloads_nothing_more(tmp_path):
    """The first load's unload is done (trap - EXIT): a failed second load leaves no rmmod
    of a module that is not there."""
    r = cpu_pm(tmp_path, modprobe_rc=(0, 1))
    assert r.returncode == 1
    assert r.stdout == ("FAIL: modprobe events=0x11 recheck_ms=10000: "
                        + "".join(DMESG.splitlines(keepends=True)[1:]))
    assert (tmp_path / "modlog").read_text().splitlines() == [
        "modprobe simple-pmu events=0x11 everyone=1 recheck_ms=10000", "rmmod simple-pmu",
        "modprobe simple-pmu events=0x11 recheck_ms=10000"]


def test_a_refused_unload_after_the_reads_fails(tmp_path):
    r = cpu_pm(tmp_path, rmmod_rc=1)
    assert r.returncode == 1
    assert "FAIL: rmmod after the reads" in r.stdout
    assert "could not remove module simple-pmu: Operation not permitted" in r.stderr
    assert "modprobe simple-pmu events=0x11 recheck_ms=10000" not in (
        tmp_path / "modlog").read_text()


def test_interventions_at_exactly_half_the_entries_pass(tmp_path):
    """40 entries in 20 sleeps: 20 interventions beyond the timer's pass, 19 fail."""
    r = cpu_pm(tmp_path, per_sleep=(2, 1, 0), entries_in_2s=10)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cpu0: idle-state entries 40, interventions 20, timer checks 0;" in r.stdout
    (tmp_path / "b").mkdir()
    r = cpu_pm(tmp_path / "b", per_sleep=(2, 1, 0), first_sleep=(0, 0, 1), entries_in_2s=10)
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1] == (
        "FAIL: cpu0: 20 interventions, 1 timer checks, 40 idle-state entries: the PM exits "
        "did not reopen access")


def test_generation_moves_while_everyone_is_let_in_are_not_counted(tmp_path):
    """Reopened access moves the generation while everyone is let in (three times per
    CPU per sleep here, cpu1's last); only the phase with nobody let in must leave it, the
    module-wide one, where it was."""
    r = cpu_pm(tmp_path, gen_per_read_sleep=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "sysfs" / "generation").read_text() == "1120\n"
    assert (tmp_path / "sysfs" / "cpu0" / "generation").read_text() == "1117\n"


def test_one_new_generation_on_any_cpu_fails(tmp_path):
    """One move on either CPU alone (the other's number unchanged): the module-wide
    generation shows it."""
    for c in (0, 1):
        (tmp_path / f"{c}").mkdir()
        r = cpu_pm(tmp_path / f"{c}", gen_moves_in_2s={c: 1})
        assert r.returncode == 1
        assert r.stdout.strip().splitlines()[-1] == (
            "FAIL: the generation moved 1 times across 50 idle-state entries (nobody let in, "
            "64-bit counters): a PM exit with no reload gave a new generation")


def test_nineteen_idle_entries_in_the_generation_phase_fail(tmp_path):
    r = cpu_pm(tmp_path, entries_in_2s={0: 10, 1: 9})
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1] == (
        "FAIL: cpu1: 9 idle-state entries in 2 s of sleep, nobody let in: CPU PM hardly ran")
    # Enough in all, none on one CPU: its PM exits were never seen.
    (tmp_path / "b").mkdir()
    r = cpu_pm(tmp_path / "b", entries_in_2s={0: 20, 1: 0})
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1] == (
        "FAIL: cpu1: 0 idle-state entries in 2 s of sleep, nobody let in: CPU PM hardly ran")
