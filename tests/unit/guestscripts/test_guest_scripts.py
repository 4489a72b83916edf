"""Checks inside the guest scripts, run on the host against fakes of what they call: each
must fail when what it guards is broken (a guest run only ever shows the unbroken case).

The scripts are POSIX sh for busybox; bash --posix runs these parts the same way. They are
staged the way the guest's init stages them, with lib.sh's SYSFS pointed at a directory
under tmp_path.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

GUEST = Path(__file__).resolve().parents[3] / "tests" / "guest"
SYSFS_LINE = "SYSFS=/sys/devices/system/simple-pmu/simple-pmu0\n"
CPUDIR_LINE = "CPUDIR=/sys/devices/system/cpu\n"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def stage(tmp: Path, cpus: dict[int, int] | None = None) -> Path:
    """lib.sh as /tests/lib.sh, with SYSFS under tmp and CPUDIR too (cpuN/online files
    holding the given states; by default cpu1 online): a script run on the host must never
    take the host's own CPUs offline. Returns the fake bin directory."""
    lib = (GUEST / "common" / "lib.sh").read_text()
    assert SYSFS_LINE in lib, "lib.sh no longer sets SYSFS where this harness expects"
    assert CPUDIR_LINE in lib, "lib.sh no longer sets CPUDIR where this harness expects"
    (tmp / "sysfs").mkdir()
    (tmp / "lib.sh").write_text(lib.replace(SYSFS_LINE, f"SYSFS={tmp / 'sysfs'}\n")
                                .replace(CPUDIR_LINE, f"CPUDIR={tmp / 'cpu'}\n"))
    for n, state in (cpus if cpus is not None else {1: 1}).items():
        (tmp / "cpu" / f"cpu{n}").mkdir(parents=True)
        (tmp / "cpu" / f"cpu{n}" / "online").write_text(f"{state}\n")
    (tmp / "bin").mkdir()
    return tmp / "bin"


def fake(bindir: Path, name: str, body: str) -> None:
    exe = bindir / name
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)


