"""Reports of the kernel's debuggers, read from a debug guest's console (issue 24).

A guest booted with spmu.debug=1 (tests/guest/init) marks the kernel log when its init
starts, and at its end scans kmemleak and prints the whole kernel log between @@SPMU
markers. Every report after the init's mark counts against the run: lockdep, sleeping in
atomic context, KASAN, KCSAN, UBSAN, debug objects, kmemleak, any other BUG or WARNING, an
oops, a hung task or an RCU stall. Reports before it are the kernel's own, from boot:
shown, not counted.
"""

import re
from dataclasses import dataclass

INIT_MARK = "spmu-debug: init started"
# Checked in order: the first that matches names the report.
KINDS = (
    ("lockdep", re.compile(r"WARNING: (possible (circular|recursive) locking|inconsistent "
                           r"lock state|suspicious RCU usage|possible irq lock inversion)"
                           r"|BUG: (held lock freed|bad unlock balance|lock held when "
                           r"returning|Invalid wait context)"
                           r"|INFO: possible (recursive|circular)")),
    ("atomic-sleep", re.compile(r"BUG: (sleeping function called from invalid context"
                                r"|scheduling while atomic|using (__this_cpu_\w+|"
                                r"smp_processor_id)\(\) in preemptible)")),
    ("kasan", re.compile(r"BUG: KASAN: ")),
    ("kcsan", re.compile(r"BUG: KCSAN: ")),
    ("ubsan", re.compile(r"UBSAN: ")),
    ("debugobjects", re.compile(r"ODEBUG: ")),
    ("oops", re.compile(r"Unable to handle kernel|Internal error: |general protection fault|"
                        r"Kernel panic|kernel BUG at|Oops")),
    ("hung", re.compile(r"INFO: task .* blocked for more than|rcu: INFO: |"
                        r"detected stall")),
    # kmemleak off (its pool ran out, an allocation of its own failed): leaks go unseen.
    ("kmemleak-off", re.compile(r"kmemleak: (Cannot allocate a kmemleak_object|Memory pool "
                                r"empty|Kernel memory leak detector disabled)")),
    ("bug", re.compile(r"BUG: ")),
    ("warning", re.compile(r"WARNING: ")),
)
REPORT_LINES = 30
KCSAN_LINES = 150
_RULE = re.compile(r"\s*={20,}\s*$")
# A data race KCSAN reports with no frame of the module in either stack is the
# kernel's own (6.1 has its share): shown, not counted.
MODULE_FRAME = "[simple_pmu]"
KERNEL_RACE = "the kernel's own data race: no [simple_pmu] frame in either stack"
# The kernel's own bugs that the module's error paths reach and cannot avoid: a kmemleak
# entry whose backtrace has these two frames, one right after the other, and whose hex
# dump shows the module's bus name. Shown, not counted.
KNOWN_KERNEL_LEAKS = (
    (("kobject_set_name+", "bus_register+"), "simple-pmu",
     "the kernel's: 6.1's kset_register() keeps the kobject's name when it fails and "
     "bus_register() frees only its private data (fixed upstream in 6.2: \"kset: fix "
     "memory leak when kset_register() returns error\"); the module's subsys_system_"
     "register() failed there"),
)
# A guest that commits several bugs in turn marks the log before each (debugrun).
BUG_MARK = re.compile(r"spmu-detector: bug=(?P<bug>[\w-]+) pid=(?P<pid>\d+)")
_LEAK_PID = re.compile(r'^\s*comm ".*", pid (?P<pid>\d+)')
_TIME = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_BLOCK = re.compile(r"^@@SPMU (?P<name>[A-Z]+)-(?P<edge>BEGIN|END)\s*$")


@dataclass(frozen=True)
class Report:
    kind: str
    text: str  # the report's first line and up to REPORT_LINES after it

    @property
    def title(self) -> str:
        return self.text.splitlines()[0]


@dataclass(frozen=True)
class Verdict:
    reports: tuple[Report, ...]  # after the init's mark: each fails the run
    boot: tuple[Report, ...]  # before it: the kernel's own
    klog: bool  # the guest printed its kernel log
    kmemleak: bool | None  # and its kmemleak scan (None: a kernel without kmemleak)
    marked: bool = True  # the log still holds the init's mark: nothing before it lost
    # KNOWN_KERNEL_LEAKS and the kernel's own data races, with why: not counted
    known: tuple[tuple[Report, str], ...] = ()

    def problems(self) -> list[str]:
        out = [f"{r.kind}: {r.text}" for r in self.reports]
        if not self.klog:
            out.append("the guest printed no kernel log (@@SPMU KLOG): nothing was judged")
        elif not self.marked:
            out.append(f"the kernel log lost its start ('{INIT_MARK}' is gone: the buffer "
                       "wrapped): reports there would be unseen")
        if self.klog and self.kmemleak is False:
            out.append("no kmemleak scan (@@SPMU KMEMLEAK): leaks were not judged")
        return out

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.reports:
            counts[r.kind] = counts.get(r.kind, 0) + 1
        return counts


