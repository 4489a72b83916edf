"""The test guest's initramfs: static busybox, the module, the in-guest tests and programs."""

import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from pmubuild.common.errors import PipelineError
from pmubuild.common.seeds import restored_tcyc
from pmubuild.guests import cpio, perfguest, pyguest
from pmubuild.trees import cache
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.matrix import GNU_TRIPLET, SUITES

REPO = Path(__file__).resolve().parents[2]
GUEST_TESTS = REPO / "tests" / "guest"
BUSYBOX_SUITE = "bookworm"


@dataclass
class GuestSpec:
    arch: str
    release: str
    module: Path | None  # installed as /lib/modules/RELEASE/extra/simple-pmu.ko, not loaded
    mode: str = "test"  # "test": run the in-guest suite; "cmd": run `command` in /work
    command: str = ""
    add: list[Path] = field(default_factory=list)  # copied into /work
    profile: str = ""  # "" or e.g. "stress": which test directory set the guest runs
    python: bool = False  # python3.11 and simple_pmu in the guest
    suite: str = ""  # the kernel's Debian suite: Debian's perf of it where perfguest has one


def busybox(apt: PrivateApt, arch: str) -> Path:
    """A static busybox for `arch`, from Debian's busybox-static, cached by version."""
    pkg = apt.newest("busybox-static", [BUSYBOX_SUITE, f"{BUSYBOX_SUITE}-security"], arch)
    target = cache.subdir("guest") / f"busybox-{arch}-{pkg.version}"
    binary = target / "bin" / "busybox"
    if binary.exists():
        return binary
    # test-qemu prepares two kernels at once: one extracts, the other waits and finds it
    # (atomic_dir would replace the entry under a reader).
    with cache.locked("guest-busybox"):
        if not binary.exists():
            (deb,) = apt.download([pkg])
            with cache.atomic_dir(target) as tmp:
                subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    return binary


