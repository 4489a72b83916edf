"""Boot a Debian kernel under QEMU TCG with a test initramfs, and read what the guest said.

The guest's init prints results between @@SPMU markers on the serial console; everything
else on the console is the kernel's own output, kept for diagnosing panics and hangs.
"""

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import PipelineError

MARK = "@@SPMU"
_TEST = re.compile(r"@@SPMU TEST (?P<name>\S+) (?P<verdict>PASS|FAIL|SKIP) ?(?P<detail>.*)$")
_OUT = re.compile(r"@@SPMU OUT (?P<name>\S+) \| (?P<line>.*)$")
_CMD_END = re.compile(r"@@SPMU CMD-END rc=(?P<rc>\d+)")
_PANIC = re.compile(r"Kernel panic|end Kernel panic|Oops|BUG:|Unable to handle kernel")


@dataclass(frozen=True)
class TestResult:
    name: str
    verdict: str  # PASS, FAIL, SKIP
    detail: str
    output: tuple[str, ...] = ()


@dataclass
class GuestRun:
    console: str
    seconds: float
    timed_out: bool
    qemu_rc: int | None
    results: list[TestResult] = field(default_factory=list)
    booted: bool = False
    done: bool = False  # the suite ran to its end
    command_rc: int | None = None
    command_output: str = ""

    @property
    def ok(self) -> bool:
        return self.done and bool(self.results) and all(r.verdict != "FAIL" for r in self.results)

    def problem(self) -> str | None:
        """Why the guest did not finish, with the end of the kernel's output, or None."""
        if self.done or self.command_rc is not None:
            return None
        if self.timed_out:
            why = f"guest timed out after {self.seconds:.0f}s"
        elif _PANIC.search(self.console):
            why = "guest kernel panicked or oopsed"
        elif not self.booted:
            why = f"guest never reached its init (QEMU exit {self.qemu_rc})"
        else:
            why = f"guest stopped before the end of its run (QEMU exit {self.qemu_rc})"
        tail = "\n    ".join(self.console.strip().splitlines()[-30:])
        return f"{why}; last console lines:\n    {tail}"


def parse_console(console: str) -> tuple[list[TestResult], bool, bool, int | None, str]:
    """(results, booted, done, command rc, command output) from the guest's console text."""
    outputs: dict[str, list[str]] = {}
    results = []
    booted = done = False
    rc = None
    cmd_lines: list[str] = []
    in_cmd = False
    for raw in console.splitlines():
        line = raw.rstrip("\r")
        if f"{MARK} BOOTED" in line:
            booted = True
        elif f"{MARK} CMD-BEGIN" in line:
            in_cmd = True
        elif m := _CMD_END.search(line):
            in_cmd = False
            rc = int(m["rc"])
        elif in_cmd:
            cmd_lines.append(line)
        elif m := _OUT.search(line):
            outputs.setdefault(m["name"], []).append(m["line"])
        elif m := _TEST.search(line):
            results.append(TestResult(m["name"], m["verdict"], m["detail"].strip(),
                                      tuple(outputs.get(m["name"], []))))
        elif f"{MARK} DONE" in line:
            done = True
    return results, booted, done, rc, "\n".join(cmd_lines)


def command(arch: str, image: Path, initrd: Path, mode: str, smp: int = 2,
            icount: bool = True, el2: bool = False, params: str = "") -> list[str]:
    append = f"panic=-1 quiet rdinit=/init spmu.mode={mode} {params}".rstrip()
    if arch == "arm64":
        binary = "qemu-system-aarch64"
        # -icount shift=0: one instruction = 1 ns of virtual time, so PMU counts are exact;
        # sleep=off: while every vCPU idles the virtual clock jumps to the next timer
        # instead of waiting it out in real time (same guest-visible times, less wall).
        # el2: the kernel boots at EL2 (VHE) and can run KVM guests of its own.
        # pauth-impdef: Debian's kernels sign every return address; QEMU's emulated QARMA5
        # doubles a guest's run time, its IMPDEF algorithm does not (counts are unchanged).
        machine = ["-M", "virt,virtualization=on" if el2 else "virt",
                   "-cpu", "max,pauth-impdef=on",
                   *(["-icount", "shift=0,sleep=off"] if icount else [])]
        append = f"console=ttyAMA0 {append}"
    else:
        binary = "qemu-system-x86_64"
        # TCG's x86 CPU models have no PMU (no architectural perfmon).
        machine = ["-M", "pc", "-cpu", "max"]
        append = f"console=ttyS0 {append}"
    if not shutil.which(binary):
        raise PipelineError(f"{binary} not found (./devenv installs qemu-system-arm/-x86)")
    return [binary, *machine, "-smp", str(smp), "-m", "1024", "-nographic", "-no-reboot",
            "-kernel", str(image), "-initrd", str(initrd), "-append", append]


def boot(arch: str, image: Path, initrd: Path, mode: str = "test", timeout: float = 180,
         smp: int = 2, icount: bool = True, el2: bool = False, params: str = "") -> GuestRun:
    """params: extra kernel command-line words (spmu.* settings the guest tests read)."""
    argv = command(arch, image, initrd, mode, smp, icount, el2, params)
    start = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
        console, qemu_rc = proc.stdout.decode(errors="replace"), proc.returncode
        if proc.returncode != 0:
            console += proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        timed_out = True
        console = (e.stdout or b"").decode(errors="replace")
        qemu_rc = None
    results, booted, done, rc, out = parse_console(console)
    return GuestRun(console, time.monotonic() - start, timed_out, qemu_rc, results, booted,
                    done, rc, out)
