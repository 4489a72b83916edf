"""perf_event_open() events for self-monitoring: open, read(2), and the mmap page.

Counting this task only, user space only (exclude_kernel, exclude_hv): what an
unprivileged process may do at perf_event_paranoid <= 2.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from typing import Any

from simple_pmu import reasons
from simple_pmu.native import native
from simple_pmu.sysinfo import PARANOID, read_int

PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1

# arm64 PMUv3 config1 bit 1 ("rdpmc" format): ask for EL0 access to the counter.
ARM64_CONFIG1_USER_ACCESS = 1 << 1

EVENTS = {
    "cycles": (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    "instructions": (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
}


class PerfError(OSError):
    """perf_event_open() failed; str() is the precise reason."""

    def __init__(self, event: str, err: int) -> None:
        super().__init__(err, os.strerror(err))
        self.event = event
        self.reason = reasons.PERF_OPEN_FAILED.format(
            event=event, errname=reasons.errno_name(err),
            meaning=reasons.perf_errno_meaning(err, read_int(PARANOID)))

    def __str__(self) -> str:
        return self.reason


def open_event(name: str, *, user_access: bool = False) -> int:
    """Open a cycles or instructions event on this task; PerfError on failure."""
    if native is None:
        raise RuntimeError(reasons.NO_NATIVE.format(error="perf_open needs it"))
    ptype, config = EVENTS[name]
    config1 = ARM64_CONFIG1_USER_ACCESS if user_access and native.ARCH == "aarch64" else 0
    try:
        return native.perf_open(ptype, config, config1=config1)
    except OSError as exc:
        raise PerfError(name, exc.errno or errno.EIO) from None


def read_count(fd: int) -> int:
    """The event's count through read(2) (read_format 0: one u64)."""
    return struct.unpack("=Q", os.read(fd, 8))[0]


@dataclass
class SelfMonitor:
    """An event with its mmap page, read with RDPMC / mrs in user space."""

    event: str
    fd: int
    page: Any  # native.PerfPage

    @classmethod
    def open(cls, name: str) -> SelfMonitor:
        assert native is not None
        fd = open_event(name, user_access=True)
        try:
            page = native.PerfPage(fd)
        except OSError:
            os.close(fd)
            raise
        return cls(name, fd, page)

    def info(self) -> dict[str, int]:
        info: dict[str, int] = self.page.info()
        return info

    def problem(self) -> str | None:
        """Why user-space reads would not work now, None if they would."""
        info = self.info()
        if not info["cap_user_rdpmc"]:
            return reasons.NO_CAP_USER_RDPMC.format(event=self.event)
        if not info["index"]:
            return reasons.INDEX_ZERO.format(event=self.event)
        return None

    def close(self) -> None:
        self.page.close()
        os.close(self.fd)