def compile_programs(arch: str, out_dir: Path) -> list[Path]:
    """Build tests/guest/src/*.c as static binaries for the guest's arch."""
    cc = "gcc" if arch == "amd64" else f"{GNU_TRIPLET[arch]}-gcc"
    if not shutil.which(cc):
        raise PipelineError(f"{cc} not found: needed to build the in-guest test programs "
                            "(./devenv installs it)")
    out_dir.mkdir(parents=True, exist_ok=True)
    built = []
    sources = sorted((GUEST_TESTS / "src").glob("*.c"))
    article = article_program(out_dir) if arch == "arm64" else None
    mhz = seed_mhz_program(out_dir) if arch == "arm64" else None
    tcyc = seed_tcyc_program(out_dir) if arch == "arm64" else None
    seeds = [src for src in (article, mhz, tcyc) if src]
    sources += seeds
    # include/cycles.h too: a program built against an older header is stale.
    headers = [*(GUEST_TESTS / "src").glob("*.h"), REPO / "include" / "cycles.h"]
    newest_header = max((h.stat().st_mtime for h in headers), default=0.0)
    for src in sources:
        exe = out_dir / src.stem
        if not exe.exists() or exe.stat().st_mtime < max(src.stat().st_mtime, newest_header):
            # The seed programs are compiled as published: no -Werror for them.
            strict = ["-Wall", "-Wextra", "-Werror"] if src not in seeds else ["-pthread"]
            # Compile to a private name and rename: guests are prepared in parallel.
            tmp = exe.with_name(f".{exe.name}.{threading.get_ident()}")
            proc = subprocess.run([cc, "-O2", *strict, "-static", "-I", str(REPO / "include"),
                                   "-o", str(tmp), str(src)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise PipelineError(f"compiling {src.name} for {arch} failed:\n{proc.stderr}")
            tmp.rename(exe)
        built.append(exe)
    return built


ARTICLE = REPO.parent / "shared" / "reference" / "seeds" / "arm64-pmu-user-access-article.txt"


def article_missing() -> str | None:
    """Why the article's program cannot be built (the seed is not beside the checkout: a
    plain clone), or None when it can. The guest gets this as tests/data/article.skip and
    reports SKIP with it; without that file a missing program is a FAIL."""
    if ARTICLE.is_file():
        return None
    return (f"seed document {ARTICLE} absent (the seeds sit beside the project's own "
            "checkout, not in a clone)")


def article_program(out_dir: Path) -> Path | None:
    """The user program of the arm64 article (section 3), unchanged, as article.c; the
    seed sits in the shared reference beside the checkout, not in this repository.
    None when the reference is absent (see article_missing)."""
    if article_missing() is not None:
        return None
    text = ARTICLE.read_text()
    start = text.index("#define _GNU_SOURCE")
    end = text.index("4 注意事项")
    src = out_dir / "article.c"
    code = text[start:end]
    if not src.exists() or src.read_text() != code:
        tmp = src.with_name(f".article.{threading.get_ident()}.c")
        tmp.write_text(code)
        tmp.rename(src)
    return src


SEED_MHZ = REPO.parent / "shared" / "reference" / "seeds" / "mhz" / "mhz.c"


def seed_mhz_missing() -> str | None:
    """Why the mhz tool cannot be built (not beside the checkout), or None when it can;
    the guest gets it as tests/data/seed-mhz.skip, as for the article."""
    if SEED_MHZ.is_file():
        return None
    return (f"seed document {SEED_MHZ} absent (the seeds sit beside the project's own "
            "checkout, not in a clone)")


def seed_mhz_program(out_dir: Path) -> Path | None:
    """Willy Tarreau's mhz tool as seed-mhz.c, unchanged (tests/guest/arm64/
    29-mhz-tool.sh compares it with simple-pmu mhz on QEMU's virtual clock). None when
    the seeds are not beside the checkout (see seed_mhz_missing)."""
    if seed_mhz_missing() is not None:
        return None
    src = out_dir / "seed-mhz.c"
    code = SEED_MHZ.read_text()
    if not src.exists() or src.read_text() != code:
        tmp = src.with_name(f".seed-mhz.{threading.get_ident()}.c")
        tmp.write_text(code)
        tmp.rename(src)
    return src


def seed_tcyc_program(out_dir: Path) -> Path | None:
    """The 2011 demo tcyc.c with only its transmission damage restored
    (pmubuild.common.seeds), as tcyc.c: tests/guest/arm64/43-cycles-h-selfmon.sh runs it on
    cycles.h's self-monitoring path. None when the seeds are absent."""
    code = restored_tcyc()
    if code is None:
        return None
    src = out_dir / "tcyc.c"
    if not src.exists() or src.read_text() != code:
        tmp = src.with_name(f".tcyc.{threading.get_ident()}.c")
        tmp.write_text(code)
        tmp.rename(src)
    return src


LOOP_SYMBOLS = ("spmu_region_start", "spmu_loop", "spmu_loop_end", "spmu_region_end")


def loop_layout(binary: Path) -> dict[str, int] | None:
    """Instruction counts of the measured region of tests/guest/src/arm64_loop.h, read
    from the built binary's symbols (A64 instructions are 4 bytes): STRAIGHT before the
    loop, BODY per iteration, TAIL after. None if the binary has no such region."""
    with open(binary, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            return None
        addr = {}
        for name in LOOP_SYMBOLS:
            syms = symtab.get_symbol_by_name(name)
            if not syms:
                return None
            addr[name] = syms[0]["st_value"]
    start, loop, loop_end, end = (addr[n] for n in LOOP_SYMBOLS)
    return {"STRAIGHT": (loop - start) // 4, "BODY": (loop_end - loop) // 4,
            "TAIL": (end - loop_end) // 4}


@dataclass(frozen=True)
class Profile:
    """One guest boot of the in-guest suite: its test directory and QEMU options."""

    name: str  # "" for the main suite
    icount: bool
    python: bool = True
    el2: bool = False  # boot at EL2 (virt,virtualization=on): KVM in the guest
    params: str = ""  # kernel command-line words of this guest


# arm64 runs three guests: the main suite under -icount shift=0 (exact counts), the
# load/unload stress loop without it, which QEMU 7.2 hangs under -icount, and a guest
# booted at EL2 whose kernel runs a KVM vCPU of its own. That one boots with cpu1 left
# offline (maxcpus=1): its first test sees a CPU that was never online.
PROFILES = {"amd64": (Profile("", True),),
            "arm64": (Profile("", True), Profile("stress", False, python=False),
                      Profile("kvm", True, python=False, el2=True, params="maxcpus=1"))}


# tests/guest/<dir>/NN-name.sh: NN orders the run, `name` is what the guest reports.
SCRIPT_NAME = re.compile(r"(?P<order>[0-9]{2})-(?P<name>[A-Za-z0-9_.-]+)\.sh")


def script_name(script: Path) -> str:
    """The name the guest's init reports a script under (as init strips `NN-` and `.sh`)."""
    m = SCRIPT_NAME.fullmatch(script.name)
    if not m:
        raise PipelineError(f"{script}: guest test scripts are named NN-name.sh (NN: two "
                            "digits, the run order); the guest would not run this one")
    return m["name"]


def test_scripts(arch: str, profile: str = "", root: Path = GUEST_TESTS) -> list[Path]:
    """The scripts one guest runs, in its order: common/ and the arch's (or profile's)
    own directory. Every file there must be a runnable NN-name.sh, names unique, and the
    own directory must hold at least one: a guest with only the common checks, or none,
    would report green having tested nothing."""
    suite = root / (f"{arch}-{profile}" if profile else arch)
    if not suite.is_dir():
        raise PipelineError(f"{suite}: no such directory (the {arch} "
                            f"{profile or 'main'} guest's tests)")
    scripts = []
    for d in (root / "common", suite):
        for f in sorted(d.iterdir()) if d.is_dir() else []:
            if d.name == "common" and f.name == "lib.sh":
                continue  # sourced by the scripts, not one of them
            script_name(f)
            scripts.append(f)
    if not any(f.parent == suite for f in scripts):
        raise PipelineError(f"{suite} holds no test script (NN-name.sh)")
    names = [script_name(f) for f in scripts]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise PipelineError(f"guest scripts for {suite.name} share a name: {', '.join(dups)}"
                            " (results are reported by name)")
    return sorted(scripts, key=lambda p: p.name)


def manifest(arch: str, profile: str = "", root: Path = GUEST_TESTS) -> tuple[str, ...]:
    """The names of the scripts the host expects the guest to report, in run order."""
    return tuple(script_name(f) for f in test_scripts(arch, profile, root))


def manifest_problem(expected: Sequence[str], reported: Sequence[str]) -> str | None:
    """What is wrong with the reported result names against the manifest: scripts that
    did not report (the guest skipped, lost or never reached them), reports no script
    explains, and scripts reported twice. None when they match one to one."""
    problems = []
    missing = [n for n in expected if n not in reported]
    if missing:
        problems.append(f"{len(missing)} of {len(expected)} expected guest scripts did not "
                        f"report: {', '.join(missing)}")
    unexpected = [n for n in reported if n not in expected]
    if unexpected:
        problems.append(f"reported but not in the manifest: {', '.join(unexpected)}")
    twice = sorted({n for n in reported if n in expected and reported.count(n) > 1})
    if twice:
        problems.append(f"reported more than once: {', '.join(twice)}")
    return "; ".join(problems) or None


def initramfs(spec: GuestSpec, apt: PrivateApt, out: Path) -> Path:
    bb = busybox(apt, spec.arch)
    entries = [cpio.directory(d) for d in ("bin", "sbin", "etc", "lib", "lib/modules",
                                           f"lib/modules/{spec.release}", "tests",
                                           "tests/bin", "work", "root")]
    entries.append(cpio.file("bin/busybox", bb.read_bytes(), executable=True))
    entries.append(cpio.symlink("bin/sh", "busybox"))
    entries.append(cpio.file("init", (GUEST_TESTS / "init").read_bytes(), executable=True))
    if spec.module:
        entries.append(cpio.directory(f"lib/modules/{spec.release}/extra"))
        entries.append(cpio.file(f"lib/modules/{spec.release}/extra/simple-pmu.ko",
                                 spec.module.read_bytes()))
        # What depmod would write for one module without dependencies.
        entries.append(cpio.file(f"lib/modules/{spec.release}/modules.dep",
                                 b"extra/simple-pmu.ko:\n"))
    entries.append(cpio.directory("tests/data"))
    for name, missing in (("article", article_missing), ("seed-mhz", seed_mhz_missing)):
        skip = missing() if spec.arch == "arm64" else None
        if skip:
            entries.append(cpio.file(f"tests/data/{name}.skip", skip.encode() + b"\n"))
    for prog in compile_programs(spec.arch, REPO / "build" / f"guest-{spec.arch}"):
        entries.append(cpio.file(f"tests/bin/{prog.name}", prog.read_bytes(), executable=True))
        layout = loop_layout(prog) if spec.arch == "arm64" else None
        if layout:
            env = "".join(f"{k}={v}\n" for k, v in layout.items())
            entries.append(cpio.file(f"tests/data/{prog.name}.env", env.encode()))
    entries.append(cpio.file("tests/lib.sh", (GUEST_TESTS / "common" / "lib.sh").read_bytes()))
    if spec.mode == "test":
        for script in test_scripts(spec.arch, spec.profile):
            entries.append(cpio.file(f"tests/{script.name}", script.read_bytes()))
    else:
        entries.append(cpio.file("cmd.sh", spec.command.encode() + b"\n"))
    for path in spec.add:
        if not path.exists():
            raise PipelineError(f"--add {path}: no such file or directory")
        cpio.add_tree(entries, path, f"work/{path.name}")
    perf = perf_archive(spec, apt, entries)
    if not spec.python:
        return cpio.write_gz(entries, out) if perf is None else _concat([perf], entries, out)
    entries += pyguest.package_entries(apt, spec.arch, REPO / "build" / f"guest-{spec.arch}")
    entries.append(cpio.directory("tests/py"))
    for script in sorted((GUEST_TESTS / "py").glob("*.py")):
        entries.append(cpio.file(f"tests/py/{script.name}", script.read_bytes()))
    # The kernel unpacks concatenated archives in order: cached Python (and perf), then
    # this guest's.
    cached = [pyguest.archive(apt, spec.arch)] + ([perf] if perf else [])
    return _concat(cached, entries, out)


def _concat(cached: list[Path], entries: list[cpio.Entry], out: Path) -> Path:
    small = cpio.write_gz(entries, out.with_name(f".{out.name}.{threading.get_ident()}"))
    out.write_bytes(b"".join(p.read_bytes() for p in cached) + small.read_bytes())
    small.unlink()
    return out


def perf_archive(spec: GuestSpec, apt: PrivateApt, entries: list[cpio.Entry]) -> Path | None:
    """Debian's perf of the guest kernel's suite (pmubuild.guests.perfguest), for the main
    suite's guest and qemu-run; where there is none, tests/data/perf.skip says why (the
    guest's 47-perf-own-tests.sh reports SKIP with it)."""
    if spec.profile:
        return None
    why = perfguest.not_provided(spec.suite, spec.arch) if spec.suite else \
        "the guest was built without a kernel suite (no Debian perf chosen for it)"
    if why is None:
        return perfguest.archive(apt, SUITES[spec.suite], spec.arch)
    entries.append(cpio.file("tests/data/perf.skip", why.encode() + b"\n"))
    return None
