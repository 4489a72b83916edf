#!/usr/bin/env python3
"""Check a built .ko against the kernel that is to load it, before it is installed.

modpost checks a module against the tree it was built in; this checks the artifact against
a target tree (often another one): ELF machine, vermagic, license, every undefined symbol
against the target's Module.symvers (GPL-only and namespaced exports, exports restricted to
named modules), the CRCs in __versions, symbols we never use, and the appended signature
(signer, hash, key id; with a certificate, verified offline with openssl).

Standalone on purpose: python3 and pyelftools only (plus the C preprocessor to expand the
target's vermagic.h, openssl to verify a signature), so
DKMS runs it on a user's machine as the last step of its build command (dkms.conf MAKE[0]):
    /usr/bin/python3 modverify.py --kdir /lib/modules/$(uname -r)/build simple-pmu.ko
"""

import argparse
import io
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

try:
    from .kbuildfiles import (
        Export,
        TreeError,
        read_config,
        read_symvers,
        tree_arch,
        tree_release,
        tree_vermagic,
    )
except ImportError:  # run as a plain script from its directory (dkms.conf MAKE[0])
    from kbuildfiles import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        Export,
        TreeError,
        read_config,
        read_symvers,
        tree_arch,
        tree_release,
        tree_vermagic,
    )

SIG_MAGIC = b"~Module signature appended~\n"
SIG_INFO = struct.Struct(">BBBBB3xI")  # struct module_signature: algo..key_id_len, sig_len
PKEY_ID_PKCS7 = 2
MACHINE_BY_ARCH = {"amd64": "EM_X86_64", "arm64": "EM_AARCH64"}
# license_is_gpl_compatible() in include/linux/license.h.
GPL_COMPATIBLE = ("GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL",
                  "Dual MIT/GPL", "Dual MPL/GPL")
# Symbols simple-pmu never needs: their presence means something went badly wrong (a
# rootkit-style lookup, file or process access from the kernel, patching kernel text).
NEVER_USED = {
    "kallsyms_lookup_name": "looks up unexported kernel symbols",
    "kallsyms_on_each_symbol": "walks unexported kernel symbols",
    "filp_open": "opens files from kernel space",
    "kernel_read": "reads files from kernel space",
    "kernel_write": "writes files from kernel space",
    "call_usermodehelper": "starts user-space programs",
    "text_poke": "patches kernel text",
    "set_memory_rw": "makes kernel memory writable",
    "set_memory_x": "makes kernel memory executable",
    "sys_call_table": "touches the system call table",
}
# Hash algorithms of a PKCS#7 SignerInfo, by DER-encoded OID.
DIGESTS = {
    "2.16.840.1.101.3.4.2.1": "sha256", "2.16.840.1.101.3.4.2.2": "sha384",
    "2.16.840.1.101.3.4.2.3": "sha512", "2.16.840.1.101.3.4.2.4": "sha224",
    "2.16.840.1.101.3.4.2.8": "sha3-256", "2.16.840.1.101.3.4.2.9": "sha3-384",
    "2.16.840.1.101.3.4.2.10": "sha3-512", "1.3.14.3.2.26": "sha1",
}
NAME_ATTRS = {"2.5.4.3": "CN", "2.5.4.10": "O", "2.5.4.11": "OU", "1.2.840.113549.1.9.1": "email"}


class VerifyError(Exception):
    """The module or the tree cannot be read at all (as opposed to a failed check)."""


@dataclass(frozen=True)
class Target:
    path: Path
    arch: str
    release: str
    config: dict[str, str]
    exports: dict[str, Export]

    @property
    def modversions(self) -> bool:
        return self.config.get("CONFIG_MODVERSIONS") == "y"

    @property
    def sig_forced(self) -> bool:
        return self.config.get("CONFIG_MODULE_SIG_FORCE") == "y"


@dataclass(frozen=True)
class Signature:
    signer: str
    key_id: str  # the signing certificate's serial number, as modinfo shows it
    hash: str
    length: int


