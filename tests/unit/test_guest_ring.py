"""tests/guest/arm64/33-ring-and-identity.sh's ring=2 judgement on the host, against a fake
pmuwin: QEMU's other vCPU only ever adds to a window, so a disturbed plain window must not
make a getppid() look shorter than its two instructions (the old rule judged each pair's
difference and failed at once), while a syscall that really adds more or fewer fails."""

from pathlib import Path

from tests.unit.test_guest_scripts import GUEST, fake, run_script_text, stage

SCRIPT = (GUEST / "arm64" / "33-ring-and-identity.sh").read_text()
# The ring=2 part: up to the generation check of the ring=3 write.
RING2 = SCRIPT[:SCRIPT.index("gens() {")]


def pairs(*rows: tuple[int, int]) -> str:
    return "".join(f"plain={p} syscall={s}\n" for p, s in rows)


CLEAN = pairs(*[(2010, 2012)] * 5)


def ring2(tmp: Path, *batches: str):
    """Run the ring=2 part; pmuwin prints the given batches in turn (the last again)."""
    bindir = stage(tmp)
    for i, b in enumerate(batches, 1):
        (tmp / f"batch{i}").write_text(b)
    fake(bindir, "pmuwin",
         f'n=$(cat {tmp}/calls 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {tmp}/calls\n'
         f'[ -f {tmp}/batch$n ] || n={len(batches)}\n'
         f'[ "$1 $2 $3" = "syscall 1 5" ] || exit 9\ncat {tmp}/batch$n\n')
    return run_script_text(tmp, RING2)


def test_clean_batch_passes(tmp_path):
    r = ring2(tmp_path, CLEAN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "plain 2010, syscall 2012 (+2; try 1)" in r.stdout


def test_a_disturbed_plain_window_is_not_a_short_syscall(tmp_path):
    """One plain window +3400 (an interrupt the other vCPU took): the pair's difference
    is -3388, yet the least plain and syscall counts hold in 4 of 5: +2, first try."""
    r = ring2(tmp_path, pairs((5410, 2012), *[(2010, 2012)] * 4))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(+2; try 1)" in r.stdout


def test_a_batch_without_a_majority_is_measured_again(tmp_path):
    noisy = pairs((2010, 2012), (2026, 2028), (2026, 2040), (2011, 2013), (2050, 2012))
    r = ring2(tmp_path, noisy, CLEAN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "try 1 disturbed" in r.stderr and "(+2; try 2)" in r.stdout


def test_never_a_majority_fails(tmp_path):
    noisy = pairs((2010, 2012), (2026, 2028), (2026, 2040), (2011, 2013), (2050, 2012))
    r = ring2(tmp_path, noisy)
    assert r.returncode == 1
    assert "no batch whose least plain and syscall counts each held in 3 of 5" in r.stdout


def test_a_syscall_adding_more_than_its_two_instructions_fails(tmp_path):
    r = ring2(tmp_path, pairs(*[(2010, 2013)] * 5))
    assert r.returncode == 1
    assert "added 3 instructions (plain 2010, syscall 2013)" in r.stdout


def test_a_syscall_adding_fewer_fails(tmp_path):
    r = ring2(tmp_path, pairs(*[(2010, 2011)] * 5))
    assert r.returncode == 1 and "added 1 instructions" in r.stdout


def test_missing_pairs_fail(tmp_path):
    r = ring2(tmp_path, pairs(*[(2010, 2012)] * 4))
    assert r.returncode == 1 and "printed not 5 pairs" in r.stdout
