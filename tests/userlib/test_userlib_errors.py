"""One exception hierarchy rooted in simple_pmu.Error, with and without the extension;
and the extension's stub (_native.pyi) matches the extension (mypy's stubtest)."""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import subprocess
import sys

import pytest
from userlib_helpers import USERLIB


def test_hierarchy(simple_pmu):
    e = simple_pmu
    for cls, also in ((e.UsageError, ValueError), (e.CounterUnavailable, RuntimeError),
                      (e.CounterFault, OSError), (e.PerfError, OSError)):
        assert issubclass(cls, e.Error) and issubclass(cls, also), cls
        assert cls.code != e.Error.code
    # The extension raises the library's own classes.
    assert e.native.CounterFault is e.CounterFault
    assert e.native.CounterUnavailable is e.CounterUnavailable
    assert not isinstance(OSError(errno.EIO, "disk"), e.CounterFault)
    assert not issubclass(e.Error, OSError)


def test_perf_error_is_exported_and_raised(simple_pmu):
    perf = importlib.import_module("simple_pmu.perf")
    try:
        os.close(perf.open_event("cycles"))
    except simple_pmu.PerfError as exc:
        assert isinstance(exc, simple_pmu.Error) and exc.errno
        assert str(exc).startswith("perf_event_open(cycles) failed: ")
        assert exc.code == "perf_open_failed" and exc.event == "cycles"
    else:
        pytest.skip("perf_event_open(cycles) works here: no PerfError to check")


def test_usage_error(simple_pmu):
    with pytest.raises(simple_pmu.UsageError, match="unknown backend 'bogus'") as info, \
            simple_pmu.measure(backend="bogus"):
        pass
    assert isinstance(info.value, ValueError) and info.value.code == "unknown_backend"
    measure = importlib.import_module("simple_pmu._measure")
    with pytest.raises(simple_pmu.UsageError):
        measure.wrap_delta(0, 1, 0)


def test_perf_page_refusal_is_counter_unavailable(simple_pmu):
    n = simple_pmu.native
    try:
        fd = n.perf_open(1, 1)  # PERF_TYPE_SOFTWARE, TASK_CLOCK: no hardware counter
    except OSError as exc:
        pytest.skip(f"software perf events unavailable here: {exc}")
    try:
        page = n.PerfPage(fd)
        with pytest.raises(simple_pmu.CounterUnavailable, match="cap_user_rdpmc 0"):
            page.read()
        page.close()
    finally:
        os.close(fd)


def test_without_the_extension_counter_fault_is_no_oserror(tmp_path):
    """Pure Python only: CounterFault is still its own class; no OSError is one."""
    shutil.copytree(USERLIB / "simple_pmu", tmp_path / "simple_pmu",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    code = ("import simple_pmu\n"
            "assert simple_pmu.native is None\n"
            "try:\n"
            "    try:\n"
            "        raise OSError(5, 'unrelated')\n"
            "    except simple_pmu.CounterFault:\n"
            "        print('caught as CounterFault')\n"
            "except OSError:\n"
            "    print('passed through')\n"
            "try:\n"
            "    simple_pmu.known_loop(5)\n"
            "except simple_pmu.CounterUnavailable as exc:\n"
            "    print(exc.code)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "passed through\nno_native\n"


def _stubtest(pkg_root):
    return subprocess.run([sys.executable, "-m", "mypy.stubtest", "--concise",
                           "simple_pmu._native"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(pkg_root)), cwd=pkg_root,
                          timeout=300)


def test_stub_matches_the_extension(native_pkg):
    res = _stubtest(native_pkg)
    assert res.returncode == 0, res.stdout + res.stderr


def test_stub_check_can_fail(native_pkg, tmp_path):
    """A stub that promises a function the extension lacks is caught."""
    broken = tmp_path / "pkg"
    shutil.copytree(native_pkg, broken)
    stub = broken / "simple_pmu" / "_native.pyi"
    stub.write_text(stub.read_text() + "def no_such_read() -> int: ...\n")
    res = _stubtest(broken)
    assert res.returncode != 0 and "no_such_read" in res.stdout, res.stdout


def test_every_error_survives_pickling(simple_pmu):
    # An error raised in a multiprocessing worker is pickled back to the parent.
    import pickle

    e = simple_pmu
    samples = [e.Error("x"), e.UsageError("bad"), e.CounterUnavailable("none"),
               e.CounterFault(errno.EFAULT, "fault"),
               e.PerfError("cycles", errno.EACCES, "perf_event_open(cycles) failed: no")]
    for exc in samples:
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc) and back.args == exc.args
    perf = pickle.loads(pickle.dumps(samples[-1]))
    assert (perf.event, perf.errno, perf.reason) == ("cycles", errno.EACCES, samples[-1].reason)


def test_no_public_name_is_also_a_module(simple_pmu):
    """simple_pmu.probe is the function, simple_pmu.measure the class, simple_pmu.native
    the extension: no module of the package has a public name (it would be shadowed by,
    or shadow, what the package exports under that name)."""
    import importlib.util

    for name in simple_pmu.__all__:
        assert importlib.util.find_spec(f"simple_pmu.{name}") is None, name
    assert callable(simple_pmu.probe) and isinstance(simple_pmu.measure, type)
    assert importlib.import_module("simple_pmu._probe").probe is simple_pmu.probe
