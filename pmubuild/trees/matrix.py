"""The kernel matrix: Debian suites x architectures, and how each suite maps to apt suites."""

from dataclasses import dataclass

from pmubuild.common.errors import PipelineError


@dataclass(frozen=True)
class Suite:
    name: str
    apt_suites: tuple[str, ...]  # where its kernels are published, newest wins
    userland: str  # the Debian release whose compiler and libc build for it


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("bullseye", ("bullseye", "bullseye-security"), "bullseye"),
        Suite("bookworm", ("bookworm", "bookworm-security"), "bookworm"),
        Suite("bookworm-backports", ("bookworm-backports",), "bookworm"),
        Suite("trixie", ("trixie", "trixie-security"), "trixie"),
        Suite("sid", ("sid",), "sid"),
    )
}
ARCHES = ("amd64", "arm64")
DEFAULT_SUITE = "bookworm"
# Debian architecture -> what the kernel calls it (ARCH=, .config symbol, uname -m).
KERNEL_ARCH = {"amd64": "x86", "arm64": "arm64"}
UNAME_MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}
GNU_TRIPLET = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}


def check_suite(name: str) -> Suite:
    if name not in SUITES:
        raise PipelineError(f"unknown kernel suite {name!r}; valid: {', '.join(SUITES)}")
    return SUITES[name]


def check_arch(name: str) -> str:
    if name not in ARCHES:
        raise PipelineError(f"unknown architecture {name!r}; valid: {', '.join(ARCHES)}")
    return name


def expand(kernel: str, arch: str) -> list[tuple[Suite, str]]:
    """`all` or one name for each axis -> the (suite, arch) pairs to run, validated."""
    suites = list(SUITES.values()) if kernel == "all" else [check_suite(kernel)]
    arches = list(ARCHES) if arch == "all" else [check_arch(arch)]
    return [(s, a) for s in suites for a in arches]
