"""tests/guest/arm64/25-idle-timer.sh on the host, against fakes of the module's check
counters: an idle window where a CPU stayed busy (the tests before left work behind) is
measured again, and only a CPU woken in every one of three windows, as a timer that
wakes the CPU would be, fails."""

from pathlib import Path

from .test_guest_scripts import fake, run_script, stage

SCRIPT = "arm64/25-idle-timer.sh"


def idle_timer(tmp: Path, idle: list[tuple[int, int]]):
    """Two CPUs; pmuspin adds 40 checks to its CPU; each `sleep 3` adds the next pair of
    idle checks (cpu0, cpu1) from `idle`, the last pair again when they run out."""
    bindir = stage(tmp)
    sysfs = tmp / "sysfs"
    for c in (0, 1):
        (sysfs / f"cpu{c}").mkdir()
        (sysfs / f"cpu{c}" / "checks").write_text("0\n")
    (sysfs / "recheck_ms").write_text("10\n")
    (tmp / "idle").write_text("".join(f"{a} {b}\n" for a, b in idle))
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "modprobe", f"echo \"modprobe $*\" >> {tmp}/modlog\n")
    fake(bindir, "rmmod", f"echo \"rmmod $*\" >> {tmp}/modlog\n")
    fake(bindir, "pmuspin", f'f={sysfs}/cpu$1/checks; echo $(($(cat $f) + 40)) > $f\n')
    fake(bindir, "sleep",
         f'n=$(cat {tmp}/sleeps 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {tmp}/sleeps\n'
         f'set -- $(sed -n "${{n}}p" {tmp}/idle); [ -n "$1" ] || set -- $(tail -n 1 {tmp}/idle)\n'
         f'for c in 0 1; do f={sysfs}/cpu$c/checks; eval "a=\\${{$((c + 1))}}"; '
         f'echo $(($(cat $f) + a)) > $f; done\n')
    return run_script(tmp, SCRIPT)


def test_quiet_cpus_pass_at_once(tmp_path):
    r = idle_timer(tmp_path, [(5, 12)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cpu0=5" in r.stdout and "cpu1=12" in r.stdout and "(try 1)" in r.stdout
    assert (tmp_path / "modlog").read_text().splitlines() == [
        "rmmod simple-pmu", "modprobe simple-pmu recheck_ms=10", "rmmod simple-pmu",
        "modprobe simple-pmu"]


def test_a_busy_window_is_measured_again(tmp_path):
    r = idle_timer(tmp_path, [(5, 90), (4, 11)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "idle try 1: cpu0=5 (timer interrupts 0) cpu1=90" in r.stdout
    assert "(try 2)" in r.stdout


def test_a_timer_that_wakes_the_cpu_fails(tmp_path):
    r = idle_timer(tmp_path, [(5, 280)])
    assert r.returncode == 1
    assert "FAIL: at least 75 checks in each of 3 idle windows on cpu1;" in r.stdout
    assert r.stdout.count("idle try") == 3


def test_each_cpu_quiet_once_is_enough(tmp_path):
    """Busy in turns (cpu0, then cpu1, then cpu0): each CPU was quiet in one window, so no
    timer woke it; measured three times, it passes."""
    r = idle_timer(tmp_path, [(90, 5), (5, 90), (90, 5)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(try 2)" in r.stdout


def test_74_checks_pass(tmp_path):
    assert idle_timer(tmp_path, [(74, 74)]).returncode == 0


def test_75_checks_fail(tmp_path):
    assert idle_timer(tmp_path, [(75, 0)]).returncode == 1
