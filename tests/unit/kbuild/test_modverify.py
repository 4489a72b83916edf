"""modverify's parts that need no real kernel tree: vermagic from a hand-made tree's own
vermagic.h, the signature trailer and its PKCS#7, the command line, and that it runs
standalone (DKMS POST_BUILD)."""

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pmubuild.kbuild import modverify
from pmubuild.kbuild.kbuildfiles import Export, read_symvers
from pmubuild.modbuild import signing

from .kdir_fixtures import make_debian_tree
from .test_compat import imported_names

MODVERIFY_PY = Path(modverify.__file__)


BASE = {"CONFIG_SMP": "y", "CONFIG_MODULE_UNLOAD": "y"}
ARCH_CONFIG = {"arm64": "CONFIG_ARM64", "amd64": "CONFIG_X86_64"}


def target(root: Path, arch: str, header: str = "6.1", **config: str) -> modverify.Target:
    """A Debian-like split tree with that config, loaded as modverify loads a --kdir."""
    kdir = make_debian_tree(root, {**BASE, ARCH_CONFIG[arch]: "y", **config},
                            release="6.1.0-9-x", header=header)
    return modverify.load_target(kdir)


RT = {"CONFIG_PREEMPT_RT": "y", "CONFIG_PREEMPT_BUILD": "y"}


@pytest.mark.parametrize(("arch", "header", "config", "want"), [
    ("amd64", "6.1", {"CONFIG_PREEMPT_BUILD": "y", "CONFIG_MODVERSIONS": "y"},
     "6.1.0-9-x SMP preempt mod_unload modversions "),
    ("arm64", "6.1", {"CONFIG_MODVERSIONS": "y"}, "6.1.0-9-x SMP mod_unload modversions aarch64"),
    ("arm64", "6.1", {"CONFIG_PREEMPT_BUILD": "y"}, "6.1.0-9-x SMP preempt mod_unload aarch64"),
    # An RT kernel whose vermagic.h tests PREEMPT_BUILD first (6.1) says "preempt": the old
    # rule copied from a newer header expected "preempt_rt" and refused a loadable module.
    ("amd64", "6.1", RT, "6.1.0-9-x SMP preempt mod_unload "),
    ("arm64", "6.1", RT, "6.1.0-9-x SMP preempt mod_unload aarch64"),
    ("amd64", "6.12", RT, "6.1.0-9-x SMP preempt_rt mod_unload "),
    ("arm64", "7.2", RT, "6.1.0-9-x SMP preempt_rt mod_unload aarch64"),
    ("amd64", "6.1", {"CONFIG_SMP": "n", "CONFIG_MODULE_UNLOAD": "n"}, "6.1.0-9-x "),
])
def test_expected_vermagic_from_the_trees_header(tmp_path, arch, header, config, want):
    assert modverify.expected_vermagic(target(tmp_path, arch, header, **config)) == want


def test_arch_header_decides_proc_family(tmp_path):
    """x86's asm/vermagic.h: an x86_64 kernel has no MODULE_PROC_FAMILY whatever its CPU
    choice (the old rule appended "CORE2 " for CONFIG_MCORE2)."""
    t = target(tmp_path, "amd64", CONFIG_MCORE2="y")
    assert modverify.expected_vermagic(t) == "6.1.0-9-x SMP mod_unload "


def test_tree_without_vermagic_h(tmp_path):
    kdir = make_debian_tree(tmp_path, {**BASE, "CONFIG_X86_64": "y"}, release="6.1.0-9-x",
                            skip=("linux-headers-common/include/linux/vermagic.h",))
    with pytest.raises(modverify.VerifyError,
                       match=r"no include/linux/vermagic.h in .*6.1.0-9-x, .*linux-headers-common"):
        modverify.expected_vermagic(modverify.load_target(kdir))


def test_header_error_is_reported(tmp_path):
    """The arch header's own #error (an x86 config with no CPU family) reaches the user."""
    kdir = make_debian_tree(tmp_path, {**BASE, "CONFIG_X86_32": "y"}, release="6.1.0-9-x")
    (kdir / ".config").write_text("CONFIG_X86_64=y\n")  # load_target wants a known arch
    with pytest.raises(modverify.VerifyError,
                       match=r"could not expand VERMAGIC_STRING .*unknown processor family"):
        modverify.expected_vermagic(modverify.load_target(kdir))


def test_arch_predefines_are_the_targets(tmp_path):
    """The fixture arch headers #error unless they see their own compiler's predefine and
    not the host's: an arm64 tree expanded by this host's cpp gets __aarch64__ only."""
    arm = target(tmp_path / "arm", "arm64")
    x86 = target(tmp_path / "x86", "amd64")
    assert modverify.expected_vermagic(arm).endswith("aarch64")
    assert modverify.expected_vermagic(x86) == "6.1.0-9-x SMP mod_unload "


