"""invoke test-hw without the hardware: its report format, its preflight on this host (a
real call that must stop before anything is built or loaded) and on fake machines, and
the pure helpers of its steps. The steps themselves need a real Intel PMU: untested here."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.hw import hwtest, hwtest_steps
from pmubuild.hw import run as hw_run
from pmubuild.hw.hwtest import HostView, Record

REPO = Path(__file__).resolve().parents[3]

INTEL_FLAGS = "fpu tsc msr apic arch_perfmon pebs bts rep_good nopl xtopology constant_tsc"
AMD_FLAGS = "fpu tsc msr apic rep_good nopl constant_tsc hypervisor topoext"


def cpuinfo(vendor: str, flags: str, model_name: str = "Some CPU") -> str:
    block = (f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 6\nmodel\t\t: 186\n"
             f"model name\t: {model_name}\nstepping\t: 2\nmicrocode\t: 0x4123\n"
             f"flags\t\t: {flags}\n")
    return block + "\n" + block.replace("processor\t: 0", "processor\t: 1") + "\n"


def fake_host(tmp_path: Path, *, vendor="GenuineIntel", flags=INTEL_FLAGS, pmus=("cpu",),
              euid=0, machine="x86_64", modules=True, modules_disabled="0",
              headers=True, rdpmc="1") -> HostView:
    es = tmp_path / "event_source"
    for name in ("software", "tracepoint", *pmus):
        (es / name).mkdir(parents=True)
    for name in pmus:
        (es / name / "rdpmc").write_text(rdpmc + "\n")
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    if modules:
        (proc / "modules").write_text("")
        (proc / "sys" / "kernel" / "modules_disabled").write_text(modules_disabled + "\n")
    kbuild = tmp_path / "lib" / "modules" / "6.1.0-test" / "build"
    if headers:
        kbuild.mkdir(parents=True)
    return HostView(euid, machine, cpuinfo(vendor, flags), es, proc, "6.1.0-test", kbuild)


def codes(pf: hwtest.Preflight) -> list[str]:
    return [p.code for p in pf.problems]


# --- preflight on fake machines ----------------------------------------------------------

def test_preflight_intel_with_pmu_passes(tmp_path):
    pf = hwtest.preflight(fake_host(tmp_path))
    assert pf.ok, pf.reason()
    assert pf.pmus == ("cpu",)
    assert pf.facts["hybrid"] is False
    assert pf.facts["rdpmc_original"] == {"cpu": "1"}
    assert pf.facts["model"] == "186" and pf.facts["microcode"] == "0x4123"
    assert pf.warnings == ()


def test_preflight_amd(tmp_path):
    pf = hwtest.preflight(fake_host(tmp_path, vendor="AuthenticAMD", flags=AMD_FLAGS,
                                    pmus=("cpu",)))
    assert codes(pf) == ["x86_no_perfmon", "x86_no_perfmon"]
    assert "AuthenticAMD CPU" in pf.reason() and "arch_perfmon flag is absent" in pf.reason()
    assert len(pf.warnings) == 1 and "hypervisor" in pf.warnings[0]


def test_preflight_intel_without_pmu(tmp_path):
    pf = hwtest.preflight(fake_host(tmp_path, flags=INTEL_FLAGS.replace("arch_perfmon ", "")
                                    + " hypervisor", pmus=()))
    assert codes(pf) == ["x86_no_perfmon", "no_cpu_pmu"]
    assert "has none of: cpu, cpu_core, cpu_atom" in pf.reason()
    assert "hypervisor" in pf.reason()


def test_preflight_intel_hybrid(tmp_path):
    pf = hwtest.preflight(fake_host(tmp_path, pmus=("cpu_core", "cpu_atom")))
    assert pf.ok, pf.reason()
    assert pf.pmus == ("cpu_core", "cpu_atom")
    assert pf.facts["hybrid"] is True
    assert pf.facts["rdpmc_original"] == {"cpu_core": "1", "cpu_atom": "1"}


def test_preflight_not_root(tmp_path):
    pf = hwtest.preflight(fake_host(tmp_path, euid=1000))
    assert codes(pf) == ["not_root"]
    assert "euid 1000" in pf.reason()


def test_preflight_no_modules_no_headers_arm64(tmp_path):
    assert codes(hwtest.preflight(fake_host(tmp_path / "a", modules=False))) == ["no_modules"]
    assert codes(hwtest.preflight(fake_host(tmp_path / "b", modules_disabled="1"))) == \
        ["modules_disabled"]
    assert codes(hwtest.preflight(fake_host(tmp_path / "c", headers=False))) == \
        ["no_kernel_headers"]
    assert codes(hwtest.preflight(fake_host(tmp_path / "d", machine="aarch64"))) == \
        ["arch_unsupported"]


def test_reason_is_one_line(tmp_path):
    pf = hwtest.preflight(fake_host(tmp_path, vendor="AuthenticAMD", flags=AMD_FLAGS,
                                    pmus=(), euid=5, modules=False, headers=False))
    assert len(pf.problems) == 6
    assert "\n" not in pf.reason()
    with pytest.raises(PipelineError, match="^test-hw cannot run on this machine: not root"):
        hwtest.check(pf)


def test_rdpmc_changes():
    assert hwtest.rdpmc_changes({"cpu": "1"}, "1") == {}
    assert hwtest.rdpmc_changes({"cpu": "2"}, "1") == {"cpu": "2"}
    assert hwtest.rdpmc_changes({"cpu_core": "0", "cpu_atom": "1", "x": None}, "1") == \
        {"cpu_core": "0"}


def rdpmc_writes(monkeypatch) -> list[tuple[str, str]]:
    """Every write_rdpmc, recorded, and done."""
    writes: list[tuple[str, str]] = []
    real = hwtest.write_rdpmc

    def write(es, pmu, value):
        writes.append((pmu, value))
        real(es, pmu, value)

    monkeypatch.setattr(hwtest, "write_rdpmc", write)
    return writes


def test_rdpmc_set_sets_and_restores_when_the_block_raises(tmp_path, monkeypatch):
    view = fake_host(tmp_path, pmus=("cpu_core", "cpu_atom"), rdpmc="2")
    pf = hwtest.preflight(view)
    rdpmc = [view.event_source / p / "rdpmc" for p in pf.pmus]
    writes = rdpmc_writes(monkeypatch)
    with pytest.raises(RuntimeError), \
            hwtest.rdpmc_set(view.event_source, pf.pmus, "1", pf.rdpmc_original) as back:
        assert back == {"cpu_core": "2", "cpu_atom": "2"}
        assert [p.read_text() for p in rdpmc] == ["1", "1"]
        raise RuntimeError("a step blew up")
    assert [p.read_text() for p in rdpmc] == ["2", "2"]
    assert writes == [("cpu_core", "1"), ("cpu_atom", "1"), ("cpu_atom", "2"),
                      ("cpu_core", "2")]


def test_rdpmc_set_writes_nothing_where_it_is_that_already(tmp_path, monkeypatch):
    view = fake_host(tmp_path)
    writes = rdpmc_writes(monkeypatch)
    with hwtest.rdpmc_set(view.event_source, ("cpu",), "1") as back:
        assert back == {}
    assert writes == []
    with hwtest.rdpmc_set(view.event_source, ("cpu",), "0"):  # read here: "1"
        assert (view.event_source / "cpu" / "rdpmc").read_text() == "0"
    assert writes == [("cpu", "0"), ("cpu", "1")]


def test_rdpmc_set_restores_when_a_write_fails(tmp_path, monkeypatch, capsys):
    """The second PMU's write fails: the first is put back, and the one that failed is
    written back too (it may have been half done); a failed put-back is said, not raised."""
    view = fake_host(tmp_path, pmus=("cpu_core", "cpu_atom"))
    writes = []

    def write(es, pmu, value):
        writes.append((pmu, value))
        if pmu == "cpu_atom":
            raise OSError(22, "Invalid argument")
        (es / pmu / "rdpmc").write_text(value)

    monkeypatch.setattr(hwtest, "write_rdpmc", write)
    with pytest.raises(OSError), hwtest.rdpmc_set(view.event_source, ("cpu_core", "cpu_atom"),
                                                  "2"):
        pytest.fail("the block ran although a write failed")
    assert writes == [("cpu_core", "2"), ("cpu_atom", "2"), ("cpu_atom", "1"),
                      ("cpu_core", "1")]
    assert (view.event_source / "cpu_core" / "rdpmc").read_text() == "1"
    assert "error: could not put back" in capsys.readouterr().err


# --- the preflight on this host: a real call -----------------------------------------------

def _host_has_pmu() -> bool:
    """From facts the preflight does not compute: a cpu PMU registered with perf and the
    arch_perfmon flag (a preflight bug must not turn its own test into a skip)."""
    pmus = Path("/sys/bus/event_source/devices")
    has_pmu = any((pmus / n).exists() for n in ("cpu", "cpu_core", "cpu_atom"))
    flags = Path("/proc/cpuinfo").read_text()
    return has_pmu and " arch_perfmon" in flags


@pytest.mark.skipif(_host_has_pmu(), reason="this host passes the preflight (a real PMU)")
def test_preflight_here_stops_before_building_or_loading(tmp_path, monkeypatch):
    def forbidden(*args, **kwargs):
        pytest.fail("test-hw went past its preflight on a machine without a PMU")

    monkeypatch.setattr(hwtest, "insmod", forbidden)
    monkeypatch.setattr(hwtest, "build_module", forbidden)
    monkeypatch.setattr(hwtest, "rdpmc_set", forbidden)
    monkeypatch.setattr(hwtest_steps, "compile_programs", forbidden)
    before = (REPO / "build" / "hw").exists()
    out = tmp_path / "report.json"
    with pytest.raises(PipelineError) as err:
        hw_run.run(out)
    text = str(err.value)
    assert "\n" not in text
    pf = hwtest.preflight(HostView.current())
    assert "no_cpu_pmu" in codes(pf) or "x86_no_perfmon" in codes(pf)
    assert "no CPU PMU registered with perf" in text or "arch_perfmon" in text
    assert text.endswith("Nothing was built or loaded.")
    assert not out.exists()
    assert (REPO / "build" / "hw").exists() == before


@pytest.mark.skipif(_host_has_pmu(), reason="this host passes the preflight (a real PMU)")
def test_invoke_test_hw_here_exits_nonzero_with_the_reason(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "invoke", "test-hw", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "test-hw cannot run on this machine" in errors[0]
    assert not out.exists()
    assert not Path("/sys/module/simple_pmu").exists()


# --- the report ------------------------------------------------------------------------

RECORDS = [
    Record("load", "pass", measured={"ko": "/b/simple-pmu.ko"}),
    Record("known-loop", "fail", "read overhead 900, want 0..200",
           {"read_overhead": 900}, {"read_overhead": "0..200"}),
    Record("perf-concurrent", "skip", "perf not installed (apt install linux-perf)"),
]
HOST = {k: None for k in hwtest.REQUIRED_HOST_KEYS} | {"kernel_release": "6.1.0-test"}


def test_table():
    assert hwtest.table(RECORDS) == [
        "step             status  details",
        "---------------  ------  -------",
        "load             PASS    ko=/b/simple-pmu.ko",
        "known-loop       FAIL    read overhead 900, want 0..200",
        "perf-concurrent  SKIP    perf not installed (apt install linux-perf)",
        "1 passed, 1 failed, 1 skipped",
    ]


def test_table_shortens_long_measurements():
    line = hwtest.table([Record("advance", "pass", measured={"x": "y" * 200})])[2]
    assert line.endswith("...") and len(line) < 90


def test_exit_status():
    ok, bad, skip = RECORDS
    assert hwtest.exit_status([ok]) == 0
    assert hwtest.exit_status([ok, skip]) == 0
    assert hwtest.exit_status([ok, bad]) == 1
    assert hwtest.exit_status([skip]) == 1  # nothing tested is no pass
    assert hwtest.exit_status([]) == 1


def test_record_needs_a_reason_to_fail_or_skip():
    with pytest.raises(ValueError, match="needs a reason"):
        Record("sysfs", "fail")
    with pytest.raises(ValueError, match="status"):
        Record("sysfs", "ok")


def test_json_report(tmp_path):
    path = hwtest.write_report(tmp_path / "sub" / "r.json", HOST, RECORDS)
    data = json.loads(path.read_text())
    assert data["schema_version"] == hwtest.SCHEMA_VERSION == 1
    assert set(data) == {"schema_version", "tool", "host", "steps", "summary", "exit_status"}
    assert all(k in data["host"] for k in hwtest.REQUIRED_HOST_KEYS)
    assert [s["name"] for s in data["steps"]] == ["load", "known-loop", "perf-concurrent"]
    for s in data["steps"]:
        assert set(s) == {"name", "status", "reason", "measured", "expected"}
    assert data["steps"][1] == {"name": "known-loop", "status": "fail",
                                "reason": "read overhead 900, want 0..200",
                                "measured": {"read_overhead": 900},
                                "expected": {"read_overhead": "0..200"}}
    assert data["summary"] == {"pass": 1, "fail": 1, "skip": 1}
    assert data["exit_status"] == 1


def test_required_host_keys_cover_the_brief():
    for k in ("kernel_release", "model_name", "family", "model", "stepping", "microcode",
              "perfmon_version", "hybrid", "hypervisor_flag", "rdpmc_original",
              "module_version", "module_commit"):
        assert k in hwtest.REQUIRED_HOST_KEYS


# --- pure helpers of the steps -------------------------------------------------------------

def test_parse_cpulist():
    assert hwtest_steps.parse_cpulist("0-3,5,7-8\n") == [0, 1, 2, 3, 5, 7, 8]
    assert hwtest_steps.parse_cpulist("\n") == []


def test_index_problem():
    fixed = 1 << 30
    assert hwtest_steps.index_problem(fixed + 1, 8, 0b111) is None
    assert hwtest_steps.index_problem(3, 8, 0b111) is None
    assert "lacks" in hwtest_steps.index_problem(fixed + 3, 8, 0b111)
    assert "neither" in hwtest_steps.index_problem(8, 8, 0b111)
    assert "neither" in hwtest_steps.index_problem(-1, 8, 0b111)


def test_parse_perf_csv():
    text = ("# started on Fri\n\n"
            "123456,,cycles,2001234,100.00,,\n"
            "<not counted>,,instructions,0,0.00,,\n"
            "10,,cpu_core/instructions:u/,100,100.00,,\n"
            "5,,cpu_atom/instructions:u/,100,100.00,,\n")
    assert hwtest_steps.parse_perf_csv(text) == {"cycles": 123456, "instructions": None,
                                                 "instructions:u": 15}


def test_parse_cpuid_and_its_verdict():
    # An Alder Lake P-core: perfmon v5, 8 GP, 3 fixed 48 bits, hybrid, family 6 model 0x97.
    text = ("vendor=GenuineIntel\nmax_leaf=0x20\nleaf1_eax=0x90672\nhypervisor=0\nhybrid=1\n"
            "leafa=0x07300805 0x0 0x7 0x00008603\n")
    c = hwtest_steps.parse_cpuid(text)
    assert c.family_model_stepping == (6, 0x97, 2)
    assert (c.version, c.num_fixed, c.hybrid, c.hypervisor) == (5, 3, True, False)
    assert c.problem is None
    v1 = hwtest_steps.parse_cpuid(text.replace("0x07300805", "0x07300801"))
    assert "version 1" in v1.problem
    one_fixed = hwtest_steps.parse_cpuid(text.replace("0x7 0x00008603", "0x0 0x00008601"))
    assert one_fixed.problem == "CPUID leaf 0xA lists no fixed counter 1 (core cycles)"


@pytest.mark.skipif(not shutil.which("gcc") or not shutil.which("objdump"),
                    reason="needs gcc and objdump")
def test_programs_compile_and_loop_layout_from_the_binary(tmp_path):
    progs = hwtest_steps.compile_programs(tmp_path)
    assert set(progs) == {"hwalt", "hwcpuid", "hwloop", "hwraw", "hwread"}
    # mov; (sub; jnz) per iteration; ret — counted by objdump, not stated anywhere.
    layout = hwtest_steps.loop_layout(progs["hwloop"])
    assert (layout.head, layout.body, layout.tail) == (1, 2, 1)
    assert layout.count(1000) == 2002
    # Without the module every counter program refuses before reading.
    proc = subprocess.run([str(progs["hwread"]), "0"], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (1, "result=unavailable\n")
    assert subprocess.run([str(progs["hwloop"]), "spin", "1000"]).returncode == 0
    cpuid = hwtest_steps.cpuid_facts(progs)
    assert cpuid.vendor in ("GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls")


# --- steps on a fake sysfs, and the run's order with fake hardware ---------------------------

def fake_driver(tmp_path: Path, *, cycle_index="1073741825", event_index="1073741824 1073741826",
                user_access="1", cpus="0-1", **top_values: str) -> Path:
    top = tmp_path / "simple-pmu0"
    values = {"generation": "3", "cpus": cpus, "recheck_ms": "100", "events": "0xc0,0x300",
              "ring": "2", "rdpmc_fixed": "1", "pmu_version": "5", "num_gp": "8",
              "gp_width": "48", "num_fixed": "3", "fixed_width": "48", "fixed_mask": "0x7",
              "events_unavailable": "0x0", "rdpmc_always": "0", "access": "members",
              "members": "0"} | top_values
    for c in (0, 1):
        d = top / f"cpu{c}"
        d.mkdir(parents=True)
        for a, v in {"cycle_index": cycle_index, "event_index": event_index, "generation": "2",
                     "interventions": "0", "kvm_deferrals": "0", "checks": "10",
                     "user_access": user_access, "conflicts": "0"}.items():
            (d / a).write_text(v + "\n")
    for a, v in values.items():
        (top / a).write_text(v + "\n")
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "online").write_text("0-1\n")
    return top


def sysfs_step(tmp_path, monkeypatch, **kw):
    top = fake_driver(tmp_path, **kw)
    monkeypatch.setattr(hwtest_steps, "SYSFS", top)
    monkeypatch.setattr(hwtest_steps, "CPU_SYSFS", tmp_path / "cpu")
    cpuid = hwtest_steps.Cpuid("GenuineIntel", (6, 0x97, 2), False, True,
                               (0x07300805, 0, 7, 0x8603))
    ctx = hwtest_steps.Context({}, tmp_path, ("cpu",), {"cpu": "1"}, cpuid)
    return top, hwtest_steps.step_sysfs(ctx)


def test_step_sysfs_passes_on_the_contract(tmp_path, monkeypatch):
    _, r = sysfs_step(tmp_path, monkeypatch)
    assert r.status == "pass", r.reason


def test_step_sysfs_passes_with_cycles_and_instructions_on_general_counters(tmp_path,
                                                                           monkeypatch):
    """The NMI watchdog holds fixed counter 1: perf puts cycles on a general counter."""
    _, r = sysfs_step(tmp_path, monkeypatch, cycle_index="2", event_index="0 1073741826")
    assert r.status == "pass", r.reason


@pytest.mark.parametrize("kw, words", [
    ({"cycle_index": "-1"}, "cpu0: -1"),
    ({"cycle_index": "1073741827"}, "fixed counter 3"),
    ({"event_index": "1073741824"}, "1 event_index entries for 2 events"),
    ({"user_access": "0"}, "user_access 0"),
    ({"cpus": ""}, "cpus is empty"),
    ({"cpus": "0"}, "cpus 0, online [0, 1]"),
    ({"cycle_index": "1073741824"}, "event 0x3c at fixed counter 0"),
    ({"event_index": "1073741825 1073741826"}, "event 0xc0 at fixed counter 1"),
    ({"event_index": "1073741824 3"}, "event 0x300 at general counter 3, but it is fixed-only"),
    ({"cycle_index": "3", "event_index": "3 1073741826"}, "two events at one counter"),
    ({"access": "everyone"}, "access everyone, want members"),
    ({"rdpmc_always": "1"}, "rdpmc_always 1, want 0"),
    ({"members": "-1"}, "members '-1', want a count"),
])
def test_step_sysfs_fails(tmp_path, monkeypatch, kw, words):
    _, r = sysfs_step(tmp_path, monkeypatch, **kw)
    assert r.status == "fail" and words in r.reason, r.reason


def test_step_sysfs_missing_file(tmp_path, monkeypatch):
    top = fake_driver(tmp_path / "x")
    (top / "cpu1" / "conflicts").unlink()
    (top / "rdpmc_always").unlink()
    (top / "members").unlink()
    monkeypatch.setattr(hwtest_steps, "SYSFS", top)
    monkeypatch.setattr(hwtest_steps, "CPU_SYSFS", tmp_path / "x" / "cpu")
    r = hwtest_steps.step_sysfs(None)
    assert (r.status, r.reason) == ("fail", "missing: rdpmc_always members cpu1/conflicts")


def fake_run(tmp_path, monkeypatch, *, insmod_fails=False, step_status="pass", rdpmc="1",
             steps_raise=None, insmod_rdpmc=None, rmmod_rdpmc=None):
    """hw_run.run on a fake machine whose rdpmc starts at `rdpmc`; insmod_rdpmc and
    rmmod_rdpmc: what a module that changes it would write there at load and unload."""
    view = fake_host(tmp_path, rdpmc=rdpmc)
    calls = []
    loaded = []
    cpuid = hwtest_steps.Cpuid("GenuineIntel", (6, 0x97, 2), False, False,
                               (0x07300805, 0, 7, 0x8603))
    rdpmc_file = view.event_source / "cpu" / "rdpmc"

    def insmod(ko):
        calls.append("insmod")
        if insmod_fails:
            raise PipelineError("insmod: ERROR: could not insert module: Operation not permitted")
        if insmod_rdpmc is not None:
            rdpmc_file.write_text(insmod_rdpmc)
        loaded.append(ko)

    def steps(ctx):
        calls.append(f"steps rdpmc={rdpmc_file.read_text().strip()}")
        if steps_raise is not None:
            raise steps_raise
        return [Record("sysfs", step_status, "" if step_status == "pass" else "broken")]

    def rmmod():
        calls.append("rmmod")
        if rmmod_rdpmc is not None:
            rdpmc_file.write_text(rmmod_rdpmc)
        loaded.clear()
        return None

    monkeypatch.setattr(hwtest_steps, "compile_programs", lambda out: {})
    monkeypatch.setattr(hwtest_steps, "cpuid_facts", lambda progs: cpuid)
    monkeypatch.setattr(hwtest_steps, "perf_baseline",
                        lambda ctx: Record("perf-baseline", "skip", "no perf"))
    monkeypatch.setattr(hwtest_steps, "loaded_steps", steps)
    monkeypatch.setattr(hwtest_steps, "unload_record",
                        lambda err: Record("unload", "pass" if err is None else "fail", err or ""))
    monkeypatch.setattr(hwtest, "build_module", lambda kbuild: calls.append("build") or
                        tmp_path / "simple-pmu.ko")
    monkeypatch.setattr(hwtest, "modinfo", lambda ko, f: "0.1")
    monkeypatch.setattr(hwtest, "insmod", insmod)
    monkeypatch.setattr(hwtest, "rmmod", rmmod)
    monkeypatch.setattr(hwtest, "module_loaded", lambda: bool(loaded))
    writes = rdpmc_writes(monkeypatch)
    out = tmp_path / "r.json"
    rc = hw_run.run(out, view)
    return rc, calls, json.loads(out.read_text()), rdpmc_file.read_text(), writes


def steps_of(data) -> dict[str, dict]:
    return {s["name"]: s for s in data["steps"]}


def test_run_order_with_fake_hardware(tmp_path, monkeypatch, capsys):
    """rdpmc 1 already (perf's default): the steps run with it, and nothing writes it."""
    rc, calls, data, rdpmc, writes = fake_run(tmp_path, monkeypatch)
    assert calls == ["build", "insmod", "steps rdpmc=1", "rmmod"]
    assert writes == []
    assert rc == 0 and data["exit_status"] == 0
    assert [s["name"] for s in data["steps"]] == ["perf-baseline", "load", "rdpmc-load",
                                                  "sysfs", "unload", "rdpmc-unload",
                                                  "rdpmc-restored"]
    assert rdpmc.strip() == "1"
    assert data["host"]["perfmon_version"] == 5 and data["host"]["module_version"] == "0.1"
    assert all(k in data["host"] for k in hwtest.REQUIRED_HOST_KEYS)
    printed = capsys.readouterr().out
    assert "6 passed, 0 failed, 1 skipped" in printed and str(tmp_path / "r.json") in printed


@pytest.mark.parametrize("original", ["2", "0"])
def test_run_sets_rdpmc_1_for_the_block_and_puts_it_back(tmp_path, monkeypatch, original):
    rc, calls, data, rdpmc, writes = fake_run(tmp_path, monkeypatch, rdpmc=original)
    assert calls == ["build", "insmod", "steps rdpmc=1", "rmmod"]
    assert writes == [("cpu", "1"), ("cpu", original)]
    assert rdpmc == original and rc == 0
    assert steps_of(data)["rdpmc-restored"]["status"] == "pass"


def test_run_puts_rdpmc_back_when_a_step_raises(tmp_path, monkeypatch):
    """An exception no step caught: the module is still unloaded, rdpmc still put back."""
    with pytest.raises(KeyboardInterrupt):
        fake_run(tmp_path, monkeypatch, rdpmc="2", steps_raise=KeyboardInterrupt())
    assert (tmp_path / "event_source" / "cpu" / "rdpmc").read_text() == "2"


def test_run_failed_step_and_failed_insmod(tmp_path, monkeypatch):
    rc, calls, data, rdpmc, _ = fake_run(tmp_path / "a", monkeypatch, step_status="fail")
    assert rc == 1 and calls[-1] == "rmmod" and rdpmc.strip() == "1"
    rc, calls, data, rdpmc, writes = fake_run(tmp_path / "b", monkeypatch, insmod_fails=True,
                                              rdpmc="2")
    assert rc == 1 and calls == ["build", "insmod"] and rdpmc == "2"
    assert writes == [("cpu", "1"), ("cpu", "2")]
    load = next(s for s in data["steps"] if s["name"] == "load")
    assert load["status"] == "fail" and "Operation not permitted" in load["reason"]
    assert "rdpmc-load" not in steps_of(data) and "rdpmc-unload" not in steps_of(data)


def test_run_fails_a_module_that_changes_rdpmc(tmp_path, monkeypatch):
    rc, _, data, _, _ = fake_run(tmp_path / "a", monkeypatch, insmod_rdpmc="2")
    step = steps_of(data)["rdpmc-load"]
    assert rc == 1 and step["status"] == "fail", step
    assert step["reason"] == "insmod changed rdpmc from {'cpu': '1'} to {'cpu': '2'}"
    assert steps_of(data)["rdpmc-unload"]["status"] == "pass"
    rc, _, data, _, _ = fake_run(tmp_path / "b", monkeypatch, rmmod_rdpmc="2")
    step = steps_of(data)["rdpmc-unload"]
    assert rc == 1 and step["status"] == "fail", step
    assert step["reason"] == "rmmod changed rdpmc from {'cpu': '1'} to {'cpu': '2'}"
    assert steps_of(data)["rdpmc-load"]["status"] == "pass"


# --- who may read: the raw reader's verdicts ---------------------------------------------

RAW_OK = ("cpu=1 map=ok index=1073741825 gen=7 gen_after=7 c0=100 c1=5100 delta=5000 "
          "result=ok\n")
RAW_FAULT = "cpu=1 map=none index=1073741825 gen=7 result=sigsegv code=128 at_rdpmc=1\n"
SEGV = -11


@pytest.mark.parametrize("rc, out, want", [
    (0, RAW_OK, ("ok", "ok", 5000)),
    (SEGV, RAW_FAULT, ("sigsegv", "none", None)),
    (SEGV, RAW_FAULT.replace("map=none", "map=open:EACCES"), ("sigsegv", "open:EACCES", None)),
    (1, "cpu=0 map=mmap:EPERM index=2 gen=3 gen_after=4 c0=1 c1=9 delta=8 result=generation\n",
     ("generation", "mmap:EPERM", None)),
    (1, "cpu=0 map=none index=-1 gen=3 result=unplaced\n", ("unplaced", "none", None)),
    (1, "cpu=0 map=open:ENOENT result=unavailable\n", ("unavailable", "open:ENOENT", None)),
    (1, "cpu=0 map=ok index=2 gen=3 gen_after=3 c0=9 c1=9 delta=0 result=stalled\n",
     ("stalled", "ok", None)),
    # Killed by SIGSEGV, but not at its RDPMC (or with nothing said): not the fault wanted.
    (SEGV, RAW_FAULT.replace("at_rdpmc=1", "at_rdpmc=0"), ("error", "none", None)),
    (SEGV, "cpu=1 map=ok index=1 gen=7 ", ("error", "ok", None)),
    # The handler saw the fault, yet the process did not die of it.
    (3, RAW_FAULT, ("error", "none", None)),
    (0, RAW_FAULT, ("error", "none", None)),
    # Another signal; a read said ok but exited 1, or exited 0 without advancing.
    (-9, RAW_OK, ("error", "ok", None)),
    (1, RAW_OK, ("error", "ok", None)),
    (0, RAW_OK.replace("delta=5000", "delta=0"), ("error", "ok", 0)),
    (0, RAW_OK.replace("delta=5000 ", ""), ("error", "ok", None)),
    (2, "", ("error", "?", None)),
    # hwraw exits 1 after a result other than ok (tests/hw/src/hwraw.c): any other exit
    # status with one (0: it said stalled yet exited as after an ok read; 2: bad arguments
    # or a CPU it cannot run on) is no such result.
    (0, "cpu=0 map=ok index=2 gen=3 gen_after=3 c0=9 c1=9 delta=0 result=stalled\n",
     ("error", "ok", None)),
    (2, "cpu=0 map=open:ENOENT result=unavailable\n", ("error", "open:ENOENT", None)),
    (0, "cpu=0 map=none index=-1 gen=3 result=unplaced\n", ("error", "none", None)),
    (3, "cpu=0 map=ok index=2 gen=3 gen_after=4 c0=1 c1=9 delta=8 result=generation\n",
     ("error", "ok", None)),
])
def test_judge_raw(rc, out, want):
    r = hwtest_steps.judge_raw(rc, out)
    assert (r.result, r.map, r.delta) == want, r


def test_judge_raw_says_why():
    assert hwtest_steps.judge_raw(SEGV, RAW_FAULT).brief() == "sigsegv map=none (si_code 128)"
    assert hwtest_steps.judge_raw(0, RAW_OK).brief() == "ok map=ok delta=5000"
    assert "killed by SIGKILL" in hwtest_steps.judge_raw(-9, RAW_OK).detail
    r = hwtest_steps.judge_raw(2, "", "hwraw: cannot run on CPU 9: Invalid argument\n")
    assert r.detail == ("exit status 2: no output; stderr: hwraw: cannot run on CPU 9: "
                        "Invalid argument")
    assert "not death by SIGSEGV" in hwtest_steps.judge_raw(3, RAW_FAULT).detail
    stalled = "cpu=0 map=ok index=2 gen=3 gen_after=3 c0=9 c1=9 delta=0 result=stalled"
    assert hwtest_steps.judge_raw(0, stalled + "\n").detail == f"exit status 0: {stalled}"
    assert hwtest_steps.judge_raw(2, "cpu=0 map=ok result=unavailable\n").detail == \
        "exit status 2: cpu=0 map=ok result=unavailable"
    assert "not at its RDPMC" in hwtest_steps.judge_raw(
        SEGV, RAW_FAULT.replace("at_rdpmc=1", "at_rdpmc=0")).detail


def test_raw_problems():
    ok = hwtest_steps.RawRead("ok", "ok", 10)
    fault = hwtest_steps.RawRead("sigsegv", "none", detail="si_code 128")
    assert hwtest_steps.raw_problems({0: ok, 1: ok}, "ok", "ok") == []
    assert hwtest_steps.raw_problems({0: ok, 1: fault}, "ok", "ok") == \
        ["cpu1: sigsegv map=none (si_code 128), want ok map=ok"]
    # The right result with the wrong map is wrong too: a read not let in the way wanted.
    assert hwtest_steps.raw_problems({0: ok}, "ok", "none") == \
        ["cpu0: ok map=ok delta=10, want ok map=none"]
    assert hwtest_steps.raw_problems({}, "ok", "ok") == ["no CPU to read on"]


def test_rdpmc_unchanged():
    r = hwtest_steps.rdpmc_unchanged("rdpmc-load", "insmod", {"cpu": "1"}, {"cpu": "1"})
    assert r.status == "pass" and r.measured == {"before": {"cpu": "1"}, "after": {"cpu": "1"}}
    r = hwtest_steps.rdpmc_unchanged("rdpmc-unload", "rmmod", {"cpu": "1"}, {"cpu": "2"})
    assert (r.status, r.reason) == ("fail", "rmmod changed rdpmc from {'cpu': '1'} to "
                                            "{'cpu': '2'}")
    assert r.expected == {"after": {"cpu": "1"}}


def test_unused_gid():
    assert hwtest_steps.unused_gid(lambda g: False) == 4242
    assert hwtest_steps.unused_gid(lambda g: g in (4242, 4243)) == 4244
    assert hwtest_steps.unused_gid(lambda g: False, first=65534) == 65535  # never nogroup
    with pytest.raises(PipelineError, match="every group id"):
        hwtest_steps.unused_gid(lambda g: True)


def test_exec_dir(tmp_path, monkeypatch):
    assert hwtest_steps.exec_dir((str(tmp_path / "missing"), str(tmp_path))) == str(tmp_path)
    with pytest.raises(PipelineError, match="missing or mounted noexec"):
        hwtest_steps.exec_dir((str(tmp_path / "missing"),))
    real = os.statvfs
    noexec = str(tmp_path / "noexec")

    class Flags:
        f_flag = os.ST_NOEXEC | os.ST_NOSUID

    monkeypatch.setattr(os, "statvfs", lambda p: Flags() if p == noexec else real(p))
    assert hwtest_steps.exec_dir((noexec, str(tmp_path))) == str(tmp_path)


def test_node_access_never_opens_more_than_both_states(tmp_path, monkeypatch):
    """0600 root -> 0660 group 4242 and back: each step's mode is one both the old and the
    new state grant, until the group is the new one."""
    node = tmp_path / "node"
    node.write_text("")
    node.chmod(0o600)
    calls = []
    real_chmod = os.chmod

    def chmod(path, mode):
        calls.append(("chmod", oct(mode)))
        real_chmod(path, mode)

    monkeypatch.setattr(os, "chmod", chmod)
    monkeypatch.setattr(os, "chown", lambda path, uid, gid: calls.append(("chown", gid)))
    hwtest_steps.node_access(node, 4242, 0o660)
    assert calls == [("chmod", "0o600"), ("chown", 4242), ("chmod", "0o660")]
    calls.clear()
    hwtest_steps.node_access(node, 0, 0o600)
    assert calls == [("chmod", "0o600"), ("chown", 0), ("chmod", "0o600")]


# --- the raw reader, built and run on this host (no module, no PMU access) ----------------

def _rdpmc_open_to_all() -> bool:
    """rdpmc 2 on this host: user RDPMC works everywhere, so hwraw's fault cannot be seen."""
    es = Path("/sys/bus/event_source/devices")
    return any((es / p / "rdpmc").is_file() and (es / p / "rdpmc").read_text().strip() == "2"
               for p in hwtest.X86_CPU_PMUS)


@pytest.fixture(scope="module")
def hwraw(tmp_path_factory) -> Path:
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    import platform
    if platform.machine() != "x86_64":
        pytest.skip("hwraw is x86-64 code")
    return hwtest_steps.compile_programs(tmp_path_factory.mktemp("hw"))["hwraw"]


def test_hwraw_without_the_module(hwraw):
    """No module here: it says so without reading, let in or not; --index reads anyway."""
    assert hwtest_steps.run_raw(hwraw, 0).result == "unavailable"
    r = hwtest_steps.run_raw(hwraw, 0, map_node=True)
    assert (r.result, r.map) == ("unavailable", "open:ENOENT")


@pytest.mark.skipif(_rdpmc_open_to_all(), reason="rdpmc 2 here: user RDPMC does not fault")
def test_hwraw_dies_of_its_rdpmc_fault(hwraw):
    """A real fault: user RDPMC outside a perf-mapping process (no module here) is a #GP;
    the kernel's SIGSEGV kills it after its handler said where, and judge_raw sees it."""
    proc = subprocess.run([str(hwraw), "--index", "0", "0"], capture_output=True, text=True)
    assert proc.returncode == SEGV, proc
    assert proc.stdout.endswith("result=sigsegv code=128 at_rdpmc=1\n"), proc.stdout
    r = hwtest_steps.judge_raw(proc.returncode, proc.stdout, proc.stderr)
    assert (r.result, r.map, r.detail) == ("sigsegv", "none", "si_code 128")


def test_hwraw_says_where_it_faulted(hwraw):
    """at_rdpmc tells a fault at hwraw's RDPMC from one elsewhere: --fault-elsewhere reads
    address 0 where its first RDPMC would be (SEGV_MAPERR, at_rdpmc=0), which judge_raw
    does not take for the fault wanted. Here (no module, no PMU access) the RDPMC itself
    faults too: at_rdpmc=1, the fault wanted."""
    proc = subprocess.run([str(hwraw), "--fault-elsewhere", "--index", "0", "0"],
                          capture_output=True, text=True)
    assert proc.returncode == SEGV, proc
    assert proc.stdout == "cpu=0 map=none index=0 gen=none result=sigsegv code=1 " \
        "at_rdpmc=0\n", proc.stdout
    r = hwtest_steps.judge_raw(proc.returncode, proc.stdout, proc.stderr)
    assert (r.result, r.map) == ("error", "none") and "not at its RDPMC" in r.detail, r
    if _rdpmc_open_to_all():
        return  # rdpmc 2 here: user RDPMC does not fault
    proc = subprocess.run([str(hwraw), "--index", "0", "0"], capture_output=True, text=True)
    assert proc.returncode == SEGV, proc
    assert proc.stdout == "cpu=0 map=none index=0 gen=none result=sigsegv code=128 " \
        "at_rdpmc=1\n", proc.stdout
    assert hwtest_steps.judge_raw(proc.returncode, proc.stdout).result == "sigsegv"


REAL_POPEN = subprocess.Popen


def holder_args(monkeypatch, *extra):
    """Holders whose hwraw gets `extra` arguments first (--node, --index)."""
    argv = []

    def popen(args, **kw):
        argv.append(args)
        return REAL_POPEN([args[0], *extra, *args[1:]], **kw)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return argv


@pytest.mark.skipif(_rdpmc_open_to_all(), reason="rdpmc 2 here: user RDPMC does not fault")
def test_hwraw_holder_protocol(hwraw, monkeypatch, tmp_path):
    """--hold as the members step drives it, with a plain file for the node (--node):
    held with a mapping, a read, unmap (munmap succeeds), EOF; then a holder whose read
    faults (--index: no module needed), which ends it, judged from its exit."""
    plain = tmp_path / "plain"
    plain.write_text("not a node\n")
    with hwtest_steps.Holder(hwraw, 0) as h:  # the real node: none here
        assert h.map == "open:ENOENT"
        assert h.unmap() == "unmapped rc=-1"  # nothing was mapped
    argv = holder_args(monkeypatch, "--node", str(plain))
    with hwtest_steps.Holder(hwraw, 0) as h:
        assert h.map == "ok"
        maps = Path(f"/proc/{h.proc.pid}/maps")
        assert str(plain) in maps.read_text()  # one page, read-only, shared
        assert [ln.split()[1] for ln in maps.read_text().splitlines()
                if ln.endswith(str(plain))] == ["r--s"]
        r = h.read()
        assert (r.result, r.map) == ("unavailable", "ok"), r
        assert h.unmap() == "unmapped rc=0"
        assert str(plain) not in maps.read_text()
        assert h.read().map == "unmapped"
        assert h.close() == 0
    assert argv == [[str(hwraw), "--hold", "--map", "0"]]
    holder_args(monkeypatch, "--node", str(plain), "--index", "0")
    with hwtest_steps.Holder(hwraw, 0) as h:
        assert h.map == "ok"
        r = h.read()  # a mapping of something else lets nobody in
        assert (r.result, r.map) == ("sigsegv", "ok"), r
        assert h.close() == SEGV
    holder_args(monkeypatch, "--index", "0")
    with hwtest_steps.Holder(hwraw, 0, map_node=False) as h:
        assert h.map == "none"
        assert h.read().result == "sigsegv"


def test_hwraw_holder_protect_and_children(hwraw, monkeypatch, tmp_path):
    """The member-fork step's commands, with a plain file for the node: a read-only shared
    mapping of a file opened O_RDONLY cannot be made writable either (EACCES); each child
    reads once and ends (no module: unavailable, exit 1), the fork's with the holder's
    mapping inherited, the exec's not let in; the holder lives on. Then with --index (no
    module needed): here nobody may RDPMC, so both children die of it, judged so."""
    plain = tmp_path / "plain"
    plain.write_text("not a node\n")
    holder_args(monkeypatch, "--node", str(plain))
    with hwtest_steps.Holder(hwraw, 0) as h:
        assert h.map == "ok"
        assert h.protect() == "protect rc=-1 errno=EACCES"
        r = h.child(exec_=False)
        assert (r.result, r.map) == ("unavailable", "inherited"), r
        r = h.child(exec_=True)
        assert (r.result, r.map) == ("unavailable", "none"), r
        assert h.read().map == "ok"
        assert h.unmap() == "unmapped rc=0"
        assert h.protect() == "protect rc=-1 errno=0"  # nothing mapped: not tried
        assert h.close() == 0
    # --rdwr: the file mode allows writing, so only a driver's VM_MAYWRITE refusal would.
    with hwtest_steps.Holder(hwraw, 0, rdwr=True) as h:
        assert h.map == "ok"
        assert h.protect() == "protect rc=0 errno=0"
        assert h.close() == 0
    if _rdpmc_open_to_all():
        return  # rdpmc 2 here: user RDPMC does not fault
    holder_args(monkeypatch, "--node", str(plain), "--index", "0")
    with hwtest_steps.Holder(hwraw, 0) as h:
        for exec_, mapped in ((False, "inherited"), (True, "none")):
            r = h.child(exec_)
            assert (r.result, r.map) == ("sigsegv", mapped), r
        assert h.close() == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a program as uid 65534: needs root")
def test_hwraw_as_nobody(hwraw):
    """public_copy and run_raw as uid 65534 (the other-user and everyone steps): the copy
    runs as that user, here without the module, and is gone after."""
    with hwtest_steps.public_copy(hwraw) as prog:
        assert prog.parent != hwraw.parent and os.stat(prog).st_mode & 0o777 == 0o755
        proc = subprocess.run(["id", "-u"], capture_output=True, text=True, user=65534)
        assert proc.stdout.strip() == "65534"
        r = hwtest_steps.run_raw(prog, 0, map_node=True, who=hwtest_steps.NOBODY_WHO)
        assert (r.result, r.map) == ("unavailable", "open:ENOENT"), r
    assert not prog.exists() and not prog.parent.exists()


# --- the steps about who may read, against a fake driver -----------------------------------

class FakeDriver:
    """The x86 driver's access rules as issue 23 states them, on a fake sysfs, rdpmc file
    and node, answering for hwraw (run_raw, Holder) and rmmod. `broken` names one rule
    it gets wrong, as a driver with that bug would."""

    def __init__(self, tmp_path, monkeypatch, broken=None):
        self.top = fake_driver(tmp_path)
        self.es = tmp_path / "event_source"
        (self.es / "cpu").mkdir(parents=True)
        (self.es / "cpu" / "rdpmc").write_text("1\n")
        self.node = tmp_path / "simple-pmu"
        self.node.write_text("")
        self.node.chmod(0o600)
        self.node_gid = 0  # the fake node's group (chown needs root: kept here)
        self.broken = broken
        self.loaded = True
        self.runs = []
        self.visits = []
        cpuid = hwtest_steps.Cpuid("GenuineIntel", (6, 0x97, 2), False, False,
                                   (0x07300805, 0, 7, 0x8603))
        self.ctx = hwtest_steps.Context({"hwraw": tmp_path / "hwraw"}, self.es, ("cpu",),
                                        {"cpu": "1"}, cpuid)
        real_write = hwtest.write_rdpmc

        def write_rdpmc(es, pmu, value):
            real_write(es, pmu, value)
            if broken != "access-ignores-rdpmc":  # the module's check follows rdpmc
                self.attr_write("access", "everyone" if value == "2" else "members")
                self.attr_write("rdpmc_always", "1" if value == "2" else "0")

        def node_access(path, gid, mode):
            assert path == self.node
            # Once changed, a "-stuck" node keeps that group or mode (the put-back fails).
            changed = (self.node_gid, self.node.stat().st_mode & 0o777) != (0, 0o600)
            if not (changed and broken == "node-group-stuck"):
                self.node_gid = gid
            if not (changed and broken == "node-mode-stuck"):
                path.chmod(mode)

        @contextmanager
        def public_copy(prog):
            yield prog.parent / "public" / prog.name

        for name, value in (("SYSFS", self.top), ("CPU_SYSFS", tmp_path / "cpu"),
                            ("NODE", self.node), ("run_raw", self.run_raw),
                            ("Holder", self.holder_class()), ("public_copy", public_copy),
                            ("node_access", node_access), ("MEMBERS_WAIT_S", 0.05),
                            ("visit_cpus", self.visits.append),
                            ("ACCESS_WAIT_S", 0.05),
                            ("os", StatOs({self.node: self.node_stat}))):
            monkeypatch.setattr(hwtest_steps, name, value)
        monkeypatch.setattr(hwtest, "write_rdpmc", write_rdpmc)
        monkeypatch.setattr(hwtest, "rmmod", self.rmmod)
        monkeypatch.setattr(hwtest, "module_loaded", lambda: self.loaded)

    def attr_write(self, name, value):
        (self.top / name).write_text(f"{value}\n")

    def node_stat(self):
        """The node as the steps see it: the file's mode, the group kept here."""
        st = self.node.stat()
        return SimpleNamespace(st_mode=st.st_mode, st_uid=0, st_gid=self.node_gid,
                               st_rdev=st.st_rdev)

    def rdpmc(self):
        return (self.es / "cpu" / "rdpmc").read_text().strip()

    def members(self, change):
        n = int((self.top / "members").read_text()) + change
        self.attr_write("members", n)

    def may_open(self, who):
        mode = self.node.stat().st_mode & 0o777
        if who is None or self.broken == "node-open-to-all" or mode & 0o006:
            return True
        if self.broken == "group-ignored":  # the node's group lets nobody in
            return False
        return bool((self.node_gid == who.gid or self.node_gid in who.groups) and mode & 0o060)

    def map(self, who):
        if not self.may_open(who):
            return "open:EACCES"
        if self.rdpmc() == "0" and self.broken != "maps-at-rdpmc-0":
            return "mmap:EPERM"
        return "ok"

    def reads(self, mapped, who=None):
        everyone = self.rdpmc() == "2" and (who is None or self.broken != "everyone-root-only")
        return everyone or mapped == "ok" or self.broken == "counters-for-all"

    def run_raw(self, prog, cpu, map_node=False, who=None):
        self.runs.append((prog.parent.name, cpu, map_node, who))
        mapped = self.map(who) if map_node else "none"
        if mapped == "mmap:EPERM" and self.broken == "counts-refused":
            self.members(+1)  # counted, though perf refused it, and never uncounted
        if self.reads(mapped, who):
            return hwtest_steps.RawRead("ok", mapped, 1000)
        return hwtest_steps.RawRead("sigsegv", mapped, detail="si_code 128")

    def rmmod(self):
        if int((self.top / "members").read_text()) and self.broken != "unpinned":
            return "rmmod: ERROR: Module simple_pmu is in use"
        self.loaded = False
        return None

    def holder_class(self):
        drv = self

        class FakeHolder:
            def __init__(self, prog, cpu, map_node=True, rdwr=False):
                self.map = drv.map(None) if map_node else "none"
                self.mapped, self.alive = self.map == "ok", True
                if self.mapped and drv.broken != "members-not-counted":
                    drv.members(+1)

            def read(self):
                if drv.reads("ok" if self.mapped else "none"):
                    return hwtest_steps.RawRead("ok", self.map, 500)
                self.alive = False
                return hwtest_steps.RawRead("sigsegv", self.map, detail="si_code 128")

            def protect(self):
                ok = drv.broken == "writable-mapping" and self.mapped
                if drv.broken == "protect-einval":
                    return "protect rc=-1 errno=EINVAL"
                return "protect rc=0 errno=0" if ok else "protect rc=-1 errno=EACCES"

            def child(self, exec_):
                keeps = self.mapped and (not exec_ or drv.broken == "exec-keeps-grant")
                if drv.broken == "child-not-let-in" and not exec_:
                    keeps = False
                mapped = "none" if exec_ else "inherited"
                if drv.broken == "exec-not-fresh" and exec_:
                    mapped = "inherited"
                if drv.broken == "fork-revokes-holder":
                    self.mapped = False
                if drv.reads("ok" if keeps else "none"):
                    return hwtest_steps.RawRead("ok", mapped, 700)
                return hwtest_steps.RawRead("sigsegv", mapped, detail="si_code 128")

            def unmap(self):
                if self.mapped:
                    drv.members(-1)
                    self.mapped = drv.broken == "munmap-keeps-grant"
                self.map = "unmapped"
                return "unmapped rc=0"

            def close(self):
                if self.alive and self.mapped and drv.broken != "exit-keeps-member":
                    drv.members(-1)
                self.mapped = False
                status, self.alive = (0 if self.alive else SEGV), False
                return status

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.close()

        return FakeHolder


class StatOs:
    """os, for hwtest_steps, but stat() of the paths given is their function's answer (a
    node's group without chown, which needs root; a character device without mknod)."""

    def __init__(self, stats):
        self.stats = stats

    def __getattr__(self, name):
        return getattr(os, name)

    def stat(self, path, *args, **kwargs):
        fake = self.stats.get(Path(path))
        return fake() if fake else os.stat(path, *args, **kwargs)


ACCESS_STEPS = {
    "non-member-faults": hwtest_steps.step_non_member,
    "member-reads": hwtest_steps.step_member,
    "members": hwtest_steps.step_members,
    "member-fork": hwtest_steps.step_member_fork,
    "other-user": hwtest_steps.step_other_user,
    "rdpmc-0": hwtest_steps.step_rdpmc_never,
    "everyone": hwtest_steps.step_everyone,
}


def run_access_steps(drv):
    return {name: fn(drv.ctx) for name, fn in ACCESS_STEPS.items()}


def test_access_steps_pass_on_a_driver_that_keeps_the_rules(tmp_path, monkeypatch):
    drv = FakeDriver(tmp_path, monkeypatch)
    records = run_access_steps(drv)
    for name, r in records.items():
        assert (r.name, r.status) == (name, "pass"), r
    # Whatever they changed is back: rdpmc, the node, the count, the module loaded.
    assert drv.rdpmc() == "1" and drv.node.stat().st_mode & 0o777 == 0o600
    assert drv.node_gid == 0 and (drv.top / "members").read_text() == "0\n" and drv.loaded
    assert (drv.top / "access").read_text() == "members\n"
    m = records["members"].measured
    assert (m["while_mapped"], m["after_munmap"], m["while_mapped_2"], m["after_exit"]) == \
        ("1", "0", "1", "0")
    assert m["rmmod_while_mapped"] == "rmmod: ERROR: Module simple_pmu is in use"
    # uid 65534 runs the public copy, with the temporary group only where it is wanted.
    nobody = [(d, w) for d, _, _, w in drv.runs if w is not None]
    assert {d for d, _ in nobody} == {"public"}
    assert [w.groups for _, w in nobody if w.groups] == [(4242,), (4242,)]
    assert records["other-user"].measured["group"] == 4242


@pytest.mark.parametrize("broken, step, words", [
    ("counters-for-all", "non-member-faults", "cpu0: ok map=none delta=1000, want sigsegv"),
    ("counters-for-all", "other-user", "uid 65534 not in the node's group: cpu0: ok"),
    ("counters-for-all", "everyone", "root, rdpmc put back: cpu0: ok"),
    ("node-open-to-all", "other-user",
     "uid 65534 not in the node's group: cpu0: ok map=ok delta=1000, want sigsegv "
     "map=open:EACCES"),
    ("members-not-counted", "members", "members 0 while mapped, want 1"),
    ("munmap-keeps-grant", "members", "read after munmap: ok"),
    ("exit-keeps-member", "members", "members 1 after exit, want 0"),
    ("unpinned", "members", "rmmod succeeded while a let-in process lived"),
    ("writable-mapping", "member-fork", "mprotect read-write: protect rc=0 errno=0"),
    ("exec-keeps-grant", "member-fork", "child exec: ok map=none delta=700, want sigsegv"),
    ("child-not-let-in", "member-fork", "child: sigsegv map=inherited (si_code 128), want ok"),
    ("protect-einval", "member-fork", "mprotect read-write: protect rc=-1 errno=EINVAL"),
    ("exec-not-fresh", "member-fork",
     "child exec: sigsegv map=inherited (si_code 128), want sigsegv map=none"),
    ("fork-revokes-holder", "member-fork", "the holder after its children: sigsegv"),
    ("maps-at-rdpmc-0", "rdpmc-0", "cpu0: ok map=ok delta=1000, want sigsegv map=mmap:EPERM"),
    ("access-ignores-rdpmc", "everyone", "access members, want everyone"),
    ("counts-refused", "rdpmc-0", "members 2 with rdpmc 0, 0 before"),  # one per CPU
    ("group-ignored", "other-user",
     "uid 65534 in group 4242: cpu0: sigsegv map=open:EACCES (si_code 128), want ok map=ok"),
    ("everyone-root-only", "everyone",
     "uid 65534, rdpmc 2: cpu0: sigsegv map=none (si_code 128), want ok map=none"),
    ("node-group-stuck", "other-user", "not put back: 4242 0600, was root 0600"),
    ("node-mode-stuck", "other-user", "not put back: root 0660, was root 0600"),
])
def test_access_steps_fail_on_a_broken_driver(tmp_path, monkeypatch, broken, step, words):
    drv = FakeDriver(tmp_path, monkeypatch, broken)
    r = ACCESS_STEPS[step](drv.ctx)
    assert r.status == "fail" and words in r.reason, r.reason
    if broken == "access-ignores-rdpmc":  # waited, waking every CPU for its check
        assert drv.visits and all(v == [0, 1] for v in drv.visits)


def test_visit_cpus_puts_the_affinity_back():
    before = os.sched_getaffinity(0)
    hwtest_steps.visit_cpus(sorted(before))
    assert os.sched_getaffinity(0) == before


def test_access_steps_put_rdpmc_and_the_node_back_when_a_read_raises(tmp_path, monkeypatch):
    drv = FakeDriver(tmp_path, monkeypatch)
    seen = []

    def boom(prog, cpu, map_node=False, who=None):
        seen.append((drv.rdpmc(), drv.node.stat().st_mode & 0o777, drv.node_gid))
        if seen[-1] != ("1", 0o600, 0):  # raise once the step changed something
            raise subprocess.TimeoutExpired(["hwraw"], 60)
        return drv.run_raw(prog, cpu, map_node, who)

    monkeypatch.setattr(hwtest_steps, "run_raw", boom)
    for step, state in ((hwtest_steps.step_other_user, ("1", 0o660, 4242)),
                        (hwtest_steps.step_rdpmc_never, ("0", 0o600, 0)),
                        (hwtest_steps.step_everyone, ("2", 0o600, 0))):
        seen.clear()
        with pytest.raises(subprocess.TimeoutExpired):
            step(drv.ctx)
        assert seen[-1] == state
        assert (drv.rdpmc(), drv.node.stat().st_mode & 0o777, drv.node_gid) == ("1", 0o600, 0)
    # And through _guarded (as loaded_steps runs them): a failed step, rdpmc put back.
    r = hwtest_steps._guarded("everyone", lambda: hwtest_steps.step_everyone(drv.ctx))
    assert r.status == "fail" and "TimeoutExpired" in r.reason and drv.rdpmc() == "1"


def test_rdpmc_steps_skip_without_the_attribute(tmp_path, monkeypatch):
    drv = FakeDriver(tmp_path, monkeypatch)
    drv.ctx.rdpmc_original["cpu"] = None
    assert hwtest_steps.step_rdpmc_never(drv.ctx).status == "skip"
    assert hwtest_steps.step_everyone(drv.ctx).status == "skip"


@pytest.mark.parametrize("mode, gid, words", [
    (0o600, 0, None),
    (0o660, 4242, None),  # a udev rule's group
    (0o604, 0, "has mode 0604: every local user may open it"),  # others may read
    (0o606, 4242, "has mode 0606: every local user may open it"),
    (0o601, 0, "has mode 0601: every local user may open it"),
], ids=["0600", "0660-group", "0604", "0606", "0601"])
def test_step_node_mode(tmp_path, monkeypatch, mode, gid, words):
    """root's character device, the module's: 0600, or 0660 with a group, passes; any bit
    for others fails (reading is enough to be let in: the mapping is PROT_READ)."""
    node = tmp_path / "simple-pmu"
    misc = tmp_path / "misc"
    misc.mkdir()
    (misc / "dev").write_text("10:123\n")
    st = SimpleNamespace(st_mode=stat.S_IFCHR | mode, st_uid=0, st_gid=gid,
                         st_rdev=os.makedev(10, 123))
    monkeypatch.setattr(hwtest_steps, "os", StatOs({node: lambda: st}))
    monkeypatch.setattr(hwtest_steps, "NODE", node)
    monkeypatch.setattr(hwtest_steps, "MISC_SYSFS", misc)
    r = hwtest_steps.step_node(None)
    assert r.measured["mode"] == f"{mode:04o}" and r.measured["dev"] == "10:123"
    if words is None:
        assert r.status == "pass", r.reason
    else:
        assert r.status == "fail" and r.reason == f"{node} {words} and be let in (a local " \
            "udev rule?)", r.reason


def test_step_node(tmp_path, monkeypatch):
    plain = tmp_path / "node"
    plain.write_text("")
    plain.chmod(0o600)
    monkeypatch.setattr(hwtest_steps, "MISC_SYSFS", tmp_path / "misc")
    monkeypatch.setattr(hwtest_steps, "NODE", plain)
    r = hwtest_steps.step_node(None)
    assert r.status == "fail" and "is not a character device" in r.reason
    monkeypatch.setattr(hwtest_steps, "NODE", tmp_path / "gone")
    assert "no " in hwtest_steps.step_node(None).reason
    null = Path("/dev/null")  # root's character device, 0666: every local user may open it
    if null.is_char_device() and null.stat().st_uid == 0:
        monkeypatch.setattr(hwtest_steps, "NODE", null)
        (tmp_path / "misc").mkdir()
        (tmp_path / "misc" / "dev").write_text("10:123\n")
        r = hwtest_steps.step_node(None)
        assert r.status == "fail"
        assert r.reason == ("/dev/null has mode 0666: every local user may open it and be let "
                            "in (a local udev rule?); /dev/null is device 1:3, the module's is "
                            "10:123 (" + str(tmp_path / "misc" / "dev") + ")")



def test_loaded_steps_are_the_documented_steps(monkeypatch):
    """Every step of docs/DEVELOPING.md's test-hw table that needs the module is run by
    loaded_steps (a step dropped from the list would otherwise pass unseen)."""
    names = []
    monkeypatch.setattr(hwtest_steps, "_guarded", lambda name, fn: names.append(name))
    monkeypatch.setattr(hwtest_steps, "online_cpus", lambda: [0])
    hwtest_steps.loaded_steps(None)
    table = next(b for b in (REPO / "docs" / "DEVELOPING.md").read_text().split("\n\n")
                 if "| `member-reads` |" in b)
    documented = re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.M)
    outside = {"load", "perf-baseline", "rdpmc-load", "unload", "rdpmc-unload",
               "rdpmc-restored"}
    missing = set(documented) - set(names) - outside
    assert documented and not missing, sorted(missing)


def test_hwraw_fork_exec_runs_a_fresh_image(hwraw, monkeypatch, tmp_path):
    """--fault-elsewhere lives in the holder's memory: a forked child keeps it (its
    fault is not at the RDPMC: error), a child that really executed hwraw anew has lost it
    and faults at the RDPMC itself."""
    if _rdpmc_open_to_all():
        pytest.skip("rdpmc 2 here: user RDPMC does not fault")
    plain = tmp_path / "plain"
    plain.write_text("not a node\n")
    holder_args(monkeypatch, "--node", str(plain), "--index", "0", "--fault-elsewhere")
    with hwtest_steps.Holder(hwraw, 0) as h:
        r = h.child(exec_=False)
        assert (r.result, r.map) == ("error", "inherited") and "not at its RDPMC" in r.detail, r
        r = h.child(exec_=True)
        assert (r.result, r.map) == ("sigsegv", "none"), r
        assert h.close() == 0
