"""pmubuild.debian.package.run_in_overlay's shell script run on the host, with unshare, mount,
cp and chroot faked: what it writes into the overlay before the chroot's script runs."""

import os
import re

from pmubuild.debian import package


def fake(bindir, name, body):
    exe = bindir / name
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)


def test_overlay_tells_dpkg_not_to_fsync(tmp_path, monkeypatch):
    """The throw-away overlay has dpkg's force-unsafe-io, in a file of
    /etc/dpkg/dpkg.cfg.d/ that dpkg reads, written before the chroot's script runs."""
    base = tmp_path / "base"
    for d in ("etc/dpkg/dpkg.cfg.d", "etc/apt/apt.conf.d"):
        (base / d).mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake(bindir, "unshare", 'shift 3; exec "$@"\n')  # unshare --mount --propagation private
    # mount -t overlay overlay -o lowerdir=L,upperdir=U,workdir=W MERGED: L's directories;
    # the bind mounts: nothing.
    fake(bindir, "mount", '[ "$1" = -t ] || exit 0\nlower=${5#lowerdir=}; lower=${lower%%,*}\n'
         '(cd "$lower" && find . -type d) | while read -r d; do mkdir -p "$6/$d"; done\n')
    fake(bindir, "cp", '[ "$1" = /etc/resolv.conf ] && : > "$2"\n')
    # The chroot's script, in its place: what dpkg's configuration directory holds.
    fake(bindir, "chroot", 'cd "$1/etc/dpkg/dpkg.cfg.d" && for f in *; do '
         'echo "$f: $(cat "$f")"; done\n')
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("SIMPLE_PMU_CACHE", str(tmp_path / "cache"))
    rc, out = package.run_in_overlay(base, [], "true", "test")
    assert rc == 0, out
    # dpkg reads the files of dpkg.cfg.d named only with letters, digits, '_' and '-'.
    assert any(re.fullmatch(r"[A-Za-z0-9_-]+: force-unsafe-io", line) for line in out), out
