"""Boot a Debian kernel under QEMU TCG with a test initramfs, and read what the guest said.

The guest's init prints results between @@SPMU markers on the serial console; everything
else on the console is the kernel's own output, kept for diagnosing panics and hangs.
"""

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pmubuild.common.errors import PipelineError
from pmubuild.guests import idledt

MARK = "@@SPMU"
_TEST = re.compile(r"@@SPMU TEST (?P<name>\S+) (?P<verdict>PASS|FAIL|SKIP) ?(?P<detail>.*)$")
_OUT = re.compile(r"@@SPMU OUT (?P<name>\S+) \| (?P<line>.*)$")
_CMD_END = re.compile(r"@@SPMU CMD-END rc=(?P<rc>\d+)")
_PANIC = re.compile(r"Kernel panic|end Kernel panic|Oops|BUG:|Unable to handle kernel")
_KERNEL_LINE = re.compile(r"^\[\s*\d+\.\d+\]")  # printk's timestamp
# A debug guest's printed kernel log and kmemleak scan (tests/guest/init, spmu.debug=1):
# pmubuild.guests.debugjudge judges them; their reports are not this guest's crash.
_DUMP = re.compile(r"@@SPMU (KLOG|KMEMLEAK)-(?P<edge>BEGIN|END)")


@dataclass(frozen=True)
class TestResult:
    name: str
    verdict: str  # PASS, FAIL, SKIP
    detail: str
    output: tuple[str, ...] = ()
    # Host wall time from the previous result line (the first: from BOOTED) to this one:
    # what the script cost in real time (under -icount the guest's clock is virtual).
    seconds: float | None = None


@dataclass(frozen=True)
class Console:
    """What the guest said, read from its console text."""

    results: list[TestResult]
    booted: bool
    done: bool  # the suite ran to its end
    command_rc: int | None
    command_output: str
    crashes: tuple[str, ...]  # the kernel's panic/oops lines, anywhere in the console
    booted_at: float | None = None  # when the BOOTED line arrived, if times were given


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
    crash: str | None = None
    boot_seconds: float | None = None  # host wall time from QEMU's start to BOOTED

    @classmethod
    def of(cls, console: str, seconds: float, timed_out: bool, qemu_rc: int | None,
           times: Sequence[float] | None = None, start: float | None = None) -> "GuestRun":
        """times: when each console line arrived; start: when QEMU started (same clock)."""
        c = parse_console(console, times)
        return cls(console, seconds, timed_out, qemu_rc, c.results, c.booted, c.done,
                   c.command_rc, c.command_output, c.crashes[0] if c.crashes else None,
                   c.booted_at - start if c.booted_at is not None and start is not None
                   else None)

    @property
    def ok(self) -> bool:
        return (self.crash is None and self.done and bool(self.results)
                and all(r.verdict != "FAIL" for r in self.results))

    def problem(self) -> str | None:
        """Why the guest run failed as a whole (a crash even after the suite's end, or no
        end), with the end of the kernel's output; None if it finished cleanly."""
        if self.crash is not None:
            end = " although the run reached its end" if self.done else ""
            why = f"guest kernel panicked or oopsed{end}: {self.crash.strip()}"
        elif self.done or self.command_rc is not None:
            return None
        elif self.timed_out:
            why = f"guest timed out after {self.seconds:.0f}s"
        elif not self.booted:
            why = f"guest never reached its init (QEMU exit {self.qemu_rc})"
        else:
            why = f"guest stopped before the end of its run (QEMU exit {self.qemu_rc})"
        tail = "\n    ".join(self.console.strip().splitlines()[-30:])
        return f"{why}; last console lines:\n    {tail}"


def parse_console(console: str, times: Sequence[float] | None = None) -> Console:
    """Parse the guest's console text; `times[i]`, if given, is when line i (split on
    newlines) reached the host, and gives each result its wall time. Every line the guest
    did not print itself (not @@SPMU, not a command's output) is scanned for a panic or
    oops to the very end: one after DONE fails the run too."""
    outputs: dict[str, list[str]] = {}
    results = []
    booted = done = False
    rc = None
    crashes = []
    cmd_lines: list[str] = []
    in_cmd = in_dump = False
    last_mark = booted_at = None
    pieces = console.split("\n")
    if pieces[-1] == "":
        pieces.pop()  # the newline ending the last line
    for i, raw in enumerate(pieces):
        line = raw.rstrip("\r")
        now = times[i] if times is not None and i < len(times) else None
        if m := _DUMP.search(line):
            in_dump = m["edge"] == "BEGIN"
        elif in_dump:
            continue
        elif f"{MARK} BOOTED" in line:
            booted = True
            last_mark = booted_at = now
        elif f"{MARK} CMD-BEGIN" in line:
            in_cmd = True
        elif m := _CMD_END.search(line):
            in_cmd = False
            rc = int(m["rc"])
        elif in_cmd:
            cmd_lines.append(line)
            # The command's output and the kernel's messages share the console; a kernel
            # line carries printk's timestamp.
            if _KERNEL_LINE.match(line) and _PANIC.search(line):
                crashes.append(line)
        elif m := _OUT.search(line):
            outputs.setdefault(m["name"], []).append(m["line"])
        elif m := _TEST.search(line):
            took = now - last_mark if now is not None and last_mark is not None else None
            last_mark = now
            results.append(TestResult(m["name"], m["verdict"], m["detail"].strip(),
                                      tuple(outputs.get(m["name"], [])), took))
        elif f"{MARK} DONE" in line:
            done = True
        elif MARK not in line and _PANIC.search(line):
            crashes.append(line)
    return Console(results, booted, done, rc, "\n".join(cmd_lines), tuple(crashes),
                   booted_at)


