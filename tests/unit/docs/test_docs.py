"""Documentation ships with the drivers: every message is in DIAGNOSTICS, every
attribute and parameter is in the man page and the sysfs ABI file."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MAN = REPO / "docs" / "simple-pmu.4"
ABI = REPO / "docs" / "ABI" / "sysfs-devices-system-simple-pmu"
SOURCES = sorted((REPO / "drivers").rglob("*.c"))
PRINT = re.compile(
    r'\bpr_(?:emerg|alert|crit|err|warn|notice|info)(?:_once|_ratelimited)?\(\s*((?:"[^"]*"\s*)+)')


def messages() -> list[str]:
    """Format strings of pr_err/pr_warn/pr_info calls, also _once and _ratelimited (pr_debug
    is documented as a class)."""
    found = []
    for src in SOURCES:
        text = src.read_text()
        for m in PRINT.finditer(text):
            found.append("".join(re.findall(r'"([^"]*)"', m.group(1))).removesuffix("\\n"))
    return found


def attributes() -> set[str]:
    names = set()
    for src in SOURCES:
        text = src.read_text()
        names |= set(re.findall(r"DEVICE_ATTR_(?:RO|RW|WO)\((\w+)\)", text))
        names |= set(re.findall(r"^SPMU_\w*ATTR\((\w+),", text, re.M))  # x86's macro
    return {n for n in names if not n.startswith("_")}


def cpu_attributes() -> set[str]:
    """The cpuN/ attributes, named in drivers/common/sysfs_dev.c's field table."""
    text = (REPO / "drivers" / "common" / "sysfs_dev.c").read_text()
    return set(re.findall(r'\[SPMU_F_\w+\]\s*=\s*"(\w+)"', text))


def parameters() -> set[str]:
    names = set()
    for src in SOURCES:
        names |= set(re.findall(r"module_param(?:_named|_cb)?\((\w+)", src.read_text()))
    return names


def sysfs_lists() -> tuple[str, str]:
    """The man page's SYSFS ATTRIBUTES: simple-pmu0's own entries, and the cpuN/ ones (the
    list after `.Pa cpu Ns Ar N`): user_access and generation are in both."""
    section = MAN.read_text().split(".Sh SYSFS ATTRIBUTES")[1].split("\n.Sh ")[0]
    before, _, after = section.partition(".Pa cpu Ns Ar N")
    cpu, _, rest = after.partition("\n.El\n")
    return before + rest, cpu


def test_there_is_something_to_check():
    assert len(messages()) >= 10 and len(parameters()) == 6
    # Every attribute by name: one that falls out of the regexes is not checked below.
    assert attributes() == {
        "access", "cpus", "event_width", "events", "events_unavailable", "fixed_mask",
        "fixed_width", "generation", "gp_width", "hybrid", "members", "num_counters",
        "num_fixed", "num_gp",
        "perf_fixed_mask", "pmu_version", "rdpmc_always", "rdpmc_fixed", "recheck_ms", "ring",
        "user_access"}
    assert len(cpu_attributes()) == 8


@pytest.mark.parametrize("msg", messages())
def test_every_message_is_in_diagnostics(msg):
    diagnostics = MAN.read_text().split(".Sh DIAGNOSTICS")[1].split(".Sh ERRORS")[0]
    assert msg in diagnostics.replace("\\-", "-")


@pytest.mark.parametrize("name", sorted(attributes()))
def test_every_attribute_is_documented(name):
    """An entry of its own in SYSFS ATTRIBUTES, not among cpuN/'s (`.It Pa name`, or in
    `.It Pa num_gp , Pa gp_width`): the name in a sentence (`.Pa access`) is no entry."""
    device, _ = sysfs_lists()
    assert re.search(rf"^\.It Pa (?:\w+ , Pa )*{name}(?: |$)", device, re.M)
    assert f"simple-pmu0/{name}\n" in ABI.read_text()


@pytest.mark.parametrize("name", sorted(cpu_attributes()))
def test_every_cpu_attribute_is_documented(name):
    _, cpu = sysfs_lists()
    assert re.search(rf"^\.It Pa {name}$", cpu, re.M)
    assert f"simple-pmu0/cpuN/{name}\n" in ABI.read_text()


@pytest.mark.parametrize("name", sorted(parameters()))
def test_every_parameter_is_documented(name):
    params = MAN.read_text().split(".Sh MODULE PARAMETERS")[1].split(".Sh")[0]
    assert f".It Cm {name}" in params


def test_man_page_renders_without_warnings():
    proc = subprocess.run(["groff", "-mdoc", "-Tutf8", "-ww", "-z", str(MAN)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
