"""pmubuild.guests.perfguest: Debian's perf and only the libraries its binary loads, for the
arm64 guests (tests/guest/arm64/47-perf-own-tests.sh). Fakes: packages are directories,
an "ELF" is a text file naming its NEEDED sonames and interpreter."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.guests import cpio, guest, perfguest
from pmubuild.trees.apt import Package


def fake_elf(path: Path) -> perfguest.Elf | None:
    text = path.read_text()
    if not text.startswith("ELF"):
        return None
    fields = dict(part.split("=", 1) for part in text.split()[1:])
    needed = tuple(n for n in fields.get("needed", "").split(",") if n)
    return perfguest.Elf(needed, fields.get("interp"))


class FakeApt:
    """Packages as {name: (depends, {path: text or ('->', target)})}; records downloads."""

    def __init__(self, tmp: Path, packages: dict) -> None:
        self.tmp = tmp
        self.packages = packages
        self.downloaded: list[str] = []

    def _pkg(self, name: str) -> Package:
        depends = self.packages[name][0]
        return Package(name, "1.0", "arm64", "trixie", name, depends, f"pool/{name}_1.0.deb")

    def newest(self, name, suites, arch):
        return self._pkg(name)

    def find(self, name_re, suites, arch):
        import re
        return [self._pkg(n) for n in self.packages if re.fullmatch(name_re, n)]

    def download(self, pkgs):
        out = []
        for p in pkgs:
            self.downloaded.append(p.name)
            deb = self.tmp / "debs" / p.name
            for rel, body in self.packages[p.name][1].items():
                f = deb / rel
                f.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(body, tuple):
                    os.symlink(body[1], f)
                else:
                    f.write_text(body)
            deb.mkdir(parents=True, exist_ok=True)
            out.append(deb)
        return out


def copy_extract(deb: Path, dest: Path) -> None:
    shutil.copytree(deb, dest, symlinks=True)


LIB = "usr/lib/aarch64-linux-gnu"
PERF = {"usr/bin/perf": "ELF needed=libc.so.6,liba.so.1 interp=/lib/ld-linux-aarch64.so.1"}
LIBC = {f"{LIB}/libc.so.6": "ELF needed=",
        # trixie's libc6: the loader in usr/lib, reached as /lib/... through usrmerge,
        # and an absolute symlink that must resolve inside the package.
        "usr/lib/ld-linux-aarch64.so.1": ("->", f"/{LIB}/ld-linux-aarch64.so.1"),
        f"{LIB}/ld-linux-aarch64.so.1": "ELF needed="}


def world(**extra):
    packages = {
        "linux-perf": ("libc6 (>= 2.38), liba1, libbig-stdlib, perl:any", PERF),
        "libc6": ("", LIBC),
        "liba1": ("libb2 | libb-alt, libhuge, libc6", {
            f"{LIB}/liba.so.1": ("->", "liba.so.1.2.3"),
            f"{LIB}/liba.so.1.2.3": "ELF needed=libb.so.2,libc.so.6"}),
        "libb2": ("libc6", {f"{LIB}/libb.so.2": "ELF needed=libc.so.6"}),
        "libhuge": ("libgiant", {"usr/share/doc/libhuge/README": "text"}),
        "libgiant": ("", {"usr/share/giant": "x"}),
        "libbig-stdlib": ("libstdlib-dep", {"usr/lib/python3/x.py": "print()"}),
        "libstdlib-dep": ("", {f"{LIB}/libdep.so.1": "ELF needed="}),
    }
    packages.update(extra)
    return packages


def test_closure_follows_only_the_packages_that_supplied_libraries(tmp_path):
    apt = FakeApt(tmp_path, world())
    closure, top = perfguest.collect(apt, ["trixie"], "arm64", tmp_path / "work",
                                     copy_extract, fake_elf)
    assert top.name == "linux-perf"
    assert sorted(closure.libs) == ["liba.so.1", "libb.so.2", "libc.so.6"]
    # liba.so.1 is a symlink: the file behind it is what goes in.
    assert closure.libs["liba.so.1"].name == "liba.so.1.2.3"
    assert closure.loader.read_text() == "ELF needed="
    assert closure.loader.is_relative_to(tmp_path / "work")
    assert closure.used == {"linux-perf", "libc6", "liba1", "libb2"}
    # Direct Depends of what was used are fetched; the Depends of packages that supplied
    # no library (libhuge -> libgiant, libbig-stdlib -> libstdlib-dep) never are.
    assert "libgiant" not in apt.downloaded and "libstdlib-dep" not in apt.downloaded
    assert {"libhuge", "libbig-stdlib"} <= set(apt.downloaded)
    assert apt.downloaded.count("libc6") == 1


def test_a_soname_no_package_supplies_is_an_error_naming_it(tmp_path):
    pkgs = world(libb2=("libc6", {f"{LIB}/libother.so.9": "ELF needed="}))
    apt = FakeApt(tmp_path, pkgs)
    with pytest.raises(PipelineError, match=r"supplies libb\.so\.2"):
        perfguest.collect(apt, ["trixie"], "arm64", tmp_path / "work", copy_extract,
                          fake_elf)


def test_an_absolute_symlink_never_leaves_the_package(tmp_path):
    root = tmp_path / "pkg"
    (root / "usr/lib").mkdir(parents=True)
    os.symlink("/etc/passwd", root / "usr/lib/libx.so.1")
    assert perfguest.real_path(root, root / "usr/lib/libx.so.1") == root / "etc/passwd"
    tree = perfguest.Tree(tmp_path, {"p": root})
    assert tree.find_lib("libx.so.1") is None  # dangling inside the package: not found


def test_entries_hold_perf_its_loader_libraries_and_the_wrapper(tmp_path):
    apt = FakeApt(tmp_path, world())
    closure, top = perfguest.collect(apt, ["trixie"], "arm64", tmp_path / "work",
                                     copy_extract, fake_elf)
    out = cpio.write_gz(perfguest.entries(closure, top.version), tmp_path / "p.cpio.gz")
    listing = subprocess.run(f"zcat {out} | cpio -it", shell=True, capture_output=True,
                             text=True, check=True).stdout.split()
    for path in ("opt/perf/bin/perf", "opt/perf/lib/ld-linux.so", "opt/perf/lib/liba.so.1",
                 "opt/perf/lib/libb.so.2", "opt/perf/lib/libc.so.6", "usr/bin/perf"):
        assert path in listing
    assert not any("libdep" in p or "python3" in p for p in listing)
    script = perfguest.wrapper("6.12.1-1").decode()
    assert script.startswith("#!/bin/sh\n")
    assert ("exec /opt/perf/lib/ld-linux.so --library-path /opt/perf/lib /opt/perf/bin/perf"
            ' "$@"') in script


def test_which_guests_get_perf():
    assert perfguest.not_provided("trixie", "arm64") is None
    assert perfguest.not_provided("sid", "arm64") is None
    assert "trixie, sid" in perfguest.not_provided("bookworm", "arm64")
    assert "arm64" in perfguest.not_provided("trixie", "amd64")


def test_a_guest_without_perf_is_told_why(tmp_path):
    """The guest script reports SKIP with tests/data/perf.skip; the stress and kvm
    guests (which do not run it) get neither perf nor the note."""
    entries: list = []
    spec = guest.GuestSpec("arm64", "6.1.0-1-arm64", None, suite="bookworm")
    assert guest.perf_archive(spec, None, entries) is None
    (note,) = [e for e in entries if "perf.skip" in str(e)]
    assert "bookworm" in str(note)
    entries = []
    spec = guest.GuestSpec("arm64", "6.12", None, profile="stress", suite="trixie")
    assert guest.perf_archive(spec, None, entries) is None and entries == []


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_read_elf_of_a_real_shared_object(tmp_path):
    (tmp_path / "x.c").write_text("#include <math.h>\ndouble f(double a) { return sqrt(a); }\n")
    so = tmp_path / "x.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "x.c"), "-lm"],
                   check=True)
    info = perfguest.read_elf(so)
    assert info is not None and "libm.so.6" in info.needed and info.interp is None
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "m"
    subprocess.run(["gcc", "-o", str(exe), str(tmp_path / "m.c")], check=True)
    info = perfguest.read_elf(exe)
    assert info is not None and "libc.so.6" in info.needed
    assert info.interp is not None and info.interp.startswith("/lib")
    assert perfguest.read_elf(tmp_path / "x.c") is None