def blocks(console: str) -> dict[str, list[str]]:
    """The guest's @@SPMU NAME-BEGIN .. NAME-END blocks, by name (lines without \\r)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in console.split("\n"):
        line = raw.rstrip("\r")
        m = _BLOCK.match(line)
        if m and m["edge"] == "BEGIN":
            current = found.setdefault(m["name"], [])
        elif m:
            current = None
        elif current is not None:
            current.append(line)
    return found


def kind_of(line: str) -> str | None:
    for kind, pattern in KINDS:
        if pattern.search(line):
            return kind
    return None


def reports_in(lines: list[str]) -> list[Report]:
    """Each report's first line (the first matching line of a run of them) with what
    follows it, up to the next report or REPORT_LINES."""
    found = []
    i = 0
    while i < len(lines):
        kind = kind_of(lines[i])
        if kind is None:
            i += 1
            continue
        end = i + 1
        # KCSAN's report holds two stacks, up to its closing rule: whether the module is
        # in it is judged from the whole (kcsan_counted).
        most = KCSAN_LINES if kind == "kcsan" else REPORT_LINES
        # WARN() prints its own "WARNING: CPU: .. at file:line" right after a report's
        # title (debug objects do so): part of that report, not another.
        while end < len(lines) and end - i <= most and (
                kind_of(lines[end]) is None
                or (end - i <= 3 and kind_of(lines[end]) == "warning")):
            end += 1
            if kind == "kcsan" and _RULE.match(_TIME.sub("", lines[end - 1])):
                break
        found.append(Report(kind, "\n".join(_TIME.sub("", ln) for ln in lines[i:end])))
        i = end
    return found


def leaks_in(lines: list[str]) -> list[Report]:
    """kmemleak's 'unreferenced object' entries, each with its backtrace."""
    found: list[Report] = []
    current: list[str] = []
    for line in lines + ["unreferenced object (end)"]:
        if line.startswith("unreferenced object"):
            if current:
                found.append(Report("kmemleak", "\n".join(current[:REPORT_LINES])))
            current = [line]
        elif current:
            current.append(line)
    return found


def known_leak(leak: Report) -> str | None:
    """Why a kmemleak entry is one of KNOWN_KERNEL_LEAKS, or None."""
    lines = leak.text.splitlines()
    dump = [ln for ln in lines if ln.startswith("    ") and not ln.strip().startswith("[<")]
    for (caller, callee), name, why in KNOWN_KERNEL_LEAKS:
        adjacent = any(caller in a and callee in b for a, b in zip(lines, lines[1:], strict=False))
        if adjacent and any(name in ln for ln in dump):
            return why
    return None


def judge(console: str, kmemleak: bool = True) -> Verdict:
    """The guest's console judged; `kmemleak`: the kernel has it, so a scan is due."""
    b = blocks(console)
    klog = b.get("KLOG")
    found = leaks_in(b["KMEMLEAK"]) if "KMEMLEAK" in b else []
    known = tuple((r, why) for r in found if (why := known_leak(r)))
    leaks = [r for r in found if not known_leak(r)]
    scanned = ("KMEMLEAK" in b) if kmemleak else None
    if klog is None:
        return Verdict(tuple(leaks), (), False, scanned, known=known)
    at = next((i for i, ln in enumerate(klog) if INIT_MARK in ln), None)
    after = reports_in(klog if at is None else klog[at:])
    races = tuple((r, KERNEL_RACE) for r in after
                  if r.kind == "kcsan" and MODULE_FRAME not in r.text)
    counted = [r for r in after if not any(r is x for x, _ in races)]
    if at is None:  # judged whole: nothing can be told to be the boot's
        return Verdict(tuple(counted + leaks), (), True, scanned, False, known + races)
    return Verdict(tuple(counted + leaks), tuple(reports_in(klog[:at])), True,
                   scanned, known=known + races)


def by_bug(console: str) -> dict[str, list[Report]]:
    """The reports of a guest that committed bugs in turn, by bug: a report in the kernel
    log belongs to the bug whose mark (BUG_MARK) last came before it; a kmemleak entry to
    the bug whose loading process (the mark's pid) made the allocation. Reports after the
    init's mark that no bug claims are under ""."""
    b = blocks(console)
    klog = b.get("KLOG", [])
    at = next((i for i, ln in enumerate(klog) if INIT_MARK in ln), 0)
    found: dict[str, list[Report]] = {}
    bug, start, pids = "", at, {}
    for i in range(at, len(klog) + 1):
        m = BUG_MARK.search(klog[i]) if i < len(klog) else None
        if m or i == len(klog):
            found.setdefault(bug, []).extend(reports_in(klog[start:i]))
            if m:
                bug, start = m["bug"], i + 1
                pids[m["pid"]] = bug
    for leak in leaks_in(b.get("KMEMLEAK", [])):
        owner = next((pids.get(p["pid"], "") for ln in leak.text.splitlines()
                      if (p := _LEAK_PID.match(ln))), "")
        found.setdefault(owner, []).append(leak)
    return found
