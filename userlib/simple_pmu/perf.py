"""perf_event_open() events for self-monitoring: one group, read(2), and the mmap pages.

Counting this thread only, user space only (exclude_kernel, exclude_hv): what an
unprivileged process may do at perf_event_paranoid <= 2.

cycles and instructions are opened as one group, cycles the leader, as `perf stat`
does with {cycles,instructions}: the kernel puts both on the PMU together or neither, and
one read(2) of the leader returns both counts with the group's time_enabled and
time_running (read_format TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | GROUP). When the PMU
is shared the group is multiplexed: time_running < time_enabled, and the counts cover
only time_running. They are given unscaled, with the ratio beside them.
"""

from __future__ import annotations

import errno
import functools
import os
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simple_pmu import reasons
from simple_pmu._extension import native, native_error
from simple_pmu.errors import CounterFault, CounterUnavailable, PerfError
from simple_pmu.sysinfo import PARANOID, read_int

if TYPE_CHECKING:
    from simple_pmu._native import PerfPage

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1

PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_GROUP = 1 << 3
GROUP_READ_FORMAT = (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
                     | PERF_FORMAT_GROUP)

# arm64 PMUv3 config1 bit 1 ("rdpmc" format): ask for EL0 access to the counter.
ARM64_CONFIG1_USER_ACCESS = 1 << 1

# What perf backends count: this thread (wherever it runs), user space only.
SCOPE = "thread"
RINGS = ("user",)

