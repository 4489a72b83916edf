"""Load the C extension once; say precisely why not when it cannot be loaded.

Everything else imports `native` from here and checks `native is None` instead of
failing at import time, so `simple-pmu status` still explains what is missing on a
machine where only the pure-Python part is installed.

`native` is the module itself, so mypy types every call through _native.pyi. mypy has
no Optional of a module: the None of the except branch is hidden from it, and each
user checks `native is None` (or asserts it is not) before a call.
"""

from __future__ import annotations

from simple_pmu import reasons

native_error: str

try:
    import simple_pmu._native as native  # re-exported: see __all__
except ImportError as exc:
    native = None  # type: ignore[assignment]  # see the docstring
    native_error = reasons.NO_NATIVE.format(error=exc)
else:
    native_error = ""

__all__ = ["native", "native_error"]