@dataclass
class Module:
    path: Path
    body: bytes  # the ELF file without its signature
    machine: str
    modinfo: dict[str, list[str]]
    undefined: list[str]
    versions: dict[str, int]
    signature: Signature | None
    sig_blob: bytes = b""

    def info(self, key: str) -> str:
        return ",".join(self.modinfo.get(key, []))

    @property
    def name(self) -> str:
        return self.info("name") or self.path.name.removesuffix(".ko").replace("-", "_")


@dataclass
class Report:
    module: Module
    target: Target
    rows: list[tuple[str, str]] = field(default_factory=list)  # (check, what it found)
    problems: list[str] = field(default_factory=list)
    # The problems above that would not stop the target kernel from loading the module
    # (a policy finding, a taint): DKMS reports them and installs (main(--load-fatal-only)).
    not_load_fatal: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def load_fatal(self) -> list[str]:
        """The problems that make the target kernel refuse the module."""
        return [p for p in self.problems if p not in self.not_load_fatal]

    def add(self, check: str, found: str, problem: str | None = None,
            load_fatal: bool = True) -> None:
        """One table row; a problem marks it and becomes one line of the failure list."""
        mark = "  <-- FAIL" if load_fatal else "  <-- FAIL (the kernel would still load it)"
        self.rows.append((check, found + ("" if problem is None else mark)))
        if problem:
            self.problem(problem, load_fatal)

    def problem(self, text: str, load_fatal: bool = True) -> None:
        self.problems.append(f"{self.module.path.name}: {text}")
        if not load_fatal:
            self.not_load_fatal.append(self.problems[-1])

    def table(self) -> list[str]:
        width = max(len(c) for c, _ in self.rows)
        head = f"{self.module.path} against {self.target.release} ({self.target.path})"
        return [head, *(f"  {c:<{width}}  {v}" for c, v in self.rows)]


def load_target(kdir: Path) -> Target:
    kdir = kdir.expanduser().resolve()
    if not (kdir / ".config").is_file():
        raise VerifyError(f"{kdir}: no .config: not a kernel build tree")
    config = read_config(kdir / ".config")
    arch = tree_arch(config)
    if arch is None:
        raise VerifyError(f"{kdir}/.config: neither CONFIG_X86_64 nor CONFIG_ARM64")
    try:
        return Target(kdir, arch, tree_release(kdir), config, read_symvers(kdir / "Module.symvers"))
    except TreeError as e:
        raise VerifyError(str(e)) from None


def expected_vermagic(t: Target) -> str:
    """VERMAGIC_STRING as the target tree's own include/linux/vermagic.h expands it: the
    rules (which preempt word wins, the arch suffix) differ between releases and flavours."""
    try:
        return tree_vermagic(t.path, t.config, t.arch)
    except TreeError as e:
        raise VerifyError(str(e)) from None


def split_signature(data: bytes) -> tuple[bytes, bytes, Signature | None]:
    """(ELF body, PKCS#7 blob, what the blob says) for an appended module signature."""
    if not data.endswith(SIG_MAGIC):
        return data, b"", None
    end = len(data) - len(SIG_MAGIC) - SIG_INFO.size
    if end < 0:
        raise VerifyError("signature marker present but the file is too short for it")
    algo, hash_, id_type, signer_len, key_id_len, sig_len = SIG_INFO.unpack_from(data, end)
    if id_type != PKEY_ID_PKCS7 or sig_len == 0 or sig_len > end:
        raise VerifyError(f"malformed signature trailer (id_type {id_type}, length {sig_len})")
    blob = data[end - sig_len:end]
    return data[:end - sig_len], blob, parse_pkcs7(blob)


def read_module(path: Path) -> Module:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VerifyError(f"{path}: {e.strerror}") from None
    body, blob, sig = split_signature(data)
    try:
        elf = ELFFile(io.BytesIO(body))
        machine = elf["e_machine"]
        modinfo_sec = elf.get_section_by_name(".modinfo")
        symtab = elf.get_section_by_name(".symtab")
        if (modinfo_sec is None or not isinstance(symtab, SymbolTableSection)
                or elf["e_type"] != "ET_REL"):
            raise VerifyError(f"{path}: not a kernel module (no .modinfo/.symtab or not "
                              "a relocatable object)")
        modinfo: dict[str, list[str]] = {}
        for item in modinfo_sec.data().split(b"\0"):
            if b"=" in item:
                k, v = item.decode(errors="replace").split("=", 1)
                modinfo.setdefault(k, []).append(v)
        undefined = sorted({s.name for s in symtab.iter_symbols()
                            if s.name and s["st_shndx"] == "SHN_UNDEF"})
        versions = _versions(elf)
    except ELFError as e:
        raise VerifyError(f"{path}: not an ELF file: {e}") from None
    return Module(path, body, machine, modinfo, undefined, versions, sig, blob)


