"""tests/guest/arm64-debug/*.sh and the lib.sh helpers they use (fault_setup, left_nothing,
members_reaped, unload, log_mark/log_since, progress) on the host, against a model of the
module and of the debug kernel's per-task fault injection (WORLD): each script must pass
on a module that behaves, and fail on one that breaks what the script guards (BUGS). Each
check of the scripts is then removed or broken in turn (MUTATIONS): a scenario here must
notice. The checks the audit found missing (now in the scripts) are the tests at the end.

The model is one process per run (world.py), which the guest's tools (shell functions
appended to the staged lib.sh) ask through a FIFO, one request at a time:
- `failnth N write|load|join` arms the calling thread: the call makes POINTS[what]
  fault-capable calls and the N-th fails (ENOMEM) when N <= those, unless ABSORBED has
  "what:k" (the k-th fails and the call works all the same), as per-task fail-nth does;
  N = 0 arms nothing. It prints failnth.c's line. A load's calls: the kernel's loader's
  (POINTS["loader"]), the module's init's ("load"), the loader's after the init returned
  ("after": absorbed). With initcall_debug on the command line the kernel logs "calling
  ... [simple_pmu]" before the init and "initcall ... returned" after it; with failslab's
  verbose at 1 or more, each injected failure logs its notice (NOWARN: none). A failure
  in the init says one simple-pmu line, one in the loader none.
- Each online CPU's perf events are made by the module's online callback in that CPU's
  hotplug thread cpuhp/N, at load, at a ring or events write that changes the events,
  and when cpu1 comes online: the thread's fail-nth (/proc/PID/task/PID/fail-nth, which
  30-failnth-cpuhp writes) is counted down by POINTS["cpuhp"] calls, and a CPU whose
  failure is not absorbed gets no events (it says so, faults, is not in `cpus`). Every
  CPU refused: the load fails, or the write fails and the previous events are taken back
  ("previous settings kept").
- modprobe/rmmod make and remove the sysfs directory, the /proc/modules line and the node
  (rmmod is busy once per unload while 40's reader runs: lib.sh's unload tries again).
- pmuread reads each online CPU; pmuspin (40's reader on cpu0) says at its end how many
  reads worked and faulted, from the loads and unloads it lived through. 40's loads wait
  for the reader and for cpu1 to have gone offline since the load before (on the debug
  kernel a load takes seconds).
Sysfs, cpu1/online and fault-injection writes are the shell's own redirections: the
staged lib.sh wraps `echo` so that such a write reaches the model right after it (a write
the model refuses makes the echo fail, with the old value back, as the kernel would).
A mutant the model sees looping (the same N again, N beyond 200) is ended, as the guest's
timeout would end it.

Every guest path (/sys, /proc, /dev, /lib/modules, /tmp) is moved under the run's
directory (or, unchanged by any run, a shared one), and the staged text is checked for
any left: these tests run as root on the host. Only the shell's own stdout is looked at
(/dev/stdout, to tell which file an echo wrote)."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .test_guest_scripts import GUEST, fake

RELEASE = "6.1.0-debug"
CPUHP = {0: 15, 1: 16}  # the hotplug threads' PIDs
S10, S20, S30 = ("arm64-debug/10-failnth-sysfs.sh", "arm64-debug/20-failnth-join.sh",
                 "arm64-debug/30-failnth-cpuhp.sh")
S40, S50 = "arm64-debug/40-hotplug-load-unload.sh", "arm64-debug/50-failnth-load.sh"

WORLD = r'''
import contextlib, json, os, select, shutil, signal, sys, time, traceback
from pathlib import Path

T = Path(sys.argv[1])
CFG = json.loads(sys.argv[2])
BUGS, ABSORBED, POINTS = set(CFG["bugs"]), set(CFG["absorbed"]), CFG["points"]
SYS = T / "spmu"  # /sys/devices/system/simple-pmu
SYSFS = SYS / "simple-pmu0"
NODE, MODULES, KMSG = T / "node", T / "modules", T / "kmsg"
ONLINE = T / "online1"
STORES = ("user_access", "ring", "events")
STRERROR = {"EBUSY": "Device or resource busy", "ENOMEM": "Cannot allocate memory"}
S = {"requests": 0, "loaded": False, "held": [False, False], "online1": True,
     "settings": {}, "broken": False, "clean": [], "store_failed": False,
     "loads": 0, "unloads": 0, "modprobes": 0, "rmmods": 0, "offlines": 0,
     "offline_tries": 0, "pace": CFG["pace"], "pace_mark": 0, "spin": None,
     "busy": False, "last_failnth": None, "refused1": False, "spin_seen": False,
     "fi": {f"{p.parent.name}/{p.name}": p.read_text().strip()
            for p in T.glob("fi/*/*")}}
OUT, ERR = [], []


class Runaway(Exception):
    """A loop the guest's timeout would end: the run is killed."""


def kmsg(line):
    with open(KMSG, "a") as f:
        f.write(f"[{12 + S['requests'] / 100:12.6f}] {line}\n")


def fault(n, calls):
    """A thread armed with n makes `calls` fault-capable calls: (the call that failed or
    0, what its fail-nth reads after)."""
    if 0 < n <= calls:
        return n, 0
    return 0, n - calls if n else 0


def online_cpus():
    return [0, 1] if S["online1"] else [0]


def publish():
    if S["loaded"] and SYSFS.is_dir():
        on = [c for c in online_cpus() if S["held"][c] or "refused-cpu-listed" in BUGS]
        (SYSFS / "cpus").write_text(("0-1" if on == [0, 1] else " ".join(map(str, on))) + "\n")


def refused_line(c):
    kmsg(f"simple-pmu: cpu{c}: perf refused event 0x11: -12; user access stays closed there")


def callback(c):
    """CPU c's online callback, run by its hotplug thread: whether it got its events."""
    f = T / "proc" / f"fail-nth.{CFG['cpuhp'][str(c)]}"
    n = int(f.read_text().strip() or 0) if f.exists() else 0
    if n > 200:
        raise Runaway(f"cpuhp/{c} armed with {n}")
    k, left = fault(n, 0 if "cpuhp-allocates-nothing" in BUGS else POINTS["cpuhp"])
    if f.exists():
        f.write_text(f"{left}\n")
    return not k or f"cpuhp:{k}" in ABSORBED


def start(when):
    """The events taken on every online CPU (cpuhp_setup_state()); False: perf refused
    them on every one (or, a bug, on any one), and nothing is held."""
    got = {c: callback(c) for c in online_cpus()}
    none = not any(got.values())
    quiet = ("refusal-not-said" in BUGS or (when == "write" and "write-refusal-not-said" in BUGS)
             or (none and "all-refused-silent" in BUGS))
    for c, ok in got.items():
        S["held"][c] = ok
        if not ok and not quiet:
            refused_line(c)
    if none or (f"{when}-fails-on-one-refusal" in BUGS and not all(got.values())):
        S["held"] = [False, False]
        return False
    return True


def injected_here(where, i):
    """failslab's notice of an injected failure (verbose 1 or more, not __GFP_NOWARN)."""
    verbose = T / "fi" / "failslab" / "verbose"
    if verbose.exists() and verbose.read_text().strip() not in ("", "0") and (
            f"{where}:{i}" not in CFG["nowarn"]):
        kmsg("FAULT_INJECTION: forcing a failure.")
        kmsg("name failslab, interval 1, probability 0, space 0, times -1")


def initcall(what):
    """initcall_debug's lines around the module's init."""
    if CFG["initcall_lines"] and "initcall_debug" in (T / "cmdline").read_text().split():
        kmsg("calling  spmu_init+0x0/0x2c8 [simple_pmu] @ 93" if what == "calling" else
             f"initcall spmu_init+0x0/0x2c8 [simple_pmu] returned {what} after 8123 usecs")


def load(n, params):
    """finit_module() with the loading thread armed with n: (rc, errno, k, left). The
    thread's fault-capable calls: the kernel's loader's, the module's init's, and the
    loader's after the init returned (a failure there is absorbed)."""
    if S["loaded"]:
        return -1, "EEXIST", 0, n
    loader, init, after = POINTS["loader"], POINTS["load"], POINTS["after"]
    k, left = fault(n, loader + init + after)
    absorbed = False
    if k and k <= loader:
        injected_here("loader", k)
        if f"loader:{k}" not in ABSORBED:
            if "loader-failure-says" in BUGS:  # the module's parameter code, in the loader
                kmsg("simple-pmu: invalid events=0x11: valid is none or up to 6 event numbers")
            return -1, "ENOMEM", k, left
    initcall("calling")
    if k and loader < k <= loader + init:
        injected_here("load", k - loader)
        absorbed = f"load:{k - loader}" in ABSORBED
    failed = ("ENOMEM" if k and loader < k <= loader + init and not absorbed else "ENOENT"
              if "uninjected-load-fails" in BUGS and n == loader + init + after + 1 else "")
    if failed:
        if "failed-load-silent" not in BUGS:
            kmsg("simple-pmu: cannot register sysfs device (-12)")
        if "failed-load-says-twice" in BUGS:
            kmsg("simple-pmu: cannot register /dev/simple-pmu (-12)")
        if "failed-load-leaves-sysfs" in BUGS:
            SYSFS.mkdir(parents=True, exist_ok=True)
        if "failed-load-leaves-module" in BUGS:
            MODULES.write_text("simple_pmu 16384 0 - Unloading 0x0\n")
        if "failed-load-leaves-node" in BUGS:
            NODE.write_text("")
        initcall(-12 if failed == "ENOMEM" else -2)
        return -1, failed, k, left
    if not start("load"):
        kmsg("simple-pmu: perf did not give the events to any CPU (-12); is there a PMU "
             "driver (CONFIG_HW_PERF_EVENTS, a PMU node in the device tree or ACPI)?")
        if "all-refused-leaves-sysfs" in BUGS:
            SYSFS.mkdir(parents=True, exist_ok=True)
        initcall(-12)
        return -1, "ENOMEM", k, left
    if not (absorbed and "loaded-without-sysfs" in BUGS):
        SYSFS.mkdir(parents=True, exist_ok=True)
    events = next((p[7:] for p in params if p.startswith("events=")), "none")
    S["settings"] = {"user_access": "1", "ring": CFG["ring_default"], "events": events}
    if SYSFS.is_dir():
        for name, v in {**S["settings"], "members": "0", "recheck_ms": "100"}.items():
            (SYSFS / name).write_text(v + "\n")
    S.update(loaded=True, loads=S["loads"] + 1, clean=[], store_failed=False,
             broken="load-reads-broken" in BUGS or bool(
                 absorbed and "absorbed-load-reads-broken" in BUGS))
    publish()
    MODULES.write_text("simple_pmu 16384 0 - Live 0x0\n")
    NODE.write_text("")
    kmsg("simple-pmu: PMUv3 version 0x1, 6 event counters of 32 bits; cycles and 1 events "
         "taken through perf; EL0 reads for threads let in through /dev/simple-pmu")
    initcall(0)
    if k > loader + init:
        injected_here("after", k - loader - init)
    return 0, "0", k, left


