"""A kernel that enforces module signatures (CONFIG_MODULE_SIG_FORCE, the test certificate
in CONFIG_SYSTEM_TRUSTED_KEYS) loads our signed module and refuses an unsigned one, a
tampered one and one signed by a key it does not trust; modverify agrees offline."""

import io
import re
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from pmubuild.guests import guest, qemu, sigkernel
from pmubuild.kbuild import modverify
from pmubuild.modbuild import build, signing
from pmubuild.trees import kdir
from pmubuild.trees.apt import PrivateApt

pytestmark = [pytest.mark.kernels, pytest.mark.qemu]

GUEST_SCRIPT = """\
echo "sig_enforce=$(cat /sys/module/module/parameters/sig_enforce)"
for m in plain signed unsigned tampered otherkey; do
    echo "== $m"
    dmesg -c >/dev/null
    if [ $m = plain ]; then
        insmod /work/mods/signed/simple-pmu.ko $plain 2>&1
    else
        insmod /work/mods/$m/simple-pmu.ko $args 2>&1
    fi
    echo "rc=$?"
    dmesg | grep -E 'simple-pmu|odule' | sed 's/^\\[[ 0-9.]*\\] //'
    if [ -d /sys/devices/system/simple-pmu/simple-pmu0 ]; then
        echo "loaded"
        rmmod simple-pmu
    fi
done
"""


def flip_byte_in_body(ko: Path) -> None:
    """Tamper with one byte of the module's code (.text): the module stays well formed, so
    the signature is the one thing wrong with it (a byte of a symbol name would also
    make an unknown symbol)."""
    body, blob, _ = modverify.split_signature(ko.read_bytes())
    data = bytearray(body)
    text = ELFFile(io.BytesIO(body)).get_section_by_name(".text")
    assert text is not None and text["sh_size"] > 0
    data[text["sh_offset"] + text["sh_size"] // 2] ^= 0x40
    ko.write_bytes(bytes(data) + ko.read_bytes()[len(body):])
    assert blob and modverify.split_signature(ko.read_bytes())[1] == blob


def sections(output: str) -> dict[str, str]:
    parts = re.split(r"^== (\w+)$", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("arch", ["arm64", "amd64"])
def test_enforcing_kernel(arch, tmp_path):
    apt = PrivateApt()
    k = sigkernel.ensure(apt, arch)
    ko = build.build(k.kdir).ko
    # The build output may carry an earlier `invoke sign`'s signature: start from the body.
    body = modverify.split_signature(ko.read_bytes())[0]
    mods = tmp_path / "mods"
    for name in ("signed", "unsigned", "tampered", "otherkey"):
        (mods / name).mkdir(parents=True)
        (mods / name / "simple-pmu.ko").write_bytes(body)
    signing.sign(kdir.inspect(k.kdir), [mods / "signed" / "simple-pmu.ko",
                                         mods / "tampered" / "simple-pmu.ko"], k.keys)
    flip_byte_in_body(mods / "tampered" / "simple-pmu.ko")
    other = signing.create_keypair(tmp_path / "other", "a key the kernel does not trust")
    signing.sign(kdir.inspect(k.kdir), [mods / "otherkey" / "simple-pmu.ko"], other)

    # Offline, modverify reaches the kernel's verdicts.
    target = modverify.load_target(k.kdir)
    verdict = {n: modverify.check(modverify.read_module(mods / n / "simple-pmu.ko"), target,
                                  cert=k.keys.cert).problems for n in
               ("signed", "unsigned", "tampered", "otherkey")}
    assert verdict["signed"] == []
    assert verdict["unsigned"] == ["simple-pmu.ko: not signed, and the target kernel enforces "
                                   "signatures (CONFIG_MODULE_SIG_FORCE)"]
    for n in ("tampered", "otherkey"):
        assert len(verdict[n]) == 1 and "signature does not verify" in verdict[n][0]

    # Without -icount QEMU implements no INST_RETIRED (PMCEID0 bit 8 clear) and the driver
    # refuses its default events; this test is about signatures, so count CPU_CYCLES only.
    # This tinyconfig kernel has no KVM, hence no preempt notifiers: the arm64 module
    # cannot let threads in one by one and refuses unless everyone=1 ("plain" shows it).
    plain = "events=0x11" if arch == "arm64" else ""
    args = "events=0x11 everyone=1" if arch == "arm64" else ""
    command = f"plain='{plain}'\nargs='{args}'\n{GUEST_SCRIPT}"
    spec = guest.GuestSpec(arch, k.release, None, mode="cmd", command=command, add=[mods])
    initrd = guest.initramfs(spec, apt, tmp_path / "initrd.gz")
    run = qemu.boot(arch, k.image, initrd, "cmd", timeout=180, icount=False)
    assert run.problem() is None, run.problem()
    out = run.command_output
    assert "sig_enforce=Y" in out, out
    s = sections(out)
    rejected = "Key was rejected by service"
    if arch == "arm64":  # QEMU's virt CPU has a PMU: the signed module loads and works
        assert "rc=0" in s["signed"] and "loaded" in s["signed"], out
        assert "rc=0" not in s["plain"] and "loaded" not in s["plain"], out
        assert "simple-pmu: this kernel has no preempt notifiers" in s["plain"], out
    else:  # x86 TCG has no perfmon: the signed module is let in, and its init refuses
        for m in ("plain", "signed"):
            assert "No such device" in s[m] and "simple-pmu: " in s[m], out
    assert rejected not in s["signed"], out
    assert rejected in s["unsigned"] and "Loading of unsigned module is rejected" in \
        s["unsigned"], out
    assert rejected in s["tampered"] and "loaded" not in s["tampered"], out
    assert rejected in s["otherkey"] and \
        "Loading of module with unavailable key is rejected" in s["otherkey"], out
