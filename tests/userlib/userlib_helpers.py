"""Paths and build commands shared by the userlib tests and their fixtures."""

from __future__ import annotations

import errno
import grp
import json
import os
import subprocess
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USERLIB = REPO / "userlib"
INCLUDE = REPO / "include"
PY_INCLUDE = sysconfig.get_paths()["include"]
SCHEMA = USERLIB / "simple_pmu" / "schema" / "simple-pmu.schema.json"


def validate(doc: object) -> None:
    """doc against the shipped JSON Schema (jsonschema.ValidationError if it breaks it).
    jsonschema is a dev dependency: a missing one is an error, not a skip."""
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


def native_build_cmd(cc: str, out: Path, py_include: list[str]) -> list[str]:
    return [cc, "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
            "-Wno-missing-field-initializers", "-Werror", "-shared", "-fPIC",
            *(f"-I{d}" for d in py_include), f"-I{INCLUDE}",
            str(USERLIB / "simple_pmu" / "_native.c"), "-o", str(out)]


class FakeDriver:
    """A directory laid out as the arm64 driver's simple-pmu0 (drivers/common/sysfs_dev.c,
    drivers/arm64/pmu_sysfs.c): top-level attributes and one cpuN/ per CPU. Every value
    ends in a newline, as the driver's do. Placing a CPU gives it a new generation,
    unique across CPUs, as the driver does. `events` may name x86's INST_RETIRED (0xc0)
    instead, for the arch-neutral lookup tests run natively on x86."""

    def __init__(self, root: Path, ncpus: int, events: str = "0x8", event_width: int = 32,
                 user_access: int = 1, pmu_version: int = 4, recheck_ms: int = 100) -> None:
        self.dir = root / "simple-pmu0"
        self.dir.mkdir(parents=True)
        self.next_generation = 1_000_000
        self.ncpus = ncpus
        for name, value in self.top_attrs(events, event_width, user_access, pmu_version,
                                          recheck_ms):
            self.attr(name, value)
        nevents = 0 if events == "none" else len(events.split(","))
        for cpu in range(ncpus):
            (self.dir / f"cpu{cpu}").mkdir()
            for name, value in self.cpu_attrs():
                self.cpu_attr(cpu, name, value)
            self.place(cpu, *self.first_placement(nevents))

    def top_attrs(self, events: str, event_width: int, user_access: int, pmu_version: int,
                  recheck_ms: int) -> list[tuple[str, object]]:
        return [("pmu_version", pmu_version), ("num_counters", 6),
                ("event_width", event_width), ("user_access", user_access), ("ring", 2),
                ("events", events), ("recheck_ms", recheck_ms),
                ("cpus", f"0-{self.ncpus - 1}")]

    def cpu_attrs(self) -> list[tuple[str, object]]:
        return [("interventions", 0), ("kvm_deferrals", 0), ("checks", 0)]

    def first_placement(self, nevents: int) -> tuple[int, list[int]]:
        return 31, list(range(5, 5 - nevents, -1))

    def attr(self, name: str, value: object) -> None:
        (self.dir / name).write_text(f"{value}\n")

    def cpu_attr(self, cpu: int, name: str, value: object) -> None:
        (self.dir / f"cpu{cpu}" / name).write_text(f"{value}\n")

    def place(self, cpu: int, cycle: int, events: list[int]) -> int:
        """Publish cpu's indices with a new generation; returns the generation."""
        self.cpu_attr(cpu, "cycle_index", cycle)
        self.cpu_attr(cpu, "event_index", " ".join(map(str, events)))
        return self.bump(cpu)

    def bump(self, cpu: int) -> int:
        """A new generation for cpu only (e.g. perf reloaded a 32-bit counter)."""
        self.next_generation += 1
        self.cpu_attr(cpu, "generation", self.next_generation)
        self.attr("generation", self.next_generation)
        return self.next_generation

    def generation(self, cpu: int) -> int:
        return int((self.dir / f"cpu{cpu}" / "generation").read_text())


FIXED = 1 << 30  # RDPMC ECX bit 30: fixed counter n is FIXED + n


