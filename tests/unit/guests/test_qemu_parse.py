"""Reading the guest's console: results, outputs, crashes, timeouts, command mode."""

import pytest

from pmubuild.guests import qemu
from pmubuild.guests.qemu import GuestRun, parse_console


def run_of(console: str, *, timed_out=False, qemu_rc=0, seconds=3.0) -> GuestRun:
    return GuestRun.of(console, seconds, timed_out, qemu_rc)


def parsed(console: str):
    c = parse_console(console)
    return c.results, c.booted, c.done, c.command_rc, c.command_output


SUITE = """\
[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]
@@SPMU BOOTED release=6.1.0-57-arm64 machine=aarch64 cpus=2
@@SPMU TEST sigill-before-load PASS SIGILL on all 2 CPUs
[    3.141592] simple-pmu: loaded
@@SPMU OUT load | FAIL: modprobe simple-pmu failed: oops
@@SPMU OUT load | second line
@@SPMU TEST load FAIL FAIL: modprobe simple-pmu failed: oops
@@SPMU TEST refuse-without-perfmon SKIP not this arch
@@SPMU TEST kernel-log-clean PASS
@@SPMU DMESG-BEGIN
[    1.0] something
@@SPMU DMESG-END
@@SPMU DONE
"""


def test_results_and_outputs():
    results, booted, done, rc, out = parsed(SUITE)
    assert booted and done
    assert rc is None and out == ""
    assert [(r.name, r.verdict) for r in results] == [
        ("sigill-before-load", "PASS"), ("load", "FAIL"),
        ("refuse-without-perfmon", "SKIP"), ("kernel-log-clean", "PASS")]
    by = {r.name: r for r in results}
    assert by["sigill-before-load"].detail == "SIGILL on all 2 CPUs"
    assert by["kernel-log-clean"].detail == ""
    assert by["load"].output == ("FAIL: modprobe simple-pmu failed: oops", "second line")
    assert by["sigill-before-load"].output == ()
    assert by["refuse-without-perfmon"].output == ()


def test_failed_suite_is_not_ok_but_has_no_problem():
    run = run_of(SUITE)
    assert run.problem() is None
    assert not run.ok


def test_all_pass_is_ok():
    run = run_of(SUITE.replace("load FAIL", "load PASS"))
    assert run.ok and run.problem() is None


def test_crlf_and_interleaved_kernel_messages():
    console = ("@@SPMU BOOTED release=x\r\n"
               "[   2.5] random: crng init done\r\n"
               "@@SPMU OUT a | line one\r\n"
               "[   2.6] virtio_net virtio0: something\r\n"
               "@@SPMU OUT b | other test\r\n"
               "@@SPMU OUT a | line two\r\n"
               "@@SPMU TEST a FAIL broke\r\n"
               "@@SPMU TEST b PASS fine\r\n"
               "@@SPMU DONE\r\n")
    results, booted, done, _, _ = parsed(console)
    assert booted and done
    a, b = results
    assert (a.name, a.verdict, a.detail, a.output) == ("a", "FAIL", "broke",
                                                       ("line one", "line two"))
    assert (b.name, b.verdict, b.output) == ("b", "PASS", ("other test",))


def test_missing_done_is_a_crash_with_console_tail():
    lines = [f"[   {i}.0] boot message {i}" for i in range(40)]
    console = "\n".join(["@@SPMU BOOTED release=x", "@@SPMU TEST a PASS ok", *lines])
    run = run_of(console, qemu_rc=0)
    assert run.booted and not run.done
    assert not run.ok
    problem = run.problem()
    assert problem is not None
    assert "stopped before the end" in problem and "QEMU exit 0" in problem
    assert "boot message 39" in problem  # the end of the console
    assert "boot message 0\n" not in problem + "\n"  # only the tail (30 lines)


def test_never_booted():
    run = run_of("qemu-system-aarch64: -kernel /nope: No such file", qemu_rc=1)
    assert not run.booted
    problem = run.problem()
    assert "never reached its init" in problem and "QEMU exit 1" in problem
    assert "No such file" in problem


