"""tests/guest/arm64/45-bench-icount.sh, run on the host against a fake readbench: it
passes on identical counts, fails when two runs differ or a path that must run did not,
prints every goal met or not (and does not fail on one not met), and leaves ring and
kernel.perf_user_access as it found them."""

import subprocess
from pathlib import Path

import pytest

from .test_guest_scripts import GUEST, fake, run_script_text, stage

SCRIPT = "arm64/45-bench-icount.sh"
PUA = "/proc/sys/kernel/perf_user_access"

RING2 = """\
ring=2 reads=100 windows=7 cpu=0
path=driver window=39323 window2=78223 empty=423 empty2=823 per_read=389.00
path=window-cpu window=1026 window2=2026 empty=423 empty2=823 per_read=6.00 window_valid=1
path=bare window=523 window2=1023 empty=423 empty2=823 per_read=1.00
unavailable path=rdtsc reason=x86-64 only
path=cntvct window=523 window2=1023 empty=423 empty2=823 per_read=1.00
path=clock_gettime window=5933 window2=11833 empty=423 empty2=823 per_read=55.00
path=perf-mmap window=3428 window2=6828 empty=423 empty2=823 per_read=30.00
path=perf-read window=3037 window2=6037 empty=423 empty2=823 per_read=26.00
path=selfmon window=5540 window2=11040 empty=423 empty2=823 per_read=51.00
path=window window=1627 window2=3227 empty=423 empty2=823 per_read=12.00 window_valid=1
"""
RING3 = RING2.replace("ring=2", "ring=3").replace(
    "window=3037 window2=6037 empty=423 empty2=823 per_read=26.00",
    "window=158573 window2=317109 empty=423 empty2=823 per_read=1581.36")

# readbench: the output for the ring in sysfs; a second output (".2") for the second run
# at that ring if the test gives one. Also records the perf_user_access it ran with.
READBENCH = """\
r=$(cat "$SYSFS_DIR/ring")
n=$(cat "$T/count.$r" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$T/count.$r"
[ -f "$T/pua" ] && echo "ring=$r pua=$(cat "$T/pua")" >> "$T/seen"
cat "$T/cpu/cpu1/online" >> "$T/cpu1"
if [ $n -gt 1 ] && [ -f "$T/out.$r.2" ]; then cat "$T/out.$r.2"; else cat "$T/out.$r"; fi
exit $(cat "$T/rc" 2>/dev/null || echo 0)
"""


def guest(tmp: Path, ring2: str = RING2, ring3: str = RING3, second: dict[int, str] | None = None,
          pua: str | None = "0", rc: int = 0) -> subprocess.CompletedProcess[str]:
    bindir = stage(tmp)
    sysfs = tmp / "sysfs"
    sysfs.rmdir()  # loaded by the script's modprobe
    (tmp / "out.2").write_text(ring2)
    (tmp / "out.3").write_text(ring3)
    for ring, text in (second or {}).items():
        (tmp / f"out.{ring}.2").write_text(text)
    (tmp / "rc").write_text(f"{rc}\n")
    if pua is not None:
        (tmp / "pua").write_text(pua + "\n")
    fake(bindir, "modprobe", f'mkdir -p "{sysfs}"; echo 2 > "{sysfs}/ring"; '
                             f'echo 100 > "{sysfs}/recheck_ms"\n')
    fake(bindir, "rmmod", f'echo "rmmod ring=$(cat "{sysfs}/ring")" >> "{tmp}/seen"; '
                          f'rm -rf "{sysfs}"\n')
    fake(bindir, "nproc", "echo 2\n")
    fake(bindir, "pmuspin", "exit 0\n")
    fake(bindir, "readbench", f'SYSFS_DIR="{sysfs}"; T="{tmp}"\n' + READBENCH)
    text = (GUEST / SCRIPT).read_text()
    assert text.count(PUA) == 1
    return run_script_text(tmp, text.replace(PUA, str(tmp / "pua")))


