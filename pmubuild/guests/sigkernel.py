"""A small kernel that enforces module signatures and trusts one test certificate.

Debian's kernels enforce signatures only under Secure Boot, and trust Debian's key and the
machine's MOK list, neither of which a QEMU test can hold. So we build Debian's
linux-source (pmubuild.guests.selfkernel) with tinyconfig plus what a test guest and our module
need, CONFIG_MODULE_SIG_FORCE, and a test certificate in CONFIG_SYSTEM_TRUSTED_KEYS.
Cached by content: source version, arch, fragment, certificate.
"""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pmubuild.guests import selfkernel
from pmubuild.modbuild import signing
from pmubuild.trees import cache
from pmubuild.trees.apt import PrivateApt

SIGNING = ("MODULE_SIG", "MODULE_SIG_FORCE", "MODULE_SIG_ALL", "MODULE_SIG_SHA256",
           "SYSTEM_TRUSTED_KEYRING")


@dataclass(frozen=True)
class SigKernel(selfkernel.SelfKernel):
    keys: signing.KeyPair  # the pair whose certificate the kernel trusts


def test_keypair() -> signing.KeyPair:
    """The test key, made once in the cache: it exists to sign test modules only."""
    directory = cache.subdir("sigkernel") / "testkey"
    key, cert = directory / signing.KEY_NAME, directory / signing.CERT_NAME
    with cache.locked("sigkernel"):
        if not (key.is_file() and cert.is_file()):
            signing.create_keypair(directory, "simple-pmu TEST key (tests only)")
    return signing.KeyPair(key, cert, "test key")


def fragment(arch: str, cert_pem: Path) -> str:
    # The signing options right after MODULE_UNLOAD: the text is part of the cache key.
    at = selfkernel.GUEST_ALL.index("MODULE_UNLOAD") + 1
    options = (*selfkernel.GUEST_ALL[:at], *SIGNING, *selfkernel.GUEST_ALL[at:],
               *selfkernel.GUEST_ARCH[arch])
    lines = selfkernel.config_lines(options, {"SYSTEM_TRUSTED_KEYS": f'"{cert_pem}"'})
    return "\n".join(lines) + "\n"


def ensure(apt: PrivateApt, arch: str) -> SigKernel:
    keys = test_keypair()
    cert_pem = keys.cert.with_suffix(".pem")
    if not cert_pem.exists():
        subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(keys.cert),
                        "-out", str(cert_pem)], check=True, capture_output=True)
    recipe = selfkernel.Recipe("sigkernel", "a kernel that enforces module signatures",
                               fragment(arch, cert_pem), 1500, "3-4",
                               digest_extra=cert_pem.read_text())
    k = selfkernel.ensure(apt, arch, recipe)
    return SigKernel(arch, k.release, k.kdir, k.image, keys)
