"""The in-guest test scripts (tests/guest) run on the host against fakes."""
