"""`invoke test-hw`: the x86 driver on a real Intel machine, run as root (hw/run.py).

Order: a preflight that reads files only (root? x86-64 Intel with architectural perfmon?
a cpu PMU registered with perf? can this kernel load modules? its headers installed?) and
stops with one line naming everything missing, before anything is compiled, built or
loaded; then the test programs (tests/hw/src) and CPUID's leaf 0xA; perf's baseline
without the module; the module built for the running kernel; the cpu PMU's rdpmc set to 1
(perf's default) where it is not 1 already (every old value remembered); insmod; the
steps of pmubuild.hw.hwtest_steps; rmmod; rdpmc put back. The module opens its counters to
nobody: the steps' cycles.h programs read as processes let in through /dev/simple-pmu
(root may open it), and the steps about who may read set rdpmc to 0 and 2 for a moment
each themselves (rdpmc_set). Each step gives a Record; the report is a table on stdout
and a JSON file (SCHEMA_VERSION) someone can send back. No CI machine has a PMU: this has
run only where someone ran it by hand.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say

REPO = Path(__file__).resolve().parents[2]
SCHEMA_VERSION = 1
DEFAULT_JSON = REPO / "build" / "test-hw-report.json"
EVENT_SOURCE = Path("/sys/bus/event_source/devices")
X86_CPU_PMUS = ("cpu", "cpu_core", "cpu_atom")  # as perf names them; hybrid: the last two
STATUSES = ("pass", "fail", "skip")
# The cpu PMU's rdpmc attribute (arch/x86/events/core.c): 0 no user RDPMC at all; 1
# (perf's default) only for a process with a perf event mapped, or let in through
# simple-pmu's node; 2 for every process.
RDPMC_NEVER, RDPMC_MEMBERS, RDPMC_EVERYONE = "0", "1", "2"


# --- preflight -------------------------------------------------------------------------

@dataclass(frozen=True)
class HostView:
    """What the preflight looks at; HostView.current() is this machine, tests build fakes."""

    euid: int
    machine: str
    cpuinfo: str  # text of /proc/cpuinfo
    event_source: Path  # /sys/bus/event_source/devices
    proc: Path  # /proc (modules, sys/kernel/modules_disabled)
    release: str  # uname -r
    kbuild: Path  # /lib/modules/RELEASE/build

    @classmethod
    def current(cls) -> HostView:
        release = platform.release()
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
        return cls(os.geteuid(), platform.machine(), cpuinfo, EVENT_SOURCE, Path("/proc"),
                   release, Path("/lib/modules") / release / "build")


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


@dataclass(frozen=True)
class Problem:
    code: str  # the userlib's reason code where it has one (simple_pmu.reasons)
    text: str


@dataclass(frozen=True)
class Preflight:
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]
    facts: dict[str, object]
    pmus: tuple[str, ...]  # the x86 core PMUs registered with perf
    rdpmc_original: dict[str, str | None]  # each one's rdpmc before the test

    @property
    def ok(self) -> bool:
        return not self.problems

    def reason(self) -> str:
        """One line naming everything that is missing."""
        return ("test-hw cannot run on this machine: "
                + "; ".join(p.text for p in self.problems)
                + ". Nothing was built or loaded.")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_rdpmc(event_source: Path, pmus: Sequence[str]) -> dict[str, str | None]:
    """Each cpu PMU's rdpmc attribute; None where it cannot be read."""
    return {p: _read(event_source / p / "rdpmc") for p in pmus}