def run(tmp: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "TMPDIR": str(tmp), "HOME": str(tmp)}
    return subprocess.run(["bash", "--posix", "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=30)


def run_script(tmp: Path, rel: str) -> subprocess.CompletedProcess[str]:
    return run_script_text(tmp, (GUEST / rel).read_text())


def run_script_text(tmp: Path, text: str) -> subprocess.CompletedProcess[str]:
    """The script as init runs it, sourcing the staged lib.sh."""
    assert ". /tests/lib.sh\n" in text
    return run(tmp, text.replace(". /tests/lib.sh\n", f". {tmp / 'lib.sh'}\n"))


# --- nonroot_refused (38-sysfs-bad-input) -------------------------------------------------

# A runas that drops privileges: `id -u` says 65534, and the kernel refuses the write with
# the message busybox sh prints for a failed redirection.
RUNAS_OK = """\
[ "$4" = 'id -u' ] && { echo 65534; exit 0; }
echo "/bin/sh: can't create ${4##*> }: Permission denied" >&2
exit 1
"""
# A runas that fails by itself, with "Permission denied" in its message.
RUNAS_CANNOT_EXEC = 'echo "runas: exec: Permission denied" >&2\nexit 127\n'
# A runas that does not drop privileges at all: the write goes through.
RUNAS_NO_DROP = """\
[ "$4" = 'id -u' ] && { echo 0; exit 0; }
exec /bin/sh -c "$4"
"""
# The check 38-sysfs-bad-input made before: fooled by RUNAS_CANNOT_EXEC.
OLD_CHECK = """\
runas 65534 /bin/sh -c "echo 1 > $SYSFS/ring" 2>/tmp/x.err && fail "non-root wrote ring"
grep -q 'Permission denied' /tmp/x.err || fail "failed otherwise"
echo old-check-passed
"""


def nonroot(tmp: Path, runas: str, old: bool = False) -> subprocess.CompletedProcess[str]:
    bindir = stage(tmp)
    fake(bindir, "runas", runas)
    (tmp / "sysfs" / "ring").write_text("3\n")
    code = (OLD_CHECK.replace("/tmp/", f"{tmp}/") if old
            else 'nonroot_refused $SYSFS/ring 3 && echo refused-checked')
    return run(tmp, f". {tmp / 'lib.sh'}\n{code}")


def test_nonroot_refused_passes_on_a_real_refusal(tmp_path):
    r = nonroot(tmp_path, RUNAS_OK)
    assert r.returncode == 0 and "refused-checked" in r.stdout, r.stdout + r.stderr


def test_nonroot_refused_fails_when_runas_itself_fails(tmp_path):
    r = nonroot(tmp_path, RUNAS_CANNOT_EXEC)
    assert r.returncode == 1
    assert "runas cannot run a command as uid 65534" in r.stdout
    # What the guest checked before passed here: runas's own failure read as a refusal.
    (tmp_path / "old").mkdir()
    old = nonroot(tmp_path / "old", RUNAS_CANNOT_EXEC, old=True)
    assert old.returncode == 0 and "old-check-passed" in old.stdout


def test_nonroot_refused_fails_when_runas_does_not_drop(tmp_path):
    r = nonroot(tmp_path, RUNAS_NO_DROP)
    assert r.returncode == 1 and "ran 'id -u' as '0'" in r.stdout


def test_nonroot_refused_fails_when_the_write_fails_otherwise(tmp_path):
    # Refused, but not for lack of permission (e.g. the attribute's own EINVAL).
    r = nonroot(tmp_path, RUNAS_OK.replace("Permission denied", "Invalid argument"))
    assert r.returncode == 1 and "failed otherwise" in r.stdout, r.stdout + r.stderr


def test_nonroot_refused_fails_when_the_write_goes_through(tmp_path):
    r = nonroot(tmp_path, RUNAS_OK.replace('echo "/bin/sh', "exec /bin/sh -c \"$4\" #"))
    assert r.returncode == 1 and "non-root wrote" in r.stdout, r.stdout + r.stderr


# --- 28-python-bench ----------------------------------------------------------------------

BENCH = """\
driver cycles (_native.driver_cycles())    612.0 ns/call
time.perf_counter_ns()                      695.5 ns/call
loop alone                                  101.2 ns/iteration
ratio 0.88 (read / time.perf_counter_ns(), loop included; goal <= 1.5; fastest of 3 x 100000 calls)
"""


def bench(tmp: Path, output: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
    bindir = stage(tmp)
    (tmp / "bench.out").write_text(output)
    fake(bindir, "simple-pmu", f'cat "{tmp / "bench.out"}"\nexit {rc}\n')
    return run_script(tmp, "arm64/28-python-bench.sh")


def test_bench_passes_on_a_sane_ratio(tmp_path):
    r = bench(tmp_path, BENCH)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("ratio 0.88 (")


@pytest.mark.parametrize(("output", "why"), [
    (BENCH.replace("ratio 0.88", "ratio 0.00"), "not in (0, 3)"),
    (BENCH.replace("ratio 0.88", "ratio 41.30"), "not in (0, 3)"),
    (BENCH.replace("ratio 0.88", "ratio nan"), "want one 'ratio N.NN (' line"),
    (BENCH.replace("ratio 0.88 (", "ratio: see above ("), "want one 'ratio N.NN (' line"),
    ("\n".join(BENCH.splitlines()[:3]) + "\n", "want one 'ratio N.NN (' line"),
    (BENCH.replace("driver cycles (_native.driver_cycles())",
                   "timer (_native.tsc(); no counter backend usable)"), "did not read the driver"),
], ids=["zero", "too-slow", "nan", "word-only", "no-ratio", "timer"])
def test_bench_fails_on_a_broken_result(tmp_path, output, why):
    r = bench(tmp_path, output)
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr


def test_bench_fails_when_bench_fails(tmp_path):
    r = bench(tmp_path, BENCH, rc=3)
    assert r.returncode == 1 and "simple-pmu bench exit 3" in r.stdout


# --- no test clears the kernel log ------------------------------------------------------

# `dmesg -c`/`-C` (or klogctl clearing) would erase a WARNING before kernel-log-clean looks.
_CLEARS = re.compile(r"\bdmesg\b[^|;&\n]*\s(-[a-zA-Z]*[cC][a-zA-Z]*|--clear|--read-clear)\b"
                     r"|klogctl\s*\(\s*[45]\b|SYSLOG_ACTION_CLEAR")


def log_clearing_lines(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".sh", ".py", ".c") or path.name == "init":
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if not line.lstrip().startswith(("#", "//", "/*", "*")) and _CLEARS.search(line):
                    found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_no_guest_test_clears_the_kernel_log():
    assert log_clearing_lines(GUEST) == []


@pytest.mark.parametrize("line", ["dmesg -c >/dev/null", "dmesg -C", "out=$(dmesg -rc)",
                                  "dmesg --clear", "klogctl(5, NULL, 0);"])
def test_log_clearing_is_found(tmp_path, line):
    shutil.copytree(GUEST / "common", tmp_path / "common")
    (tmp_path / "common" / "50-x.sh").write_text(f". /tests/lib.sh\n{line}\n")
    assert [f.split(": ", 1)[1] for f in log_clearing_lines(tmp_path)] == [line]


def test_reading_the_log_is_not_clearing_it(tmp_path):
    (tmp_path / "a.sh").write_text("dmesg | grep -c x\ndmesg | tail -n 3\n"
                                   "msg=$(dmesg | grep 'simple-pmu:' | tail -n 1)\n")
    assert log_clearing_lines(tmp_path) == []


def test_fake_bin_is_used(tmp_path):
    # The harness's PATH puts the fakes first (else these tests would call real tools).
    bindir = stage(tmp_path)
    fake(bindir, "runas", "echo fake\n")
    assert run(tmp_path, "runas").stdout == "fake\n"
    assert os.access(bindir / "runas", os.X_OK)


# --- arm64-stress/10-load-unload-cycles: the readers' reports -----------------------------

# A reader as pmuspin is: reads until SIGTERM, then prints its counts (from a file here).
PMUSPIN = """\
trap 'cat "$TMPDIR/spin-out.$1"; exit $(cat "$TMPDIR/spin-rc.$1")' TERM
[ -e "$TMPDIR/spin-quit.$1" ] && { cat "$TMPDIR/spin-out.$1"; exit 0; }
while :; do sleep 0.02; done
"""
PMUREAD_TRAPS = 'echo "cpu0 result=sigill"\necho "cpu1 result=sigill"\n'


def stress(tmp: Path, readers: dict[int, str], rc: dict[int, int] | None = None,
           quit_early: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    bindir = stage(tmp)
    for name in ("modprobe", "rmmod"):
        fake(bindir, name, "exit 0\n")
    fake(bindir, "dmesg", "exit 0\n")
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "pmuspin", PMUSPIN)
    fake(bindir, "pmuread", PMUREAD_TRAPS)
    for cpu, out in readers.items():
        (tmp / f"spin-out.{cpu}").write_text(out + "\n")
        (tmp / f"spin-rc.{cpu}").write_text(f"{(rc or {}).get(cpu, 0)}\n")
    for cpu in quit_early:
        (tmp / f"spin-quit.{cpu}").touch()
    # The fake load/unload takes a moment, as the real one does: readers have started.
    fake(bindir, "rmmod", "sleep 0.05\n")
    (tmp / "cmdline").write_text("console=ttyAMA0 spmu.mode=test spmu.stress_cycles=3\n")
    text = (GUEST / "arm64-stress" / "10-load-unload-cycles.sh").read_text()
    assert text.count("/proc/cmdline") == 1 and "/tmp/spin." in text
    staged = text.replace("/proc/cmdline", str(tmp / "cmdline")).replace(
        "/tmp/spin.", f"{tmp}/spin.")
    return run_script_text(tmp, staged)


def test_stress_passes_when_every_reader_saw_both(tmp_path):
    r = stress(tmp_path, {0: "ok=5 sigill=7", 1: "ok=3 sigill=2"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 load/unload cycles with 2 readers (ok=5 sigill=7 on cpu0)" in r.stdout


@pytest.mark.parametrize(("readers", "rc", "early", "why"), [
    ({0: "ok=5 sigill=7", 1: "ok=0 sigill=9"}, None, (), "reader on cpu1: 'ok=0 sigill=9'"),
    ({0: "ok=5 sigill=0", 1: "ok=3 sigill=2"}, None, (), "reader on cpu0: 'ok=5 sigill=0'"),
    ({0: "ok=5 sigill=7", 1: ""}, None, (), "reader on cpu1: ''"),
    ({0: "ok=5 sigill=7", 1: "ok=3 sigill=2"}, {1: 2}, (), "reader on cpu1 ended with status 2"),
    ({0: "ok=5 sigill=7", 1: "ok=3 sigill=2"}, None, (0,),
     "reader on cpu0 ended before the last cycle: ok=5 sigill=7"),
], ids=["no-reads", "no-sigill", "silent", "status", "ended-early"])
def test_stress_fails_on_a_reader_that_did_not_see_both(tmp_path, readers, rc, early, why):
    r = stress(tmp_path, readers, rc, early)
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr


# --- common/99-kernel-log-clean ------------------------------------------------------------

CLEAN_LOG = """\
[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]
[    3.141592] simple-pmu: loaded: user access on 2 CPUs, ring 3
[    9.000000] spmu-mark-123-8.99
"""


def log_clean(tmp: Path, log: str) -> subprocess.CompletedProcess[str]:
    bindir = stage(tmp)
    (tmp / "dmesg.out").write_text(log)
    fake(bindir, "dmesg", f'cat "{tmp / "dmesg.out"}"\n')
    return run_script(tmp, "common/99-kernel-log-clean.sh")


def test_kernel_log_clean_passes_on_a_clean_log(tmp_path):
    r = log_clean(tmp_path, CLEAN_LOG)
    assert r.returncode == 0 and "no WARNING, BUG or Oops" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("line", [
    "[   12.5] WARNING: CPU: 1 PID: 77 at drivers/common/counters.c:80 spmu_check+0x1c/0x90",
    "[   12.5] BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
    "[   12.5] Internal error: Oops: 0000000096000004 [#1] PREEMPT SMP",
    "[   12.5] Unable to handle kernel NULL pointer dereference at virtual address 0",
    "[   12.5] Call trace:",
    "[   12.5] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
    "[   12.5] INFO: task modprobe:88 blocked for more than 120 seconds.",
])
def test_kernel_log_clean_fails_on_a_warning(tmp_path, line):
    r = log_clean(tmp_path, CLEAN_LOG + line + "\n")
    assert r.returncode == 1 and "FAIL: kernel log:" in r.stdout and line in r.stdout


WARN_ALLOC = """\
[   40.1] insmod: vmalloc error: size 135168, vm_struct allocation failed, mode:0xcc0(GFP_KERNEL)
[   40.1] CPU: 0 PID: 77 Comm: insmod Not tainted 6.1.192 #1
[   40.1] Call trace:
[   40.1]  dump_backtrace+0x0/0x1e0
"""


@pytest.mark.parametrize("debug", [False, True])
def test_kernel_log_clean_on_a_debug_kernel_leaves_a_bare_call_trace_to_the_judge(
        tmp_path, debug):
    """An injected allocation failure's warn_alloc() dump is no report on a debug kernel
    (spmu.debug=1: the host's judge reads each report by its title); elsewhere, and a
    WARNING anywhere, fails."""
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("console=ttyAMA0 quiet" + (" spmu.debug=1" if debug else "") + "\n")
    bindir = stage(tmp_path)
    lib = tmp_path / "lib.sh"
    assert "/proc/cmdline" in lib.read_text()
    lib.write_text(lib.read_text().replace("/proc/cmdline", str(cmdline)))
    (tmp_path / "dmesg.out").write_text(CLEAN_LOG + WARN_ALLOC)
    fake(bindir, "dmesg", f'cat "{tmp_path / "dmesg.out"}"\n')
    r = run_script_text(tmp_path, (GUEST / "common/99-kernel-log-clean.sh").read_text())
    assert r.returncode == (0 if debug else 1), r.stdout
    (tmp_path / "dmesg.out").write_text(CLEAN_LOG + WARN_ALLOC + "[   41.0] WARNING: CPU: 1\n")
    r = run_script_text(tmp_path, (GUEST / "common/99-kernel-log-clean.sh").read_text())
    assert r.returncode == 1 and "WARNING: CPU: 1" in r.stdout
    # A data race KCSAN reports is the judge's too (counted when the module is in it);
    # any other BUG is not.
    race = "[   42.0] BUG: KCSAN: data-race in tick_sched_timer / rcu_gp_kthread\n"
    (tmp_path / "dmesg.out").write_text(CLEAN_LOG + race)
    r = run_script_text(tmp_path, (GUEST / "common/99-kernel-log-clean.sh").read_text())
    assert r.returncode == (0 if debug else 1), r.stdout
    (tmp_path / "dmesg.out").write_text(CLEAN_LOG + race + "[   43.0] BUG: KASAN: x\n")
    r = run_script_text(tmp_path, (GUEST / "common/99-kernel-log-clean.sh").read_text())
    assert r.returncode == 1 and "BUG: KASAN: x" in r.stdout


# --- others_offline / others_online (29-mhz-tool, 45-bench-icount) -----------------------

def stage_cpus(tmp: Path, online: dict[int, int]) -> None:
    stage(tmp, online)


def cpu_state(tmp: Path, n: int) -> str:
    return (tmp / "cpu" / f"cpu{n}" / "online").read_text().strip()


def lib_run(tmp: Path, code: str) -> subprocess.CompletedProcess[str]:
    return run(tmp, f". {tmp / 'lib.sh'}\n{code}")


def test_others_offline_and_back(tmp_path):
    stage_cpus(tmp_path, {1: 1, 2: 1, 3: 0})
    res = lib_run(tmp_path, "others_offline; for c in 1 2 3; do cat $CPUDIR/cpu$c/online; "
                            "done; others_online; echo back")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split() == ["0", "0", "0", "back"]
    # Only those it took offline come back: cpu3 was offline before.
    assert [cpu_state(tmp_path, n) for n in (1, 2, 3)] == ["1", "1", "0"]


def test_others_offline_fails_when_a_cpu_stays_online(tmp_path):
    stage_cpus(tmp_path, {1: 1})
    res = lib_run(tmp_path, "_cpu_write() { :; }; others_offline; echo not reached")
    assert res.returncode == 1 and "not reached" not in res.stdout
    assert f"FAIL: still online after others_offline: {tmp_path / 'cpu' / 'cpu1'}" in res.stdout


def test_others_offline_fails_when_the_write_is_refused(tmp_path):
    stage_cpus(tmp_path, {1: 1})
    res = lib_run(tmp_path, "_cpu_write() { return 1; }; others_offline; echo not reached")
    assert res.returncode == 1 and "cannot take" in res.stdout and "not reached" not in res.stdout


def test_others_online_fails_when_a_cpu_does_not_come_back(tmp_path):
    stage_cpus(tmp_path, {1: 1, 2: 1})
    # In an EXIT trap, as the tests use it: the script's status becomes 1.
    res = lib_run(tmp_path, "trap others_online EXIT; others_offline; "
                            "_cpu_write() { [ \"$2\" = 1 ] && [ \"${1%/online}\" = "
                            "\"$CPUDIR/cpu2\" ] && return 0; echo \"$2\" > \"$1\"; }; exit 0")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL: online after others_online:" in res.stdout
    assert cpu_state(tmp_path, 2) == "0"


def test_others_online_without_offline_does_nothing(tmp_path):
    stage_cpus(tmp_path, {1: 1})
    res = lib_run(tmp_path, "others_online; echo fine")
    assert res.returncode == 0 and res.stdout.strip() == "fine"


# --- the article's program (39-article-program): SKIP only for the host's reason -------


def article(tmp: Path, skip_reason: str | None, script: str = "39-article-program.sh",
            name: str = "article") -> subprocess.CompletedProcess[str]:
    """A seed program's script (39-article-program.sh, 29-mhz-tool.sh) without its
    program, with the host's NAME.skip (what guest.initramfs writes when the seed is
    absent) or without it."""
    stage(tmp)
    (tmp / "data").mkdir()
    if skip_reason is not None:
        (tmp / "data" / f"{name}.skip").write_text(skip_reason + "\n")
    text = (GUEST / "arm64" / script).read_text()
    assert f"/tests/data/{name}.skip" in text
    return run_script_text(tmp, text.replace("/tests/data/", f"{tmp}/data/"))


def test_article_skips_with_the_hosts_reason(tmp_path):
    res = article(tmp_path, "seed document /x/article.txt absent")
    assert res.returncode == 77, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "SKIP: seed document /x/article.txt absent"


def test_article_missing_without_a_reason_fails(tmp_path):
    """The seeds were there (no article.skip) but no program reached the guest: FAIL."""
    res = article(tmp_path, None)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1].startswith("FAIL: article program missing")


def test_mhz_tool_skips_with_the_hosts_reason(tmp_path):
    res = article(tmp_path, "seed document /x/mhz.c absent", "29-mhz-tool.sh", "seed-mhz")
    assert res.returncode == 77, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "SKIP: seed document /x/mhz.c absent"


def test_mhz_tool_missing_without_a_reason_fails(tmp_path):
    res = article(tmp_path, None, "29-mhz-tool.sh", "seed-mhz")
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1].startswith("FAIL: seed-mhz missing")


# --- exact_batch: the other vCPU only adds (lib.sh) -------------------------------------

def batches(tmp: Path, *outputs: str) -> subprocess.CompletedProcess[str]:
    """exact_batch L 2000 3 counts, where `counts` prints the given batches in turn."""
    bindir = stage(tmp)
    for i, out in enumerate(outputs, 1):
        (tmp / f"batch.{i}").write_text(out)
    fake(bindir, "counts", f'n=$(cat {tmp}/n 2>/dev/null || echo 0); n=$((n + 1)); '
                           f'echo $n > {tmp}/n; cat {tmp}/batch.$n\n')
    return lib_run(tmp, "exact_batch L 2000 3 counts")


def test_exact_batch_retries_a_disturbance_of_any_size(tmp_path):
    res = batches(tmp_path, "2000\n37206\n2000\n", "2000\n2000\n2000\n")
    assert res.returncode == 0, res.stdout
    assert "try 1 disturbed: +35206" in res.stdout and "2000 on every run (try 2)" in res.stdout


def test_exact_batch_fails_below_the_expected_count(tmp_path):
    res = batches(tmp_path, "2000\n1999\n2000\n")
    assert res.returncode == 1 and "1999, fewer than the 2000 expected" in res.stdout


def test_exact_batch_fails_when_never_clean(tmp_path):
    res = batches(tmp_path, *["2000\n2016\n2000\n"] * 10)
    assert res.returncode == 1 and "no undisturbed batch in 10 tries" in res.stdout


def test_has_is_not_killed_by_its_own_pipe():
    """lib.sh's has under pipefail, on a megabyte whose first line matches: true. The
    'echo "$TEXT" | grep -q' it replaced returns 141 (SIGPIPE: grep left at its first
    match while echo still wrote), shown here too, so the check can fail."""
    text = (GUEST / "common" / "lib.sh").read_text()
    has = re.search(r"^has\(\) \{.*?^\}", text, re.M | re.S).group(0)
    big = 'big=$(yes y | head -c 1000000)'
    ok = subprocess.run(["bash", "-c", f"set -o pipefail\n{has}\n{big}\nhas \"$big\" y"])
    assert ok.returncode == 0
    old = subprocess.run(["bash", "-c", f'set -o pipefail\n{big}\necho "$big" | grep -q y'])
    assert old.returncode == 141


# --- every in-guest Python check's failure fails its script ----------------------------

def _commands(text: str) -> list[str]:
    """The script's lines with continuations joined, comments and blanks dropped."""
    joined = text.replace("\\\n", " ")
    return [ln.strip() for ln in joined.splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


@pytest.mark.parametrize("script", sorted(GUEST.glob("*/*.sh")), ids=lambda p: p.name)
def test_python_checks_are_not_ignored(script):
    """The guest judges a script by its exit status only, and lib.sh sets no -e: a
    `python3 check.py` whose FAIL is not followed by `|| exit 1` (or fail) is ignored
    unless it is the last command (26 ran spmu_check.py exact unchecked: its new
    switched-out check failed in a guest with the extension broken, and 26 passed)."""
    commands = _commands(script.read_text())
    for i, cmd in enumerate(commands):
        if cmd.startswith("python3 ") and "||" not in cmd:
            assert i == len(commands) - 1, f"{script.name}: unchecked: {cmd}"


# --- unload (lib.sh): rmmod tried again only while a reader holds the node --------------

# rmmod failing as busybox does while /dev/simple-pmu is open (EAGAIN), $1 times, then ok.
RMMOD_BUSY = """\
n=$(cat "$TMPDIR/tries" 2>/dev/null || echo 0)
echo $((n + 1)) > "$TMPDIR/tries"
[ "$n" -ge "$BUSY" ] && exit 0
echo "rmmod: can't unload module 'simple_pmu': $WHY" >&2
exit 1
"""


@pytest.mark.parametrize(("busy", "why", "ok", "tries"), [
    (0, "", True, 1),
    (3, "Resource temporarily unavailable", True, 4),
    (500, "Resource temporarily unavailable", False, 100),
    (3, "No such file or directory", False, 1),
    (3, "Operation not permitted", False, 1),
    (3, "Module simple_pmu is in use", True, 4),  # kmod's rmmod, not busybox's
], ids=["at-once", "busy-then-ok", "busy-forever", "not-loaded", "refused", "kmod-in-use"])
def test_unload_retries_only_while_busy(tmp_path, busy, why, ok, tries):
    bindir = stage(tmp_path)
    fake(bindir, "rmmod", RMMOD_BUSY)
    r = run(tmp_path, f"BUSY={busy} WHY='{why}'; export BUSY WHY\n. {tmp_path / 'lib.sh'}\n"
            "unload && echo UNLOADED\n")
    assert ("UNLOADED" in r.stdout) is ok, r.stdout + r.stderr
    assert int((tmp_path / "tries").read_text()) == tries
    if not ok:
        assert why in r.stderr


# --- members_reaped (49-members, 20-failnth-join) -------------------------------------------

@pytest.mark.parametrize("count, ok", [("0", True), ("1", False)])
def test_members_reaped_waits_for_zero_then_fails_naming_who(tmp_path, count, ok):
    stage(tmp_path)
    (tmp_path / "sysfs" / "members").write_text(count + "\n")
    fake(tmp_path / "bin", "sleep", "exit 0\n")  # the 100 tries without waiting 1 s
    r = lib_run(tmp_path, "members_reaped member && echo REAPED")
    assert ("REAPED" in r.stdout) is ok, r.stdout
    if not ok:
        assert "FAIL: members still 1 1 s after every member exited" in r.stdout


# --- 49-members: the shared-cpu1 verdicts ---------------------------------------------------

def members_verdict(tmp: Path, m1: str, m2: str, m3: str,
                    counted: int = 2) -> subprocess.CompletedProcess[str]:
    """49's checks after its three readers on cpu1 ended, on their outputs."""
    text = (GUEST / "arm64" / "49-members.sh").read_text()
    start = text.index("m1=$(cat /tmp/m1.out)")
    end = text.index("# A member that exits without leaving")
    stage(tmp)
    code = (f". {tmp / 'lib.sh'}\nduring={counted}\n"
            + text[start:end].replace("/tmp/", f"{tmp}/") + "echo VERDICT-OK\n")
    for name, out in (("m1", m1), ("m2", m2), ("m3", m3)):
        (tmp / f"{name}.out").write_text(out + "\n")
    return run(tmp, code)


@pytest.mark.parametrize(("m1", "m2", "m3", "counted", "ok"), [
    ("ok=500 sigill=0", "ok=300 sigill=0", "ok=0 sigill=900", 2, True),
    ("ok=500 sigill=1", "ok=300 sigill=0", "ok=0 sigill=900", 2, False),  # a member faulted
    ("ok=500 sigill=0", "ok=0 sigill=0", "ok=0 sigill=900", 2, False),  # a member never read
    ("ok=500 sigill=0", "ok=300 sigill=0", "ok=1 sigill=900", 2, False),  # non-member read
    ("ok=500 sigill=0", "ok=300 sigill=0", "ok=0 sigill=0", 2, False),  # non-member never ran
    ("ok=500 sigill=0", "ok=300 sigill=0", "ok=0 sigill=900", 1, False),  # not counted
], ids=["good", "member-faulted", "member-idle", "leak", "nonmember-idle", "count"])
def test_members_verdicts(tmp_path, m1, m2, m3, counted, ok):
    r = members_verdict(tmp_path, m1, m2, m3, counted)
    assert ("VERDICT-OK" in r.stdout) is ok, r.stdout + r.stderr
