"""invoke test-hw without the hardware: its report format, its preflight on this host (a
real call that must stop before anything is built or loaded) and on fake machines, and
the pure helpers of its steps. The steps themselves need a real Intel PMU: untested here."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pmubuild import hwtest, hwtest_steps
from pmubuild.errors import PipelineError
from pmubuild.hwtest import HostView, Record

REPO = Path(__file__).resolve().parents[2]

INTEL_FLAGS = "fpu tsc msr apic arch_perfmon pebs bts rep_good nopl xtopology constant_tsc"
AMD_FLAGS = "fpu tsc msr apic rep_good nopl constant_tsc hypervisor topoext"


def cpuinfo(vendor: str, flags: str, model_name: str = "Some CPU") -> str:
    block = (f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 6\nmodel\t\t: 186\n"
             f"model name\t: {model_name}\nstepping\t: 2\nmicrocode\t: 0x4123\n"
             f"flags\t\t: {flags}\n")
    return block + "\n" + block.replace("processor\t: 0", "processor\t: 1") + "\n"


def fake_host(tmp_path: Path, *, vendor="GenuineIntel", flags=INTEL_FLAGS, pmus=("cpu",),
              euid=0, machine="x86_64", modules=True, modules_disabled="0",
              headers=True) -> HostView:
    es = tmp_path / "event_source"
    for name in ("software", "tracepoint", *pmus):
        (es / name).mkdir(parents=True)
    for name in pmus:
        (es / name / "rdpmc").write_text("1\n")
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


def test_rdpmc_always_sets_and_restores(tmp_path):
    view = fake_host(tmp_path, pmus=("cpu_core", "cpu_atom"))
    pf = hwtest.preflight(view)
    rdpmc = [view.event_source / p / "rdpmc" for p in pf.pmus]
    with pytest.raises(RuntimeError), \
            hwtest.rdpmc_always(view.event_source, pf.pmus, pf.rdpmc_original):
        assert [p.read_text() for p in rdpmc] == ["2", "2"]
        raise RuntimeError("a step blew up")
    assert [p.read_text() for p in rdpmc] == ["1", "1"]


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
    monkeypatch.setattr(hwtest, "rdpmc_always", forbidden)
    monkeypatch.setattr(hwtest_steps, "compile_programs", forbidden)
    before = (REPO / "build" / "hw").exists()
    out = tmp_path / "report.json"
    with pytest.raises(PipelineError) as err:
        hwtest.run(out)
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
    assert set(progs) == {"hwalt", "hwcpuid", "hwloop", "hwread"}
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
                user_access="1", cpus="0-1") -> Path:
    top = tmp_path / "simple-pmu0"
    values = {"generation": "3", "cpus": cpus, "recheck_ms": "100", "events": "0xc0,0x300",
              "ring": "2", "rdpmc_fixed": "1", "pmu_version": "5", "num_gp": "8",
              "gp_width": "48", "num_fixed": "3", "fixed_width": "48", "fixed_mask": "0x7",
              "events_unavailable": "0x0", "rdpmc_always": "1"}
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
])
def test_step_sysfs_fails(tmp_path, monkeypatch, kw, words):
    _, r = sysfs_step(tmp_path, monkeypatch, **kw)
    assert r.status == "fail" and words in r.reason, r.reason


def test_step_sysfs_missing_file(tmp_path, monkeypatch):
    top = fake_driver(tmp_path / "x")
    (top / "cpu1" / "conflicts").unlink()
    (top / "rdpmc_always").unlink()
    monkeypatch.setattr(hwtest_steps, "SYSFS", top)
    monkeypatch.setattr(hwtest_steps, "CPU_SYSFS", tmp_path / "x" / "cpu")
    r = hwtest_steps.step_sysfs(None)
    assert (r.status, r.reason) == ("fail", "missing: rdpmc_always cpu1/conflicts")


def fake_run(tmp_path, monkeypatch, *, insmod_fails=False, step_status="pass"):
    view = fake_host(tmp_path)
    calls = []
    loaded = []
    cpuid = hwtest_steps.Cpuid("GenuineIntel", (6, 0x97, 2), False, False,
                               (0x07300805, 0, 7, 0x8603))
    rdpmc = view.event_source / "cpu" / "rdpmc"

    def insmod(ko):
        calls.append("insmod")
        if insmod_fails:
            raise PipelineError("insmod: ERROR: could not insert module: Operation not permitted")
        loaded.append(ko)

    def steps(ctx):
        calls.append(f"steps rdpmc={rdpmc.read_text()}")
        return [Record("sysfs", step_status, "" if step_status == "pass" else "broken")]

    def rmmod():
        calls.append("rmmod")
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
    monkeypatch.setattr(hwtest, "_modinfo", lambda ko, f: "0.1")
    monkeypatch.setattr(hwtest, "insmod", insmod)
    monkeypatch.setattr(hwtest, "rmmod", rmmod)
    monkeypatch.setattr(hwtest, "module_loaded", lambda: bool(loaded))
    out = tmp_path / "r.json"
    rc = hwtest.run(out, view)
    return rc, calls, json.loads(out.read_text()), rdpmc.read_text()


def test_run_order_with_fake_hardware(tmp_path, monkeypatch, capsys):
    rc, calls, data, rdpmc = fake_run(tmp_path, monkeypatch)
    assert calls == ["build", "insmod", "steps rdpmc=2", "rmmod"]
    assert rc == 0 and data["exit_status"] == 0
    assert [s["name"] for s in data["steps"]] == ["perf-baseline", "load", "sysfs", "unload",
                                                  "rdpmc-restored"]
    assert rdpmc.strip() == "1"
    assert data["host"]["perfmon_version"] == 5 and data["host"]["module_version"] == "0.1"
    assert all(k in data["host"] for k in hwtest.REQUIRED_HOST_KEYS)
    printed = capsys.readouterr().out
    assert "4 passed, 0 failed, 1 skipped" in printed and str(tmp_path / "r.json") in printed


def test_run_failed_step_and_failed_insmod(tmp_path, monkeypatch):
    rc, calls, data, rdpmc = fake_run(tmp_path / "a", monkeypatch, step_status="fail")
    assert rc == 1 and calls[-1] == "rmmod" and rdpmc.strip() == "1"
    rc, calls, data, rdpmc = fake_run(tmp_path / "b", monkeypatch, insmod_fails=True)
    assert rc == 1 and calls == ["build", "insmod"] and rdpmc.strip() == "1"
    load = next(s for s in data["steps"] if s["name"] == "load")
    assert load["status"] == "fail" and "Operation not permitted" in load["reason"]
