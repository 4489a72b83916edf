"""A minimal newc (SVR4, no CRC) cpio writer: initramfs archives without the cpio tool,
with every entry owned by root whatever the files on the host say."""

import gzip
import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    path: str  # inside the archive, no leading slash
    mode: int  # full st_mode, type bits included
    data: bytes = b""


def directory(path: str) -> Entry:
    return Entry(path, stat.S_IFDIR | 0o755)


def file(path: str, data: bytes, executable: bool = False) -> Entry:
    return Entry(path, stat.S_IFREG | (0o755 if executable else 0o644), data)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, stat.S_IFLNK | 0o777, target.encode())


def _header(ino: int, entry_mode: int, nlink: int, size: int, name: bytes) -> bytes:
    fields = [ino, entry_mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name) + 1, 0]
    return b"070701" + b"".join(f"{v:08X}".encode() for v in fields)


def _pad(n: int) -> bytes:
    return b"\0" * ((4 - n % 4) % 4)


def archive(entries: list[Entry]) -> bytes:
    """Serialize entries; parent directories must come before their contents."""
    out = bytearray()
    for ino, e in enumerate([*entries, Entry("TRAILER!!!", 0)], start=1):
        name = e.path.lstrip("/").encode()
        nlink = 2 if stat.S_ISDIR(e.mode) else 1
        head = _header(ino if e.mode else 0, e.mode, nlink if e.mode else 1, len(e.data), name)
        out += head + name + b"\0"
        out += _pad(len(head) + len(name) + 1)
        out += e.data + _pad(len(e.data))
    return bytes(out)


def add_tree(entries: list[Entry], src: Path, dest: str) -> None:
    """Add a host file, symlink or directory (recursively) at `dest`, keeping the
    executable bit; symlinks stay links (a rootfs is full of them)."""
    if src.is_symlink():
        entries.append(symlink(dest, os.readlink(src)))
    elif src.is_dir():
        entries.append(directory(dest))
        for child in sorted(src.iterdir()):
            add_tree(entries, child, f"{dest}/{child.name}")
    else:
        entries.append(file(dest, src.read_bytes(), bool(src.stat().st_mode & 0o111)))


def write_gz(entries: list[Entry], out: Path) -> Path:
    # Level 1: the archive is rebuilt for every guest, and QEMU reads it from memory.
    out.write_bytes(gzip.compress(archive(entries), compresslevel=1))
    return out