def preflight(view: HostView) -> Preflight:
    """Decide from files alone whether the hardware test can run here."""
    f = cpuinfo_fields(view.cpuinfo)
    flags = frozenset(f.get("flags", "").split())
    vendor = f.get("vendor_id", "unknown")
    hypervisor = "hypervisor" in flags
    pmus = tuple(p for p in X86_CPU_PMUS if (view.event_source / p).is_dir())
    problems: list[Problem] = []
    warnings: list[str] = []
    if view.euid != 0:
        problems.append(Problem("not_root", f"not root (euid {view.euid}): loading a module, "
                                "writing rdpmc and CPU hotplug need it; run with sudo"))
    if view.machine != "x86_64":
        problems.append(Problem("arch_unsupported", f"{view.machine} is not x86-64: this test "
                                "is for Intel machines (the arm64 driver is tested under QEMU,"
                                " invoke test-qemu)"))
    else:
        if vendor != "GenuineIntel":
            problems.append(Problem("x86_no_perfmon", f"{vendor} CPU: the x86 driver needs "
                                    "Intel architectural perfmon (GenuineIntel)"))
        if "arch_perfmon" not in flags:
            problems.append(Problem("x86_no_perfmon", "no architectural perfmon (the "
                                    "arch_perfmon flag is absent from /proc/cpuinfo)"))
    if not pmus:
        why = ": the CPU flags say a hypervisor runs this machine and it exposes no " \
              "virtual PMU" if hypervisor else ""
        problems.append(Problem("no_cpu_pmu", f"no CPU PMU registered with perf "
                                f"({view.event_source} has none of: "
                                f"{', '.join(X86_CPU_PMUS)}){why}"))
    if not (view.proc / "modules").exists():
        problems.append(Problem("no_modules", "this kernel cannot load modules "
                                f"({view.proc / 'modules'} does not exist: CONFIG_MODULES off)"))
    elif _read(view.proc / "sys" / "kernel" / "modules_disabled") == "1":
        problems.append(Problem("modules_disabled", "module loading is disabled "
                                "(kernel.modules_disabled = 1 until reboot)"))
    if not view.kbuild.is_dir():
        problems.append(Problem("no_kernel_headers", f"no build tree for the running kernel "
                                f"({view.kbuild} missing: apt install "
                                f"linux-headers-{view.release})"))
    if hypervisor:
        warnings.append("a hypervisor runs this machine (cpuinfo flag 'hypervisor'): its "
                        "virtual PMU may lack counters, and its exits add to the counts")
    facts: dict[str, object] = {
        "kernel_release": view.release,
        "machine": view.machine,
        "vendor": vendor,
        "model_name": f.get("model name"),
        "family": f.get("cpu family"),
        "model": f.get("model"),
        "stepping": f.get("stepping"),
        "microcode": f.get("microcode"),
        "arch_perfmon_flag": "arch_perfmon" in flags,
        "hypervisor_flag": hypervisor,
        "cpu_pmus": list(pmus),
        "hybrid": "cpu_core" in pmus or "cpu_atom" in pmus,
    }
    rdpmc = read_rdpmc(view.event_source, pmus)
    facts["rdpmc_original"] = rdpmc
    return Preflight(tuple(problems), tuple(warnings), facts, pmus, rdpmc)


def check(pf: Preflight) -> None:
    for w in pf.warnings:
        say(f"warning: {w}")
    if not pf.ok:
        raise PipelineError(pf.reason())


# --- records and the report ------------------------------------------------------------

@dataclass
class Record:
    """One step's result. status: pass, fail or skip; reason says why it failed or was
    skipped; measured and expected: what was seen and what the step wanted."""

    name: str
    status: str
    reason: str = ""
    measured: dict[str, object] = field(default_factory=dict)
    expected: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r}, want one of {STATUSES}")
        if self.status != "pass" and not self.reason:
            raise ValueError(f"step {self.name}: a {self.status} needs a reason")

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "reason": self.reason,
                "measured": self.measured, "expected": self.expected}


def exit_status(records: Sequence[Record]) -> int:
    """0 when no step failed and at least one passed; 1 otherwise."""
    if any(r.status == "fail" for r in records):
        return 1
    return 0 if any(r.status == "pass" for r in records) else 1


def _brief(values: dict[str, object], width: int = 60) -> str:
    text = " ".join(f"{k}={v}" for k, v in values.items())
    return text if len(text) <= width else text[:width - 3] + "..."