@pytest.mark.parametrize("header", ["6.1", "7.2"])
def test_randstruct_without_hash_is_an_error(tmp_path, header):
    t = target(tmp_path, "amd64", header, CONFIG_RANDSTRUCT="y")
    with pytest.raises(modverify.VerifyError, match="randstruct_hash.h"):
        modverify.expected_vermagic(t)


@pytest.mark.parametrize("header", ["6.1", "7.2"])
def test_randstruct_hash_from_the_tree(tmp_path, header):
    """6.1's vermagic.h includes the hash header itself; 7.x's only uses the macro, which
    kbuild's forced -include of compiler-version.h defines."""
    t = target(tmp_path, "amd64", header, CONFIG_RANDSTRUCT="y")
    seed = "ab" * 32
    (t.path / "include/generated/randstruct_hash.h").write_text(
        f'#define RANDSTRUCT_HASHED_SEED "{seed}"\n')
    assert modverify.expected_vermagic(t) == f"6.1.0-9-x SMP mod_unload RANDSTRUCT_{seed}"


def test_undefined_macro_left_over(tmp_path):
    t = target(tmp_path, "arm64")
    common = tmp_path / "linux-headers-common"
    (common / "arch/arm64/include/asm/vermagic.h").write_text("\n")
    with pytest.raises(modverify.VerifyError, match="'MODULE_ARCH_VERMAGIC' is left undefined"):
        modverify.expected_vermagic(t)


def test_no_preprocessor(tmp_path, monkeypatch):
    t = target(tmp_path, "amd64")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(modverify.VerifyError,
                       match=r"no C preprocessor \(gcc, cc, cpp, clang\)"):
        modverify.expected_vermagic(t)


def test_the_kernels_own_compiler_preprocesses(tmp_path, monkeypatch):
    """Debian's sid headers name gcc-16, and a DKMS machine without Recommends has no plain
    gcc: the compiler the tree names is tried first, and named when absent."""
    t = target(tmp_path, "amd64", CONFIG_CC_VERSION_TEXT='"gcc-99 (Debian 99.1-1) 99.1"')
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    with pytest.raises(modverify.VerifyError, match=r"no C preprocessor \(gcc-99, gcc, cc,"):
        modverify.expected_vermagic(t)
    real = shutil.which("gcc", path="/usr/bin:/bin")
    assert real
    (bindir / "gcc-99").symlink_to(real)
    assert modverify.expected_vermagic(t) == "6.1.0-9-x SMP mod_unload "


def test_unsigned_file_is_all_body():
    assert modverify.split_signature(b"\x7fELF....") == (b"\x7fELF....", b"", None)


def test_truncated_trailer():
    with pytest.raises(modverify.VerifyError, match="too short"):
        modverify.split_signature(b"x" + modverify.SIG_MAGIC)


def test_bad_trailer_length():
    info = modverify.SIG_INFO.pack(0, 0, modverify.PKEY_ID_PKCS7, 0, 0, 10_000)
    with pytest.raises(modverify.VerifyError, match="malformed signature trailer"):
        modverify.split_signature(b"body" + info + modverify.SIG_MAGIC)


def test_garbage_pkcs7():
    blob = b"\x30\x03\x02\x01\x01"
    info = modverify.SIG_INFO.pack(0, 0, modverify.PKEY_ID_PKCS7, 0, 0, len(blob))
    with pytest.raises(modverify.VerifyError, match="not a readable PKCS#7"):
        modverify.split_signature(b"body" + blob + info + modverify.SIG_MAGIC)


@pytest.mark.parametrize("md", ["sha256", "sha512"])
def test_pkcs7_from_openssl(tmp_path, md):
    """A detached signature made the way sign-file makes one: no certs, no attributes."""
    pair = signing.create_keypair(tmp_path / "k", "unit test signer")
    body = tmp_path / "body"
    body.write_bytes(b"\x7fELF pretend module" * 50)
    sig = tmp_path / "sig"
    subprocess.run(["openssl", "cms", "-sign", "-binary", "-noattr", "-nocerts", "-md", md,
                    "-in", str(body), "-signer", str(pair.cert), "-keyform", "PEM",
                    "-inkey", str(pair.key), "-outform", "DER", "-out", str(sig),
                    "-certfile", str(pair.cert)], check=True, capture_output=True)
    blob = sig.read_bytes()
    parsed = modverify.parse_pkcs7(blob)
    serial = subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(pair.cert),
                             "-noout", "-serial"], capture_output=True, text=True,
                            check=True).stdout.strip().split("=")[1]
    assert parsed.hash == md and parsed.signer == "CN=unit test signer"
    assert parsed.key_id.replace(":", "") == serial
    data = body.read_bytes() + blob + modverify.SIG_INFO.pack(
        0, 0, modverify.PKEY_ID_PKCS7, 0, 0, len(blob)) + modverify.SIG_MAGIC
    got_body, got_blob, got_sig = modverify.split_signature(data)
    assert got_body == body.read_bytes() and got_blob == blob and got_sig == parsed


