from tests.unit.test_guest_cpu_pm import cpu_pm


def test_a_fault_after_an_idle_period_fails(tmp_path):
    """The first read passes; the 5th (after 4 sleeps) faults: the reads after idle count."""
    r = cpu_pm(tmp_path, read=f'n=$(cat {tmp_path}/n 2>/dev/null || echo 0); '
                              f'echo $((n + 1)) > {tmp_path}/n\n'
                              '[ $n -ge 8 ] && { echo cpu=$1 result=sigill; exit 1; }\n'
                              'echo cpu=$1 result=ok\n')
    assert r.returncode == 1
    assert "FAIL: read 4 on cpu0 after an idle period: cpu=0 result=sigill" in r.stdout


def test_any_failed_read_fails_not_only_sigill(tmp_path):
    r = cpu_pm(tmp_path, read="echo cpu=$1 result=not-increasing first=2 second=1; exit 3\n")
    assert r.returncode == 1 and "result=not-increasing" in r.stdout


def test_nineteen_idle_entries_in_twenty_sleeps_fail(tmp_path):
    # 19 of the 20 sleeps enter the state once (the first does not).
    r = cpu_pm(tmp_path, per_sleep=(1, 1, 0), first_sleep_idle=False)
    assert r.returncode == 1 and "above WFI 19 times in 20 sleeps" in r.stdout
    (tmp_path / "b").mkdir()
    assert cpu_pm(tmp_path / "b", per_sleep=(1, 1, 0)).returncode == 0


def test_cpu1_checked_too(tmp_path):
    r = cpu_pm(tmp_path, per_cpu={1: (25, 0, 0)})
    assert r.returncode == 1 and "FAIL: cpu1: 0 interventions" in r.stdout
    (tmp_path / "b").mkdir()
    r = cpu_pm(tmp_path / "b", per_cpu={1: (0, 24, 0)})
    assert r.returncode == 1 and "FAIL: cpu1 entered its idle states above WFI 0" in r.stdout


def test_cpu1_without_the_state_skips(tmp_path):
    r = cpu_pm(tmp_path, states={0: 2, 1: 1})
    assert r.returncode == 77 and r.stdout.startswith("SKIP: cpu1 has no idle state")
