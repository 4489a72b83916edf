"""Sign modules with the target tree's scripts/sign-file, and keep the signing key.

Default key: DKMS's MOK key when this machine has one (/var/lib/dkms/mok.key, mok.pub), so
one enrolled key covers DKMS builds and ours; otherwise a key pair made once under
$XDG_DATA_HOME/simple-pmu/signing (private key mode 0600, never in the repository, never
packaged). Enrolling its certificate with mokutil makes a Secure Boot machine trust it.
"""

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say
from pmubuild.kbuild.modverify import VerifyError, split_signature
from pmubuild.modbuild import build
from pmubuild.trees import chroot, toolchain
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.kdir import KernelTree

DKMS_MOK_DIR = Path("/var/lib/dkms")
KEY_NAME = "simple-pmu-signing.key"
CERT_NAME = "simple-pmu-signing.der"


@dataclass(frozen=True)
class KeyPair:
    key: Path  # PEM private key
    cert: Path  # X.509 certificate, DER (what mokutil --import wants) or PEM
    origin: str


def key_dir() -> Path:
    env = os.environ.get("SIMPLE_PMU_KEY_DIR")
    if env:
        return Path(env)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "simple-pmu" / "signing"


def check_private_key(key: Path) -> None:
    try:
        mode = key.stat().st_mode
    except OSError as e:
        raise PipelineError(f"signing key {key}: {e.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PipelineError(f"signing key {key} is readable by others (mode "
                            f"{stat.S_IMODE(mode):04o}); chmod 600 {key}")


def create_keypair(directory: Path, common_name: str) -> KeyPair:
    """A self-signed RSA-2048 code-signing certificate, as the kernel's x509.genkey makes."""
    if not shutil.which("openssl"):
        raise PipelineError("openssl is not installed: cannot create a signing key")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key, cert = directory / KEY_NAME, directory / CERT_NAME
    with tempfile.TemporaryDirectory(dir=directory, prefix=".new-") as tmp:
        tkey, tcert = Path(tmp) / KEY_NAME, Path(tmp) / CERT_NAME
        old = os.umask(0o077)
        try:
            proc = subprocess.run(
                ["openssl", "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes", "-utf8",
                 "-sha256", "-days", "36500", "-batch", "-subj", f"/CN={common_name}/",
                 "-addext", "basicConstraints=critical,CA:FALSE",
                 "-addext", "keyUsage=digitalSignature",
                 "-addext", "extendedKeyUsage=codeSigning",
                 "-keyout", str(tkey), "-outform", "DER", "-out", str(tcert)],
                capture_output=True, text=True)
        finally:
            os.umask(old)
        if proc.returncode != 0:
            raise PipelineError(f"openssl req failed: {proc.stderr.strip()}")
        tkey.chmod(0o600)
        tcert.rename(cert)
        tkey.rename(key)  # last: a key without its certificate is never left behind
    return KeyPair(key, cert, f"created in {directory}")


def default_keypair(dkms_dir: Path = DKMS_MOK_DIR, own_dir: Path | None = None) -> KeyPair:
    dkms_key, dkms_cert = dkms_dir / "mok.key", dkms_dir / "mok.pub"
    if dkms_key.is_file() and dkms_cert.is_file():
        check_private_key(dkms_key)
        return KeyPair(dkms_key, dkms_cert, "DKMS's MOK key")
    directory = own_dir or key_dir()
    key, cert = directory / KEY_NAME, directory / CERT_NAME
    if key.is_file() and cert.is_file():
        check_private_key(key)
        return KeyPair(key, cert, f"simple-pmu's key in {directory}")
    pair = create_keypair(directory, "simple-pmu module signing key")
    say(f"created a module signing key: {pair.key} (private, mode 0600) and {pair.cert}; "
        f"enroll it for Secure Boot with: mokutil --import {pair.cert}")
    return pair


def given_keypair(key: str, cert: str) -> KeyPair:
    if bool(key) != bool(cert):
        raise PipelineError("give both --key and --cert, or neither (default key)")
    k, c = Path(key).expanduser().resolve(), Path(cert).expanduser().resolve()
    for p, what in ((k, "--key"), (c, "--cert")):
        if not p.is_file():
            raise PipelineError(f"{what} {p}: no such file")
    check_private_key(k)
    return KeyPair(k, c, "given")


def sign_file_tool(tree: KernelTree) -> Path:
    tool = tree.path / "scripts" / "sign-file"
    if not tool.exists():
        raise PipelineError(f"{tool} is missing: the tree cannot sign modules (Debian: it "
                            "comes with linux-kbuild-X; in a full tree run 'make "
                            "modules_prepare' with CONFIG_MODULE_SIG=y)")
    return tool.resolve()


def sign(tree: KernelTree, modules: list[Path], pair: KeyPair,
         apt_factory: Callable[[], PrivateApt] = PrivateApt) -> None:
    """Sign each module in place (an old signature is replaced, not stacked)."""
    tool = sign_file_tool(tree)
    algo = tree.config.get("CONFIG_MODULE_SIG_HASH") or "sha256"
    apt_factory = functools.cache(apt_factory)  # one index parse for all modules
    tc = build.choose_toolchain(tree, apt_factory)
    for ko in modules:
        try:
            body, _, _ = split_signature(ko.read_bytes())
        except (OSError, VerifyError) as e:
            raise PipelineError(f"{ko}: {e}") from None
        # Signed as a copy, then renamed over the module: another process packing it
        # into a guest meanwhile (test-package's boot beside test-qemu) sees the old
        # signed module or the new one, never one being rewritten.
        part = ko.with_name(ko.name + ".signing")
        part.write_bytes(body)
        argv = [str(tool), algo, str(pair.key), str(pair.cert), str(part)]
        if tc.chroot_suite:
            # The tool links the suite's libcrypto and glibc, like the other kbuild tools.
            apt = apt_factory()
            apt.update()
            root = chroot.ensure(apt, tc.chroot_suite, tree.cc_major,
                                 toolchain.host_info().arch)
            binds = sorted({*toolchain.tree_paths(tree), tool.parent.parent,
                            pair.key.parent, pair.cert.parent, ko.parent})
            proc = chroot.run(root, binds, argv, ko.parent)
        else:
            proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            part.unlink(missing_ok=True)
            raise PipelineError(f"sign-file failed for {ko}: {(proc.stdout + proc.stderr).strip()}")
        os.replace(part, ko)