EventSpec = tuple[int, int]  # (perf type, config)
EVENTS: dict[str, EventSpec] = {
    "cycles": (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    "instructions": (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
}


# Threads with perf groups whose events ask for user reads (arm64 config1 bit 1): perf
# grants such a thread the PMU itself at every switch to it (arm64 >= 5.17), so a counter
# perf moves stays readable there without a fault, and the driver's readings in that
# thread cannot be called exact while one is open. thread ident -> [open now, ever opened].
_user_groups: dict[int, list[int]] = {}
_user_groups_lock = threading.Lock()


def _count_user_group(ident: int, change: int) -> None:
    with _user_groups_lock:
        entry = _user_groups.setdefault(ident, [0, 0])
        entry[0] = max(0, entry[0] + change)
        entry[1] += max(0, change)


def user_reads_token() -> tuple[int, int]:
    """(groups with user reads open now, ever opened) in this thread: a driver reading
    taken between two equal tokens whose first member is 0 had no such group beside it."""
    entry = _user_groups.get(threading.get_ident(), (0, 0))
    return entry[0], entry[1]


def user_reads_between(first: tuple[int, int], second: tuple[int, int]) -> bool:
    """Whether this thread had perf user reads at any time between two tokens."""
    return first != second or first[0] > 0


# A forked child has none: the inherited events count the parent's thread.
os.register_at_fork(after_in_child=_user_groups.clear)


def perf_error(event: str, err: int) -> PerfError:
    reason = reasons.PERF_OPEN_FAILED.format(
        event=event, errname=reasons.errno_name(err),
        meaning=reasons.perf_errno_meaning(err, read_int(PARANOID)))
    reason = reason.extended("", reasons.PERF_ERRNO_REMEDIES.get(err, ""))
    return PerfError(event, err, reason)


def open_event(name: str, *, user_access: bool = False, group_fd: int = -1,
               read_format: int = 0, spec: EventSpec | None = None) -> int:
    """Open a cycles or instructions event (or spec) on this thread; PerfError on failure."""
    if native is None:
        raise CounterUnavailable(native_error, reasons.NO_NATIVE.code)
    ptype, config = EVENTS[name] if spec is None else spec
    config1 = ARM64_CONFIG1_USER_ACCESS if user_access and native.ARCH == "aarch64" else 0
    try:
        return native.perf_open(ptype, config, config1=config1, group_fd=group_fd,
                                read_format=read_format)
    except OSError as exc:
        raise perf_error(name, exc.errno or errno.EIO) from None


def read_count(fd: int) -> int:
    """The event's count through read(2) (read_format 0: one u64)."""
    value: int = struct.unpack("=Q", os.read(fd, 8))[0]
    return value


@dataclass(frozen=True)
class GroupReading:
    """One read(2) of a group leader: every member's count and the group's times."""

    counts: dict[str, int]
    time_enabled: int  # ns the group was enabled
    time_running: int  # ns it was on the PMU

    @property
    def ratio(self) -> float | None:
        """time_running / time_enabled since the group was opened (None before it ran)."""
        return self.time_running / self.time_enabled if self.time_enabled else None


def parse_group_read(data: bytes, names: tuple[str, ...]) -> GroupReading:
    """Decode read_format GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING:
    u64 nr, u64 time_enabled, u64 time_running, u64 value[nr]."""
    if len(data) < 24:
        raise _malformed(f"{len(data)} bytes, want at least 24")
    nr, enabled, running = struct.unpack_from("=QQQ", data)
    if nr != len(names) or len(data) != 24 + 8 * nr:
        raise _malformed(f"{nr} values in {len(data)} bytes, want {len(names)} values in "
                         f"{24 + 8 * len(names)}")
    values = struct.unpack_from(f"={nr}Q", data, 24)
    return GroupReading(dict(zip(names, values, strict=True)), enabled, running)


def _malformed(detail: str) -> CounterUnavailable:
    reason = reasons.PERF_READ_MALFORMED.format(detail=detail)
    return CounterUnavailable(reason, reason.code, (reason,))


def interval_ratio(first: GroupReading, second: GroupReading) -> float | None:
    """time_running / time_enabled between two readings (None if no time passed)."""
    enabled = second.time_enabled - first.time_enabled
    return (second.time_running - first.time_running) / enabled if enabled > 0 else None


@dataclass
class PerfGroup:
    """cycles (the leader) and the other events that could join, as one perf group.

    problems: each event that could not be opened in the group, with why."""

    names: tuple[str, ...]
    fds: tuple[int, ...]
    problems: dict[str, reasons.Reason] = field(default_factory=dict)
    user_thread: int | None = None  # user_access: the thread counted in _user_groups
    user_pid: int = 0  # ... by this process (a forked child's count is its own)

    @classmethod
    def open(cls, names: Iterable[str] = ("cycles", "instructions"), *,
             user_access: bool = False, specs: dict[str, EventSpec] | None = None
             ) -> PerfGroup:
        """Open the first name as leader (PerfError if it fails), the others in its group."""
        specs = EVENTS if specs is None else specs
        leader, *members = names
        lfd = open_event(leader, user_access=user_access, read_format=GROUP_READ_FORMAT,
                         spec=specs[leader])
        opened, fds = [leader], [lfd]
        problems: dict[str, reasons.Reason] = {}
        for name in members:
            try:
                fds.append(open_event(name, user_access=user_access, group_fd=lfd,
                                      read_format=GROUP_READ_FORMAT, spec=specs[name]))
            except PerfError as exc:
                problems[name] = reasons.as_reason(exc.reason)
                continue
            opened.append(name)
        group = cls(tuple(opened), tuple(fds), problems)
        if user_access:
            group.user_thread, group.user_pid = threading.get_ident(), os.getpid()
            _count_user_group(group.user_thread, 1)
        return group

    @property
    def leader(self) -> int:
        return self.fds[0]

    def fd(self, name: str) -> int:
        return self.fds[self.names.index(name)]

    def read(self) -> GroupReading:
        """Every count and the group's times in one read(2) of the leader."""
        return parse_group_read(os.read(self.leader, 24 + 8 * len(self.fds)), self.names)

    def count(self, name: str) -> int:
        return self.read().counts[name]

    def close(self) -> None:
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = ()
        if self.user_thread is not None and self.user_pid == os.getpid():
            _count_user_group(self.user_thread, -1)
        self.user_thread = None


@dataclass
class SelfMonitor:
    """An event with its mmap page, read with RDPMC / mrs in user space.

    When the page says the counter cannot be read in user space now (cap_user_rdpmc 0:
    root turned user reads off; index 0: the event is not on a counter, e.g. multiplexed
    out), or the read faulted (root turned user reads off during it), read() takes the
    count from read(2) instead (`fallback`): the same count of the same event, so a
    block may start on one path and end on the other."""

    event: str
    fd: int
    page: PerfPage
    owns_fd: bool = True
    fallback: Callable[[], int] | None = None  # read(2) of the event's count

    @classmethod
    def open(cls, name: str, fallback: bool = False) -> SelfMonitor:
        """A single event of its own (no group); fallback: read(2) when the page says no
        (the probe's trials leave it off: they ask whether user reads work)."""
        fd = open_event(name, user_access=True)
        return cls.on(name, fd, owns_fd=True,
                      fallback=functools.partial(read_count, fd) if fallback else None)

    @classmethod
    def on(cls, name: str, fd: int, owns_fd: bool = False,
           fallback: Callable[[], int] | None = None) -> SelfMonitor:
        """The mmap page of an open event (e.g. a PerfGroup member, with
        fallback=functools.partial(group.count, name))."""
        if native is None:
            raise CounterUnavailable(native_error, reasons.NO_NATIVE.code)
        try:
            page = native.PerfPage(fd)
        except OSError:
            if owns_fd:
                os.close(fd)
            raise
        return cls(name, fd, page, owns_fd, fallback)

    def read(self) -> int:
        try:
            return self.page.read()
        except (CounterUnavailable, CounterFault):  # not now, or turned off meanwhile
            if self.fallback is None:
                raise
            return self.fallback()

    def info(self) -> dict[str, int]:
        return self.page.info()

    def problem(self) -> reasons.Reason | None:
        """Why user-space reads would not work now, None if they would."""
        info = self.info()
        if not info["cap_user_rdpmc"]:
            return reasons.NO_CAP_USER_RDPMC.format(event=self.event)
        if not info["index"]:
            return reasons.INDEX_ZERO.format(event=self.event)
        return None

    def close(self) -> None:
        self.page.close()
        if self.owns_fd:
            os.close(self.fd)
