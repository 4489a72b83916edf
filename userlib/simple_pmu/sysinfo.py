"""Facts about this machine that decide which counter backend can work: files and CPUID.

Nothing here executes an instruction that can fault; CPUID never does.
"""

from __future__ import annotations

import errno
import grp
import mmap
import os
import platform
import resource
import stat
from dataclasses import dataclass, field
from pathlib import Path

from simple_pmu._extension import native

SYSFS_DIR = Path("/sys/devices/system/simple-pmu/simple-pmu0")
# The module's device node: a reader that can open it may be let in (arm64: a thread,
# with an ioctl; x86: a process, with a mapping of it).
DEV_NODE = Path("/dev/simple-pmu")
# The node's group in the package's udev rule (named where the node cannot say).
DEV_GROUP = "simple-pmu"
EVENT_SOURCE = Path("/sys/bus/event_source/devices")
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
PERF_USER_ACCESS = Path("/proc/sys/kernel/perf_user_access")
CPUINFO = Path("/proc/cpuinfo")

# x86 core PMUs as perf names them (hybrid parts: cpu_core and cpu_atom).
X86_CPU_PMUS = ("cpu", "cpu_core", "cpu_atom")

# MIDR_EL1 implementer codes, as /proc/cpuinfo prints them.
ARM_IMPLEMENTERS = {
    0x00: "software (e.g. QEMU -cpu max)",
    0x41: "Arm",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "Applied Micro",
    0x51: "Qualcomm",
    0x61: "Apple",
    0xC0: "Ampere",
}

CPUID_PERFMON_LEAF = 0xA
CPUID_HYPERVISOR_BIT = 1 << 31  # leaf 1 ECX
CPUID_HV_BASE = 0x40000000


def read_text(path: Path) -> str | None:
    """The file's contents without the trailing newline, None if it cannot be read."""
    try:
        return path.read_text().rstrip("\n")
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def thread_switches() -> int:
    """The calling thread's context switches so far, voluntary and not (getrusage
    RUSAGE_THREAD, as cycles.h's cycles_switches())."""
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_nvcsw + usage.ru_nivcsw


def machine() -> str:
    return native.ARCH if native is not None else platform.machine()


@dataclass(frozen=True)
class Perfmon:
    """CPUID leaf 0xA (x86 architectural performance monitoring), decoded."""

    version: int
    num_gp: int
    num_fixed: int
    fixed_width: int
    fixed_mask: int  # bit i: fixed counter i exists
    events_unavailable: int  # EBX, bit set: event not available
    gp_width: int = 0  # bits of the general-purpose counters (EAX[23:16])

    @classmethod
    def from_regs(cls, eax: int, ebx: int, ecx: int, edx: int) -> Perfmon:
        version = eax & 0xFF
        # EDX and the fixed counters arrived with version 2.
        num_fixed = edx & 0x1F if version >= 2 else 0
        fixed_width = (edx >> 5) & 0xFF if version >= 2 else 0
        # Version 5 lists fixed counters in ECX; before, they are the first EDX[4:0].
        fixed_mask = (ecx | ((1 << num_fixed) - 1)) if version >= 2 else 0
        # Only EAX[31:24] bits of EBX are enumerated: count the rest as unavailable.
        enumerated = (1 << ((eax >> 24) & 0xFF)) - 1
        unavailable = (ebx & enumerated) | (0xFF & ~enumerated)
        return cls(version, (eax >> 8) & 0xFF, num_fixed, fixed_width, fixed_mask, unavailable,
                   (eax >> 16) & 0xFF)


@dataclass(frozen=True)
class CpuInfo:
    arch: str
    vendor: str  # "GenuineIntel", "AuthenticAMD", "Arm (0x41)", ...
    model: str
    flags: frozenset[str] = field(repr=False)
    hypervisor: str | None  # vendor signature, "present", or None
    perfmon: Perfmon | None  # x86 only, when the extension can run CPUID

    def to_dict(self) -> dict[str, object]:
        return {
            "arch": self.arch,
            "vendor": self.vendor,
            "model": self.model,
            "hypervisor": self.hypervisor,
            "perfmon_version": self.perfmon.version if self.perfmon else None,
            "fixed_counters": self.perfmon.num_fixed if self.perfmon else None,
            "fixed_width": self.perfmon.fixed_width if self.perfmon else None,
        }


