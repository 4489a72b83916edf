"""Debian version ordering (deb-version(7)), so the newest kernel is picked from the index."""

import re
from functools import cmp_to_key

_VERSION = re.compile(r"^(?:(\d+):)?(.+?)(?:-([^-]+))?$")


def _order(c: str) -> int:
    if c == "~":
        return -1
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    while a or b:
        # Non-digit prefixes compare character by character, '~' sorting before anything.
        na = re.match(r"^\D*", a).group(0)  # type: ignore[union-attr]
        nb = re.match(r"^\D*", b).group(0)  # type: ignore[union-attr]
        for i in range(max(len(na), len(nb))):
            oa = _order(na[i]) if i < len(na) else 0
            ob = _order(nb[i]) if i < len(nb) else 0
            if oa != ob:
                return -1 if oa < ob else 1
        a, b = a[len(na) :], b[len(nb) :]
        da = re.match(r"^\d*", a).group(0)  # type: ignore[union-attr]
        db = re.match(r"^\d*", b).group(0)  # type: ignore[union-attr]
        ia, ib = int(da or 0), int(db or 0)
        if ia != ib:
            return -1 if ia < ib else 1
        a, b = a[len(da) :], b[len(db) :]
    return 0


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as Debian version `a` sorts before, equal to, or after `b`."""
    ma, mb = _VERSION.match(a), _VERSION.match(b)
    if not ma or not mb:
        raise ValueError(f"not a Debian version: {a!r} or {b!r}")
    ea, eb = int(ma.group(1) or 0), int(mb.group(1) or 0)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ma.group(2), mb.group(2)) or _compare_part(
        ma.group(3) or "", mb.group(3) or ""
    )


version_key = cmp_to_key(compare)
