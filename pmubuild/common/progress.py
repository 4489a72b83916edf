"""Progress lines for long operations (downloads, chroot creation, matrix runs)."""

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@contextmanager
def step(what: str) -> Iterator[None]:
    """Print what starts, and how long it took when it ends (or that it failed)."""
    say(f"==> {what} ...")
    start = time.monotonic()
    try:
        yield
    except BaseException:
        say(f"==> {what}: failed after {time.monotonic() - start:.1f}s")
        raise
    say(f"==> {what}: done in {time.monotonic() - start:.1f}s")
