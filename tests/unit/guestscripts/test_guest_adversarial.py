"""tests/guest/arm64/46-adversarial.sh on the host, against fakes of advreader, perfchurn
and python3: it must fail when a reader reports a wrong valid window, dies, is on the wrong
path, or when the churn did not run beside it (a guest run only shows the unbroken case)."""

import pytest

from .test_guest_scripts import GUEST, fake, run_script, run_script_text, stage

SCRIPT = "arm64/46-adversarial.sh"
GUEST_46 = GUEST / SCRIPT
CHURN_OK = ("trap 'echo rounds=40 task=80 pinned=10; exit 0' TERM\necho started\n"
            "while :; do sleep 0.05; done\n")
READER_OK = 'echo "path=x windows=1000 reads=1000000 valid=990 flagged=10 count=413"\n'
PY_OK = 'echo "scope=$3 backend=x runs=300 valid=300 flagged=0 count=2412"\n'


def module_fakes(tmp, bindir):
    """modprobe and rmmod that make and remove the staged sysfs directory (modprobe
    writes recheck_ms=N into it) and log each call to tmp/modlog."""
    sysfs, log = tmp / "sysfs", tmp / "modlog"
    fake(bindir, "modprobe", f'echo "modprobe $*" >> {log}; mkdir -p {sysfs}\n'
         f'r=100; for a; do case $a in recheck_ms=*) r=${{a#*=}};; esac; done\n'
         f'echo $r > {sysfs}/recheck_ms\n')
    fake(bindir, "rmmod", f'echo "rmmod $*" >> {log}; rm -rf {sysfs}\n')
    return log


def adversarial(tmp, reader=READER_OK, churn=CHURN_OK, python=PY_OK):
    bindir = stage(tmp)
    module_fakes(tmp, bindir)
    fake(bindir, "advreader", reader)
    fake(bindir, "perfchurn", churn)
    fake(bindir, "python3", python)
    fake(bindir, "dmesg", "")
    return run_script(tmp, SCRIPT)


