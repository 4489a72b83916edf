"""modverify on real modules built for the matrix, and on deliberately wrong ones: each
wrong one must be caught with its own precise message."""

import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cloudtree import flavour_tree
from matrixbuild import apt, w1_build

from pmubuild.common.errors import PipelineError
from pmubuild.kbuild import modverify
from pmubuild.modbuild import build, signing
from pmubuild.trees import kdir, kernels, matrix

pytestmark = pytest.mark.kernels
REPO = Path(__file__).resolve().parents[2]
BADMOD = Path(__file__).parent / "data" / "badmod"
COMBOS = [(s, a) for s in matrix.SUITES for a in matrix.ARCHES]


@functools.cache
def tree(suite: str, arch: str) -> kdir.KernelTree:
    return kdir.inspect(kernels.fetch(apt(), matrix.SUITES[suite], arch).kdir)


def built(suite: str, arch: str) -> build.BuildResult:
    # The run's one W=1 build of this tree (test_w1_builds judges its warnings).
    return w1_build(suite, arch)


def problems(ko: Path, t: kdir.KernelTree, **kw) -> list[str]:
    return modverify.check(modverify.read_module(ko), modverify.load_target(t.path), **kw).problems


@pytest.mark.parametrize(("suite", "arch"), COMBOS)
def test_matrix_module_verifies(suite, arch):
    r = built(suite, arch)
    assert r.report.ok, r.report.problems
    m = r.report.module
    # VERMAGIC_STRING expanded from the tree's own vermagic.h equals what kbuild put in
    # the module (built by the same tree's *.mod.c).
    assert m.info("vermagic") == modverify.expected_vermagic(r.report.target)
    assert m.machine == modverify.MACHINE_BY_ARCH[arch]
    rows = dict(r.report.rows)
    assert rows["symbols"].startswith(f"{len(m.undefined)} undefined")
    if r.tree.config.get("CONFIG_MODVERSIONS") == "y":
        assert m.versions and f"{len(m.versions)} match" in rows["crcs"]
        assert "module_layout" in m.versions or "__fentry__" in m.versions or m.versions


def test_other_arch():
    ko = built("bookworm", "arm64").ko
    msgs = problems(ko, tree("bookworm", "amd64"))
    assert "simple-pmu.ko: built for EM_AARCH64, the target kernel is amd64 (EM_X86_64)" in msgs


def test_other_release():
    ko = built("bookworm-backports", "amd64").ko
    t = tree("trixie", "amd64")
    msgs = problems(ko, t)
    want = (f"simple-pmu.ko: vermagic release '{built('bookworm-backports', 'amd64').tree.release}'"
            f", the target kernel is '{t.release}'")
    assert want in msgs


def test_symbol_not_exported_by_target():
    # 6.10 renamed kmalloc_trace to kmalloc_trace_noprof: a 6.1 module cannot load on 6.12.
    ko = built("bookworm", "amd64").ko
    t = tree("trixie", "amd64")
    assert f"simple-pmu.ko: kmalloc_trace is not exported by {t.release}" in problems(ko, t)