def crash_lines(console: str) -> list[str]:
    """The kernel's panic/oops lines in a console text (see parse_console)."""
    return list(parse_console(console).crashes)


def command(arch: str, image: Path, initrd: Path, mode: str, smp: int = 2,
            icount: bool = True, el2: bool = False, params: str = "",
            idle_states: bool = False) -> list[str]:
    """idle_states (arm64): boot with QEMU's own device tree plus a PSCI idle state
    (pmubuild.guests.idledt), which a kernel with CPU_IDLE and ARM_PSCI_CPUIDLE enters through
    CPU PM; without it, QEMU's tree has no idle state."""
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
                   "-cpu", "max,pauth-impdef=on"]
        timing = ["-icount", "shift=0,sleep=off"] if icount else []
        append = f"console=ttyAMA0 {append}"
    else:
        binary = "qemu-system-x86_64"
        # TCG's x86 CPU models have no PMU (no architectural perfmon).
        machine = ["-M", "pc", "-cpu", "max"]
        # thread=single: one host thread runs both vCPUs. QEMU before 8.1 (Debian 12 has
        # 7.2; fixed by its commit deba78709ae8) translated guest code without locking the
        # page, so a vCPU could link in and keep running a translation made while another
        # vCPU patched that code: the stray int3 of a finished text_poke_bp() then oopses
        # the kernel at boot ("Oops: int3" at a "66 <90>" site, no module loaded; CI, sid
        # and trixie). The amd64 guests test refusals and gain nothing from two threads, so
        # the flag stays on newer QEMU too. arm64 guests without -icount (stress, debug,
        # KCSAN) are exposed as well, silently (a stale static-key branch on one vCPU), but
        # need vCPUs that really run in parallel; the exact counts run under -icount, which
        # is single-threaded by itself.
        timing = ["-accel", "tcg,thread=single"]
        append = f"console=ttyS0 {append}"
        if idle_states:
            raise PipelineError("idle states in the device tree: arm64 guests only")
    if not shutil.which(binary):
        raise PipelineError(f"{binary} not found (./devenv installs qemu-system-arm/-x86)")
    # What shapes QEMU's device tree: the idle-state tree is dumped with exactly these.
    machine += ["-smp", str(smp), "-m", "1024"]
    dtb = ["-dtb", str(idledt.ensure(binary, machine))] if idle_states else []
    return [binary, *machine, *timing, "-nographic", "-no-reboot", *dtb,
            "-kernel", str(image), "-initrd", str(initrd), "-append", append]


def boot(arch: str, image: Path, initrd: Path, mode: str = "test", timeout: float = 180,
         smp: int = 2, icount: bool = True, el2: bool = False, params: str = "",
         on_line: Callable[[str], None] | None = None,
         idle_states: bool = False) -> GuestRun:
    """params: extra kernel command-line words (spmu.* settings the guest tests read);
    on_line: called with each console line as it comes (progress of a long guest);
    idle_states: see command()."""
    argv = command(arch, image, initrd, mode, smp, icount, el2, params, idle_states)
    start = time.monotonic()
    lines, times, stderr, qemu_rc = read_console(argv, timeout, on_line)
    console = "".join(lines)
    if qemu_rc not in (0, None):
        console += stderr
    return GuestRun.of(console, time.monotonic() - start, qemu_rc is None, qemu_rc, times,
                       start)


def read_console(argv: list[str], timeout: float,
                 on_line: Callable[[str], None] | None = None
                 ) -> tuple[list[str], list[float], str, int | None]:
    """Run argv, reading its stdout line by line as it comes, each line stamped with the
    host's monotonic clock (and given to on_line): (lines, times, stderr, exit status or
    None if killed at `timeout`)."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, errs = proc.stdout, proc.stderr
    assert out is not None and errs is not None
    lines: list[str] = []
    times: list[float] = []
    err: list[bytes] = []

    def pump(stream: IO[bytes]) -> None:
        for raw in stream:
            times.append(time.monotonic())
            lines.append(raw.decode(errors="replace"))
            if on_line:
                on_line(lines[-1])

    readers = [threading.Thread(target=pump, args=(out,)),
               threading.Thread(target=lambda: err.append(errs.read()))]
    for t in readers:
        t.start()
    rc: int | None
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = None
    for t in readers:
        t.join()
    out.close()
    errs.close()
    return lines, times, b"".join(err).decode(errors="replace"), rc
