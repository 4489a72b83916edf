"""`invoke test-hw` from end to end: the preflight, the programs, the module built and
loaded, the steps of hwtest_steps, rmmod, rdpmc put back (the order and why: hwtest).

Apart from hwtest because hwtest_steps uses hwtest's host operations: this module imports
both, and neither imports it. Every host operation is called through `hwtest.` so that a
monkeypatch of hwtest.insmod (rmmod, module_loaded, build_module, ...) is what runs here.
"""

from __future__ import annotations

from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.hw import hwtest
from pmubuild.hw.hwtest import HostView, Record


def run(json_path: Path | None = None, view: HostView | None = None) -> int:
    """The whole test: preflight (raises PipelineError with its reason), then the steps
    on hardware. Prints the table and the JSON file's path; returns the exit status."""
    view = view or HostView.current()
    pf = hwtest.preflight(view)
    hwtest.check(pf)
    from pmubuild.hw import hwtest_steps  # compiles and runs programs: only past the preflight

    host = dict(pf.facts)
    host.update({"perfmon_version": None, "module_version": None,
                 "module_commit": hwtest.git_commit()})
    records: list[Record] = []
    progs = hwtest_steps.compile_programs(hwtest.REPO / "build" / "hw" / view.release)
    cpuid = hwtest_steps.cpuid_facts(progs)
    host.update(cpuid.facts())
    if cpuid.problem:
        raise PipelineError(f"test-hw cannot run on this machine: {cpuid.problem}. Nothing "
                            "was built or loaded.")
    if hwtest.module_loaded():
        raise PipelineError("simple-pmu is loaded already: rmmod simple-pmu (or stop what "
                            "loaded it) and run again; the test loads its own build")
    original = pf.rdpmc_original
    ctx = hwtest_steps.Context(progs, view.event_source, pf.pmus, original, cpuid)
    records.append(hwtest_steps.perf_baseline(ctx))
    ko = hwtest.build_module(view.kbuild)
    host["module_version"] = hwtest.modinfo(ko, "version")
    host["module_srcversion"] = hwtest.modinfo(ko, "srcversion")
    with hwtest.rdpmc_set(view.event_source, pf.pmus, hwtest.RDPMC_MEMBERS, original):
        before_load = hwtest.read_rdpmc(view.event_source, pf.pmus)
        try:
            hwtest.insmod(ko)
        except PipelineError as e:
            records.append(Record("load", "fail", str(e), {"ko": str(ko)}))
        else:
            records.append(Record("load", "pass", measured={"ko": str(ko)}))
            records.append(hwtest_steps.rdpmc_unchanged(
                "rdpmc-load", "insmod", before_load,
                hwtest.read_rdpmc(view.event_source, pf.pmus)))
            try:
                records.extend(hwtest_steps.loaded_steps(ctx))
            finally:
                before_unload = hwtest.read_rdpmc(view.event_source, pf.pmus)
                records.append(hwtest_steps.unload_record(
                    hwtest.rmmod() if hwtest.module_loaded() else "not loaded any more"))
                records.append(hwtest_steps.rdpmc_unchanged(
                    "rdpmc-unload", "rmmod", before_unload,
                    hwtest.read_rdpmc(view.event_source, pf.pmus)))
    records.append(hwtest_steps.rdpmc_restored(ctx))
    for line in hwtest.table(records):
        print(line)
    out = hwtest.write_report(json_path or hwtest.DEFAULT_JSON, host, records)
    print(f"report: {out} (please send it back with the table above)")
    return hwtest.exit_status(records)
