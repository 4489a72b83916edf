"""The documentation against the code (DIAGNOSTICS, the man page, the sysfs ABI file), the
README for users and docs/DEVELOPING.md for developers (no section in both, links that
resolve), and the repository's shape: the guide's folder map, pmubuild's imports and
layers."""
