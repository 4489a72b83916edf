"""cpio.archive checked by the real cpio tool."""

import gzip
import os
import shutil
import stat
import subprocess

import pytest

from pmubuild.guests import cpio

pytestmark = pytest.mark.skipif(shutil.which("cpio") is None, reason="cpio not installed")


def extract(data: bytes, dest):
    dest.mkdir()
    proc = subprocess.run(["cpio", "-idm", "--quiet"], input=data, cwd=dest,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()


def test_archive_extracts_with_cpio(tmp_path):
    script = b"#!/bin/sh\necho hi\n"
    odd = b"x" * 5  # size not a multiple of 4: exercises padding
    entries = [
        cpio.directory("bin"),
        cpio.directory("etc"),
        cpio.directory("etc/deep"),
        cpio.file("bin/prog", script, executable=True),
        cpio.file("etc/deep/conf", odd),
        cpio.file("etc/empty", b""),
        cpio.symlink("bin/sh", "prog"),
        cpio.file("init", b"#!/bin/sh\n", executable=True),
    ]
    out = tmp_path / "x"
    extract(cpio.archive(entries), out)

    assert stat.S_IMODE((out / "bin").stat().st_mode) == 0o755
    assert (out / "etc" / "deep").is_dir()
    assert (out / "bin" / "prog").read_bytes() == script
    assert stat.S_IMODE((out / "bin" / "prog").stat().st_mode) == 0o755
    assert (out / "etc" / "deep" / "conf").read_bytes() == odd
    assert stat.S_IMODE((out / "etc" / "deep" / "conf").stat().st_mode) == 0o644
    assert (out / "etc" / "empty").read_bytes() == b""
    assert (out / "bin" / "sh").is_symlink()
    assert os.readlink(out / "bin" / "sh") == "prog"
    assert (out / "bin" / "sh").read_bytes() == script
    assert stat.S_IMODE((out / "init").stat().st_mode) == 0o755
    # Nothing but what we put in (the trailer is not a file).
    found = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert found == sorted(["bin", "etc", "etc/deep", "bin/prog", "etc/deep/conf",
                            "etc/empty", "bin/sh", "init"])


def test_listing_shows_root_owner(tmp_path):
    data = cpio.archive([cpio.file("f", b"abc")])
    proc = subprocess.run(["cpio", "-itv", "--quiet"], input=data, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    line = proc.stdout.decode().strip()
    assert line.endswith(" f")
    assert " root " in line or " 0 " in line


def test_add_tree_and_write_gz(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o700)
    (src / "sub" / "data").write_bytes(b"\x00\x01\x02")
    (src / "sub" / "data").chmod(0o600)
    entries = [cpio.directory("work")]
    cpio.add_tree(entries, src, "work/src")
    gz = cpio.write_gz(entries, tmp_path / "a.gz")
    out = tmp_path / "out"
    extract(gzip.decompress(gz.read_bytes()), out)
    # Modes are normalised: executable -> 0755, else 0644.
    assert stat.S_IMODE((out / "work/src/run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "work/src/sub/data").stat().st_mode) == 0o644
    assert (out / "work/src/sub/data").read_bytes() == b"\x00\x01\x02"