def modprobe(args):
    S["modprobes"] += 1
    S["pace_mark"] = S["offline_tries"]
    if S["modprobes"] == CFG["modprobe_fails_at"] or (
            not S["loaded"] and load(0, args[1:])[0]):
        ERR.append("modprobe: can't load module simple_pmu (extra/simple-pmu.ko): "
                   "Cannot allocate memory")
        return 1
    return 0


def rmmod(args):
    if not S["loaded"]:
        ERR.append("rmmod: can't unload module 'simple_pmu': No such file or directory")
        return 1
    if S["spin"] is not None and not S["busy"]:  # the reader holds the node for its JOIN
        S["busy"] = True
        ERR.append("rmmod: can't unload module 'simple_pmu': Resource temporarily unavailable")
        return 1
    S["busy"] = False
    S["rmmods"] += 1
    if S["rmmods"] == CFG["unload_fails_at"]:
        ERR.append("rmmod: can't unload module 'simple_pmu': Device or resource busy")
        return 1
    S["unloads"] += 1
    if "unload-leaves-sysfs" not in BUGS:
        shutil.rmtree(SYS, ignore_errors=True)
    if "unload-leaves-module" not in BUGS:
        MODULES.write_text("")
    if "unload-leaves-node" not in BUGS and not (
            CFG["node_left_from"] and S["unloads"] >= CFG["node_left_from"]):
        NODE.unlink(missing_ok=True)
    S.update(loaded=False, held=[False, False], broken=False)
    kmsg("simple-pmu: user access closed, counters given back to perf; unloaded")
    return 0


def write_attr(name, value, via):
    """A store of a writable attribute that got past its own allocations: (rc, errno)."""
    f, old = SYSFS / name, S["settings"][name]
    if via == "echo" and (
            ("stuck-after-clean-write" in BUGS and name in S["clean"])
            or ("writeback-refused" in BUGS and S["store_failed"])):
        f.write_text(old + "\n")
        return -1, "EBUSY"
    if "store-ignored" in BUGS:
        f.write_text(old + "\n")
        return 0, "0"
    if name != "user_access" and value != old:  # the events are made again
        S["held"] = [False, False]
        publish()
        if not start("write"):
            if "fallback-not-said" not in BUGS:
                kmsg("simple-pmu: perf refused the new events (-12); previous settings kept")
            start("fallback")
            if "fallback-leaves-closed" in BUGS:
                S["held"] = [False, False]
            f.write_text((value if "failed-write-shows-new" in BUGS else old) + "\n")
            if "cpus-stale-after-fallback" not in BUGS:
                publish()
            return -1, "ENOMEM"
    S["settings"][name] = value
    f.write_text(value + "\n")
    if via == "echo" and ("writeback-breaks-reads" in BUGS or (
            "events-writeback-breaks-reads" in BUGS and name == "events"
            and name in S["clean"])):
        S["broken"] = True
    publish()
    return 0, "0"


def online(value):
    if value == "0" and S["online1"]:
        S["offline_tries"] += 1
        if "offline-refused" in BUGS:
            ONLINE.write_text("1\n")
            ERR.append("sh: write error: Device or resource busy")
            return 1
        S.update(online1=False, offlines=S["offlines"] + 1)
        S["refused1"] = S["loaded"] and not S["held"][1]
        S["held"][1] = False
    elif value == "0":
        S["offline_tries"] += 1
    elif value == "1" and not S["online1"]:
        if "online-refused" in BUGS:
            ONLINE.write_text("0\n")
            ERR.append("sh: write error: Input/output error")
            return 1
        if "online-does-not-stick" in BUGS:
            ONLINE.write_text("0\n")
            return 0
        S["online1"] = True
        if S["loaded"]:
            ok = callback(1) and not ("not-back-after-online" in BUGS and S["refused1"])
            S["held"][1] = ok
            if not ok:
                refused_line(1)
            if "cpus-stale-after-online" in BUGS:
                return 0
    publish()
    return 0


def store(args):
    """A write the shell made into the module's sysfs, cpu1/online or a fault-injection
    setting: 0 took, 1 refused."""
    p = Path(args[0])
    value = p.read_text().strip() if p.is_file() else ""
    if p == ONLINE:
        return online(value)
    if p.parent.parent == T / "fi":
        name = f"{p.parent.name}/{p.name}"
        if CFG["fi_refuses"] in (name, f"{name}={value}"):
            p.write_text(S["fi"].get(name, "") + "\n")
            ERR.append("sh: write error: Operation not permitted")
            return 1
        S["fi"][name] = value
    if p.parent == SYSFS and p.name in STORES and S["loaded"]:
        rc, errno = write_attr(p.name, value, "echo")
        if rc:
            ERR.append(f"sh: write error: {STRERROR[errno]}")
            return 1
    return 0


def failnth(args):
    if CFG["failnth_broken"]:
        ERR.append("failnth: /proc/thread-self/fail-nth: No such file or directory "
                   "(a kernel without CONFIG_FAULT_INJECTION?)")
        return 2
    n, what, rest = int(args[0]), args[1], args[2:]
    if n > 200 or (n and [what, rest[0], n] == S["last_failnth"]):
        raise Runaway(f"failnth {n} {what} again")
    S["last_failnth"] = [what, rest[0], n]
    if not Path(rest[0]).exists():
        ERR.append(f"failnth: {rest[0]}: No such file or directory")
        return 2
    read = ""
    if what == "write":
        name, value = Path(rest[0]).name, rest[1]
        k, left = fault(n, POINTS[name])
        if k and f"{name}:{k}" not in ABSORBED:
            rc, errno = -1, "ENOMEM"
            S["store_failed"] = True
            if "failed-store-changes" in BUGS:
                Path(rest[0]).write_text(value + "\n")
            if "reads-broken-after-failure" in BUGS:
                S["broken"] = True
        elif "store-fails-uninjected" in BUGS and n == POINTS[name] + 1:
            rc, errno = -1, "EINVAL"
        else:
            rc, errno = write_attr(name, value, "failnth")
            rc = len(value) if rc == 0 else rc
            if not k:
                S["clean"].append(name)
    elif what == "load":
        rc, errno, k, left = load(n, rest[1].split() if len(rest) > 1 else [])
    else:  # join: the thread reads once, then exits (and is reaped)
        k, left = fault(n, POINTS["join"])
        failed = k and f"join:{k}" not in ABSORBED
        ok = not failed and not ("join-fails-uninjected" in BUGS and n == POINTS["join"] + 1)
        rc, errno = (0, "0") if ok else (-1, "ENOMEM" if failed else "EINVAL")
        reads = ok != (("join-ok-faults" if ok else "join-failed-reads") in BUGS)
        read = " read=ok" if reads and S["loaded"] else " read=sigill"
        if failed and "join-failed-stays-member" in BUGS:
            (SYSFS / "members").write_text("1\n")
    OUT.append(f"n={n} rc={rc} errno={errno} injected={int(bool(n) and left == 0)} "
               f"left={left}{read}")
    return 0


def reads(c):
    if not S["loaded"] and S["unloads"] and "access-left-open" in BUGS:
        return True  # the counters stay readable after an unload
    if not (S["loaded"] and SYSFS.is_dir()) or S["broken"]:
        return False
    if S["settings"]["user_access"] != "1":
        return False
    if c == 0 and "other-cpu-closed" in BUGS and not all(S["held"][x] for x in online_cpus()):
        return False
    return S["held"][c] or "refused-cpu-reads" in BUGS


def pmuread(args):
    rc = 0
    for c in online_cpus():
        if reads(c):
            OUT.append(f"cpu={c} result=ok first=1000 second=1400")
        else:
            OUT.append(f"cpu={c} result=sigill")
            rc = 1
    return rc


def spin(args):
    """40's reader on cpu0: its start, and the line it prints at its end."""
    if args[0] == "start":
        S["spin_seen"] = True
        S["spin"] = {"loads": S["loads"], "unloads": S["unloads"], "loaded": S["loaded"]}
        if not CFG["reader_short"]:
            return 0
    s = S["spin"] or {"loads": S["loads"], "unloads": S["unloads"], "loaded": S["loaded"]}
    S["spin"] = None
    on = S["loads"] - s["loads"] + s["loaded"]
    off = S["unloads"] - s["unloads"] + (not s["loaded"])
    if "access-left-open" in BUGS:  # after an unload the counters stay readable
        off = int(not s["loaded"])
    ok = 0 if "reader-faults-while-loaded" in BUGS else 5000 * on
    OUT.append(f"ok={ok} sigill={0 if 'reads-without-module' in BUGS else 40 * off}")
    return 0


TOOLS = {"modprobe": modprobe, "rmmod": rmmod, "failnth": failnth, "pmuread": pmuread,
         "spmu-store": store, "spmu-spin": spin}


def reply(fifo, rc):
    """The answer, into the FIFO the client made (named first in its request) and reads
    from; gone once opened, for the next client of that name."""
    data = ("".join(f"{ln}\n" for ln in OUT) + "".join(f"@@err {ln}\n" for ln in ERR)
            + f"@@rc {rc}\n").encode()
    fd = os.open(fifo, os.O_WRONLY)
    os.unlink(fifo)
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data):]
    os.close(fd)


