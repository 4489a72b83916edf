"""tests/guest/src/failnth.c, the debug guest's fault-injection helper, on this host:
its refusals of bad use, and its error where the kernel has no per-task fail-nth."""

import subprocess
from pathlib import Path

import pytest

from pmubuild import guest

FAIL_NTH = Path("/proc/thread-self/fail-nth")


@pytest.fixture(scope="module")
def failnth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("failnth")
    (exe,) = [p for p in guest.compile_programs("amd64", out) if p.name == "failnth"]
    return exe


def run(exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


@pytest.mark.parametrize("args, says", [
    ((), "usage: failnth N"),
    (("1", "load"), "usage: failnth N"),
    (("-1", "load", "/x"), "N must be 0 (inject nothing) or more, not -1"),
    (("x", "load", "/x"), "bad N: x"),
])
def test_bad_use_is_refused_before_anything_is_armed(failnth, args, says):
    p = run(failnth, *args)
    assert p.returncode == 2 and says in p.stderr and p.stdout == ""


def test_a_kernel_without_fail_nth_is_named_or_the_call_reports(failnth, tmp_path):
    target = tmp_path / "f"
    target.write_text("")
    p = run(failnth, "1", "write", str(target), "abc")
    if not FAIL_NTH.exists():
        assert p.returncode == 2 and "fail-nth" in p.stderr
        assert "CONFIG_FAULT_INJECTION" in p.stderr
    else:  # a fault-injection host: the write makes a fault-capable call or none
        assert p.returncode == 0
        assert p.stdout.startswith("n=1 rc=") and "injected=" in p.stdout
    bad = run(failnth, "1", "frob", str(target))
    assert bad.returncode == 2 and "bad use: 1 frob" in bad.stderr
