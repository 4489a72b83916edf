"""The cache of kernels, chroots and guest parts: outside the repo, entries complete or absent."""

import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pmubuild.common.errors import PipelineError

PARTIAL_PREFIX = ".partial-"


def cache_root() -> Path:
    """$SIMPLE_PMU_CACHE, else $XDG_CACHE_HOME/simple-pmu, else ~/.cache/simple-pmu."""
    explicit = os.environ.get("SIMPLE_PMU_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "simple-pmu"


def subdir(name: str) -> Path:
    path = cache_root() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def ensure_free_space(path: Path, need_mb: int, what: str) -> None:
    """Fail before filling the disk, naming what needed the space and where."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    free_mb = shutil.disk_usage(probe).free // (1024 * 1024)
    if free_mb < need_mb:
        raise PipelineError(
            f"not enough free disk space for {what}: {free_mb} MB free under {probe}, "
            f"about {need_mb} MB needed; free some space or set SIMPLE_PMU_CACHE to "
            "a larger filesystem"
        )


def remove_stale_partials(parent: Path, entry: str = "") -> None:
    """Entries left by an interrupted run are never used: delete them. With `entry`, only
    the scratch directories of that entry (atomic_dir's), for a caller that holds the
    entry's lock while others may be assembling other entries of the same parent."""
    if not parent.is_dir():
        return
    mine = re.compile(re.escape(f"{PARTIAL_PREFIX}{entry}-") + "[0-9a-f]{8}")
    for child in parent.iterdir():
        if mine.fullmatch(child.name) if entry else child.name.startswith(PARTIAL_PREFIX):
            shutil.rmtree(child, ignore_errors=True)


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a scratch directory that becomes `final` only if the body succeeds.

    A rename within one filesystem is atomic, so readers see the entry whole or not at all.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f"{PARTIAL_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Serialize writers of one part of the cache across processes (two invoke runs at
    once must not assemble, or clean up, the same entry)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