def test_symvers_namespace_and_restriction(tmp_path):
    p = tmp_path / "Module.symvers"
    p.write_text("0x1\ta\tvmlinux\tEXPORT_SYMBOL\t\n"
                 "0x2\tb\tdrivers/x/y\tEXPORT_SYMBOL_GPL\tFOO\n"
                 "0x0\tc\tvmlinux\tEXPORT_SYMBOL_GPL\tmodule:kvm,kvm-intel\n")
    ex = read_symvers(p)
    assert ex["a"].crc == 1 and not ex["a"].gpl_only and ex["a"].only_for is None
    assert ex["b"].namespace == "FOO" and ex["b"].gpl_only and ex["b"].module == "drivers/x/y"
    assert ex["c"].only_for == ("kvm", "kvm-intel")


def test_imports_only_stdlib_pyelftools_and_sibling():
    assert imported_names(MODVERIFY_PY) == {"elftools", "kbuildfiles"}


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(MODVERIFY_PY), *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=60)


def test_cli_errors(tmp_path):
    usage = run_script(cwd=tmp_path)
    assert usage.returncode == 2 and "--kdir" in usage.stderr
    nodir = run_script("--kdir", str(tmp_path / "none"), "x.ko", cwd=tmp_path)
    assert nodir.returncode == 2 and nodir.stderr.startswith("modverify: error:")
    assert "no .config" in nodir.stderr and "Traceback" not in nodir.stderr
    nocert = run_script("--kdir", str(tmp_path), "--cert", "nope.pem", "x.ko", cwd=tmp_path)
    assert nocert.returncode == 2 and "--cert nope.pem: no such file" in nocert.stderr


def test_not_a_module(tmp_path):
    (tmp_path / ".config").write_text("CONFIG_X86_64=y\n")
    (tmp_path / "include" / "config").mkdir(parents=True)
    (tmp_path / "include" / "config" / "kernel.release").write_text("6.1.0-9-amd64\n")
    (tmp_path / "Module.symvers").write_text("")
    (tmp_path / "x.ko").write_bytes(b"not elf")
    proc = run_script("--kdir", str(tmp_path), "x.ko", cwd=tmp_path)
    assert proc.returncode == 2 and "x.ko: not an ELF file" in proc.stderr
    assert struct.calcsize(">BBBBB3xI") == 12  # struct module_signature


def synthetic(undefined: list[str], **modinfo: str) -> modverify.Module:
    info = {"vermagic": ["6.1.0-9-x SMP mod_unload "], "license": ["GPL"], "name": ["m"]}
    info.update({k: [v] for k, v in modinfo.items()})
    return modverify.Module(Path("m.ko"), b"", "EM_X86_64", info, undefined, {}, None)


def exporting(root: Path, *lines: str) -> modverify.Target:
    t = target(root, "amd64")
    exports = {}
    for line in lines:
        crc, sym, mod, kind, ns = line.split("\t")
        exports[sym] = Export(int(crc, 16), sym, mod, kind, ns)
    return modverify.Target(t.path, t.arch, t.release, t.config, exports)


def test_symbol_from_a_module_needs_depends(tmp_path):
    t = exporting(tmp_path, "0x1\tarmv8_pmu_x\tdrivers/perf/arm_pmu\tEXPORT_SYMBOL_GPL\t")
    assert modverify.check(synthetic(["armv8_pmu_x"], depends="arm_pmu"), t).ok
    r = modverify.check(synthetic(["armv8_pmu_x"], depends=""), t)
    assert r.problems == ["m.ko: armv8_pmu_x comes from module arm_pmu, which is not in "
                          "depends (empty)"]


def test_namespaced_export_needs_import(tmp_path):
    t = exporting(tmp_path, "0x1\tns_sym\tvmlinux\tEXPORT_SYMBOL_GPL\tCRYPTO_INTERNAL")
    assert modverify.check(synthetic(["ns_sym"], import_ns="CRYPTO_INTERNAL"), t).ok
    r = modverify.check(synthetic(["ns_sym"]), t)
    assert r.problems == ["m.ko: ns_sym is in namespace CRYPTO_INTERNAL, which the module "
                          "does not import (MODULE_IMPORT_NS)"]


