"""Shared pytest configuration: markers for tests that need real kernels or QEMU."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "kernels: needs real Debian kernel trees from the matrix (cached)")
    config.addinivalue_line(
        "markers", "qemu: boots a real kernel under QEMU (tens of seconds)")
