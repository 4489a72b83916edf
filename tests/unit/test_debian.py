"""debian/ and dkms.conf without building anything: the udev helper against a fake sysfs,
and the MAKE[0] command DKMS composes from dkms.conf (render, build, verify in one)."""

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RDPMC = REPO / "debian" / "simple-pmu-rdpmc"


def fake_root(tmp_path: Path, pmus: dict[str, str]) -> Path:
    for pmu, value in pmus.items():
        d = tmp_path / "sys" / "bus" / "event_source" / "devices" / pmu
        d.mkdir(parents=True)
        (d / "rdpmc").write_text(value + "\n")
    return tmp_path


def rdpmc(root: Path, action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(RDPMC), action], capture_output=True, text=True,
                          env={"SIMPLE_PMU_ROOT": str(root), "PATH": "/usr/bin:/bin"})


def value(root: Path, pmu: str) -> str:
    return (root / "sys/bus/event_source/devices" / pmu / "rdpmc").read_text().strip()


@pytest.mark.parametrize("pmus", [{"cpu": "1"}, {"cpu_core": "1", "cpu_atom": "0"}])
def test_rdpmc_set_on_load_restored_on_unload(tmp_path, pmus):
    root = fake_root(tmp_path, pmus)
    assert rdpmc(root, "load").returncode == 0
    assert all(value(root, p) == "2" for p in pmus)
    assert rdpmc(root, "load").returncode == 0  # a repeated load keeps the original
    assert rdpmc(root, "unload").returncode == 0
    assert {p: value(root, p) for p in pmus} == pmus
    assert not list((root / "run" / "simple-pmu").iterdir())


def test_rdpmc_without_x86_pmu_does_nothing(tmp_path):
    (tmp_path / "sys").mkdir()
    assert rdpmc(tmp_path, "load").returncode == 0
    assert not (tmp_path / "run").exists()


def test_rdpmc_usage(tmp_path):
    assert rdpmc(tmp_path, "bogus").returncode == 2


def test_dkms_make_is_one_command_with_the_release_from_kernelver():
    script = ('kernelver=6.1.0-9-amd64 kernel_source_dir=/k dkms_tree=/var/lib/dkms; '
              f'. {REPO}/dkms.conf; printf "%s\\n" "${{MAKE[0]}}" "$BUILD_EXCLUSIVE_ARCH"')
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    make, arch = out
    steps = make.split(" && ")
    assert steps[0].startswith("/usr/bin/python3 pmubuild/compat.py --kdir /k --out "
                               "/var/lib/dkms/simple-pmu/#MODULE_VERSION#/build/compat.h")
    assert "KERNELRELEASE=6.1.0-9-amd64 -C /k M=/var/lib/dkms/simple-pmu/" in steps[1]
    assert steps[2].startswith("/usr/bin/python3 pmubuild/modverify.py --kdir /k "
                               "--no-require-signature simple-pmu.ko")
    assert arch == "^(x86_64|aarch64)$"
