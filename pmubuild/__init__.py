"""Build, test and packaging pipeline of simple-pmu (used by tasks.py and DKMS)."""