@pytest.fixture(scope="module")
def badmod(tmp_path_factory) -> Path:
    """spmu-badmod.ko built against bookworm amd64 (6.1), where modpost is satisfied."""
    t = tree("bookworm", "amd64")
    out = tmp_path_factory.mktemp("badmod")
    shutil.copytree(BADMOD, out, dirs_exist_ok=True)
    tc = build.choose_toolchain(t, apt)
    proc = subprocess.run(["make", "-C", str(t.path), f"M={out}", *tc.make_vars, "modules"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "spmu-badmod.ko"


def test_policy_symbol(badmod):
    msgs = problems(badmod, tree("bookworm", "amd64"))
    assert msgs == ["spmu-badmod.ko: uses filp_open, which simple-pmu never needs "
                    "(opens files from kernel space)"]


def test_export_restricted_to_kvm(badmod):
    t = tree("sid", "amd64")
    msgs = problems(badmod, t)
    assert any(re.fullmatch(rf"spmu-badmod\.ko: cr4_update_irqsoff is exported by "
                            rf"{re.escape(t.release)} only to kvm(, [a-z-]+)+", m) for m in msgs)


def test_gpl_only_symbol_to_non_gpl_module(badmod, tmp_path):
    data = badmod.read_bytes()
    assert data.count(b"license=GPL\0") == 1
    bad = tmp_path / "spmu-badmod.ko"
    bad.write_bytes(data.replace(b"license=GPL\0", b"license=MIT\0"))
    msgs = problems(bad, tree("bookworm", "amd64"))
    gpl = [m for m in msgs if "EXPORT_SYMBOL_GPL" in m]
    assert gpl and all("license 'MIT' is not GPL-compatible" in m for m in gpl)


def test_crc_mismatch_between_flavours():
    """bookworm's amd64 and cloud-amd64 flavours: one release, different CRCs."""
    cloud = flavour_tree(apt(), "cloud-amd64", "amd64")
    ko = built("bookworm", "amd64").ko
    target = modverify.load_target(cloud)
    report = modverify.check(modverify.read_module(ko), target)
    crc = [p for p in report.problems if p.startswith("simple-pmu.ko: CRC of ")]
    assert crc, report.problems
    for p in crc:
        sym = p.split()[3]
        mine, theirs = report.module.versions[sym], target.exports[sym].crc
        assert mine != theirs and f"is {mine:#010x}, the target exports {theirs:#010x}" in p


@pytest.fixture
def keys(tmp_path) -> signing.KeyPair:
    return signing.create_keypair(tmp_path / "keys", "modverify test")


def test_sign_verify_tamper(tmp_path, keys):
    r = built("trixie", "arm64")  # sign-file of trixie runs in its chroot
    ko = tmp_path / "simple-pmu.ko"
    # Start unsigned: test-qemu signs the build output in place.
    ko.write_bytes(modverify.split_signature(r.ko.read_bytes())[0])
    unsigned = problems(ko, r.tree, cert=keys.cert, require_signature=True)
    assert unsigned == ["simple-pmu.ko: not signed, and a signature is required"]
    signing.sign(r.tree, [ko], keys)
    report = modverify.check(modverify.read_module(ko), modverify.load_target(r.tree.path),
                             cert=keys.cert, require_signature=True)
    assert report.ok, report.problems
    sig = report.module.signature
    assert sig and sig.hash == "sha256" and sig.signer == "CN=modverify test"
    modinfo = subprocess.run(["modinfo", "-F", "sig_key", str(ko)], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert sig.key_id == modinfo
    # Signing again replaces the signature instead of stacking a second one.
    size = ko.stat().st_size
    signing.sign(r.tree, [ko], keys)
    assert ko.stat().st_size == size
    # One flipped byte in the middle of the module body.
    data = bytearray(ko.read_bytes())
    data[len(data) // 3] ^= 0x01
    ko.write_bytes(bytes(data))
    msgs = problems(ko, r.tree, cert=keys.cert)
    assert len(msgs) == 1 and msgs[0].startswith("simple-pmu.ko: signature does not verify")
    # A good signature checked against another certificate.
    signing.sign(r.tree, [ko], keys)
    other = signing.create_keypair(tmp_path / "other", "someone else")
    msgs = problems(ko, r.tree, cert=other.cert)
    assert len(msgs) == 1 and "does not verify against" in msgs[0]


def test_default_key_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMPLE_PMU_KEY_DIR", str(tmp_path / "k"))
    pair = signing.default_keypair(dkms_dir=tmp_path / "no-dkms")
    assert pair.key.stat().st_mode & 0o777 == 0o600
    assert not pair.key.is_relative_to(REPO)
    again = signing.default_keypair(dkms_dir=tmp_path / "no-dkms")
    assert again.key == pair.key and again.cert.read_bytes() == pair.cert.read_bytes()
    pair.key.chmod(0o644)
    with pytest.raises(PipelineError, match=r"readable by others .*chmod 600"):
        signing.default_keypair(dkms_dir=tmp_path / "no-dkms")


def test_dkms_mok_key_preferred(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMPLE_PMU_KEY_DIR", str(tmp_path / "own"))
    made = signing.create_keypair(tmp_path / "made", "dkms-like")
    dkms = tmp_path / "dkms"
    dkms.mkdir()
    shutil.copy2(made.key, dkms / "mok.key")
    shutil.copy2(made.cert, dkms / "mok.pub")
    pair = signing.default_keypair(dkms_dir=dkms)
    assert pair.key == dkms / "mok.key" and "DKMS" in pair.origin
    assert not (tmp_path / "own").exists()
