"""debian/ and dkms.conf without building anything: the udev helper against a fake sysfs,
the MAKE[0] command DKMS composes from dkms.conf (render, build, verify in one), the udev
rule for /dev/simple-pmu, and the postinst's group and udev steps with fake commands."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
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
    rules = [line for line in RULES.read_text().splitlines()
             if line.startswith('SUBSYSTEM=="module"')]
    assert len(rules) == 2
    for line, action in zip(rules, ("add", "remove"), strict=True):
        keys = dict(part.strip().split("==", 1) if "==" in part else part.strip().split("+=", 1)
                    for part in line.split(", "))
        # The module's kobject is named with underscores (simple_pmu), not simple-pmu.
        assert keys == {"SUBSYSTEM": '"module"', "KERNEL": '"simple_pmu"',
                        "ACTION": f'"{action}"',
                        "RUN": f'"/{dest.strip("/")}/simple-pmu-rdpmc '
                               f'{"load" if action == "add" else "unload"}"'}, line



def rule_keys(line: str) -> list[tuple[str, str, str]]:
    """A udev rule line as (key, operator, value) in order."""
    keys = []
    for part in line.split(", "):
        m = re.fullmatch(r'([A-Z]+)(==|!=|\+=|:=|=)"([^"]*)"', part.strip())
        assert m, f"not a KEY<op>\"value\" pair: {part!r} in {line!r}"
        keys.append(m.groups())
    return keys


def test_udev_rule_gives_the_device_node_group_simple_pmu_mode_0660():
    """The one non-module line: matches the misc node by its kernel name and assigns group
    and mode (plain '=', which an admin's later rule may still change)."""
    lines = [line for line in RULES.read_text().splitlines()
             if line and line[0] != "#" and not line.startswith('SUBSYSTEM=="module"')]
    assert [rule_keys(line) for line in lines] == [[
        ("KERNEL", "==", "simple-pmu"), ("SUBSYSTEM", "==", "misc"),
        ("GROUP", "=", "simple-pmu"), ("MODE", "=", "0660")]]


def test_udev_rule_names_the_drivers_node_and_the_headers_group():
    """The rule's KERNEL is both drivers' miscdevice name (root-only until the rule
    applies), and its GROUP the one cycles.h names in its reasons (CYCLES_DEV_GROUP) and
    the postinst makes."""
    group = re.search(r'#define CYCLES_DEV_GROUP\s+"([^"]+)"',
                      (REPO / "include" / "cycles.h").read_text()).group(1)
    line = next(line for line in RULES.read_text().splitlines() if 'SUBSYSTEM=="misc"' in line)
    keys = {k: v for k, _, v in rule_keys(line)}
    for arch in ("arm64", "x86"):
        member = (REPO / "drivers" / arch / "pmu_member.c").read_text()
        misc = re.search(r"struct miscdevice \w+ = \{(.*?)\};", member, re.S)
        assert misc, f"drivers/{arch}/pmu_member.c: no struct miscdevice"
        name = re.search(r'\.name\s*=\s*"([^"]+)"', misc.group(1)).group(1)
        mode = re.search(r"\.mode\s*=\s*(0[0-7]+)", misc.group(1)).group(1)
        assert (keys["KERNEL"], keys["GROUP"]) == (name, group) == ("simple-pmu", "simple-pmu")
        assert mode == "0600", f"drivers/{arch}: the node is {mode} before udev's rule"
    assert "addgroup --system --quiet simple-pmu" in POSTINST.read_text()


POSTINST = REPO / "debian" / "simple-pmu-dkms.postinst"
UDEV_CONTROL = "/run/udev/control"


def run_postinst(tmp_path: Path, action: str = "configure", *, group: bool,
                 addgroup_rc: int = 0, udevd: bool = False,
                 udevadm_rc: int | None = 0) -> tuple[int, list[str], str]:
    """The postinst as dpkg runs it, with every command it may call faked on a PATH of
    nothing else (no real addgroup or udevadm can run): getent knows the group simple-pmu
    if `group`; udevd runs if `udevd` (its control socket, which the script looks for,
    moved under tmp_path); udevadm None: not installed. (exit status, calls, stderr)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    calls.touch()

    def fake(name: str, body: str) -> None:
        f = bindir / name
        f.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n{body}\n')
        f.chmod(0o755)

    fake("getent", 'echo simple-pmu:x:123:; exit 0' if group else 'exit 2')
    fake("addgroup", f"exit {addgroup_rc}")
    if udevadm_rc is not None:
        fake("udevadm", f"exit {udevadm_rc}")
    # x86_64 running a kernel without /lib/modules: the headers message stays silent.
    fake("uname", 'case "$1" in -m) echo x86_64 ;; -r) echo 0.0-pkgtest-none ;; esac')
    for tool in ("grep", "tail"):  # the build-error trap's
        (bindir / tool).symlink_to(next(d / tool for d in (Path("/usr/bin"), Path("/bin"))
                                        if (d / tool).exists()))
    control = tmp_path / "run-udev-control"
    if udevd:
        control.touch()
    text = POSTINST.read_text()
    assert text.count(UDEV_CONTROL) == 1, "the postinst must test udevd's socket once"
    script = tmp_path / "postinst"
    script.write_text(text.replace(UDEV_CONTROL, str(control)))
    res = subprocess.run(["/bin/sh", str(script), action, "1.0-1"], capture_output=True,
                         text=True, env={"PATH": str(bindir)})
    return res.returncode, calls.read_text().splitlines(), res.stderr


def test_postinst_makes_the_system_group_when_there_is_none(tmp_path):
    rc, calls, _ = run_postinst(tmp_path, group=False)
    assert rc == 0
    assert [c for c in calls if c.split()[0] in ("getent", "addgroup")] == [
        "getent group simple-pmu", "addgroup --system --quiet simple-pmu"]


def test_postinst_leaves_an_existing_group_alone(tmp_path):
    """Ours from an earlier install or the admin's own: looked up, nothing else (any
    other group command is not on the PATH and would fail the script)."""
    rc, calls, _ = run_postinst(tmp_path, group=True)
    assert rc == 0
    assert [c for c in calls if c.split()[0] != "uname"] == ["getent group simple-pmu"]


def test_postinst_fails_when_the_group_cannot_be_made(tmp_path):
    rc, calls, _ = run_postinst(tmp_path, group=False, addgroup_rc=1)
    assert rc != 0 and "addgroup --system --quiet simple-pmu" in calls


@pytest.mark.parametrize("action", ["abort-upgrade", "abort-remove", "abort-deconfigure"])
def test_postinst_touches_groups_and_udev_only_when_configured(tmp_path, action):
    rc, calls, _ = run_postinst(tmp_path, action, group=False, udevd=True)
    assert rc == 0 and calls == []


@pytest.mark.parametrize("udevadm_rc", [0, 1])
def test_postinst_has_udev_reread_its_rules_and_retag_the_node(tmp_path, udevadm_rc):
    """Where udevd runs: rules read again (the group now exists), then a change event for
    the loaded module's node only; a failing udevadm never fails the install."""
    rc, calls, _ = run_postinst(tmp_path, group=True, udevd=True, udevadm_rc=udevadm_rc)
    assert rc == 0
    assert [c for c in calls if c.startswith("udevadm")] == [
        "udevadm control --reload-rules",
        "udevadm trigger --action=change --subsystem-match=misc --sysname-match=simple-pmu"]


@pytest.mark.parametrize("udevd, udevadm_rc", [(False, 0), (True, None)])
def test_postinst_leaves_udev_alone_where_it_does_not_run(tmp_path, udevd, udevadm_rc):
    """A chroot (no udevd socket) or no udevadm installed: no call, no failure, and no
    "not found" in apt's output."""
    rc, calls, err = run_postinst(tmp_path, group=False, udevd=udevd, udevadm_rc=udevadm_rc)
    assert rc == 0 and err == ""
    assert not [c for c in calls if c.startswith("udevadm")]
    assert "addgroup --system --quiet simple-pmu" in calls
