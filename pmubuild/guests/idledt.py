"""QEMU's arm64 virt device tree with a PSCI idle state, so that idle CPUs go through
CPU PM (issue 24).

The module opens user access again from a CPU PM notifier (drivers/arm64/pmu_access.c),
but QEMU's virt machine describes no idle state: a kernel idles in plain WFI and never
calls cpu_pm_enter()/cpu_pm_exit(). With a PSCI idle state in the tree, a kernel with
CPU_IDLE and ARM_PSCI_CPUIDLE (the arm64 debug kernel, pmubuild.guests.debugkernel) enters it
through CPU_PM_CPU_IDLE_ENTER_PARAM (6.1's drivers/cpuidle/cpuidle-psci.c): cpu_pm_enter(),
PSCI CPU_SUSPEND, cpu_pm_exit(). QEMU's PSCI emulation (target/arm/psci.c) runs a
CPU_SUSPEND of a standby state as a WFI and returns success, so the state is safe there;
the state's param, 0x1, is a standby state in both PSCI power_state formats (StateType
clear, nothing above bit 16, which QEMU refuses).

QEMU builds the tree itself from its machine options (-M, -cpu, -smp, -m): the tree is
dumped with the very options of the boot (dumpdtb), decompiled with dtc, given the idle
state and a cpu-idle-states reference in every /cpus/cpu@N node by a second root block
appended to the source (dtc merges them and allocates the phandle), and compiled back.
QEMU fills in /chosen (bootargs, initrd) and /memory at boot as it does for its own tree,
and re-randomizes rng-seed at every reset. Cached per QEMU version and options.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.trees import cache

CACHE = "idledt"
LABEL = "spmu_cpu_sleep"
STATE = "cpu-sleep-0"
STATE_PATH = f"/cpus/idle-states/{STATE}"
# Latencies in microseconds: tiny, so that a governor picks the state for any idle period
# (QEMU's is a WFI either way; 6.1's ladder promotes past WFI after a few idle periods
# longer than the exit latency, entry + exit here).
IDLE_STATES = f"""\
		idle-states {{
			entry-method = "psci";

			{LABEL}: {STATE} {{
				compatible = "arm,idle-state";
				arm,psci-suspend-param = <0x1>;
				entry-latency-us = <1>;
				exit-latency-us = <1>;
				min-residency-us = <2>;
			}};
		}};
"""
CPU_REF = f"""
		{{cpu}} {{{{
			cpu-idle-states = <&{LABEL}>;
		}}}};