def test_export_for_named_modules_only(tmp_path):
    t = exporting(tmp_path, "0x0\tkvm_only\tvmlinux\tEXPORT_SYMBOL_GPL\tmodule:kvm,kvm-intel")
    assert modverify.check(synthetic(["kvm_only"], name="kvm_intel"), t).ok
    r = modverify.check(synthetic(["kvm_only"]), t)
    assert r.problems == ["m.ko: kvm_only is exported by 6.1.0-9-x only to kvm, kvm-intel"]


def fake_module(tmp_path: Path, vermagic: str) -> Path:
    """A relocatable object with a .modinfo: enough of a .ko for modverify's reader."""
    src = tmp_path / "m.c"
    src.write_text('static const char modinfo[] __attribute__((used, section(".modinfo"))) = '
                   f'"vermagic={vermagic}\\0license=GPL\\0name=m";\n')
    ko = tmp_path / "m.ko"
    subprocess.run(["gcc", "-c", "-o", str(ko), str(src)], check=True)
    return ko


@pytest.mark.parametrize(("header", "ok"), [("6.1", True), ("6.12", False)])
def test_script_on_rt_tree(tmp_path, header, ok):
    """The standalone script, as DKMS runs it, on an RT tree whose 6.1-style vermagic.h says
    "preempt": accepted; the same module against a 6.12-style header (preempt_rt) refused."""
    kdir = make_debian_tree(tmp_path / "t", {**BASE, "CONFIG_X86_64": "y", **RT},
                            release="6.1.0-9-rt-amd64", header=header)
    ko = fake_module(tmp_path, "6.1.0-9-rt-amd64 SMP preempt mod_unload ")
    proc = run_script("--kdir", str(kdir), str(ko), cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    else:
        assert proc.returncode == 1
        assert ("m.ko: vermagic '6.1.0-9-rt-amd64 SMP preempt mod_unload ' differs from the "
                "target's '6.1.0-9-rt-amd64 SMP preempt_rt mod_unload ' (kernel configuration "
                "differs)") in proc.stderr


def test_policy_and_license_findings_are_not_load_fatal(tmp_path):
    """What the kernel would still load (our policy's forbidden symbols, a missing license)
    is a problem, but not a load-fatal one; an unexported symbol is both."""
    t = exporting(tmp_path, "0x1\tfilp_open\tvmlinux\tEXPORT_SYMBOL\t")
    r = modverify.check(synthetic(["filp_open"]), t)
    assert r.problems == ["m.ko: uses filp_open, which simple-pmu never needs (opens files "
                          "from kernel space)"]
    assert r.load_fatal == [] and not r.ok
    r = modverify.check(synthetic(["filp_open", "nowhere"], license=""), t)
    assert r.load_fatal == ["m.ko: nowhere is not exported by 6.1.0-9-x"]
    assert len(r.problems) == 3


def unlicensed_module(tmp_path: Path, vermagic: str) -> Path:
    src = tmp_path / "m.c"
    src.write_text('static const char modinfo[] __attribute__((used, section(".modinfo"))) = '
                   f'"vermagic={vermagic}\\0name=m";\n')
    ko = tmp_path / "m.ko"
    subprocess.run(["gcc", "-c", "-o", str(ko), str(src)], check=True)
    return ko


@pytest.mark.parametrize("flag", [[], ["--load-fatal-only"]])
def test_script_load_fatal_only(tmp_path, flag):
    """As DKMS runs it (--load-fatal-only): a module the kernel would load (no license:
    tainted) passes with a warning; strict (invoke build) it fails. A vermagic the kernel
    refuses fails both ways."""
    kdir = make_debian_tree(tmp_path / "t", {**BASE, "CONFIG_X86_64": "y", **RT},
                            release="6.1.0-9-rt-amd64", header="6.1")
    ko = unlicensed_module(tmp_path, "6.1.0-9-rt-amd64 SMP preempt mod_unload ")
    proc = run_script("--kdir", str(kdir), *flag, str(ko), cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    if flag:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert ("modverify: warning: m.ko: no MODULE_LICENSE: the kernel taints and refuses "
                "GPL-only symbols (not refused: the kernel would load it)") in proc.stderr
    else:
        assert proc.returncode == 1
        assert "modverify: m.ko: no MODULE_LICENSE" in proc.stderr
    ko = unlicensed_module(tmp_path, "6.1.0-9-rt-amd64 SMP mod_unload ")
    proc = run_script("--kdir", str(kdir), *flag, str(ko), cwd=tmp_path)
    assert proc.returncode == 1
    assert "modverify: m.ko: vermagic '6.1.0-9-rt-amd64 SMP mod_unload ' differs" in proc.stderr