def _versions(elf: ELFFile) -> dict[str, int]:
    """Symbol CRCs the module was linked against: __versions entries (an unsigned long
    CRC and a 56-byte name), or the extended tables of 6.14+."""
    result = {}
    sec = elf.get_section_by_name("__versions")
    if sec is not None:
        data = sec.data()
        fmt = ("<" if elf.little_endian else ">") + "Q56s"
        for crc, raw in struct.iter_unpack(fmt, data[:len(data) - len(data) % 64]):
            result[raw.split(b"\0", 1)[0].decode(errors="replace")] = crc & 0xFFFFFFFF
    crcs = elf.get_section_by_name("__version_ext_crcs")
    names = elf.get_section_by_name("__version_ext_names")
    if crcs is not None and names is not None:
        fmt = ("<" if elf.little_endian else ">") + "I"
        values = [c for (c,) in struct.iter_unpack(fmt, crcs.data())]
        for crc, name in zip(values, names.data().split(b"\0"), strict=False):
            result[name.decode(errors="replace")] = crc
    return result


# --- a small DER reader: enough of PKCS#7 SignedData for signer, serial and hash ---------

def _der(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at pos."""
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    if pos + length > len(data):
        raise ValueError("truncated DER element")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    while start < end:
        el = _der(data, start)
        out.append(el)
        start = el[2]
    return out


def _oid(raw: bytes) -> str:
    parts = [raw[0] // 40, raw[0] % 40]
    value = 0
    for b in raw[1:]:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _name(data: bytes, start: int, end: int) -> str:
    fields = []
    for _, s, e in _children(data, start, end):  # SET of AttributeTypeAndValue
        for _, s2, e2 in _children(data, s, e):
            (_, os_, oe), (_, vs, ve) = _children(data, s2, e2)[:2]
            key = _oid(data[os_:oe])
            fields.append(f"{NAME_ATTRS.get(key, key)}={data[vs:ve].decode(errors='replace')}")
    return ", ".join(fields)


def parse_pkcs7(blob: bytes) -> Signature:
    """ContentInfo -> SignedData -> first SignerInfo: issuer, serial, digest algorithm."""
    try:
        _, s, e = _der(blob, 0)
        content = _children(blob, s, e)[1]  # [0] EXPLICIT SignedData
        _, s, e = _der(blob, content[1])
        signed = _children(blob, s, e)
        signer_infos = signed[-1]
        _, s, e = _der(blob, signer_infos[1])  # first SignerInfo
        version, sid, digest = _children(blob, s, e)[:3]
        if sid[0] == 0x30:  # issuerAndSerialNumber
            issuer, serial = _children(blob, sid[1], sid[2])[:2]
            signer = _name(blob, issuer[1], issuer[2])
            key_id = ":".join(f"{b:02X}" for b in blob[serial[1]:serial[2]].lstrip(b"\0"))
        else:  # [0] subjectKeyIdentifier
            signer = "(by subject key identifier)"
            key_id = ":".join(f"{b:02X}" for b in blob[sid[1]:sid[2]])
        oid_el = _children(blob, digest[1], digest[2])[0]
        oid = _oid(blob[oid_el[1]:oid_el[2]])
    except (IndexError, ValueError) as e:
        raise VerifyError(f"signature is not a readable PKCS#7 SignedData: {e}") from None
    return Signature(signer, key_id, DIGESTS.get(oid, oid), len(blob))


def verify_signature(m: Module, cert: Path) -> str | None:
    """None when the signature checks out against cert; else the reason."""
    if not shutil.which("openssl"):
        return "openssl is not installed: cannot verify the signature"
    with tempfile.TemporaryDirectory(prefix="modverify-") as tmp:
        d = Path(tmp)
        (d / "body").write_bytes(m.body)
        (d / "sig").write_bytes(m.sig_blob)
        pem = d / "cert.pem"
        raw = cert.read_bytes()
        form = "PEM" if b"-----BEGIN" in raw else "DER"
        conv = subprocess.run(["openssl", "x509", "-inform", form, "-in", str(cert),
                               "-out", str(pem)], capture_output=True, text=True)
        if conv.returncode != 0:
            return f"{cert}: not an X.509 certificate ({conv.stderr.strip().splitlines()[-1]})"
        proc = subprocess.run(
            ["openssl", "cms", "-verify", "-binary", "-inform", "DER", "-in", str(d / "sig"),
             "-content", str(d / "body"), "-certfile", str(pem), "-CAfile", str(pem),
             "-purpose", "any", "-out", "/dev/null"], capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    detail = lines[-1] if lines else f"openssl exit {proc.returncode}"
    return f"does not verify against {cert}: the module or its signature was altered, or " \
           f"another key signed it ({detail.strip()})"


def check(m: Module, t: Target, *, cert: Path | None = None,
          require_signature: bool | None = None) -> Report:
    """Every check of the module against the target. require_signature None: as the
    target's CONFIG_MODULE_SIG_FORCE says; False: not yet (a build verifies before signing)."""
    r = Report(m, t)
    row = r.add
    want = MACHINE_BY_ARCH[t.arch]
    row("machine", m.machine, None if m.machine == want else
        f"built for {m.machine}, the target kernel is {t.arch} ({want})")

    vermagic = m.info("vermagic")
    expected = expected_vermagic(t)
    mod_release = vermagic.split(" ", 1)[0]
    if vermagic == expected:
        row("vermagic", vermagic)
    elif mod_release != t.release:
        row("vermagic", vermagic, f"vermagic release {mod_release!r}, the target kernel is "
            f"{t.release!r}")
    else:
        row("vermagic", vermagic, f"vermagic {vermagic!r} differs from the target's "
            f"{expected!r} (kernel configuration differs)")

    license_ = m.info("license")
    gpl = license_ in GPL_COMPATIBLE
    # Without a license the kernel loads the module tainted; the GPL-only symbols it would
    # then refuse are load-fatal problems of the symbol check below.
    row("license", license_ or "(none)", None if license_ else
        "no MODULE_LICENSE: the kernel taints and refuses GPL-only symbols", load_fatal=False)

    sym_problems = _check_symbols(m, t, gpl)
    r.problems += sym_problems
    row("symbols", f"{len(m.undefined)} undefined, all checked against the target's "
        "Module.symvers" + (f"; {len(sym_problems)} problem(s)" if sym_problems else ""))

    never = [s for s in m.undefined if s in NEVER_USED]
    for s in never:  # our policy, not the kernel's: it would load such a module
        r.problem(f"uses {s}, which simple-pmu never needs ({NEVER_USED[s]})", load_fatal=False)
    row("policy", "clean" if not never else f"{len(never)} forbidden symbol(s)")

    _check_crcs(r)
    _check_signature(r, cert,
                     t.sig_forced if require_signature is None else require_signature)
    return r


def _check_symbols(m: Module, t: Target, gpl: bool) -> list[str]:
    imports = set(m.modinfo.get("import_ns", []))
    depends = {d.replace("-", "_") for d in m.info("depends").split(",") if d}
    me = m.name.replace("-", "_")
    problems = []
    for sym in m.undefined:
        exp = t.exports.get(sym)
        if exp is None:
            problems.append(f"{sym} is not exported by {t.release}")
            continue
        owner = exp.module.rsplit("/", 1)[-1].replace("-", "_")
        if exp.module != "vmlinux" and owner not in depends:
            problems.append(f"{sym} comes from module {owner}, which is not in depends "
                            f"({','.join(sorted(depends)) or 'empty'})")
        if exp.gpl_only and not gpl:
            problems.append(f"{sym} is EXPORT_SYMBOL_GPL and the module's license "
                            f"{m.info('license')!r} is not GPL-compatible")
        only = exp.only_for
        if only is not None and me not in {o.replace("-", "_") for o in only}:
            problems.append(f"{sym} is exported by {t.release} only to {', '.join(only)}")
        elif only is None and exp.namespace and exp.namespace not in imports:
            problems.append(f"{sym} is in namespace {exp.namespace}, which the module does "
                            "not import (MODULE_IMPORT_NS)")
    return [f"{m.path.name}: {p}" for p in problems]


def _check_crcs(r: Report) -> None:
    m, t, row = r.module, r.target, r.add
    if not t.modversions:
        row("crcs", "target has no CONFIG_MODVERSIONS: not checked")
        return
    if not m.versions:
        row("crcs", "none", "no __versions section, the target kernel has CONFIG_MODVERSIONS "
            "and will refuse it ('no symbol version for module_layout' or similar)")
        return
    bad = []
    for sym, crc in sorted(m.versions.items()):
        exp = t.exports.get(sym)
        if exp is not None and exp.crc != crc:
            bad.append(sym)
            r.problems.append(f"{m.path.name}: CRC of {sym} is {crc:#010x}, the target "
                              f"exports {exp.crc:#010x} (built against another kernel "
                              "build or flavour)")
    row("crcs", f"{len(m.versions)} in __versions, {len(m.versions) - len(bad)} match "
        "the target's" + (f"; {len(bad)} differ" if bad else ""))


def _check_signature(r: Report, cert: Path | None, required: bool) -> None:
    m, row = r.module, r.add
    sig = m.signature
    if sig is None:
        why = "the target kernel enforces signatures (CONFIG_MODULE_SIG_FORCE)" \
            if r.target.sig_forced else "a signature is required"
        note = " (the target enforces signatures: sign it before loading)" \
            if r.target.sig_forced and not required else ""
        row("signature", "none" + note, f"not signed, and {why}" if required else None)
        return
    desc = f"{sig.hash}, signer {sig.signer}, key id {sig.key_id}"
    if cert is None:
        row("signature", desc + " (not verified: no certificate given)",
            "signature cannot be checked without --cert" if required else None)
        return
    problem = verify_signature(m, cert)
    row("signature", desc + (" (verified)" if problem is None else ""),
        None if problem is None else f"signature {problem}")


def verify(kdir: Path, modules: list[Path], *, cert: Path | None = None,
           require_signature: bool | None = None) -> list[Report]:
    target = load_target(kdir)
    return [check(read_module(p), target, cert=cert, require_signature=require_signature)
            for p in modules]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kdir", required=True, type=Path, help="target kernel build tree")
    ap.add_argument("--cert", type=Path, help="X.509 certificate (PEM or DER) to verify "
                    "the signature against")
    # --no-require-signature: for DKMS, which signs after the build this check is part of.
    ap.add_argument("--require-signature", action=argparse.BooleanOptionalAction,
                    default=None, help="an unsigned module is an error (default: when the "
                    "target has MODULE_SIG_FORCE)")
    # For DKMS (dkms.conf MAKE[0]): a failed build there fails dkms autoinstall, which fails
    # the postinst of a kernel or headers package being installed (/etc/kernel/postinst.d,
    # header_postinst.d): refuse only what the kernel would refuse too, report the rest.
    ap.add_argument("--load-fatal-only", action="store_true", help="fail only for problems "
                    "that would make the target kernel refuse the module; print the others "
                    "as warnings")
    ap.add_argument("ko", nargs="+", type=Path, help="module(s) to check")
    args = ap.parse_args(argv)
    if args.cert is not None and not args.cert.is_file():
        print(f"modverify: error: --cert {args.cert}: no such file", file=sys.stderr)
        return 2
    try:
        reports = verify(args.kdir, args.ko, cert=args.cert,
                         require_signature=args.require_signature)
    except VerifyError as e:
        print(f"modverify: error: {e}", file=sys.stderr)
        return 2
    for rep in reports:
        print("\n".join(rep.table()))
    problems = [p for rep in reports for p in rep.problems]
    fatal = [p for rep in reports for p in rep.load_fatal] if args.load_fatal_only else problems
    for p in problems:
        if p in fatal:
            print(f"modverify: {p}", file=sys.stderr)
        else:
            print(f"modverify: warning: {p} (not refused: the kernel would load it)",
                  file=sys.stderr)
    return 1 if fatal else 0


if __name__ == "__main__":
    sys.exit(main())
