"""Build simple-pmu.ko for one kernel tree, with the compiler that tree wants.

Sources are copied into build/<release>-<arch>/ (never built in the source tree), so one
checkout builds for many kernels side by side, the way DKMS builds from /usr/src.
"""

import functools
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.kbuild import compat, modverify
from pmubuild.trees import chroot, toolchain
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.kdir import KernelTree, inspect

REPO = Path(__file__).resolve().parents[2]
MODULE_SOURCES = ("Kbuild", "drivers", "include")
MODULE_NAME = "simple-pmu"


@dataclass(frozen=True)
class BuildResult:
    tree: KernelTree
    toolchain: toolchain.Toolchain
    build_dir: Path
    ko: Path
    warnings: tuple[str, ...]  # of the objects compiled by this make only
    log: str
    report: modverify.Report
    compiled: tuple[Path, ...] = ()  # objects this make compiled ("CC [M]" lines)
    objects: tuple[Path, ...] = ()  # the module's objects (simple-pmu.mod)

    @property
    def complete(self) -> bool:
        """Every object of the module was compiled by this make: its warnings are all
        there are (an incremental make reports only what it recompiled)."""
        return bool(self.objects) and set(self.objects) <= set(self.compiled)


def default_gcc_by_suite(apt: PrivateApt) -> dict[str, int]:
    """Each Debian userland's default gcc major version, read from the index (gcc 4:14.2.0-1)."""
    result = {}
    for suite in ("bullseye", "bookworm", "trixie", "sid"):
        gcc = [p for p in apt.packages(suite, "amd64") if p.name == "gcc"]
        if gcc:
            upstream = gcc[-1].version.split(":", 1)[-1]
            result[suite] = int(upstream.split(".")[0])
    return result


def build_dir_for(tree: KernelTree, root: Path | None = None) -> Path:
    return (root or REPO / "build") / f"{tree.release}-{tree.arch}"


# "  CC [M]  /abs/build/drivers/x.o" (5.10) or a path relative to M= (later kernels).
_CC_LINE = re.compile(r"^\s*CC \[M\]\s+(\S+\.o)$", re.M)


def compiled_objects(log: str, build_dir: Path) -> tuple[Path, ...]:
    return tuple(build_dir / m for m in _CC_LINE.findall(log))


def module_objects(build_dir: Path) -> tuple[Path, ...]:
    """The module's objects as kbuild lists them in simple-pmu.mod (absolute on 5.10,
    ./-relative later); the .mod.o kbuild adds is not among them."""
    mod = build_dir / f"{MODULE_NAME}.mod"
    if not mod.exists():
        return ()
    return tuple((build_dir / t).resolve() for t in mod.read_text().split() if t.endswith(".o"))


def stage_sources(dest: Path, src: Path = REPO) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in MODULE_SOURCES:
        s = src / name
        if s.is_dir():
            shutil.copytree(s, dest / name, dirs_exist_ok=True)
        elif s.exists():
            shutil.copy2(s, dest / name)


def render_compat(tree: KernelTree, out: Path) -> list[compat.Result]:
    """Write compat.h for this tree into its build directory (never the source tree)."""
    try:
        return compat.write(tree.path, out / "compat.h")
    except compat.CompatError as e:
        raise PipelineError(str(e)) from e


def choose_toolchain(tree: KernelTree,
                     apt_factory: Callable[[], PrivateApt]) -> toolchain.Toolchain:
    try:
        # Most trees build on the host: no package index needed for them.
        return toolchain.choose(tree, {})
    except PipelineError as e:
        if "no Debian suite" not in str(e):
            raise
    apt = apt_factory()
    apt.update()
    return toolchain.choose(tree, default_gcc_by_suite(apt))


def build(kdir: str | Path, *, w1: bool = False, clean: bool = False,
          build_root: Path | None = None, src: Path = REPO,
          apt_factory: Callable[[], PrivateApt] = PrivateApt, jobs: int = 2) -> BuildResult:
    """clean: empty the build directory first, so make compiles every object and the
    warnings it prints are all the module's (see authoritative_w1)."""
    tree = inspect(kdir)
    apt_factory = functools.cache(apt_factory)  # one index parse per build
    tc = choose_toolchain(tree, apt_factory)
    out = build_dir_for(tree, build_root)
    if clean and out.exists():
        shutil.rmtree(out)
    stage_sources(out, src)
    render_compat(tree, out)
    argv = ["make", f"-j{jobs}", "-C", str(tree.path), f"M={out}", *tc.make_vars]
    if w1:
        argv.append("W=1")
    argv.append("modules")
    if tc.chroot_suite:
        apt = apt_factory()
        apt.update()
        root = chroot.ensure(apt, tc.chroot_suite, tree.cc_major, toolchain.host_info().arch)
        proc = chroot.run(root, [*toolchain.tree_paths(tree), out], argv, out)
    else:
        proc = subprocess.run(argv, cwd=out, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    ko = out / f"{MODULE_NAME}.ko"
    if proc.returncode != 0 or not ko.exists():
        tail = "\n  ".join(log.strip().splitlines()[-25:])
        raise PipelineError(f"build for {tree.release} ({tc.cc}, {tc.where}) failed:\n  {tail}")
    warnings = tuple(ln for ln in log.splitlines() if "warning:" in ln.lower())
    # Signed later (invoke sign), so a signature is not required yet.
    report = verify(tree, [ko], require_signature=False)[0]
    return BuildResult(tree, tc, out, ko, warnings, log, report,
                       tuple(p.resolve() for p in compiled_objects(log, out)),
                       module_objects(out))


def authoritative_w1(kdir: str | Path, *, build_root: Path | None = None, src: Path = REPO,
                     apt_factory: Callable[[], PrivateApt] = PrivateApt) -> BuildResult:
    """A W=1 build whose warnings are the whole truth: from an emptied build directory,
    and checked to have compiled every object of the module. Judging warnings of an
    incremental make misses every file it did not recompile."""
    result = build(kdir, w1=True, clean=True, build_root=build_root, src=src,
                   apt_factory=apt_factory)
    if not result.complete:
        missing = sorted(str(p) for p in set(result.objects) - set(result.compiled))
        raise PipelineError(f"W=1 build for {result.tree.release} did not compile every "
                            f"object (not compiled: {', '.join(missing) or 'no objects listed'}):"
                            " its warnings would not be all of them")
    return result


def verify(tree: KernelTree, modules: list[Path], cert: Path | None = None,
           require_signature: bool | None = None) -> list[modverify.Report]:
    """modverify against `tree`; any problem is an error listing every one of them."""
    try:
        reports = modverify.verify(tree.path, modules, cert=cert,
                                   require_signature=require_signature)
    except modverify.VerifyError as e:
        raise PipelineError(str(e)) from None
    problems = [p for r in reports for p in r.problems]
    if problems:
        table = [ln for r in reports for ln in r.table()]
        raise PipelineError(f"verification against {tree.release} failed:\n  "
                            + "\n  ".join([*table, *problems]))
    return reports
