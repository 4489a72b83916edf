"""The documentation against the code: DIAGNOSTICS, the man page, the sysfs ABI file."""