def test_passes_and_prints_the_flagged_counts(tmp_path):
    r = adversarial(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("flagged=10") == 2 and "Python thread: scope=thread" in r.stdout
    assert "Python cpu: scope=cpu" in r.stdout


@pytest.mark.parametrize(("reader", "why"), [
    ('echo "FAIL: thread path x: window 3 pair 1 reported valid counts 9"; exit 1\n',
     "reported valid counts 9"),
    ("kill -SEGV $$\n", "died (exit status 139"),
    ("kill -ILL $$\n", "died (exit status 132"),
    ('echo "usage"; exit 2\n', "usage or setup error"),
    ('[ "$2" = cpu ] && { echo "SKIP: cpu scope is on path none"; exit 3; }\n' + READER_OK,
     "module loaded, yet advreader cpu"),
], ids=["wrong-valid-window", "sigsegv", "sigill", "usage", "cpu-scope-refused"])
def test_fails_when_a_c_reader_fails(tmp_path, reader, why):
    r = adversarial(tmp_path, reader=reader)
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize(("churn", "why"), [
    ("exit 0\n", "perfchurn did not start"),
    ("echo 'perfchurn: perf_event_open: Permission denied' >&2; exit 2\n",
     "perfchurn did not start: perfchurn: perf_event_open: Permission denied"),
    ("echo started; exit 0\n", "perfchurn stopped early"),
    (CHURN_OK.replace("pinned=10", "pinned=0"), "opened no pinned CPU-wide event"),
    ("trap 'exit 2' TERM\necho started\nwhile :; do sleep 0.05; done\n", "perfchurn exited 2"),
], ids=["not-running", "refused", "stopped-early", "no-pinned", "churn-error"])
def test_fails_when_the_churn_did_not_run(tmp_path, churn, why):
    r = adversarial(tmp_path, churn=churn)
    assert r.returncode == 1 and why in r.stdout, r.stdout + r.stderr


def test_fails_when_python_reports_a_wrong_valid_block(tmp_path):
    r = adversarial(tmp_path, python='echo "FAIL: measure(scope=\'cpu\'): run 7 is ok"; exit 1\n')
    assert r.returncode == 1 and "run 7 is ok" in r.stdout, r.stdout + r.stderr


def test_python_cpu_scope_refused_fails(tmp_path):
    """The module is loaded, yet measure(scope="cpu") never had an ok block (e.g. its
    retries slept while perfchurn took access away): on every kernel a failure."""
    py = '[ "$3" = cpu ] && { echo "SKIP: never ok"; exit 3; }\n' + PY_OK
    r = adversarial(tmp_path, python=py)
    assert r.returncode == 1 and "module loaded, yet measure(scope=cpu)" in r.stdout, \
        r.stdout + r.stderr


def _with_pua(tmp_path, py: str):
    """Run 46 with perf_user_access present (5.17+), faked under tmp_path."""
    bindir = stage(tmp_path)
    module_fakes(tmp_path, bindir)
    for name, body in (("advreader", READER_OK), ("perfchurn", CHURN_OK),
                       ("python3", py), ("dmesg", "")):
        fake(bindir, name, body)
    pua = tmp_path / "perf_user_access"
    pua.write_text("1\n")
    text = (GUEST_46.read_text().replace("PUA=/proc/sys/kernel/perf_user_access",
                                         f"PUA={pua}"))
    return run_script_text(tmp_path, text)


def test_python_cpu_scope_without_an_exact_block_on_5_17_fails(tmp_path):
    """5.17+: the module's readings are exact; a run where every block was flagged or
    advisory judged nothing."""
    py = ('[ "$3" = cpu ] && { echo "scope=cpu backend=driver runs=300 valid=0 '
          'flagged=200 advisory=100 count=None"; exit 0; }\n' + PY_OK)
    r = _with_pua(tmp_path, py)
    assert r.returncode == 1 and "no exact block to judge" in r.stdout, r.stdout + r.stderr
    r = _with_pua(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path, PY_OK)
    assert r.returncode == 0, r.stdout + r.stderr


def test_python_thread_scope_refused_on_5_17_fails(tmp_path):
    """perf_user_access exists (5.17+), yet measure(scope="thread") had no ok block."""
    py = '[ "$3" = thread ] && { echo "SKIP: never ok"; exit 3; }\n' + PY_OK
    r = _with_pua(tmp_path, py)
    assert r.returncode == 1 and "Linux >= 5.17 with perf_user_access=1, yet" in r.stdout, \
        r.stdout + r.stderr


def test_loads_the_module_itself_and_unloads_it_after(tmp_path):
    """Not loaded before: loaded, reloaded at recheck_ms=10 for the module's readers (and
    that setting checked), and unloaded at the end."""
    bindir = stage(tmp_path)
    (tmp_path / "sysfs").rmdir()
    log = module_fakes(tmp_path, bindir)
    seen = tmp_path / "seen"
    py = f'cat {tmp_path / "sysfs"}/recheck_ms >> {seen}\n' + PY_OK
    for name, body in (("advreader", READER_OK), ("perfchurn", CHURN_OK),
                       ("python3", py), ("dmesg", "")):
        fake(bindir, name, body)
    r = run_script(tmp_path, SCRIPT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert log.read_text().split("\n")[:-1] == [
        "modprobe simple-pmu", "rmmod simple-pmu", "modprobe simple-pmu recheck_ms=10",
        "rmmod simple-pmu"]
    assert seen.read_text().split() == ["100", "10"]  # thread scope, then cpu scope
    assert not (tmp_path / "sysfs").exists()


def test_leaves_a_loaded_module_loaded(tmp_path):
    bindir = stage(tmp_path)
    log = module_fakes(tmp_path, bindir)
    for name, body in (("advreader", READER_OK), ("perfchurn", CHURN_OK),
                       ("python3", PY_OK), ("dmesg", "")):
        fake(bindir, name, body)
    r = run_script(tmp_path, SCRIPT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert log.read_text().split("\n")[-2] == "modprobe simple-pmu"  # defaults, loaded
    assert (tmp_path / "sysfs" / "recheck_ms").read_text() == "100\n"


def test_a_failure_after_the_reload_still_restores_the_defaults(tmp_path):
    """Loaded before 46; Python's scope cpu fails at recheck_ms=10: the module is left
    loaded with its defaults, for the tests after."""
    bindir = stage(tmp_path)
    log = module_fakes(tmp_path, bindir)
    py = '[ "$3" = cpu ] && { echo "FAIL: run 7 is ok with 1"; exit 1; }\n' + PY_OK
    for name, body in (("advreader", READER_OK), ("perfchurn", CHURN_OK),
                       ("python3", py), ("dmesg", "")):
        fake(bindir, name, body)
    r = run_script(tmp_path, SCRIPT)
    assert r.returncode == 1 and "run 7 is ok" in r.stdout, r.stdout + r.stderr
    assert log.read_text().split("\n")[-3:-1] == ["rmmod simple-pmu", "modprobe simple-pmu"]
    assert (tmp_path / "sysfs" / "recheck_ms").read_text() == "100\n"


def test_fails_when_recheck_ms_was_not_taken(tmp_path):
    """The reload for scope cpu must really run at recheck_ms=10."""
    bindir = stage(tmp_path)
    module_fakes(tmp_path, bindir)
    fake(bindir, "modprobe", f'mkdir -p {tmp_path / "sysfs"}; '
         f'echo 100 > {tmp_path / "sysfs"}/recheck_ms\n')
    for name, body in (("advreader", READER_OK), ("perfchurn", CHURN_OK),
                       ("python3", PY_OK), ("dmesg", "")):
        fake(bindir, name, body)
    r = run_script(tmp_path, SCRIPT)
    assert r.returncode == 1 and "recheck_ms is 100 after modprobe recheck_ms=10" in r.stdout, \
        r.stdout + r.stderr


def test_fails_when_the_module_does_not_load(tmp_path):
    bindir = stage(tmp_path)
    (tmp_path / "sysfs").rmdir()
    fake(bindir, "modprobe", "echo 'modprobe: ERROR: could not insert' >&2; exit 1\n")
    r = run_script(tmp_path, SCRIPT)
    assert r.returncode == 1 and "modprobe simple-pmu" in r.stdout, r.stdout + r.stderr


# --- tests/guest/py/spmu_adv.py against a fake simple_pmu ----------------------------

FAKE_PMU = '''\
import os
COUNTS = [int(c) for c in os.environ["FAKE_COUNTS"].split(",")]
BACKEND = os.environ["FAKE_BACKEND"]


class _M:
    def __init__(self):
        self.backend, self.reason, self.cycles = BACKEND, None, 1
        self.exact = os.environ.get("FAKE_EXACT", "1") == "1"
        self.instructions = COUNTS.pop(0)
        self.ok = self.instructions >= 0
        if not self.ok:
            self.reason = "flagged"


class measure:
    def __init__(self, scope=None):
        pass

    def __enter__(self):
        self.m = _M()
        return self.m

    def __exit__(self, *exc):
        return False


def known_loop(n):
    pass
'''


def spmu_adv(tmp_path, backend, counts, scope="thread", warm=()):
    import os
    import subprocess
    import sys
    from pathlib import Path
    (tmp_path / "simple_pmu.py").write_text(FAKE_PMU)
    script = Path(__file__).resolve().parents[2] / "guest" / "py" / "spmu_adv.py"
    # 30 warm-up blocks first (spmu_adv.WARMUP), far off: never judged; for scope cpu
    # then blocks until one is ok (warm: the flagged ones, -1; then one ok).
    extra = [*warm, 99999] if scope == "cpu" else []
    env = dict(os.environ, PYTHONPATH=str(tmp_path), FAKE_BACKEND=backend,
               FAKE_COUNTS=",".join(map(str, [99999] * 30 + extra + list(counts))))
    return subprocess.run([sys.executable, str(script), "0", scope, "1000",
                           str(len(counts))], capture_output=True, text=True, env=env,
                          timeout=30)


def test_spmu_adv_perf_blocks_within_the_interpreter_bound_pass(tmp_path):
    r = spmu_adv(tmp_path, "perf-rdpmc", [17507, 17776, -1, 17600])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "valid=3 flagged=1 advisory=0 count=17507 spread=269" in r.stdout


@pytest.mark.parametrize("counts", [[17507, 17507 + 2001], [1999, 2100]],
                         ids=["beyond-the-bound", "below-2n"])
def test_spmu_adv_perf_blocks_off_by_more_fail(tmp_path, counts):
    r = spmu_adv(tmp_path, "perf-rdpmc", counts)
    assert r.returncode == 1 and r.stdout.startswith("FAIL:"), r.stdout + r.stderr


def test_spmu_adv_driver_blocks_within_the_interpreter_bound(tmp_path):
    """The driver's blocks are judged as perf's: Python's work between the C reads
    varies (4483 and 4531 on trixie), a count of perfchurn's slice or of another counter
    is off by far more."""
    r = spmu_adv(tmp_path, "driver", [4483, -1, 4531], scope="cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "valid=2 flagged=1 advisory=0 count=4483 spread=48" in r.stdout, r.stdout
    (tmp_path / "far").mkdir()
    r = spmu_adv(tmp_path / "far", "driver", [4483, 4483 + 2001], scope="cpu")
    assert r.returncode == 1 and "4483 to 6484" in r.stdout, r.stdout
    (tmp_path / "low").mkdir()
    r = spmu_adv(tmp_path / "low", "driver", [4483, 1999], scope="cpu")
    assert r.returncode == 1 and "run 1 is ok with 1999" in r.stdout, r.stdout


def test_spmu_adv_cpu_scope_warms_up_until_a_block_is_ok(tmp_path):
    """Flagged blocks after the fixed warm-up (reads not back yet) are warm-up too, not
    runs; the time it took is printed."""
    r = spmu_adv(tmp_path, "driver", [4483, 4490], scope="cpu", warm=[-1, -1, -1])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runs=2 valid=2 flagged=0 advisory=0 count=4483 spread=7 waited=" in r.stdout


def test_spmu_adv_never_ok_is_a_skip(tmp_path):
    """No block ok (every one flagged): exit 3 and SKIP with the last reason, which 46
    turns into a failure for scope cpu; never exit 0 with nothing judged."""
    r = spmu_adv(tmp_path, "perf-rdpmc", [-1, -1, -1])
    assert r.returncode == 3 and r.stdout.startswith("SKIP:"), r.stdout + r.stderr
    assert "flagged" in r.stdout


def test_python_cpu_scope_all_advisory_before_5_17_passes(tmp_path):
    """Before 5.17 (no perf_user_access) the driver's blocks are advisory: none judged
    is right there, not a failure."""
    py = ('[ "$3" = cpu ] && { echo "scope=cpu backend=driver runs=300 valid=0 '
          'flagged=0 advisory=300 count=None waited=0.0s"; exit 0; }\n' + PY_OK)
    r = adversarial(tmp_path, python=py)
    assert r.returncode == 0 and "Python cpu: scope=cpu" in r.stdout, r.stdout + r.stderr


def test_spmu_adv_advisory_blocks_are_counted_not_judged(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EXACT", "0")
    r = spmu_adv(tmp_path, "driver", [4436, 4444], scope="cpu")
    assert r.returncode == 0 and "valid=0 flagged=0 advisory=2" in r.stdout, r.stdout


def test_module_readers_run_at_recheck_ms_10_and_thread_ones_at_the_default(tmp_path):
    """The order the readers run in, and the recheck_ms each sees: the thread-scope ones
    with the module as loaded (100), the module's own (C and Python) after the reload at
    10 (at 100 the C reader's reads fault through most of its windows: ~55 s of TCG)."""
    bindir = stage(tmp_path)
    (tmp_path / "sysfs").rmdir()
    module_fakes(tmp_path, bindir)
    seen = tmp_path / "seen"
    rec = f'echo "$0 $S $(cat {tmp_path / "sysfs"}/recheck_ms)" >> {seen}\n'
    fake(bindir, "advreader", rec.replace("$S", "$2") + READER_OK)
    fake(bindir, "python3", rec.replace("$S", "$3").replace("$0", "py") + PY_OK)
    fake(bindir, "perfchurn", CHURN_OK)
    fake(bindir, "dmesg", "")
    r = run_script(tmp_path, SCRIPT)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [line.split(" ", 1)[1] if not line.startswith("py") else line
           for line in seen.read_text().splitlines()]
    assert got == ["thread 100", "py thread 100", "cpu 10", "py cpu 10"], got
