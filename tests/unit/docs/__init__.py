"""The documentation against the code (DIAGNOSTICS, the man page, the sysfs ABI file), and
the repository's shape: docs/DEVELOPING.md's folder map, pmubuild's imports and layers."""