"""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise PipelineError(f"{name} not found (./devenv installs device-tree-compiler)")
    return path


# QEMU's dumpdtb exits at once; a stuck one must not hang the pipeline.
TIMEOUT_S = 120


def _run(argv: Sequence[str], what: str, stdin: str | None = None) -> str:
    try:
        proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                              stdin=None if stdin is not None else subprocess.DEVNULL,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise PipelineError(f"{what} did not finish in {TIMEOUT_S} s: {' '.join(argv)}") from None
    if proc.returncode != 0:
        raise PipelineError(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n"
                            f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def with_dump(machine: Sequence[str], path: Path) -> list[str]:
    """`machine` with dumpdtb=`path` added to its -M (a comma in the path doubled, as
    QEMU's option syntax wants)."""
    args = list(machine)
    flags = [i for i, a in enumerate(args) if a in ("-M", "-machine")]
    if len(flags) != 1 or flags[0] + 1 >= len(args):
        raise PipelineError(f"one -M option expected in the machine options {args}")
    i = flags[0] + 1
    args[i] = f"{args[i]},dumpdtb={str(path).replace(',', ',,')}"
    return args


def key(version: str, machine: Sequence[str]) -> str:
    """The cache key: QEMU's version, the machine options and what is added to the tree."""
    parts = [version, *machine, IDLE_STATES, CPU_REF]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def qemu_version(binary: str) -> str:
    path = shutil.which(binary)
    if not path:
        raise PipelineError(f"{binary} not found (./devenv installs qemu-system-arm)")
    out = _run([path, "--version"], f"{binary} --version")
    return out.splitlines()[0] if out else ""


def cpu_nodes(dtb: Path) -> list[str]:
    """The /cpus/cpu@N node names of a tree (not cpu-map, not idle-states)."""
    names = _run([_tool("fdtget"), "-l", str(dtb), "/cpus"], f"fdtget -l {dtb} /cpus")
    return [n for n in names.split() if n.startswith("cpu@")]


def _cells(dtb: Path, node: str, prop: str) -> list[int]:
    out = _run([_tool("fdtget"), "-t", "u", str(dtb), node, prop],
               f"fdtget {dtb} {node} {prop}")
    return [int(w) for w in out.split()]


def problems(dtb: Path) -> list[str]:
    """What keeps `dtb` from giving every CPU the idle state (empty: nothing): the state
    node, its PSCI param, and a cpu-idle-states in each cpu node that names it."""
    try:
        method = _run([_tool("fdtget"), str(dtb), "/cpus/idle-states", "entry-method"],
                      "fdtget entry-method").strip()
        compatible = _run([_tool("fdtget"), str(dtb), STATE_PATH, "compatible"],
                          "fdtget compatible").strip()
        (phandle,) = _cells(dtb, STATE_PATH, "phandle")
        param = _cells(dtb, STATE_PATH, "arm,psci-suspend-param")
    except (PipelineError, ValueError) as e:
        return [f"no usable {STATE_PATH}: {e}"]
    out = []
    if method != "psci":
        out.append(f"/cpus/idle-states entry-method is {method!r}, not 'psci'")
    if compatible != "arm,idle-state":
        out.append(f"{STATE_PATH} is compatible {compatible!r}, not 'arm,idle-state'")
    if param != [1]:
        out.append(f"{STATE_PATH} arm,psci-suspend-param is {param}, not [1]")
    cpus = cpu_nodes(dtb)
    if not cpus:
        out.append("no /cpus/cpu@N node")
    for cpu in cpus:
        try:
            refs = _cells(dtb, f"/cpus/{cpu}", "cpu-idle-states")
        except PipelineError:
            refs = []
        if refs != [phandle]:
            out.append(f"/cpus/{cpu} cpu-idle-states is {refs}, not [{phandle}] ({STATE})")
    return out


def dump(binary: str, machine: Sequence[str], out: Path) -> None:
    """QEMU's own tree for `machine` (-M, -cpu, -smp, -m: whatever the boot passes)."""
    _run([binary, *with_dump(machine, out), "-nographic"], f"{binary} dumpdtb")
    if not out.is_file():
        raise PipelineError(f"{binary} dumpdtb wrote no {out}")


def add_idle_state(dumped: Path, out: Path) -> None:
    """`dumped` with the idle state and every cpu node's reference to it, as `out`."""
    dtc = _tool("dtc")
    cpus = cpu_nodes(dumped)
    if not cpus:
        raise PipelineError(f"{dumped}: no /cpus/cpu@N node to give an idle state")
    if "idle-states" in _run([_tool("fdtget"), "-l", str(dumped), "/cpus"], "fdtget -l"):
        raise PipelineError(f"{dumped}: QEMU's tree has idle states of its own; "
                            "pmubuild/guests/idledt.py would merge into them")
    # -q: QEMU's tree draws dtc's style warnings (unit addresses, node names); errors stay.
    source = _run([dtc, "-q", "-I", "dtb", "-O", "dts", str(dumped)], f"dtc {dumped}")
    addition = "\n/ {\n\tcpus {\n" + IDLE_STATES + "".join(
        CPU_REF.format(cpu=c) for c in cpus) + "\t};\n};\n"
    _run([dtc, "-q", "-I", "dts", "-O", "dtb", "-o", str(out), "-"],
         "dtc (the tree with the idle state)", stdin=source + addition)


def ensure(binary: str, machine: Sequence[str]) -> Path:
    """The tree of QEMU's `machine` (the boot's exact -M, -cpu, -smp and -m options) with
    the PSCI idle state, built once per QEMU version and options (a different -smp, -m or
    virtualization= gives a different tree) under the cache's idledt/."""
    final = cache.subdir(CACHE) / f"virt-{key(qemu_version(binary), machine)}.dtb"
    if final.is_file():
        return final
    _tool("dtc")
    _tool("fdtget")
    # One builder at a time: it may then delete what a killed run left half-built.
    with cache.locked(CACHE):
        if final.is_file():
            return final
        cache.remove_stale_partials(final.parent)
        with tempfile.TemporaryDirectory(prefix=cache.PARTIAL_PREFIX, dir=final.parent) as tmp:
            dumped, out = Path(tmp) / "qemu.dtb", Path(tmp) / "idle.dtb"
            dump(binary, machine, dumped)
            add_idle_state(dumped, out)
            wrong = problems(out)
            if wrong:
                raise PipelineError(f"the idle-state tree for {' '.join(machine)} came out "
                                    "wrong: " + "; ".join(wrong))
            os.replace(out, final)
    return final