def process(fields):
    fifo, tool, args = fields[0], fields[1], fields[2:]
    OUT.clear()
    ERR.clear()
    S["requests"] += 1
    (T / "uptime").write_text(f"{12 + S['requests'] / 100:.2f} 20.00\n")
    try:
        if S["requests"] > CFG["max_requests"]:
            raise Runaway("too many requests")
        rc = TOOLS[tool](args)
    except Runaway as e:
        (T / "runaway").write_text(f"{e}\n")
        with contextlib.suppress(Exception):
            os.killpg(int(sys.stdin.readline()), signal.SIGKILL)
        rc = 99
    except Exception:
        with open(T / "model-errors", "a") as f:
            f.write(f"{fields}\n{traceback.format_exc()}")
        rc = 99
    (T / "state.json").write_text(json.dumps(S))
    reply(fifo, rc)


def paced():
    """Whether 40's next load may go: its reader started and cpu1 went offline (or was
    tried) since the load before; or the hotplug loop gave up (flip.err)."""
    return (S["spin_seen"] and S["offline_tries"] > S["pace_mark"]) or (
        T / "tmp" / "flip.err").exists()


def main():
    """Requests one at a time. 40's loads wait for its reader to have started, and for
    cpu1 to have been taken offline (or tried) since the load before, 10 s at most (then
    no more): on the debug kernel each load takes seconds."""
    fd = os.open(T / "req", os.O_RDWR)
    buf, pending = b"", []
    while True:
        if select.select([fd], [], [], 0.005 if pending else None)[0]:
            buf += os.read(fd, 65536)
            *lines, buf = buf.split(b"\n")
            for line in lines:
                fields = line.decode().split("\t")
                if fields[1] == "modprobe" and S["pace"] and not paced():
                    pending.append((time.monotonic() + 10, fields))
                else:
                    process(fields)
        for item in list(pending):
            if paced() or time.monotonic() > item[0]:
                S["pace"] = S["pace"] and time.monotonic() <= item[0]
                pending.remove(item)
                process(item[1])