def table(records: Sequence[Record]) -> list[str]:
    """The human-readable report: one line per step, then the totals."""
    name_w = max([len("step"), *(len(r.name) for r in records)])
    lines = [f"{'step':<{name_w}}  {'status':<6}  details", f"{'-' * name_w}  ------  -------"]
    for r in records:
        details = r.reason if r.status != "pass" else _brief(r.measured)
        lines.append(f"{r.name:<{name_w}}  {r.status.upper():<6}  {details}".rstrip())
    counts = {s: sum(r.status == s for r in records) for s in STATUSES}
    lines.append(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return lines


def report(host: dict[str, object], records: Sequence[Record]) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "simple-pmu invoke test-hw",
        "host": host,
        "steps": [r.to_dict() for r in records],
        "summary": {s: sum(r.status == s for r in records) for s in STATUSES},
        "exit_status": exit_status(records),
    }


REQUIRED_HOST_KEYS = ("kernel_release", "model_name", "family", "model", "stepping",
                      "microcode", "perfmon_version", "hybrid", "hypervisor_flag",
                      "rdpmc_original", "module_version", "module_commit")


def write_report(path: Path, host: dict[str, object], records: Sequence[Record]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report(host, records), indent=2, sort_keys=False) + "\n")
    return path


# --- the loader: module-level so that tests can replace them ---------------------------

MODULE = "simple-pmu"


def insmod(ko: Path) -> None:
    proc = subprocess.run(["insmod", str(ko)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"insmod {ko} failed: {proc.stderr.strip()}")


def rmmod() -> str | None:
    """rmmod simple-pmu: None, or its error."""
    proc = subprocess.run(["rmmod", MODULE], capture_output=True, text=True)
    return None if proc.returncode == 0 else proc.stderr.strip() or f"rc {proc.returncode}"


def module_loaded() -> bool:
    return Path("/sys/module/simple_pmu").exists()


def build_module(kbuild: Path) -> Path:
    # the build pipeline: only imported once the preflight passed
    from pmubuild.modbuild import build

    result = build.build(kbuild)
    for w in result.warnings:
        say(f"warning: {w}")
    return result.ko


def rdpmc_changes(before: dict[str, str | None], value: str) -> dict[str, str]:
    """To make every cpu PMU's rdpmc `value`: the PMUs to write, each with the value to
    put back after (those with the attribute and another value in it)."""
    return {p: old for p, old in before.items() if old is not None and old != value}


def write_rdpmc(event_source: Path, pmu: str, value: str) -> None:
    (event_source / pmu / "rdpmc").write_text(value)


@contextmanager
def rdpmc_set(event_source: Path, pmus: Sequence[str], value: str,
              before: dict[str, str | None] | None = None) -> Iterator[dict[str, str]]:
    """rdpmc = value on every cpu PMU for the block, where it is not that already; each
    value written over is put back after, also when the block (or a write) raises.
    before: the values now (read here when not given). Yields what it will put back."""
    now = read_rdpmc(event_source, pmus) if before is None else before
    restore = rdpmc_changes({p: now.get(p) for p in pmus}, value)
    written: list[str] = []
    try:
        for p in restore:
            written.append(p)  # first: a write that failed half way is put back too
            write_rdpmc(event_source, p, value)
        yield restore
    finally:
        for p in reversed(written):
            try:
                write_rdpmc(event_source, p, restore[p])
            except OSError as e:
                say(f"error: could not put back {event_source / p / 'rdpmc'} = "
                    f"{restore[p]}: {e}")


def git_commit() -> str | None:
    """The checkout's commit; None outside a git checkout or without git installed."""
    try:
        proc = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty",
                               "--abbrev=12"], capture_output=True, text=True)
    except OSError:
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def modinfo(ko: Path, field_name: str) -> str | None:
    """One field of a built module's .modinfo; None when modinfo fails or it is empty."""
    proc = subprocess.run(["modinfo", "-F", field_name, str(ko)], capture_output=True,
                          text=True)
    return proc.stdout.strip() or None if proc.returncode == 0 else None
