"""invoke bench's frequency comparison (pmubuild/bench/benchmhz.py): the verdict from the two
tools' spreads, the seed tool's output, the table; one real round of both tools."""

import pytest

from pmubuild.bench import bench, benchmhz


def tool(name, *mhz):
    return benchmhz.Tool(name, tuple(mhz), tuple(1.0 for _ in mhz))


def test_spread_is_the_range_over_the_median():
    t = tool("a", 1000.0, 1010.0, 990.0)
    assert t.median == 1000.0 and t.spread == pytest.approx(0.02)


@pytest.mark.parametrize(("seed", "ours", "word"), [
    # Medians within 1% and tight spreads: agree.
    ((3000.0, 3010.0, 2990.0), (3020.0, 3030.0, 3010.0), "agree"),
    # Medians within 1% but the rounds swing by half: nothing can be said (review of
    # issue 21: "agree" must not ignore the spreads).
    ((3000.0, 1500.0, 3600.0, 2000.0, 3650.0), (3010.0, 2400.0, 3600.0, 3700.0, 2900.0),
     "no verdict"),
    # Tight spreads, disjoint ranges, 10% apart, either way round: a disagreement.
    ((3000.0, 3010.0, 2995.0), (3300.0, 3310.0, 3305.0), "disagree"),
    ((3300.0, 3310.0, 3305.0), (3000.0, 3010.0, 2995.0), "disagree"),
    # Fewer than three rounds show no spread: no verdict, even 10% apart.
    ((3000.0,), (3300.0,), "no verdict"),
    # The busy machine of issue 21: 1683/3195/1635 vs 3807/3757/4001 gives no verdict.
    ((1683.0, 3195.0, 1635.0), (3807.0, 3757.0, 4001.0), "no verdict"),
    # Tight spreads but overlapping ranges, 2% apart: nothing can be said.
    ((3000.0, 3100.0, 3050.0), (3080.0, 3110.0, 3120.0), "no verdict"),
])
def test_verdict(seed, ours, word):
    got, why = benchmhz.verdict(tool("mhz tool", *seed), tool("simple-pmu mhz", *ours))
    assert got == word, why


def test_no_verdict_names_the_wide_spread():
    _, why = benchmhz.verdict(tool("mhz tool", 1683.0, 3195.0, 1635.0),
                              tool("simple-pmu mhz", 3807.0, 3757.0, 4001.0))
    assert "mhz tool spread 92.7%, simple-pmu mhz spread 6.4%" in why and "too busy" in why


def test_parse_seed_output():
    assert benchmhz.parse_seed("3000.125\n3100.5\n2990.0\n", 3) == 3000.125
    with pytest.raises(bench.PipelineError, match="printed 2 figures, not 3"):
        benchmhz.parse_seed("1\n2\n", 3)
    with pytest.raises(bench.PipelineError, match="something else than figures"):
        benchmhz.parse_seed("count=1000 us50=20\n", 1)


def test_report_table_and_verdict():
    doc = benchmhz.compare(tool("mhz tool", 3000.0, 3010.0, 2990.0),
                           tool("simple-pmu mhz", 3005.0, 3003.0, 3001.0))
    lines = benchmhz.report(doc)
    assert lines[0].startswith("CPU frequency, mhz tool vs simple-pmu mhz (3 rounds")
    assert lines[2].split()[:3] == ["mhz", "tool", "3000.0"]
    assert lines[3].split()[:4] == ["simple-pmu", "mhz", "3003.0", "3001.0"]
    assert lines[0].endswith("(3 rounds of 5 runs each)")
    assert lines[-1].startswith("  verdict: agree: medians 0.10% apart")


def test_run_rounds_keeps_each_tools_figures(tmp_path):
    """run_rounds against stand-ins whose figures differ: each lands with its tool."""
    seed = tmp_path / "mhz"
    seed.write_text("#!/bin/sh\n[ \"$1\" = -c ] || exit 2\n"
                    "i=0; while [ $i -lt $2 ]; do echo 1111.5; i=$((i+1)); done\n")
    seed.chmod(0o755)
    fake = tmp_path / "py" / "simple_pmu"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import json, sys\n"
        "assert sys.argv[1:] == ['mhz', '--runs', '2', '--json'], sys.argv\n"
        "print(json.dumps({'median_mhz': 2222.25}))\n")
    s, o = benchmhz.run_rounds(seed, tmp_path / "py", rounds=3, runs=2)
    assert (s.name, s.mhz, len(s.wall_s)) == ("mhz tool", (1111.5,) * 3, 3)
    assert (o.name, o.mhz, len(o.wall_s)) == ("simple-pmu mhz", (2222.25,) * 3, 3)


def test_one_real_round_of_both_tools(tmp_path):
    """Both tools run and give figures; no agreement is asserted (wall-clock timing)."""
    exe = benchmhz.compile_seed(tmp_path / "mhz")
    if exe is None:
        pytest.skip(f"seed mhz.c not beside the checkout ({benchmhz.SEED_MHZ})")
    doc = benchmhz.compare(*benchmhz.run_rounds(exe, bench.build_userlib(tmp_path / "py"),
                                                rounds=1, runs=1), runs=1)
    assert [t["name"] for t in doc["tools"]] == ["mhz tool", "simple-pmu mhz"]
    assert all(t["median"] > 0 for t in doc["tools"])
    assert doc["verdict"] in ("agree", "disagree", "no verdict")