class FakeX86Driver(FakeDriver):
    """The x86 driver's simple-pmu0 as docs/ABI/sysfs-devices-system-simple-pmu describes it:
    the 2011 attributes (ring, rdpmc_fixed), CPUID facts, `events` 0xc0,0x300 and per CPU
    RDPMC operands (fixed counter n: 2^30 + n), user_access and conflicts. Beside it,
    event_source/cpu/rdpmc stands in for /sys/bus/event_source/devices (rdpmc 2)."""

    def __init__(self, root: Path, ncpus: int, events: str = "0xc0,0x300",
                 pmu_version: int = 5) -> None:
        self.event_source = root / "event_source"
        (self.event_source / "cpu").mkdir(parents=True)
        self.rdpmc("cpu", 2)
        super().__init__(root, ncpus, events=events, pmu_version=pmu_version)

    def top_attrs(self, events: str, event_width: int, user_access: int, pmu_version: int,
                  recheck_ms: int) -> list[tuple[str, object]]:
        return [("pmu_version", pmu_version), ("num_gp", 8), ("gp_width", 48),
                ("num_fixed", 3), ("fixed_width", 48), ("fixed_mask", "0x7"),
                ("events_unavailable", "0x0"), ("ring", 2), ("rdpmc_fixed", 1),
                ("rdpmc_always", 1), ("events", events), ("recheck_ms", recheck_ms),
                ("cpus", f"0-{self.ncpus - 1}")]

    def cpu_attrs(self) -> list[tuple[str, object]]:
        return super().cpu_attrs() + [("user_access", 1), ("conflicts", 0)]

    def first_placement(self, nevents: int) -> tuple[int, list[int]]:
        # Cycles on fixed counter 1; instructions on 0, reference cycles on 2.
        return FIXED + 1, [FIXED + 0, FIXED + 2][:nevents]

    def rdpmc(self, pmu: str, value: int | None) -> None:
        """The rdpmc attribute of event_source/<pmu>; None: no such PMU."""
        import shutil

        if value is None:
            shutil.rmtree(self.event_source / pmu, ignore_errors=True)
            return
        (self.event_source / pmu).mkdir(exist_ok=True)
        (self.event_source / pmu / "rdpmc").write_text(f"{value}\n")


class LineProcess:
    """A C checker (tests/userlib/c/*_check.c) running: one command in, one answer line out."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)

    def ask(self, command: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer and answer != "unknown command", (command, answer)
        return answer

    def pairs(self, command: str, prefix: str = "") -> dict[str, int]:
        """The answer's "key=value" pairs (after `prefix`, if it starts with it)."""
        answer = self.ask(command).removeprefix(prefix)
        return {k: int(v) for k, v in (p.split("=") for p in answer.split())}


class Join(LineProcess):
    """join_check running (tests/userlib/c/join_check.c): one command, one answer line."""

    def pairs(self, command: str, prefix: str = "child: ") -> dict[str, int]:
        return super().pairs(command, prefix)

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def unopenable(node: Path) -> tuple[str, str]:
    """Make node unopenable by the test program (after its `nodac`, for a root run): a
    group the process is not in, mode 0660, someone else's; as a user, mode 0000. Returns
    the (group, mode) cycles.h should name, as stat() and the group database say."""
    if os.geteuid() == 0:
        mine = set(os.getgroups()) | {os.getegid(), 0}
        other = next(g for g in grp.getgrall() if g.gr_gid not in mine)
        os.chown(node, 65534, other.gr_gid)
        node.chmod(0o660)
    else:
        node.chmod(0)
    st = node.stat()
    return grp.getgrgid(st.st_gid).gr_name, f"{st.st_mode & 0o7777:04o}"


def refuse_open(monkeypatch, node: Path, err: int = errno.EACCES) -> None:
    """os.open of node fails with err (as for a user outside the node's group; a root test
    run would open anything)."""
    real = os.open

    def fake_open(path, flags, *args, **kwargs):
        if Path(path) == node and node.exists():
            raise OSError(err, os.strerror(err), str(path))
        return real(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", fake_open)