def test_timeout():
    console = "@@SPMU BOOTED release=x\n@@SPMU TEST a PASS\n[  9.0] still going"
    run = run_of(console, timed_out=True, qemu_rc=None, seconds=25.2)
    assert not run.ok
    problem = run.problem()
    assert "timed out after 25s" in problem
    assert "still going" in problem


def test_panic():
    console = ("@@SPMU BOOTED release=x\n"
               "[    5.0] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0b\n"
               "[    5.1] ---[ end Kernel panic - not syncing ]---\n")
    run = run_of(console, qemu_rc=0)
    problem = run.problem()
    assert "panicked" in problem
    assert "Attempted to kill init" in problem


def test_oops_counts_as_panic():
    run = run_of("@@SPMU BOOTED\nUnable to handle kernel NULL pointer dereference at 0x0\n")
    assert "panicked or oopsed" in run.problem()


def test_done_without_results_is_not_ok():
    run = run_of("@@SPMU BOOTED\n@@SPMU DONE\n")
    assert run.problem() is None
    assert not run.ok


def test_command_mode():
    console = ("[ 0.1] boot\n@@SPMU BOOTED release=x\n@@SPMU CMD-BEGIN\n"
               "hello\r\n  indented @@ text\n@@SPMU CMD-END rc=3\n")
    results, booted, done, rc, out = parsed(console)
    assert results == [] and booted and not done
    assert rc == 3
    assert out == "hello\n  indented @@ text"
    run = run_of(console)
    assert run.command_rc == 3 and run.problem() is None


def test_command_mode_without_end_is_a_problem():
    console = "@@SPMU BOOTED\n@@SPMU CMD-BEGIN\npartial output\n"
    run = run_of(console, timed_out=True, qemu_rc=None)
    assert run.command_rc is None
    assert run.command_output == "partial output"
    assert "timed out" in run.problem()


def test_qemu_command_line_arm64(monkeypatch, tmp_path):
    monkeypatch.setattr(qemu.shutil, "which", lambda name: f"/usr/bin/{name}")
    argv = qemu.command("arm64", tmp_path / "Image", tmp_path / "initrd", "cmd", smp=3)
    assert argv[0] == "qemu-system-aarch64"
    assert "-no-reboot" in argv
    append = argv[argv.index("-append") + 1]
    assert "panic=-1" in append and "console=ttyAMA0" in append
    assert "spmu.mode=cmd" in append and "rdinit=/init" in append
    assert argv[argv.index("-smp") + 1] == "3"
    assert argv[argv.index("-initrd") + 1] == str(tmp_path / "initrd")


@pytest.mark.parametrize("smp", [1, 2, 4])
def test_qemu_command_line_amd64_single_threaded_tcg(monkeypatch, tmp_path, smp):
    """x86 guests run one TCG thread whatever their vCPU count (QEMU 7.2's multi-threaded
    TCG can run a stale translation of code the kernel just patched: "Oops: int3" at
    boot); arm64's, with or without -icount, get no -accel option (without -icount they
    keep one thread per vCPU, which the stress guest and the detectors need)."""
    monkeypatch.setattr(qemu.shutil, "which", lambda name: f"/usr/bin/{name}")
    argv = qemu.command("amd64", tmp_path / "bzImage", tmp_path / "initrd", "test", smp=smp)
    assert argv[:12] == ["qemu-system-x86_64", "-M", "pc", "-cpu", "max", "-smp", str(smp),
                         "-m", "1024", "-accel", "tcg,thread=single", "-nographic"]
    assert argv.count("-accel") == 1 and "-icount" not in argv
    append = argv[argv.index("-append") + 1]
    assert "console=ttyS0" in append and "accel" not in append
    for icount in (True, False):
        arm = qemu.command("arm64", tmp_path / "Image", tmp_path / "initrd", "test",
                           icount=icount)
        assert "-accel" not in arm
        assert ("-icount" in arm) == icount


