"""debian/ and dkms.conf without building anything: the udev helper against a fake sysfs,
and the MAKE[0] command DKMS composes from dkms.conf (render, build, verify in one)."""

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RDPMC = REPO / "debian" / "simple-pmu-rdpmc"


RULES = REPO / "debian" / "60-simple-pmu-dkms.rules"


DEFAULT = REPO / "debian" / "default" / "simple-pmu"


def fake_root(tmp_path: Path, pmus: dict[str, str], conf: str | None = "RDPMC_ALWAYS=yes\n"
              ) -> Path:
    """A sysfs with these PMUs' rdpmc, and /etc/default/simple-pmu holding `conf` (None:
    no such file). As in the kernel, cpu_atom's rdpmc on a hybrid part is the same global
    value as cpu_core's (here: a link to that file)."""
    if conf is not None:
        (tmp_path / "etc" / "default").mkdir(parents=True, exist_ok=True)
        (tmp_path / "etc" / "default" / "simple-pmu").write_text(conf)
    for pmu, value in pmus.items():
        d = tmp_path / "sys" / "bus" / "event_source" / "devices" / pmu
        d.mkdir(parents=True)
        if pmu == "cpu_atom" and "cpu_core" in pmus:
            (d / "rdpmc").symlink_to(d.parent / "cpu_core" / "rdpmc")
        else:
            (d / "rdpmc").write_text(value + "\n")
    return tmp_path


def rdpmc(root: Path, action: str) -> subprocess.CompletedProcess[str]:
    """The helper as udev runs it, with a logger that appends to root/logger.log."""
    bindir = root / "fakebin"
    bindir.mkdir(exist_ok=True)
    logger = bindir / "logger"
    logger.write_text(f'#!/bin/sh\necho "$*" >> {root / "logger.log"}\n')
    logger.chmod(0o755)
    return subprocess.run(["sh", str(RDPMC), action], capture_output=True, text=True,
                          env={"SIMPLE_PMU_ROOT": str(root), "PATH": f"{bindir}:/usr/bin:/bin"})


def logged(root: Path) -> str:
    log = root / "logger.log"
    return log.read_text() if log.exists() else ""


def value(root: Path, pmu: str) -> str:
    return (root / "sys/bus/event_source/devices" / pmu / "rdpmc").read_text().strip()


@pytest.mark.parametrize("pmus", [{"cpu": "1"}, {"cpu": "0"},
                                  {"cpu_core": "1", "cpu_atom": "1"},
                                  {"cpu_core": "0", "cpu_atom": "0"}])
def test_rdpmc_set_on_load_restored_on_unload(tmp_path, pmus):
    root = fake_root(tmp_path, pmus)
    assert rdpmc(root, "load").returncode == 0
    assert all(value(root, p) == "2" for p in pmus)
    assert rdpmc(root, "load").returncode == 0  # a repeated load keeps the original
    assert rdpmc(root, "unload").returncode == 0
    assert {p: value(root, p) for p in pmus} == pmus
    assert not (root / "run" / "simple-pmu").exists()  # removed once empty
    assert (root / "run").is_dir()


@pytest.mark.parametrize("conf", [None, "RDPMC_ALWAYS=no\n", "# RDPMC_ALWAYS=yes\n",
                                  "RDPMC_ALWAYS=yes\nRDPMC_ALWAYS=no\n",
                                  DEFAULT.read_text()])
def test_rdpmc_left_alone_unless_the_admin_says_yes(tmp_path, conf):
    """No file, 'no', a commented line, a later 'no', the file the package ships: the
    module's load changes nothing machine-wide, and its unload puts nothing back."""
    root = fake_root(tmp_path, {"cpu": "1"}, conf)
    assert rdpmc(root, "load").returncode == 0
    assert value(root, "cpu") == "1"
    assert not (root / "run").exists()
    assert rdpmc(root, "unload").returncode == 0
    assert value(root, "cpu") == "1" and logged(root) == ""


@pytest.mark.parametrize("conf", ['RDPMC_ALWAYS="yes"\n', "  RDPMC_ALWAYS=yes \n",
                                  "RDPMC_ALWAYS='yes'\n"])
def test_rdpmc_yes_as_shell_would_read_it(tmp_path, conf):
    root = fake_root(tmp_path, {"cpu": "1"}, conf)
    assert rdpmc(root, "load").returncode == 0
    assert value(root, "cpu") == "2"


@pytest.mark.parametrize("bad", ["1", "true", "YES", "maybe"])
def test_rdpmc_bad_setting_changes_nothing_and_says_why(tmp_path, bad):
    root = fake_root(tmp_path, {"cpu": "1"}, f"RDPMC_ALWAYS={bad}\n")
    assert rdpmc(root, "load").returncode == 0
    assert value(root, "cpu") == "1" and not (root / "run").exists()
    assert logged(root) == (f"-t simple-pmu {root}/etc/default/simple-pmu: RDPMC_ALWAYS must "
                            f"be yes or no, not '{bad}'; rdpmc left alone\n")


def test_rdpmc_restored_after_the_admin_changed_the_setting(tmp_path):
    """Set at load (yes); the admin writes no while the module is loaded: the unload
    still puts the old value back."""
    root = fake_root(tmp_path, {"cpu": "1"})
    assert rdpmc(root, "load").returncode == 0 and value(root, "cpu") == "2"
    (root / "etc" / "default" / "simple-pmu").write_text("RDPMC_ALWAYS=no\n")
    assert rdpmc(root, "unload").returncode == 0 and value(root, "cpu") == "1"


def test_shipped_default_says_no_and_installs_to_etc_default():
    assert [line for line in DEFAULT.read_text().splitlines()
            if line and not line.startswith("#")] == ["RDPMC_ALWAYS=no"]
    install = (REPO / "debian" / "simple-pmu-dkms.install").read_text().splitlines()
    assert "debian/default/simple-pmu etc/default/" in install


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
                               "--no-require-signature --load-fatal-only simple-pmu.ko")
    assert arch == "^(x86_64|aarch64)$"
    # Nothing may swallow a failing step, and dkms 3.2 builds nothing without AUTOINSTALL.
    assert "||" not in make and ";" not in make
    autoinstall = subprocess.run(["bash", "-c", f'. {REPO}/dkms.conf; echo "$AUTOINSTALL"'],
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert autoinstall == "yes"


def test_rdpmc_helper_is_executable_and_ships_where_the_rule_runs_it():
    assert RDPMC.stat().st_mode & 0o111, "debian/simple-pmu-rdpmc must be executable"
    install = (REPO / "debian" / "simple-pmu-dkms.install").read_text().split("\n")
    dest = next(line.split()[1] for line in install if line.startswith("debian/simple-pmu-rdpmc"))
    rules = [line for line in RULES.read_text().splitlines() if line and line[0] != "#"]
    assert len(rules) == 2
    for line, action in zip(rules, ("add", "remove"), strict=True):
        keys = dict(part.strip().split("==", 1) if "==" in part else part.strip().split("+=", 1)
                    for part in line.split(", "))
        # The module's kobject is named with underscores (simple_pmu), not simple-pmu.
        assert keys == {"SUBSYSTEM": '"module"', "KERNEL": '"simple_pmu"',
                        "ACTION": f'"{action}"',
                        "RUN": f'"/{dest.strip("/")}/simple-pmu-rdpmc '
                               f'{"load" if action == "add" else "unload"}"'}, line
