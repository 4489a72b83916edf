"""Load the C extension once; say precisely why not when it cannot be loaded.

Everything else imports `native` from here and checks `native is None` instead of
failing at import time, so `simple-pmu status` still explains what is missing on a
machine where only the pure-Python part is installed.
"""

from __future__ import annotations

import importlib
from types import ModuleType

native: ModuleType | None
native_error: str

try:
    native = importlib.import_module("simple_pmu._native")
except ImportError as exc:
    native = None
    native_error = (f"the C extension simple_pmu._native is not available ({exc}); "
                    "build it with 'pip install .' in userlib/ of a simple-pmu checkout")
else:
    native_error = ""