def _cpuinfo_fields() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in (read_text(CPUINFO) or "").splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _x86_hypervisor(flags: frozenset[str]) -> str | None:
    if native is not None:
        if not native.cpuid(1)[2] & CPUID_HYPERVISOR_BIT:
            return None
        _eax, ebx, ecx, edx = native.cpuid(CPUID_HV_BASE)
        sig = b"".join(r.to_bytes(4, "little") for r in (ebx, ecx, edx))
        name = sig.rstrip(b"\0").decode("ascii", "replace")
        return name or "present"
    return "present" if "hypervisor" in flags else None


def _arm64_hypervisor() -> str | None:
    for path in (Path("/sys/hypervisor/type"), Path("/sys/class/dmi/id/sys_vendor")):
        text = read_text(path)
        if text and (path.name == "type" or "QEMU" in text or "KVM" in text):
            return text.strip()
    compatible = read_text(Path("/proc/device-tree/compatible")) or ""
    if "linux,dummy-virt" in compatible:
        return "QEMU virt machine"
    return None


def cpu_info() -> CpuInfo:
    arch = machine()
    info = _cpuinfo_fields()
    if arch in ("x86_64", "i686", "i386"):
        flags = frozenset(info.get("flags", "").split())
        perfmon = None
        if native is not None and native.cpuid(0)[0] >= CPUID_PERFMON_LEAF:
            perfmon = Perfmon.from_regs(*native.cpuid(CPUID_PERFMON_LEAF))
        elif native is not None:
            perfmon = Perfmon(0, 0, 0, 0, 0, 0xFF)
        return CpuInfo(arch, info.get("vendor_id", "unknown"), info.get("model name", "unknown"),
                       flags, _x86_hypervisor(flags), perfmon)
    flags = frozenset(info.get("Features", "").split())
    implementer = info.get("CPU implementer")
    if implementer is not None:
        code = int(implementer, 16)
        vendor = f"{ARM_IMPLEMENTERS.get(code, 'unknown implementer')} ({implementer})"
    else:
        vendor = "unknown"
    model = f"CPU part {info.get('CPU part', 'unknown')}"
    return CpuInfo(arch, vendor, model, flags, _arm64_hypervisor(), None)


def cpu_pmus() -> list[str]:
    """The CPU PMUs perf knows here (x86: cpu or cpu_core/cpu_atom; arm64: armv8_*...)."""
    if not EVENT_SOURCE.is_dir():
        return []
    if machine().startswith("x86") or machine() in ("i386", "i686"):
        return [n for n in X86_CPU_PMUS if (EVENT_SOURCE / n).is_dir()]
    # arm_pmu devices carry a "cpus" attribute; uncore PMUs have "cpumask" instead.
    return sorted(p.name for p in EVENT_SOURCE.iterdir() if (p / "cpus").is_file())


def rdpmc_mode() -> tuple[Path, int] | None:
    """The x86 cpu PMU's rdpmc attribute: 0 off, 1 tasks with a perf mmap, 2 always."""
    for path, value in rdpmc_modes():
        if value is not None:
            return path, value
    return None


def rdpmc_modes() -> list[tuple[Path, int | None]]:
    """Every x86 cpu PMU's rdpmc attribute (cpu; cpu_core and cpu_atom on hybrid parts),
    None for one that does not parse; [] where there is none (a kernel before 4.0)."""
    modes = []
    for pmu in X86_CPU_PMUS:
        path = EVENT_SOURCE / pmu / "rdpmc"
        if path.is_file():
            modes.append((path, read_int(path)))
    return modes