main()
'''

# A tool of the model: one request (tab-separated, the reply FIFO first) to world.py, its
# answer printed. As a command for pmuspin; for the scripts, HOOK's _spmu_ask.
CLIENT = """\
_r=@T@/fifo.$$
mkfifo "$_r" || exit 97
_l="$_r	${0##*/}"
for _a; do _l="$_l	$_a"; done
printf '%s\\n' "$_l" >> @T@/req
_rc=98
while IFS= read -r _x; do
	case $_x in
	"@@rc "*) _rc=${_x#@@rc } ;;
	"@@err "*) printf '%s\\n' "${_x#@@err }" >&2 ;;
	*) printf '%s\\n' "$_x" ;;
	esac
done < "$_r"
exit "$_rc"
"""

# pmuspin CPU MS: reads until SIGTERM, then prints its line (the model's); or prints it
# at once and ends (the model's reader_short: its time ran out).
PMUSPIN = """\
spmu-spin start || exit 0
trap 'spmu-spin end; exit 0' TERM
while :; do sleep 0.2 & wait $!; done
"""

# Appended to the staged lib.sh. The model's tools as shell functions (one process less
# per call than a command: the sweeps make hundreds), and the kernel's log and release;
# sleep returns at once (members_reaped, unload: the model changes nothing meanwhile).
# lib.sh's echo, wrapped: a write into the module's sysfs, cpu1/online or a fault-injection
# setting reaches the model; one into /dev/kmsg is appended to the kernel log (which file
# the redirection opened: bash's own stdout, compared by inode).
HOOK = """\
_spmu_ask() {
	local _r=@T@/fifo.$BASHPID _l _x _a _rc=98
	mkfifo "$_r" || return 97
	_l=$_r
	for _a; do _l="$_l	$_a"; done
	builtin printf '%s\\n' "$_l" >> @T@/req
	while IFS= read -r _x; do
		case $_x in
		"@@rc "*) _rc=${_x#@@rc } ;;
		"@@err "*) builtin printf '%s\\n' "${_x#@@err }" >&2 ;;
		*) builtin printf '%s\\n' "$_x" ;;
		esac
	done < "$_r"
	return "$_rc"
}
modprobe() { _spmu_ask modprobe "$@"; }
rmmod() { _spmu_ask rmmod "$@"; }
failnth() { _spmu_ask failnth "$@"; }
pmuread() { _spmu_ask pmuread "$@"; }
dmesg() { _spmu_cat @T@/kmsg; }
_spmu_cat() {
	local _x
	while IFS= read -r _x; do builtin printf '%s\\n' "$_x"; done < "$1"
}
sleep() { :; }
uname() { builtin printf '%s\\n' @RELEASE@; }
echo() {
	builtin echo "$@" || return
	[ -f /dev/stdout ] || return 0
	local _f
	for _f in @T@/spmu/simple-pmu0/* @T@/online1 @T@/fi/*/*; do
		[ /dev/stdout -ef "$_f" ] && { _spmu_ask spmu-store "$_f"; return; }
	done
	if [ /dev/stdout -ef @T@/kmsg.w ]; then _spmu_cat @T@/kmsg.w >> @T@/kmsg; fi
}
"""


# Fault-capable calls: each store, JOIN, the kernel's loader before the module's init, the
# init, the loader after it (an uevent: its failure is absorbed), and each CPU's online
# callback in its hotplug thread.
POINTS = {"user_access": 2, "ring": 1, "events": 1, "join": 3, "loader": 2, "load": 3,
          "after": 1, "cpuhp": 1}


@dataclass
class World:
    points: dict[str, int] = field(default_factory=dict)  # changes to POINTS
    absorbed: tuple[str, ...] = ()  # "what:k": the k-th call fails but the call works
    nowarn: tuple[str, ...] = ()  # "loader|load|after:k": failslab gives no notice
    bugs: tuple[str, ...] = ()
    modprobe_fails_at: int = 0  # the k-th modprobe fails (0: none)
    unload_fails_at: int = 0  # the k-th rmmod that would work fails
    node_left_from: int = 0  # the k-th unload and every later one leave the node
    ring_default: str = "2"
    failslab: bool = True  # a fault-injection kernel
    slab_marked: str = "1"  # kmalloc-1k/failslab (slub_debug=A on the command line)
    debugger_marked: bool = False  # kmemleak's cache marked for failslab too
    fi_refuses: str = ""  # "failslab/F" (or "failslab/F=V"): that write fails
    cmdline: str = "console=ttyAMA0 spmu.debug=1 initcall_debug"
    initcall_lines: bool = True  # the kernel logs "calling  ..." under initcall_debug
    ko: bool = True
    cpuhp_threads: bool = True  # ps shows cpuhp/0 and cpuhp/1
    task_failnth: bool = True  # /proc/PID/task/PID/fail-nth exists for them
    failnth_broken: bool = False  # failnth cannot arm (exit 2)
    reader_short: bool = False  # 40's reader ends by itself right away


# Where each guest path is staged: under the run's directory (T), or the files no run
# changes under one shared by all (S). Few files and directories: a session makes
# thousands, which pytest deletes again.
GUEST_PATHS = (("/sys/devices/system/simple-pmu", "@T/spmu"),
               ("/sys/devices/system/cpu/cpu1/online", "@T/online1"),
               ("/sys/devices/system/cpu", "@T/cpu"), ("/sys/kernel/debug", "@T/fi"),
               ("/proc/modules", "@T/modules"), ("/proc/cmdline", "@T/cmdline"),
               ("/proc/uptime", "@T/uptime"), ("/proc/sys/kernel/", "@T/procsys/"),
               ("/dev/simple-pmu", "@T/node"), ("/dev/kmsg", "@T/kmsg.w"),
               ("/dev/console", "@T/console"), ("/lib/modules/", "@S/lib/modules/"),
               ("${TMPDIR:-/tmp}", "${TMPDIR}"), ("/tmp/", "@T/tmp/"))
# /proc/PID/task/PID/fail-nth, /sys/kernel/slab/CACHE/failslab: one file each.
GUEST_PATTERNS = ((r"/proc/(\$\w+)/task/\1/fail-nth", r"@T/proc/fail-nth.\1"),
                  (r"/sys/kernel/slab/([\w$-]+)/failslab", r"@T/slab.\1"))


def lib_text(tmp: Path, shared: Path, world: World, lib: str) -> str:
    """lib.sh staged, with the hook and the process list (ps -o pid,comm) appended."""
    threads = "".join(f"   {p} cpuhp/{c}\\n" for c, p in CPUHP.items()) if (
        world.cpuhp_threads) else ""
    return (stage_text(tmp, shared, lib, world) + HOOK.replace("@T@", str(tmp)).replace(
        "@RELEASE@", RELEASE) + f'ps() {{ builtin printf "  PID COMMAND\\n    1 init\\n'
        f'{threads}   90 sh\\n"; }}\n')


def stage_text(tmp: Path, shared: Path, text: str, world: World) -> str:
    """Every guest path moved under tmp or shared (one pass: both are themselves under
    /tmp), and none left but /dev/null. Without the module file, /lib/modules is a
    directory that does not exist."""
    paths = dict(GUEST_PATHS)
    if not world.ko:
        paths["/lib/modules/"] = "@T/lib/modules/"
    staged = re.sub("|".join(re.escape(old) for old in paths), lambda m: paths[m[0]], text)
    for pattern, to in GUEST_PATTERNS:
        staged = re.sub(pattern, to, staged)
    left = re.findall(r"(?<![\w.@-])/(?:sys|proc|dev|lib|tmp)\b[^\s\"';)]*", staged)
    assert set(left) <= {"/dev/null"}, left
    return staged.replace("@T/", f"{tmp}/").replace("@S/", f"{shared}/")


def share(shared: Path) -> None:
    """What no run changes: the model, the reader on cpu0 and its way to the model, the
    module file."""
    (shared / "bin").mkdir(parents=True)
    fake(shared / "bin", "spmu-spin", CLIENT.replace("@T@", "$SPMU_T"))
    fake(shared / "bin", "pmuspin", PMUSPIN)
    ko = shared / "lib" / "modules" / RELEASE / "extra" / "simple-pmu.ko"
    ko.parent.mkdir(parents=True)
    ko.write_text("ELF")
    (shared / "world.py").write_text(WORLD)


def setup(tmp: Path, world: World) -> None:
    for d in ("tmp", "proc") if world.task_failnth else ("tmp",):
        (tmp / d).mkdir()
    files = {"online1": "1", "slab.kmalloc-1k": world.slab_marked, "cmdline": world.cmdline,
             "uptime": "12.00 20.00", "kmsg": "", "kmsg.w": "", "modules": "", "console": ""}
    for c in ("kmemleak_object", "kmemleak_scan_area", "debug_objects_cache"):
        files[f"slab.{c}"] = "1" if world.debugger_marked else "0"
    if world.task_failnth:
        for pid in CPUHP.values():
            files[f"proc/fail-nth.{pid}"] = "0"
    if world.failslab:
        for a in ("failslab", "fail_page_alloc"):
            (tmp / "fi" / a).mkdir(parents=True)
            files[f"fi/{a}/ignore-gfp-wait"] = "Y"
            files[f"fi/{a}/verbose"] = "2"
        files["fi/failslab/cache-filter"] = "N"
    for name, v in files.items():
        (tmp / name).write_text(v + "\n" if v else "")
    os.mkfifo(tmp / "req")


def run(tmp: Path, shared: Path, world: World, code: str, timeout: float,
        pace: bool) -> subprocess.CompletedProcess[str]:
    """The script in bash --posix, in a process group of its own, ended with whatever it
    left running (40's hotplug loop and reader) when it ends or times out; the model
    beside it (told the group on its standard input, to end it on a loop). Output to
    files: a background job holding a pipe cannot keep this waiting."""
    cfg = json.dumps({
        "points": POINTS | world.points, "absorbed": list(world.absorbed),
        "bugs": list(world.bugs), "modprobe_fails_at": world.modprobe_fails_at,
        "unload_fails_at": world.unload_fails_at, "node_left_from": world.node_left_from,
        "ring_default": world.ring_default, "nowarn": list(world.nowarn),
        "fi_refuses": world.fi_refuses, "initcall_lines": world.initcall_lines,
        "failnth_broken": world.failnth_broken, "reader_short": world.reader_short,
        "cpuhp": {str(c): p for c, p in CPUHP.items()}, "pace": pace,
        "max_requests": 20000})
    env = {"PATH": f"{shared / 'bin'}:/usr/bin:/bin", "TMPDIR": str(tmp / "tmp"),
           "HOME": str(tmp), "SPMU_T": str(tmp)}
    model = subprocess.Popen([sys.executable, "-S", str(shared / "world.py"), str(tmp), cfg],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        with open(tmp / "stdout", "w") as out, open(tmp / "stderr", "w") as err:
            p = subprocess.Popen(["bash", "--posix", "-c", code], stdout=out, stderr=err,
                                 env=env, cwd=tmp, start_new_session=True)
        assert model.stdin is not None
        model.stdin.write(f"{p.pid}\n")
        model.stdin.flush()
        try:
            p.wait(timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    finally:
        model.kill()
        _, crash = model.communicate()
    errors = tmp / "model-errors"
    assert not errors.exists(), errors.read_text()
    assert not crash, crash
    return subprocess.CompletedProcess(p.args, p.returncode, (tmp / "stdout").read_text(),
                                       (tmp / "stderr").read_text())


def run_debug(tmp: Path, script: str, world: World, text: str | None = None,
              lib: str | None = None, timeout: float = 120,
              shared: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The script (or a mutant's text, or with a mutant lib.sh) run against the model of
    `world`, staged in tmp; shared: the files no run changes (default: in tmp)."""
    tmp = tmp.resolve()
    if shared is None:
        shared = tmp / "shared"
        share(shared)
    setup(tmp, world)
    (tmp / "lib.sh").write_text(lib_text(tmp, shared, world, lib if lib is not None else (
        GUEST / "common" / "lib.sh").read_text()))
    text = stage_text(tmp, shared, text if text is not None else (GUEST / script).read_text(),
                      world)
    assert ". /tests/lib.sh\n" in text
    return run(tmp, shared, world, text.replace(". /tests/lib.sh\n", f". {tmp / 'lib.sh'}\n"),
               timeout, pace=script == S40)


def unstage(tmp: Path, text: str) -> str:
    """The guest's paths back in text, the rest of tmp's left out."""
    for old, new in sorted(GUEST_PATHS, key=lambda p: -len(p[1])):
        if new.startswith("@T/"):
            text = text.replace(f"{tmp.resolve()}/{new[3:]}", old)
    return text.replace(str(tmp.resolve()), "")


def failure(tmp: Path, r: subprocess.CompletedProcess[str]) -> str | None:
    """The script's FAIL line, as the guest would say it."""
    lines = [ln for ln in unstage(tmp, r.stdout).splitlines() if ln.startswith("FAIL: ")]
    assert len(lines) <= 1, r.stdout
    return lines[0] if lines else None


def runaway(tmp: Path) -> bool:
    return (tmp / "runaway").exists()


def state(tmp: Path) -> dict:
    return json.loads((tmp / "state.json").read_text())


def left_clean(tmp: Path) -> bool:
    return (not (tmp / "spmu").exists() and not (tmp / "node").exists()
            and (tmp / "modules").read_text() == "")


def test_every_debug_script_is_modelled_here():
    """A new script in arm64-debug needs its place in this model (05-cpu-pm, which
    injects no faults, has its own fakes: test_guest_cpu_pm.py)."""
    assert sorted(p.name for p in (GUEST / "arm64-debug").iterdir()) == sorted(
        Path(s).name for s in (S10, S20, S30, S40, S50, "arm64-debug/05-cpu-pm.sh"))


Result = tuple[Path, subprocess.CompletedProcess[str] | None]


class Runs:
    """Every run the selected tests need (planned(): in the order they come), started
    when the first of them starts, WORKERS at a time: each run is a few hundred short
    processes that mostly wait for the CPU (a busy machine: QEMU guests), and the waits
    overlap. Each test then takes its own run's result: its directory, and the process
    (None when it timed out)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.shared = factory.mktemp("shared").resolve()
        share(self.shared)
        self.pool = ThreadPoolExecutor(WORKERS)
        self.jobs: dict[str, Future[Result]] = {}
        self.keys: dict[str, list[str]] = {}  # test: the runs it takes

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A test passed: its runs' directories go (thousands of files a session, which
        pytest would delete one at a time later); a failure keeps them."""
        if report.when == "call" and report.passed:
            for key in self.keys.get(report.nodeid, ()):
                self.pool.submit(shutil.rmtree, self.jobs[key].result()[0], True)

    def start(self, key: str, script: str, world: World, **kw: object) -> None:
        if key not in self.jobs:
            tmp = self.factory.mktemp(re.sub(r"\W", "_", key)[:30])
            self.jobs[key] = self.pool.submit(self._run, tmp, script, world, kw)

    def _run(self, tmp: Path, script: str, world: World, kw: dict) -> Result:
        try:
            return tmp, run_debug(tmp, script, world, shared=self.shared, **kw)
        except subprocess.TimeoutExpired:
            return tmp, None

    def result(self, key: str, script: str, world: World, **kw: object) -> Result:
        self.start(key, script, world, **kw)
        return self.jobs[key].result()

    def passed(self, key: str) -> tuple[Path, list[str]]:
        """A run of NAMED that must pass: its directory and output lines."""
        tmp, r = self.result(key, *NAMED[key])
        assert r is not None and r.returncode == 0 and not runaway(tmp), (
            r and r.stdout + r.stderr)
        return tmp, r.stdout.splitlines()


# Runs at once: they mostly wait (for the CPU, each other's processes); more would only
# take the CPU from the machine's other work (its QEMU guests).
WORKERS = 4 * (os.cpu_count() or 2)


def uses(*keys: str):
    """The NAMED runs a test takes (to start them early)."""
    def mark(f):
        f.named = keys
        return f
    return mark


def planned(item: pytest.Item) -> list[tuple[str, tuple[str, World], dict]]:
    params = item.callspec.params if hasattr(item, "callspec") else {}
    if "bug" in params:
        return [(f"bug-{params['bug']}", BUGS[params["bug"]][:2], {})]
    if "scenario" in params:
        try:
            kw = mutant(*(params[k] for k in ("name", "where", "old", "new", "scenario")))
        except AssertionError:  # its test says why
            return []
        return [(kw.pop("key"), (kw.pop("script"), kw.pop("world")), kw)]
    keys = [params["case"]] if "case" in params else getattr(item.function, "named", ())
    return [(key, NAMED[key], {}) for key in keys]


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    r = Runs(tmp_path_factory)
    for item in request.session.items:
        if item.module is sys.modules[__name__]:
            for key, (script, world), kw in planned(item):
                r.start(key, script, world, **kw)
                r.keys.setdefault(item.nodeid, []).append(key)
    request.config.pluginmanager.register(r, "test_guest_debug-runs")
    yield r
    request.config.pluginmanager.unregister(r)
    r.pool.shutdown(cancel_futures=True)


NAMED = {  # key: (script, world) of the tests below that are no scenario or mutant
    "10": (S10, World(points={"ring": 3, "events": 3}, absorbed=("ring:2",))),
    "20": (S20, World()),
    "30-absorbed": (S30, World(points={"cpuhp": 2}, absorbed=("cpuhp:2",))),
    "30-refused": (S30, World(points={"cpuhp": 2})),
    "40": (S40, World()),
    # Loader N=1,2, init N=3..5 (N=4 absorbed), after it N=6 (absorbed), N=7 whole.
    "50-all": (S50, World(absorbed=("load:2",))),
    # Absorbed: the loader's first, the init's second without a notice (__GFP_NOWARN).
    "50-absorbed-unseen": (S50, World(absorbed=("loader:1", "load:2"), nowarn=("load:2",))),
    # Every 4th: N=1 (loader), 5 (init), 9 (whole: 6 calls); then back from 5 to the
    # loader's last (4, 3, 2) and on to the first after the init (6).
    "50-stride": (S50, World(cmdline="quiet initcall_debug spmu.fail_nth_step=4")),
    "50-progress": (S50, World(points={"loader": 25, "load": 0})),
    # An init of 12 points, the loader's 5 before it, 2 after: the stride meets the init
    # three times (9, 13, 17) and the window must fill in every point between.
    "50-stride-long-init": (S50, World(points={"loader": 5, "load": 12, "after": 2},
                                       cmdline="initcall_debug spmu.fail_nth_step=4")),
    # The same with the walk on bounded to 2 points from the first met (9), then the
    # last 2 calls; and with a bound wider than the init, which the walk's own ends stop.
    "50-stride-window-bound": (S50, World(
        points={"loader": 5, "load": 12, "after": 2},
        cmdline="initcall_debug spmu.fail_nth_step=4 spmu.fail_nth_window=2")),
    "50-stride-window-wide": (S50, World(
        points={"loader": 5, "load": 12, "after": 2},
        cmdline="initcall_debug spmu.fail_nth_step=4 spmu.fail_nth_window=10")),
    "30-cpus-stale-after-online": (S30, World(bugs=("cpus-stale-after-online",))),
    "30-cpus-stale-after-fallback": (S30, World(bugs=("cpus-stale-after-fallback",))),
    # Every 4th point: N=1 (loader), 5 (the init's third, absorbed), 9 (whole).
    "50-stride-meets-absorbed-init": (S50, World(
        absorbed=("load:3",), cmdline="initcall_debug spmu.fail_nth_step=4")),
    "30-nothing-injected": (S30, World(bugs=("cpuhp-allocates-nothing",))),
    "40-access-left-open": (S40, World(bugs=("access-left-open",))),
}


# --- the scripts on a module that behaves -------------------------------------------------

@uses("10")
def test_10_passes_and_counts_each_attributes_points(runs):
    tmp, out = runs.passed("10")
    assert out[-1] == ("fail-nth points exercised: 8 in stores: user_access 2 (2 failed) "
                       "ring 3 (2 failed) events 3 (3 failed)")
    assert left_clean(tmp)
    fi = tmp / "fi"  # fault_setup's settings
    assert [(fi / a / f).read_text() for a in ("failslab", "fail_page_alloc")
            for f in ("ignore-gfp-wait", "verbose")] == ["N\n", "0\n"] * 2
    assert (fi / "failslab" / "cache-filter").read_text() == "Y\n"


@uses("20")
def test_20_passes(runs):
    _, out = runs.passed("20")
    assert out[-1] == ("fail-nth points exercised: 3 in JOIN (3 failed with ENOMEM); JOIN 4, "
                       "with none injected, let the thread in")


@uses("30-absorbed")
def test_30_passes_refused_and_absorbed_in_each_way(runs):
    """cpuhp:2 absorbed: N=1 refuses, N=2 is absorbed, N=3 injects nothing, in each way."""
    tmp, out = runs.passed("30-absorbed")
    assert out[-1] == ("fail-nth points exercised in cpuhp threads: load-cpu1 2 (1 refused) "
                       "load-both 2 (1 refused) ring-cpu1 2 (1 refused) ring-both 2 (1 refused)")
    assert [ln for ln in out if " N=" in ln and "rc=" in ln] == [
        f"{way} N={n} rc={rc} injected={int(n < 3)}"
        for way in ("load-cpu1", "load-both", "ring-cpu1", "ring-both") for n, rc in (
            (1, int(way.endswith("both"))), (2, 0), (3, 0))]
    for pid in CPUHP.values():  # disarmed
        assert (tmp / f"proc/fail-nth.{pid}").read_text() == "0\n"
    assert left_clean(tmp) and (tmp / "online1").read_text() == "1\n"
    assert state(tmp)["offlines"] == 1  # ring-cpu1 N=1 brought cpu1 back


@uses("30-refused")
def test_30_passes_with_every_failure_refused(runs):
    _, out = runs.passed("30-refused")
    assert out[-1] == ("fail-nth points exercised in cpuhp threads: load-cpu1 2 (2 refused) "
                       "load-both 2 (2 refused) ring-cpu1 2 (2 refused) ring-both 2 (2 refused)")


@uses("40")
def test_40_passes(runs):
    tmp, out = runs.passed("40")
    st = state(tmp)
    assert st["loads"] == 5 and st["unloads"] == 5 and left_clean(tmp)
    assert st["offlines"] >= 5  # each load waited for one
    assert out[-1].startswith("5 load/unload cycles, cpu1 offline ")
    # Five loads read; the start (before the first load) and the five unloads fault.
    assert out[-1].endswith("; reader on cpu0: ok=25000 sigill=240"), out[-1]
    assert sum(ln.startswith("cpu=") for ln in out) == 0  # pmuread's lines are not printed


SUMMARY50 = ("fail-nth points exercised: {tried} at load ({every}): {failed} failed with "
             "ENOMEM ({init} in the module's init, each with one simple-pmu line; {loader} in "
             "the kernel's loader, with none); {loaded} loaded despite the failure (by "
             "failslab's notice: {seen} unseen)")


@pytest.mark.parametrize("case, summary, tried", [
    # The count of points leaves out N=7, which injected nothing.
    ("50-all", dict(tried=6, every="all 6", failed=4, init=2, loader=2, loaded=2,
                    seen="0 in the loader, 1 in the init, 1 after it, 0"), range(1, 8)),
    ("50-absorbed-unseen", dict(tried=6, every="all 6", failed=3, init=2, loader=1, loaded=3,
                                seen="1 in the loader, 0 in the init, 1 after it, 1"),
     range(1, 8)),
    ("50-stride", dict(tried=6, every="every 4th of 6, and every one from 2 to 6 around the "
                       "module's init", failed=5, init=3, loader=2, loaded=1,
                       seen="0 in the loader, 0 in the init, 1 after it, 0"),
     [1, 5, 9, 4, 3, 2, 6]),
])
def test_50_passes_and_says_what_it_tried(runs, case, summary, tried):
    tmp, out = runs.passed(case)
    assert out[-1] == SUMMARY50.format(**summary)
    assert left_clean(tmp)
    assert [int(ln.split()[0][2:]) for ln in out if ln.startswith("n=")] == list(tried)


@uses("50-stride-long-init")
def test_50_stride_window_tries_every_point_of_a_long_init(runs):
    """(helper-46) The window once walked on from the last init point the stride met:
    the init's points between the stride's were never tried."""
    tmp, out = runs.passed("50-stride-long-init")
    tried = [int(ln.split()[0][2:]) for ln in out if ln.startswith("n=")]
    assert set(range(6, 18)) <= set(tried), tried  # the init: 6..17
    assert 18 in tried and 19 not in tried  # on to the first after it, no further
    assert len(tried) == len(set(tried))  # no point twice
    assert out[-1].startswith("fail-nth points exercised: 15 at load (every 4th of 19, "
                              "and every one from 5 to 18 around the module's init): "), out[-1]


@pytest.mark.parametrize("case, tried, window", [
    # Back to the loader's last (5, unbounded: at most step - 1), on 2 from 9, the last 2.
    ("50-stride-window-bound", [1, 5, 9, 13, 17, 21, 8, 7, 6, 10, 11, 19, 18],
     "every one from 5 to 11 around 9, the first met in the module's init (cut 2 after "
     "it), and every one from 18 to 19, the last"),
    # A bound of 10 past the init's end: the walk stops at the first after it (18), the
    # last calls' walk at a point tried already (18).
    ("50-stride-window-wide", [1, 5, 9, 13, 17, 21, 8, 7, 6, 10, 11, 12, 14, 15, 16, 18, 19],
     "every one from 5 to 18 around 9, the first met in the module's init (on to the "
     "first after it), and every one from 19 to 19, the last"),
])
@uses("50-stride-window-bound", "50-stride-window-wide")
def test_50_window_bound_walks_on_at_most_w_then_the_last_w(runs, case, tried, window):
    """spmu.fail_nth_window=W (what `invoke test` uses: the debug kernel's init has
    a hundred and more points, 15 s each) stops the walk on W points from the first,
    and walks back over the last W calls, the init's deepest unwinds."""
    tmp, out = runs.passed(case)
    assert [int(ln.split()[0][2:]) for ln in out if ln.startswith("n=")] == tried
    assert out[-1].startswith(f"fail-nth points exercised: {len(tried) - 1} at load (every "
                              f"4th of 19, and {window}): "), out[-1]
    assert left_clean(tmp)


@uses("50-progress")
def test_50_shows_its_progress_on_the_console(runs):
    tmp, _ = runs.passed("50-progress")
    assert (tmp / "console").read_text() == "@@SPMU PROGRESS load: N=25 (25 failed so far)\n"


# --- ... and on one that breaks what each guards ------------------------------------------

W = World
NODE_LEFT = "/dev/simple-pmu is left"
SYSFS_LEFT = "/sys/devices/system/simple-pmu is left"
BUGS = {  # id: (script, world, what its failure says)
    "10-failed-store-changes": (S10, W(bugs=("failed-store-changes",)),
                                "user_access N=1: failed (n=1 rc=-1 errno=ENOMEM injected=1 "
                                "left=0) but shows '0', not '1'"),
    "10-store-ignored": (S10, W(bugs=("store-ignored",)),
                         "user_access N=3: took (n=3 rc=1 errno=0 injected=0 left=1) but "
                         "shows '1', not '0'"),
    "10-store-fails-uninjected": (S10, W(bugs=("store-fails-uninjected",)),
                                  "user_access N=3: failed with nothing injected"),
    "10-reads-broken-after-failure": (S10, W(bugs=("reads-broken-after-failure",)),
                                      "user_access N=1 (n=1 rc=-1 errno=ENOMEM injected=1 "
                                      "left=0): reads broken after '1' written back"),
    "10-writeback-breaks-reads": (S10, W(bugs=("writeback-breaks-reads",)),
                                  "user_access N=1 (n=1 rc=-1 errno=ENOMEM injected=1 "
                                  "left=0): reads broken after '1' written back"),
    "10-writeback-refused": (S10, W(bugs=("writeback-refused",)),
                             "user_access: writing back '1' after N=1"),
    "10-stuck-after-sweep": (S10, W(bugs=("stuck-after-clean-write",)),
                             "user_access: writing back '1' after the sweep"),
    "10-events-writeback-breaks-reads": (S10, W(bugs=("events-writeback-breaks-reads",)),
                                         "reads broken after the sweeps"),
    "10-ring-default-is-target": (S10, W(ring_default="3"),
                                  "ring is '3' already: the sweep would prove nothing"),
    "10-rmmod-refused": (S10, W(unload_fails_at=1), "rmmod after the sweeps"),
    "10-modprobe-fails": (S10, W(modprobe_fails_at=1), "modprobe failed"),
    "10-failnth-cannot-arm": (S10, W(failnth_broken=True), "failnth 1 write user_access"),
    "10-no-failslab": (S10, W(failslab=False), "not a fault-injection kernel"),
    "10-slab-unmarked": (S10, W(slab_marked="0"), "kmalloc-1k is not marked for failslab"),
    "10-debugger-cache-marked": (S10, W(debugger_marked=True),
                                 "kmemleak_object is marked for failslab"),
    "10-gfp-wait-unset": (S10, W(fi_refuses="failslab/ignore-gfp-wait"),
                          "cannot set failslab/ignore-gfp-wait"),
    "10-verbose-unset": (S10, W(fi_refuses="fail_page_alloc/verbose"),
                         "cannot set fail_page_alloc/verbose"),
    "10-cache-filter-unset": (S10, W(fi_refuses="failslab/cache-filter"),
                              "cannot set failslab/cache-filter"),
    "10-min-order-unset": (S10, W(fi_refuses="fail_page_alloc/min-order"),
                           "cannot set fail_page_alloc/min-order"),
    "20-join-failed-reads": (S20, W(bugs=("join-failed-reads",)),
                             "N=1: JOIN failed but the thread reads"),
    "20-join-ok-faults": (S20, W(bugs=("join-ok-faults",)),
                          "N=4: JOIN returned 0 but the read faulted"),
    "20-join-fails-uninjected": (S20, W(bugs=("join-fails-uninjected",)),
                                 "N=4: failed with nothing injected"),
    "20-join-failed-stays-member": (S20, W(bugs=("join-failed-stays-member",)),
                                    "members still 1 1 s after every joined thread exited"),
    "20-rmmod-refused": (S20, W(unload_fails_at=1), "rmmod after the sweep"),
    "20-modprobe-fails": (S20, W(modprobe_fails_at=1), "modprobe failed"),
    "20-failnth-cannot-arm": (S20, W(failnth_broken=True), "failnth 1 join"),
    "30-no-cpuhp-threads": (S30, W(cpuhp_threads=False), "no cpuhp/0 or cpuhp/1 thread"),
    "30-cannot-arm": (S30, W(task_failnth=False), f"cannot arm cpuhp {CPUHP[1]}"),
    "30-failnth-fails": (S30, W(failnth_broken=True), "load-cpu1 N=1: failnth: "),
    "30-refusal-not-said": (S30, W(bugs=("refusal-not-said",)),
                            "load-cpu1 N=1: cpu1 closed without a word"),
    "30-refused-cpu-listed": (S30, W(bugs=("refused-cpu-listed",)),
                              "load-cpu1 N=1: cpus is '0-1', readable: '0'"),
    "30-refused-cpu-reads": (S30, W(bugs=("refused-cpu-reads",)),
                             "load-cpu1 N=1: cpus is '0', readable: '0-1'"),
    "30-other-cpu-closed": (S30, W(bugs=("other-cpu-closed",)),
                            "load-cpu1 N=1: cpu0: cpu=0 result=sigill"),
    "30-load-fails-on-one-refusal": (S30, W(bugs=("load-fails-on-one-refusal",)),
                                     "load-cpu1 N=1: load failed"),
    "30-all-refused-leaves-sysfs": (S30, W(bugs=("all-refused-leaves-sysfs",)),
                                    "load-both N=1: " + SYSFS_LEFT),
    "30-all-refused-silent": (S30, W(bugs=("all-refused-silent",)),
                              "load-both N=1: cpu0's refusal not said"),
    "30-rmmod-refused": (S30, W(unload_fails_at=1), "load-cpu1 N=1: rmmod"),
    "30-unload-leaves-node": (S30, W(bugs=("unload-leaves-node",)),
                              "load-cpu1 N=1, unloaded: " + NODE_LEFT),
    # Unloads before the ring ways: load-cpu1 N=1 and 2, load-both N=2.
    "30-ring-rmmod-refused": (S30, W(unload_fails_at=4), "ring-cpu1 N=1: rmmod"),
    "30-ring-unload-leaves-node": (S30, W(node_left_from=4),
                                   "ring-cpu1 N=1, unloaded: " + NODE_LEFT),
    "30-modprobe-fails": (S30, W(modprobe_fails_at=1), "ring-cpu1 N=1: modprobe failed"),
    "30-write-fails-on-one-refusal": (S30, W(bugs=("write-fails-on-one-refusal",)),
                                      "ring-cpu1 N=1: write failed"),
    "30-write-refusal-not-said": (S30, W(bugs=("write-refusal-not-said",)),
                                  "ring-cpu1 N=1: cpu1 closed without a word"),
    "30-store-ignored": (S30, W(bugs=("store-ignored",)), "ring-cpu1 N=1: write took, ring "
                         "is '2'"),
    "30-offline-refused": (S30, W(bugs=("offline-refused",)),
                           "ring-cpu1 N=1: cpu1 offline/online"),
    "30-not-back-after-online": (S30, W(bugs=("not-back-after-online",)),
                                 "ring-cpu1 N=1: cpu1 not back after offline/online"),
    "30-failed-write-shows-new": (S30, W(bugs=("failed-write-shows-new",)),
                                  "ring-both N=1: write failed but ring is '3'"),
    "30-fallback-not-said": (S30, W(bugs=("fallback-not-said",)),
                             "ring-both N=1: no word of the previous settings"),
    "30-fallback-leaves-closed": (S30, W(bugs=("fallback-leaves-closed",)),
                                  "ring-both N=1: previous settings back, yet a CPU faults"),
    "40-modprobe-fails": (S40, W(modprobe_fails_at=3), "FAIL: load 2 during hotplug failed"),
    "40-rmmod-refused": (S40, W(unload_fails_at=4), "unload 3 during hotplug failed"),
    "40-online-refused": (S40, W(bugs=("online-refused",)),
                          "cpu1 did not come back online during the loop"),
    "40-offline-refused": (S40, W(bugs=("offline-refused",)),
                           "cpu1 went offline 0 times during 5 cycles"),
    "40-reader-ended-early": (S40, W(reader_short=True), "the reader on cpu0 ended early"),
    "40-reader-faults-while-loaded": (S40, W(bugs=("reader-faults-while-loaded",)),
                                      "reader on cpu0: 'ok=0 sigill="),
    "40-reads-without-module": (S40, W(bugs=("reads-without-module",)),
                                "reader on cpu0: 'ok=25000 sigill=0'"),
    "40-online-does-not-stick": (S40, W(bugs=("online-does-not-stick",)),
                                 "cpu1 offline after the loop"),
    "40-unload-leaves-module": (S40, W(bugs=("unload-leaves-module",)),
                                "after 5 cycles: the module is still loaded"),
    "40-unload-leaves-sysfs": (S40, W(bugs=("unload-leaves-sysfs",)),
                               "after 5 cycles: " + SYSFS_LEFT),
    "50-failed-load-leaves-sysfs": (S50, W(bugs=("failed-load-leaves-sysfs",)),
                                    "N=3 (n=3 rc=-1 errno=ENOMEM injected=1 left=0): "
                                    + SYSFS_LEFT),
    "50-failed-load-leaves-module": (S50, W(bugs=("failed-load-leaves-module",)),
                                     "N=3 (n=3 rc=-1 errno=ENOMEM injected=1 left=0): the "
                                     "module is still loaded"),
    "50-failed-load-leaves-node": (S50, W(bugs=("failed-load-leaves-node",)),
                                   "N=3 (n=3 rc=-1 errno=ENOMEM injected=1 left=0): "
                                   + NODE_LEFT),
    "50-failed-load-says-twice": (S50, W(bugs=("failed-load-says-twice",)),
                                  "N=3 (n=3 rc=-1 errno=ENOMEM injected=1 left=0): the "
                                  "module's init failed with 2 simple-pmu lines, not one"),
    "50-failed-load-silent": (S50, W(bugs=("failed-load-silent",)),
                              "N=3 (n=3 rc=-1 errno=ENOMEM injected=1 left=0): the module's "
                              "init failed with 0 simple-pmu lines, not one"),
    "50-loader-failure-says": (S50, W(bugs=("loader-failure-says",)),
                               "N=1 (n=1 rc=-1 errno=ENOMEM injected=1 left=0): the loader "
                               "failed before the module ran, yet"),
    "50-uninjected-load-fails": (S50, W(bugs=("uninjected-load-fails",)),
                                 "N=7: failed with nothing injected"),
    "50-rmmod-refused": (S50, W(unload_fails_at=1), "N=6: rmmod after a load that worked"),
    "50-last-unload-leaves-node": (S50, W(node_left_from=1), "after the sweep: " + NODE_LEFT),
    "50-load-reads-broken": (S50, W(bugs=("load-reads-broken",)),
                             "N=6: loaded (n=6 rc=0 errno=0 injected=1 left=0) but reads fail"),
    "50-absorbed-load-reads-broken": (S50, W(absorbed=("load:2",),
                                             bugs=("absorbed-load-reads-broken",)),
                                      "N=4: loaded (n=4 rc=0 errno=0 injected=1 left=0) but "
                                      "reads fail"),
    "50-loaded-without-sysfs": (S50, W(absorbed=("load:2",), bugs=("loaded-without-sysfs",)),
                                "N=4: loaded (n=4 rc=0 errno=0 injected=1 left=0) but no "
                                "/sys/devices/system/simple-pmu/simple-pmu0"),
    "50-unload-leaves-module": (S50, W(absorbed=("load:2",), bugs=("unload-leaves-module",)),
                                "N=5 (n=5 rc=-1 errno=ENOMEM injected=1 left=0): the module "
                                "is still loaded"),
    "50-no-module-file": (S50, W(ko=False), f"no /lib/modules/{RELEASE}/extra/simple-pmu.ko"),
    "50-step-0": (S50, W(cmdline="initcall_debug spmu.fail_nth_step=0"),
                  "spmu.fail_nth_step=0: 1 or more"),
    "50-window-not-a-count": (S50, W(cmdline="initcall_debug spmu.fail_nth_step=2 "
                                     "spmu.fail_nth_window=-1"),
                              "spmu.fail_nth_window=-1: a count of points (0: no bound)"),
    "50-verbose-refused": (S50, W(fi_refuses="failslab/verbose=1"),
                           "cannot set failslab/verbose"),
    # Every 2nd of 3 points: the loader's (N=1), after the init (N=3), none in it.
    "50-stride-misses-init": (S50, W(points={"loader": 1, "load": 1},
                                     cmdline="initcall_debug spmu.fail_nth_step=2"),
                              "every 2th of 3 points met none in the module's init"),
    "50-no-initcall-debug": (S50, W(cmdline="console=ttyAMA0 spmu.debug=1"),
                             "no initcall_debug on the command line"),
    # Only the loader fails (the init allocates nothing here), and the kernel does not log
    # its initcalls: the load that works must show its init ran, or the count is wrong.
    "50-no-calling-line": (S50, W(points={"loader": 2, "load": 0}, initcall_lines=False),
                           "N=3: loaded but initcall_debug logged no 'calling ... "
                           "[simple_pmu]'"),
    "50-failnth-cannot-arm": (S50, W(failnth_broken=True), "failnth 1 load"),
}


@pytest.mark.parametrize("bug", BUGS)
def test_script_fails_on_the_bug_it_guards(runs, bug):
    script, world, why = BUGS[bug]
    tmp, r = runs.result(f"bug-{bug}", script, world)
    assert r is not None, f"{bug}: timed out"
    assert r.returncode == 1 and not runaway(tmp), r.stdout + r.stderr
    assert why in (failure(tmp, r) or ""), r.stdout + r.stderr


# --- each check removed: a bug above notices --------------------------------------------

GOOD = "good"  # the module that behaves: the real script passes, the mutant must fail
LIB = "common/lib.sh"
MUTATIONS = [  # (id, file, old text (exactly once there), new, BUGS id or (GOOD, script))
    ("10-same-value-unchecked", S10, '[ "$old" != "$new" ] || fail', ": || fail",
     "10-ring-default-is-target"),
    ("10-failnth-status-unchecked", S10, 'write $SYSFS/$attr "$new") || fail', 'write '
     '$SYSFS/$attr "$new") || :', "10-failnth-cannot-arm"),
    ("10-failure-branch-dropped", S10, "if has \"$out\" 'rc=-1 '; then", "if false; then",
     (GOOD, S10)),
    ("10-injected-unchecked", S10, "has \"$out\" 'injected=1' || fail", ": || fail",
     "10-store-fails-uninjected"),
    ("10-failed-value-unchecked", S10, '[ "$now" = "$old" ] || fail', ": || fail",
     "10-failed-store-changes"),
    ("10-took-value-unchecked", S10, '[ "$now" = "$new" ] || fail', ": || fail",
     "10-store-ignored"),
    ("10-writeback-unchecked", S10, "|| fail \"$attr: writing back '$old' after N=$n",
     "|| : \"$attr: writing back '$old' after N=$n",
     "10-writeback-refused"),
    ("10-reads-after-writeback-unchecked", S10, "pmuread all >/dev/null || fail \"$attr N=$n",
     "pmuread all >/dev/null || : \"", "10-reads-broken-after-failure"),
    ("10-final-writeback-unchecked", S10, "fail \"$attr: writing back '$old' after the sweep\"",
     ":", "10-stuck-after-sweep"),
    ("10-reads-after-sweeps-unchecked", S10, 'fail "reads broken after the sweeps"', ":",
     "10-events-writeback-breaks-reads"),
    ("10-unload-unchecked", S10, 'unload || fail "rmmod after the sweeps"', "unload",
     "10-rmmod-refused"),
    ("10-modprobe-unchecked", S10, 'modprobe $MOD $EV || fail', "modprobe $MOD $EV || :",
     "10-modprobe-fails"),
    ("20-failnth-status-unchecked", S20, 'join /dev/simple-pmu) || fail',
     "join /dev/simple-pmu) || :", "20-failnth-cannot-arm"),
    ("20-success-branch-dropped", S20, "if has \"$out\" 'rc=0 '; then", "if false; then",
     (GOOD, S20)),
    ("20-read-ok-unchecked", S20, "has \"$out\" 'read=ok' || fail", ": || fail",
     "20-join-ok-faults"),
    ("20-injected-unchecked", S20, "has \"$out\" 'injected=1' || fail", ": || fail",
     "20-join-fails-uninjected"),
    ("20-sigill-unchecked", S20, "has \"$out\" 'read=sigill' || fail", ": || fail",
     "20-join-failed-reads"),
    ("20-members-unchecked", S20, 'members_reaped "joined thread"', ":",
     "20-join-failed-stays-member"),
    ("20-unload-unchecked", S20, 'unload || fail "rmmod after the sweep"', "unload",
     "20-rmmod-refused"),
    ("20-modprobe-unchecked", S20, 'modprobe $MOD $EV || fail', "modprobe $MOD $EV || :",
     "20-modprobe-fails"),
    ("30-threads-unchecked", S30, '[ -n "$t0" ] && [ -n "$t1" ] || fail', ": || fail",
     "30-no-cpuhp-threads"),
    ("30-arm-unchecked", S30, '|| fail "cannot arm cpuhp $_p"', "|| :", "30-cannot-arm"),
    ("30-injected-never", S30, "= 0 ] && _inj=1", "= 0 ] && _inj=0", (GOOD, S30)),
    ("30-refusal-said-unchecked", S30, '"simple-pmu: cpu$_c: perf refused event" ||\n',
     '"simple-pmu: cpu$_c: perf refused event" || : ||\n', "30-refusal-not-said"),
    ("30-unarmed-cpu-may-refuse", S30, 'if has "$2" -w "$_c" && has', "if has",
     "30-other-cpu-closed"),
    ("30-open-cpu-unchecked", S30, 'has "$_r" "cpu=$_c .*result=ok" || fail',
     ": || fail", "30-other-cpu-closed"),
    ("30-cpus-unchecked", S30, '[ "$(cat $SYSFS/cpus)" = "$_want" ] || fail', ": || fail",
     "30-refused-cpu-listed"),
    ("30-cpus-unchecked-reads", S30, '[ "$(cat $SYSFS/cpus)" = "$_want" ] || fail',
     ": || fail", "30-refused-cpu-reads"),
    ("30-failnth-status-unchecked", S30, 'out=$(failnth 0 load "$ko" "$EV") || fail',
     'out=$(failnth 0 load "$ko" "$EV") || :', "30-failnth-fails"),
    ("30-failed-load-unchecked", S30, '[ $way = load-both ] && [ $inj = 1 ] || fail',
     ": || fail", "30-load-fails-on-one-refusal"),
    ("30-failed-load-left-nothing-dropped", S30, 'left_nothing "$way N=$n"\n', ":\n",
     "30-all-refused-leaves-sysfs"),
    ("30-failed-load-refusals-unchecked", S30, '|| fail "$way N=$n: cpu$c\'s refusal not said',
     '|| : "$way N=$n: cpu$c\'s refusal not said', "30-all-refused-silent"),
    ("30-load-state-unchecked", S30, 'st=$(cpus_state "$way N=$n" "$cpus") || fail "$st"\n'
     '\t\t\t\t[ "$st" = refused ] && refused=$((refused + 1))\n\t\t\t\tunload',
     'st=$(cpus_state "$way N=$n" "$cpus") || :\n'
     '\t\t\t\t[ "$st" = refused ] && refused=$((refused + 1))\n\t\t\t\tunload',
     "30-refusal-not-said"),
    ("30-load-unload-unchecked", S30, '\t\t\t\tunload || fail "$way N=$n: rmmod"',
     "\t\t\t\tunload", "30-rmmod-refused"),
    ("30-load-left-nothing-dropped", S30, '\t\t\t\tleft_nothing "$way N=$n, unloaded"',
     "\t\t\t\t:", "30-unload-leaves-node"),
    ("30-modprobe-unchecked", S30, 'modprobe $MOD $EV || fail', "modprobe $MOD $EV || :",
     "30-modprobe-fails"),
    ("30-failed-write-unchecked", S30, '[ $way = ring-both ] && [ $inj = 1 ] || fail',
     ": || fail", "30-write-fails-on-one-refusal"),
    ("30-failed-write-value-unchecked", S30, '[ "$(cat $SYSFS/ring)" = "$old" ] || fail',
     ": || fail", "30-failed-write-shows-new"),
    ("30-fallback-said-unchecked", S30, "has \"$(log_since)\" 'previous settings kept' || fail",
     ": || fail", "30-fallback-not-said"),
    ("30-fallback-reads-unchecked", S30, "'result=sigill' && fail", "'result=sigill' && :",
     "30-fallback-leaves-closed"),
    ("30-took-write-value-unchecked", S30, '[ "$(cat $SYSFS/ring)" = 3 ] || fail',
     ": || fail", "30-store-ignored"),
    ("30-write-state-unchecked", S30, 'st=$(cpus_state "$way N=$n" "$cpus") || fail "$st"\n'
     '\t\t\t\tif', 'st=$(cpus_state "$way N=$n" "$cpus") || :\n\t\t\t\tif',
     "30-write-refusal-not-said"),
    ("30-offline-online-unchecked", S30, 'echo 1 > $online || fail', "echo 1 > $online || :",
     "30-offline-refused"),
    ("30-back-unchecked", S30, "has \"$(pmuread all)\" 'cpu=1 .*result=ok' || fail",
     ": || fail", "30-not-back-after-online"),
    ("30-ring-unload-unchecked", S30, '\n\t\t\tunload || fail "$way N=$n: rmmod"', "\n\t\t\tunload",
     "30-ring-rmmod-refused"),
    ("30-ring-left-nothing-dropped", S30, '\n\t\t\tleft_nothing "$way N=$n, unloaded"',
     "\n\t\t\t:", "30-ring-unload-leaves-node"),
    ("40-modprobe-unchecked", S40, 'modprobe $MOD $EV || fail "load $i',
     'modprobe $MOD $EV || : "', "40-modprobe-fails"),
    ("40-unload-unchecked", S40, 'unload || fail "unload $i during hotplug failed"', "unload",
     "40-rmmod-refused"),
    ("40-online-failure-ignored", S40, '|| { echo "online failed" > /tmp/flip.err; return; }',
     "|| :", "40-online-refused"),
    ("40-flip-err-unchecked", S40, "[ -e /tmp/flip.err ] && fail", "[ -e /tmp/flip.err ] && :",
     "40-online-refused"),
    ("40-offline-counted-unchecked", S40, "echo 0 > $online && _n=", "echo 0 > $online; _n=",
     "40-offline-refused"),
    ("40-offlines-unchecked", S40, '[ "${offs:-0}" -ge 2 ] || fail', ": || fail",
     "40-offline-refused"),
    ("40-reader-end-unchecked", S40, "[ -s /tmp/hspin.0 ] && fail", "[ -s /tmp/hspin.0 ] && :",
     "40-reader-ended-early"),
    ("40-reader-ok-unchecked", S40, "'^ok=[1-9][0-9]* sigill=[1-9]'", "'^ok=[0-9]* sigill=[1-9]'",
     "40-reader-faults-while-loaded"),
    ("40-reader-sigill-unchecked", S40, "'^ok=[1-9][0-9]* sigill=[1-9]'", "'^ok=[1-9]'",
     "40-reads-without-module"),
    ("40-online-after-unchecked", S40, '[ "$(cat $online)" = 1 ] || fail', ": || fail",
     "40-online-does-not-stick"),
    ("40-left-nothing-dropped", S40, 'left_nothing "after $cycles cycles"', ":",
     "40-unload-leaves-module"),
    ("50-initcall-debug-unchecked", S50, "grep -qw initcall_debug /proc/cmdline || fail",
     ": || fail", "50-no-initcall-debug"),
    ("50-ko-unchecked", S50, '[ -f "$ko" ] || fail', ": || fail", "50-no-module-file"),
    ("50-step-unchecked", S50, '[ "$step" -ge 1 ] || fail', ": || fail", "50-step-0"),
    ("50-window-unchecked", S50, 'in *[!0-9]*) fail', "in *[!0-9]*) :", "50-window-not-a-count"),
    ("50-verbose-unchecked", S50, 'echo 1 > $FI/$a/verbose || fail', "echo 1 > $FI/$a/verbose || :",
     "50-verbose-refused"),
    ("50-failnth-status-unchecked", S50, 'out=$(failnth "$1" load "$ko" "$EV") || fail',
     'out=$(failnth "$1" load "$ko" "$EV") || :', "50-failnth-cannot-arm"),
    ("50-success-branch-dropped", S50, "if has \"$out\" 'rc=0 '; then", "if false; then",
     (GOOD, S50)),
    ("50-sysfs-unchecked", S50, '[ -d $SYSFS ] || fail', ": || fail",
     "50-loaded-without-sysfs"),
    ("50-calling-unchecked", S50, 'has "$log" "$CALLING" || fail', ": || fail",
     "50-no-calling-line"),
    ("50-reads-unchecked", S50, 'pmuread all >/dev/null || fail "N=$1', 'pmuread all || : "',
     "50-absorbed-load-reads-broken"),
    ("50-unload-unchecked", S50, 'unload || fail "N=$1: rmmod after a load that worked"',
     "unload", "50-rmmod-refused"),
    ("50-injected-unchecked", S50, "has \"$out\" 'injected=1' || fail", ": || fail",
     "50-uninjected-load-fails"),
    ("50-left-nothing-dropped", S50, 'left_nothing "N=$1 ($out)"', ":",
     "50-failed-load-leaves-node"),
    ("50-init-lines-at-most-one", S50, '[ "$got" -eq 1 ] ||', '[ "$got" -le 1 ] ||',
     "50-failed-load-silent"),
    ("50-init-lines-at-least-one", S50, '[ "$got" -eq 1 ] ||', '[ "$got" -ge 1 ] ||',
     "50-failed-load-says-twice"),
    ("50-loader-lines-unchecked", S50, '[ "$got" -eq 0 ] || fail', ": || fail",
     "50-loader-failure-says"),
    ("50-init-told-by-lines", S50, 'if has "$log" "$CALLING"; then', 'if [ "$got" -gt 0 ]; then',
     "50-failed-load-silent"),
    ("50-stride-init-unchecked", S50, '[ -n "$inits" ] || fail', ": || fail",
     "50-stride-misses-init"),
    ("50-last-left-nothing-dropped", S50, 'left_nothing "after the sweep"', ":",
     "50-last-unload-leaves-node"),
    ("lib-left-nothing-true", LIB, "left_nothing() {\n", "left_nothing() {\n\treturn 0\n",
     "50-failed-load-leaves-module"),
    ("lib-left-nothing-no-module", LIB, 'grep -q "^simple_pmu " /proc/modules && fail',
     "false && fail", "50-failed-load-leaves-module"),
    ("lib-left-nothing-no-sysfs", LIB, "[ -e /sys/devices/system/simple-pmu ] && fail",
     "false && fail", "50-failed-load-leaves-sysfs"),
    ("lib-left-nothing-no-node", LIB, "[ -e /dev/simple-pmu ] && fail", "false && fail",
     "50-failed-load-leaves-node"),
    ("lib-fault-setup-no-dir-check", LIB, "[ -d $FI/failslab ] || fail", ": || fail",
     "10-no-failslab"),
    ("lib-fault-setup-settings-unchecked", LIB, '|| fail "cannot set $a/ignore-gfp-wait"',
     "|| :", "10-gfp-wait-unset"),
    ("lib-fault-setup-verbose-unchecked", LIB, '|| fail "cannot set $a/verbose"', "|| :",
     "10-verbose-unset"),
    ("lib-fault-setup-min-order-unchecked", LIB,
     '|| fail "cannot set fail_page_alloc/min-order"', "|| :", "10-min-order-unset"),
    ("lib-fault-setup-filter-unchecked", LIB, '|| fail "cannot set failslab/cache-filter"',
     "|| :", "10-cache-filter-unset"),
    ("lib-fault-setup-no-slab-check", LIB, '[ "$(cat /sys/kernel/slab/kmalloc-1k/failslab)" '
     '= 1 ] ||', ": ||", "10-slab-unmarked"),
    ("lib-fault-setup-debuggers-unchecked", LIB, '[ "$(cat /sys/kernel/slab/$_c/failslab)" '
     '= 0 ] ||', ": ||", "10-debugger-cache-marked"),
    ("lib-members-reaped-gives-up-quietly", LIB, '[ $_i -lt 100 ] || fail "members still',
     '[ $_i -lt 100 ] || return 0; : "', "20-join-failed-stays-member"),
    ("lib-unload-busy-not-retried", LIB, "-e 'temporarily unavailable' -e 'in use'",
     "-e 'in use'", (GOOD, S40)),
]


def test_mutations_name_known_scenarios():
    ids = [m[0] for m in MUTATIONS]
    assert len(set(ids)) == len(ids)
    for m in MUTATIONS:
        assert m[4] in BUGS or (m[4][0] == GOOD and m[4][1] in (S10, S20, S30, S40, S50)), m


def mutant(name: str, where: str, old: str, new: str, scenario: object) -> dict:
    """The mutant's run: its key, script, world and text (or lib.sh's)."""
    text = (GUEST / where).read_text()
    assert text.count(old) == 1, (
        f"{name}: its target is {text.count(old)} times in {where}, not once: the script "
        f"changed; adapt this mutation to it: {old!r}")
    script, world = (scenario[1], World()) if isinstance(scenario, tuple) else BUGS[scenario][:2]
    mutated = text.replace(old, new)
    return {"key": f"mutant-{name}", "script": script, "world": world,
            "lib" if where == LIB else "text": mutated}


@pytest.mark.parametrize("name, where, old, new, scenario", MUTATIONS,
                         ids=[m[0] for m in MUTATIONS])
def test_mutation_is_noticed(runs, name, where, old, new, scenario):
    """The check's own scenario (test_script_fails_on_the_bug_it_guards: the real script
    fails there with `why`) run on the mutant: it passes, fails otherwise (another check
    noticed: still a failure, but not the one the scenario wants), or never ends (the
    model ends a loop it sees, as the guest's timeout would): either way, that test would
    fail. On GOOD, the real script passes (test_*_passes) and the mutant must not. A
    mutant that is no longer a script (a syntax error) proves nothing."""
    why = None if isinstance(scenario, tuple) else BUGS[scenario][2]
    tmp, r = runs.result(**mutant(name, where, old, new, scenario))
    assert r is not None, f"{name}: timed out (no loop the model saw: a slow machine?)"
    if runaway(tmp):
        return
    out = r.stdout + r.stderr
    assert "syntax error" not in r.stderr, f"{name}: the mutant is no script: {out}"
    if why is None:
        assert r.returncode != 0, f"{name} not noticed on a module that behaves: {out}"
    else:
        assert r.returncode == 0 or why not in (failure(tmp, r) or ""), (
            f"{name} not noticed: {out}")


# --- what the scripts once did not check (helper-44's audit; each fixed since) ------------------

class Missed(Exception):
    """The script passed on a module with the bug (only this makes these xfail)."""


def must_fail(r: subprocess.CompletedProcess[str] | None) -> None:
    assert r is not None, "timed out"
    if r.returncode == 0:
        raise Missed(r.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", ["30-cpus-stale-after-online",
                                  "30-cpus-stale-after-fallback"])
def test_30_fails_when_cpus_is_stale(runs, case):
    tmp, r = runs.result(case, *NAMED[case])
    assert state(tmp)["offlines"] == 1  # ring-cpu1 N=1 took cpu1 offline and back
    assert not runaway(tmp)
    must_fail(r)


@uses("30-nothing-injected")
def test_30_fails_when_nothing_was_ever_injected(runs):
    tmp, r = runs.result("30-nothing-injected", *NAMED["30-nothing-injected"])
    assert r is not None and not runaway(tmp)
    assert r.returncode != 0 or r.stdout.splitlines()[-1] == (
        "fail-nth points exercised in cpuhp threads: load-cpu1 0 (0 refused) load-both 0 (0 "
        "refused) ring-cpu1 0 (0 refused) ring-both 0 (0 refused)"), r.stdout
    must_fail(r)


@uses("40-access-left-open")
def test_40_fails_when_access_stays_open_after_unload(runs):
    tmp, r = runs.result("40-access-left-open", *NAMED["40-access-left-open"])
    assert not runaway(tmp) and state(tmp)["unloads"] == 1  # caught at the first unload
    must_fail(r)
    assert "unload 0 during hotplug: a CPU still reads" in (failure(tmp, r) or "")


class FalseAlarm(Exception):
    """The script failed a module that behaves, for the reason the xfail names."""


@uses("50-stride-meets-absorbed-init")
def test_50_window_starts_from_an_absorbed_init_point(runs):
    tmp, r = runs.result("50-stride-meets-absorbed-init", *NAMED["50-stride-meets-absorbed-init"])
    assert r is not None and not runaway(tmp)
    if "met none in the module's init" in (failure(tmp, r) or ""):
        raise FalseAlarm(failure(tmp, r))
    assert r.returncode == 0, r.stdout + r.stderr
