"""tests/guest/arm64/33-ring-and-identity.sh's ring=2 judgement on the host, against a fake
pmuwin: QEMU's other vCPU only ever adds to a window, so a disturbed plain window must not
make a getppid() look shorter than its two instructions (the old rule judged each pair's
difference and failed at once), while a syscall that really adds more or fewer fails."""

from pathlib import Path

from .test_guest_scripts import GUEST, fake, run_script_text, stage

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
    assert "added 3 instruction(s) (plain 2010, syscall 2013)" in r.stdout


def test_a_syscall_adding_fewer_fails(tmp_path):
    r = ring2(tmp_path, pairs(*[(2010, 2011)] * 5))
    assert r.returncode == 1 and "below plain's least 2010 + 2" in r.stdout


def test_a_disturbed_syscall_window_is_not_a_long_syscall(tmp_path):
    r = ring2(tmp_path, pairs((2010, 5412), *[(2010, 2012)] * 4))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(+2; try 1)" in r.stdout


def test_a_syscall_window_below_plain_plus_two_fails_at_once(tmp_path):
    """QEMU never takes instructions away: one syscall window at +1 is a defect, not a
    disturbance to measure again (a clean batch follows and must not rescue it)."""
    r = ring2(tmp_path, pairs((2010, 2011), *[(2010, 2012)] * 4), CLEAN)
    assert r.returncode == 1
    assert "a syscall window of 2011 instructions, below plain's least 2010 + 2" in r.stdout


def test_counts_that_vary_between_batches_fail(tmp_path):
    """A batch whose least values hold in 3 of 5 but an earlier batch counted less: the
    count moved, which QEMU's additions cannot explain."""
    first = pairs((2010, 2012), (2050, 2052), (2060, 2062), (2070, 2072), (2080, 2082))
    later = pairs(*[(2020, 2022)] * 5)
    r = ring2(tmp_path, first, later)
    assert r.returncode == 1
    assert "try 2: plain 2020 and syscall 2022 in 3 of 5 windows, yet earlier windows " \
           "counted 2010 and 2012" in r.stdout


def test_three_of_five_is_a_majority_two_is_not(tmp_path):
    three = pairs((2010, 2012), (2010, 2012), (2010, 2012), (2027, 2029), (2028, 2030))
    assert "(+2; try 1)" in ring2(tmp_path, three).stdout
    two = pairs((2010, 2012), (2010, 2012), (2026, 2028), (2027, 2029), (2028, 2030))
    (tmp_path / "two").mkdir()
    r = ring2(tmp_path / "two", two, CLEAN)
    assert "try 1 disturbed" in r.stderr and "(+2; try 2)" in r.stdout


def test_plain_noisy_or_syscall_noisy_alone_is_measured_again(tmp_path):
    plain_noisy = pairs((2010, 2012), (2010, 2012), (2026, 2012), (2027, 2012), (2028, 2012))
    sys_noisy = pairs((2010, 2012), (2010, 2012), (2010, 2028), (2010, 2029), (2010, 2030))
    for name, batch in (("p", plain_noisy), ("s", sys_noisy)):
        (tmp_path / name).mkdir()
        r = ring2(tmp_path / name, batch, CLEAN)
        assert "try 1 disturbed" in r.stderr and "(+2; try 2)" in r.stdout, name


def test_whole_values_are_compared(tmp_path):
    """12010 is not 2010: a grep without -x would count it as the least value."""
    batch = pairs((2010, 2012), (2010, 2012), (12010, 2012), (12010, 2012), (12010, 2012))
    r = ring2(tmp_path, batch, CLEAN)
    assert "try 1 disturbed" in r.stderr and "(+2; try 2)" in r.stdout


def test_ten_tries(tmp_path):
    noisy = pairs((2010, 2012), (2026, 2028), (2026, 2040), (2011, 2013), (2050, 2012))
    r = ring2(tmp_path, *[noisy] * 9, CLEAN)
    assert r.returncode == 0 and "(+2; try 10)" in r.stdout, r.stdout + r.stderr


def test_no_eleventh_try(tmp_path):
    noisy = pairs((2010, 2012), (2026, 2028), (2026, 2040), (2011, 2013), (2050, 2012))
    r = ring2(tmp_path, *[noisy] * 10, CLEAN)
    assert r.returncode == 1 and "in 10 tries" in r.stdout


def test_ring3_takes_the_least_values_of_one_batch(tmp_path):
    """ring=3 counts the kernel's path, which varies: the least values, no majority."""
    fn = SCRIPT[SCRIPT.index("syscall_mins() {"):SCRIPT.index("m=$(syscall_mins majority)")]
    bindir = stage(tmp_path)
    (tmp_path / "b").write_text(pairs((2010, 2500), (2100, 2420), (2030, 2480), (2010, 2600),
                                      (2070, 2431)))
    fake(bindir, "pmuwin", f"cat {tmp_path}/b\n")
    r = run_script_text(tmp_path, f". /tests/lib.sh\n{fn}syscall_mins least\n")
    assert r.returncode == 0 and r.stdout.split() == ["2010", "2420", "1"], r.stdout
    assert "syscall_mins least" in SCRIPT and '[ "$d" -gt 50 ]' in SCRIPT


def test_missing_pairs_fail(tmp_path):
    r = ring2(tmp_path, pairs(*[(2010, 2012)] * 4))
    assert r.returncode == 1 and "printed not 5 pairs" in r.stdout