def driver_attrs(sysfs: Path | None = None) -> dict[str, str]:
    """Every readable attribute of the simple-pmu sysfs directory ({} if absent); the
    cpuN/ directories are driver_placement()'s."""
    attrs: dict[str, str] = {}
    try:
        entries = sorted((SYSFS_DIR if sysfs is None else sysfs).iterdir())
    except OSError:
        return attrs
    for entry in entries:
        if entry.is_file():
            text = read_text(entry)
            if text is not None:
                attrs[entry.name] = text
    return attrs


def members_only(attrs: dict[str, str]) -> bool:
    """Whether the loaded module reads only for those let in through its node (its sysfs
    access is "members"; "everyone", or no access attribute at all, an older module,
    needs no letting in: on x86 that one needs the cpu PMU's rdpmc at 2)."""
    return attrs.get("access", "").strip() == "members"


@dataclass(frozen=True)
class DevNode:
    """Whether this process can open the module's device node for reading, which is what
    letting a reader in needs (include/cycles.h opens it; arm64: asks SPMU_IOC_JOIN for
    the thread; x86: maps one page of it for the process; and closes it)."""

    path: Path
    error: int | None  # open()'s errno; None: it opens
    group: str | None = None  # the node's group (name, else the number); None: no stat
    mode: int | None = None  # its permission bits
    map_error: int | None = None  # x86: let_in_mapping()'s errno; None: mapped, or not tried

    @property
    def group_readable(self) -> bool:
        """The node lets a group read it, and that group is not root's."""
        return (self.mode is not None and bool(self.mode & stat.S_IRGRP)
                and self.group not in (None, "root", "0"))


def let_in_mapping(fd: int) -> int | None:
    """x86: map one page of the node open on fd as include/cycles.h does to let a process
    in (PROT_READ, MAP_SHARED, offset 0) and unmap it at once, never touching it (it has
    no pages): None if the module allowed it, else the errno (EPERM: perf allows no user
    RDPMC here). The process is let in only while it is mapped; a mapping cycles.h holds
    counts apart (unmapping this one leaves it in)."""
    try:
        page = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ,
                         offset=0)
    except OSError as exc:
        return exc.errno
    except ValueError:  # a regular file shorter than a page: no node
        return errno.EINVAL
    page.close()
    return None