def test_identical_counts_pass_with_the_goals_printed(tmp_path):
    r = guest(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "goal window/bare <= 1.2: 12.00 (12.00 / 1.00) NOT met" in out
    assert "goal window-cpu/bare <= 1.2: 6.00 (6.00 / 1.00) NOT met" in out
    assert "goal driver/bare <= 1.2: 389.00 (389.00 / 1.00) NOT met" in out
    assert "goal perf-read/driver >= 10: 4.07 (1581.36 / 389.00) NOT met" in out
    assert "selfmon (cycles_read() outside a window) per read: 51.00 (bare: 1.00)" in out
    assert "ring=2 (EL0) per read: driver=389.00 window-cpu=6.00 bare=1.00 cntvct=1.00" in out
    assert "window=12.00 \n" in out  # the figure, without window_valid
    assert "ring=3 (EL0+EL1) per read:" in out and "perf-read=1581.36" in out
    # perf_user_access 1 while measuring, ring 2 then 3; both restored, then unloaded.
    seen = (tmp_path / "seen").read_text().splitlines()
    assert seen[:4] == ["ring=2 pua=1"] * 2 + ["ring=3 pua=1"] * 2
    assert seen[-1] == "rmmod ring=2"
    assert (tmp_path / "pua").read_text() == "0\n"
    # cpu1 offline while measuring (QEMU's count is global), online again after.
    assert (tmp_path / "cpu1").read_text().split() == ["0"] * 4
    assert (tmp_path / "cpu" / "cpu1" / "online").read_text().strip() == "1"


@pytest.mark.parametrize("ring", [2, 3])
def test_counts_that_differ_between_runs_fail(tmp_path, ring):
    base = RING2 if ring == 2 else RING3
    r = guest(tmp_path, second={ring: base.replace("window=1627", "window=1628")})
    assert r.returncode == 1, r.stdout
    assert f"FAIL: ring={ring}: the counts differ between two runs" in r.stdout
    assert (tmp_path / "seen").read_text().splitlines()[-1] == "rmmod ring=2"


@pytest.mark.parametrize("path", ["driver", "window-cpu", "bare", "cntvct", "clock_gettime",
                                  "perf-read", "perf-mmap", "selfmon", "window"])
def test_a_path_that_must_run_and_did_not_fails(tmp_path, path):
    lines = [ln for ln in RING2.splitlines() if not ln.startswith(f"path={path} ")]
    r = guest(tmp_path, ring2="\n".join(lines + [f"unavailable path={path} reason=x"]) + "\n")
    assert r.returncode == 1 and f"FAIL: ring=2: path {path} did not run" in r.stdout, r.stdout


def test_window_validity_may_differ_between_runs_but_not_be_invalid_in_both(tmp_path):
    once = RING2.replace("per_read=12.00 window_valid=1", "per_read=12.00 window_valid=0")
    r = guest(tmp_path, second={2: once})
    assert r.returncode == 0, r.stdout
    both = guest(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path, once,
                 second={2: once})
    assert both.returncode == 1
    assert "FAIL: ring=2: the window window was invalid in both runs" in both.stdout


SELF = ("path=perf-mmap ", "path=selfmon ", "path=window ")


def test_perf_mmap_may_only_say_why_without_the_sysctl(tmp_path):
    # 5.10: no kernel.perf_user_access; perf-mmap, selfmon, window must then give a reason.
    lines = [ln for ln in RING2.splitlines() if not ln.startswith(SELF)]
    why = ("unavailable path=perf-mmap reason=the perf mmap page says cap_user_rdpmc 0\n"
           "unavailable path=selfmon reason=module\nunavailable path=window reason=module")
    three = [ln for ln in RING3.splitlines() if not ln.startswith(SELF)]
    r = guest(tmp_path, "\n".join(lines + [why]) + "\n", "\n".join(three + [why]) + "\n",
              pua=None)
    assert r.returncode == 0, r.stdout
    assert "goal perf-mmap/driver" not in r.stdout and "goal window/" not in r.stdout
    silent = guest(tmp_path / "s" if (tmp_path / "s").mkdir() is None else tmp_path,
                   "\n".join(lines) + "\n", "\n".join(three) + "\n", pua=None)
    assert silent.returncode == 1 and "perf-mmap neither ran nor said why" in silent.stdout


def test_readbench_failing_fails(tmp_path):
    r = guest(tmp_path, rc=3)
    assert r.returncode == 1 and "readbench --insns (ring=2) exit 3" in r.stdout


def test_module_already_loaded_fails(tmp_path):
    bindir = stage(tmp_path)
    fake(bindir, "rmmod", "exit 0\n")
    r = run_script_text(tmp_path, (GUEST / SCRIPT).read_text())
    assert r.returncode == 1 and "module loaded before this test" in r.stdout