def test_qemu_command_line_params_and_pauth(monkeypatch, tmp_path):
    monkeypatch.setattr(qemu.shutil, "which", lambda name: f"/usr/bin/{name}")
    argv = qemu.command("arm64", tmp_path / "Image", tmp_path / "initrd", "test",
                        params="spmu.stress_cycles=50")
    assert argv[argv.index("-append") + 1].endswith("spmu.mode=test spmu.stress_cycles=50")
    assert argv[argv.index("-cpu") + 1] == "max,pauth-impdef=on"


CLEAN = SUITE.replace("load FAIL", "load PASS")


def test_panic_after_done_fails_the_run():
    """DONE was printed, then the kernel crashed (powering off, or a late timer): the scan
    goes on to the end of the console and the run fails."""
    assert run_of(CLEAN).ok  # the same console without the crash is clean
    console = (CLEAN + "[   99.1] Unable to handle kernel paging request at virtual address dead\n"
               "[   99.2] Kernel panic - not syncing: Oops: Fatal exception\n")
    run = run_of(console)
    assert run.done and run.results and not run.ok
    problem = run.problem()
    assert problem is not None and "although the run reached its end" in problem
    assert "Unable to handle kernel paging request" in problem


def test_oops_in_the_dmesg_dump_fails_the_run():
    console = CLEAN.replace("[    1.0] something",
                            "[    1.0] BUG: sleeping function called from invalid context")
    run = run_of(console)
    assert not run.ok and "BUG: sleeping function" in (run.problem() or "")


def test_crash_words_in_test_or_command_output_are_not_a_crash():
    # The guest's own lines (a test's detail or output) and a command's output may name
    # these words; only the kernel's lines count.
    console = CLEAN.replace("kernel-log-clean PASS", "kernel-log-clean PASS no Oops or BUG:")
    console = console.replace("@@SPMU DONE", "@@SPMU OUT x | Kernel panic quoted\n@@SPMU DONE")
    assert run_of(console).ok
    cmd = "@@SPMU BOOTED\n@@SPMU CMD-BEGIN\necho Kernel panic is a word\n@@SPMU CMD-END rc=0\n"
    assert run_of(cmd).problem() is None
    # A kernel line (printk's timestamp) inside the command's output is the kernel's.
    crashed = cmd.replace("@@SPMU CMD-END", "[    3.0] Kernel panic - not syncing\n@@SPMU CMD-END")
    assert qemu.crash_lines(crashed) == ["[    3.0] Kernel panic - not syncing"]
    assert "Kernel panic - not syncing" in (run_of(crashed).problem() or "")


def test_wall_time_per_test_from_line_arrival():
    console = ("[ 0.1] boot\n@@SPMU BOOTED release=x\n@@SPMU TEST a PASS\n"
               "@@SPMU OUT b | x\n@@SPMU TEST b FAIL x\n@@SPMU TEST c SKIP\n@@SPMU DONE\n")
    times = [1.0, 2.0, 5.5, 6.0, 9.0, 9.25, 9.5]
    results = parse_console(console, times).results
    assert [(r.name, r.seconds) for r in results] == [("a", 3.5), ("b", 3.5), ("c", 0.25)]
    assert [r.seconds for r in parse_console(console).results] == [None, None, None]


def test_read_console_stamps_lines_as_they_come():
    lines, times, err, rc = qemu.read_console(
        ["sh", "-c", "echo one; sleep 0.5; echo two; echo oops >&2; exit 3"], timeout=10)
    assert lines == ["one\n", "two\n"] and err == "oops\n" and rc == 3
    assert times[1] - times[0] > 0.4  # stamped on arrival, after the sleep


def test_read_console_kills_at_timeout():
    lines, times, _, rc = qemu.read_console(["sh", "-c", "echo started; exec sleep 30"],
                                            timeout=0.5)
    assert rc is None and lines == ["started\n"] and len(times) == 1