def dev_node(path: Path | None = None, let_in: bool = False) -> DevNode:
    """Open the node read-only and close it again (no ioctl: nothing is asked of the
    module), with its group and mode from stat(). let_in (x86): where it opens, also try
    the mapping that lets this process in, unmapped at once (let_in_mapping())."""
    node = DEV_NODE if path is None else path
    map_error = None
    try:
        fd = os.open(node, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        error: int | None = exc.errno
    else:
        error = None
        try:
            if let_in:
                map_error = let_in_mapping(fd)
        finally:
            os.close(fd)
    try:
        st = os.stat(node)
    except OSError:
        return DevNode(node, error, map_error=map_error)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return DevNode(node, error, group, stat.S_IMODE(st.st_mode), map_error)


CYCLE_COUNTER_INDEX = 31  # cycle_index / event_index 31: PMCCNTR_EL0, always 64 bits
NO_INDEX = -1  # cycle_index / event_index: not on a counter user space can read
# x86: cycle_index / event_index are RDPMC operands: general counter n is n, fixed
# counter n is X86_RDPMC_FIXED + n (ECX bit 30). The highest n each may be:
X86_RDPMC_FIXED = 1 << 30
X86_MAX_GP_COUNTER = 31
X86_MAX_FIXED_COUNTER = 15


def is_x86(arch: str) -> bool:
    return arch in ("x86_64", "i686", "i386")


def index_valid(idx: int, arch: str | None = None) -> bool:
    """Whether idx is a counter index of arch (default: this machine's) or -1 (none), as
    cycles.h's cycles_index_valid()."""
    if is_x86(machine() if arch is None else arch):
        return (idx == NO_INDEX or 0 <= idx <= X86_MAX_GP_COUNTER or
                X86_RDPMC_FIXED <= idx <= X86_RDPMC_FIXED + X86_MAX_FIXED_COUNTER)
    return NO_INDEX <= idx <= CYCLE_COUNTER_INDEX


def parse_events(text: str) -> list[int]:
    """The driver's `events` ("0x8,0x11", "none", ""); ValueError if malformed."""
    text = text.strip()
    if text in ("", "none"):
        return []
    events = []
    for item in text.split(","):
        if not item or not item[0].isdigit():
            raise ValueError(f"events: {item!r} is not an event number")
        events.append(int(item, 0))
    return events


def parse_index_list(text: str, arch: str | None = None) -> list[int]:
    """A cpuN/event_index line ("3 4", "-1 2", ""); ValueError unless each is an index of
    arch (default: this machine's; see index_valid)."""
    indices = [int(item, 10) for item in text.split()]
    for idx in indices:
        if not index_valid(idx, arch):
            raise ValueError(f"{idx} is not a counter index")
    return indices


def parse_cpulist(text: str) -> list[int]:
    """A kernel cpulist ("0-3,6", ""); ValueError if malformed."""
    cpus: list[int] = []
    for item in text.strip().split(","):
        if not item:
            continue
        first, sep, last = item.partition("-")
        lo, hi = int(first, 10), int(last, 10) if sep else int(first, 10)
        if lo < 0 or hi < lo:
            raise ValueError(f"cpulist: {item!r}")
        cpus.extend(range(lo, hi + 1))
    return cpus


def x86_counter_width(index: int, fixed_width: int, gp_width: int) -> int:
    """Bits of the x86 counter an RDPMC operand names: fixed_width for a fixed counter
    (bit 30; also -1, where cycles.h reads the 2011 fixed counters), else gp_width."""
    return fixed_width if index < 0 or index & X86_RDPMC_FIXED else gp_width


def counter_width(index: int, event_width: int) -> int:
    """Bits of the counter at a cycle_index / event_index: 64 for PMCCNTR_EL0 (31), else
    the driver's event_width."""
    return 64 if index == CYCLE_COUNTER_INDEX else event_width


@dataclass(frozen=True)
class CpuPlacement:
    """One cpuN/ directory of the driver: where its counters are on that CPU.

    A field is None when its file cannot be read or does not parse."""

    cpu: int
    cycle_index: int | None
    event_index: tuple[int, ...] | None
    generation: int | None
    interventions: int | None = None
    kvm_deferrals: int | None = None
    checks: int | None = None
    user_access: int | None = None  # cpuN/user_access (issue 13); None: absent
    raw: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


def _cpu_placement(cpu: int, path: Path, arch: str | None) -> CpuPlacement:
    raw = {name: text for name in ("cycle_index", "event_index", "generation",
                                   "interventions", "kvm_deferrals", "checks",
                                   "user_access")
           if (text := read_text(path / name)) is not None}

    def number(name: str) -> int | None:
        try:
            return int(raw[name].strip(), 10)
        except (KeyError, ValueError):
            return None
    try:
        events: tuple[int, ...] | None = tuple(parse_index_list(raw["event_index"], arch))
    except (KeyError, ValueError):
        events = None
    cycle = number("cycle_index")
    if cycle is not None and not index_valid(cycle, arch):
        cycle = None
    return CpuPlacement(cpu, cycle, events, number("generation"), number("interventions"),
                        number("kvm_deferrals"), number("checks"), number("user_access"),
                        raw)


def driver_placement(sysfs: Path | None = None,
                     arch: str | None = None) -> dict[int, CpuPlacement]:
    """Every cpuN/ directory of the driver ({} if there are none: not loaded, or a driver
    older than the per-CPU placement); indices are arch's (default: this machine's)."""
    base = SYSFS_DIR if sysfs is None else sysfs
    try:
        entries = list(base.iterdir())
    except OSError:
        return {}
    result = {}
    for entry in entries:
        name = entry.name
        if name.startswith("cpu") and name[3:].isdigit() and entry.is_dir():
            result[int(name[3:])] = _cpu_placement(int(name[3:]), entry, arch)
    return dict(sorted(result.items()))
