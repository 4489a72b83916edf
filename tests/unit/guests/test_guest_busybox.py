"""The guests' static busybox is extracted into the cache once, even when test-qemu's two
parallel kernels ask for it at the same moment (no QEMU, no network: a fake apt)."""

import subprocess
import threading
import time
from pathlib import Path

from pmubuild.guests import guest


class FakeApt:
    def newest(self, name, suites, arch):
        return type("P", (), {"version": "1:1.36.1-9"})()

    def download(self, pkgs):
        return [Path("/nonexistent/busybox-static.deb")]


def test_two_kernels_at_once_extract_it_once(monkeypatch, tmp_path):
    monkeypatch.setenv("SIMPLE_PMU_CACHE", str(tmp_path / "cache"))
    extractions = []

    def fake_dpkg_deb(argv, **kwargs):
        assert argv[:2] == ["dpkg-deb", "-x"]
        extractions.append(argv[-1])
        time.sleep(0.3)  # the other thread arrives while this one extracts
        (Path(argv[-1]) / "bin").mkdir(parents=True)
        (Path(argv[-1]) / "bin" / "busybox").write_bytes(b"\x7fELF busybox")
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(guest.subprocess, "run", fake_dpkg_deb)
    start = threading.Barrier(2)
    results = []

    def one():
        start.wait(timeout=10)
        results.append(guest.busybox(FakeApt(), "arm64"))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = tmp_path / "cache" / "guest" / "busybox-arm64-1:1.36.1-9" / "bin" / "busybox"
    assert results == [want, want] and want.read_bytes() == b"\x7fELF busybox"
    assert len(extractions) == 1  # the second waited and found it
