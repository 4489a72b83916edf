import pytest

from pmubuild.trees import cache


def test_atomic_dir_publishes_whole_entry(tmp_path):
    final = tmp_path / "kernels" / "entry"
    with cache.atomic_dir(final) as tmp:
        assert tmp.name.startswith(cache.PARTIAL_PREFIX)
        assert not final.exists()
        (tmp / "a").write_text("x")
    assert (final / "a").read_text() == "x"
    assert [p.name for p in final.parent.iterdir()] == ["entry"]


def test_atomic_dir_exception_leaves_nothing(tmp_path):
    final = tmp_path / "kernels" / "entry"
    with pytest.raises(RuntimeError, match="boom"), cache.atomic_dir(final) as tmp:
        (tmp / "half").write_text("partial")
        raise RuntimeError("boom")
    assert not final.exists()
    assert list(final.parent.iterdir()) == []


def test_atomic_dir_replaces_existing_entry(tmp_path):
    final = tmp_path / "entry"
    final.mkdir()
    (final / "old").write_text("old")
    with cache.atomic_dir(final) as tmp:
        (tmp / "new").write_text("new")
    assert sorted(p.name for p in final.iterdir()) == ["new"]


def test_exception_keeps_previous_entry(tmp_path):
    final = tmp_path / "entry"
    final.mkdir()
    (final / "old").write_text("old")
    with pytest.raises(KeyError), cache.atomic_dir(final):
        raise KeyError("x")
    assert (final / "old").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_remove_stale_partials_only_touches_partials(tmp_path):
    (tmp_path / f"{cache.PARTIAL_PREFIX}a-1234").mkdir()
    (tmp_path / f"{cache.PARTIAL_PREFIX}a-1234" / "f").write_text("x")
    (tmp_path / f"{cache.PARTIAL_PREFIX}b-5678").mkdir()
    (tmp_path / "done-entry").mkdir()
    (tmp_path / "file.txt").write_text("keep")
    cache.remove_stale_partials(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done-entry", "file.txt"]


def test_remove_stale_partials_of_one_entry_spares_the_others(tmp_path):
    """Another process may be assembling another entry of the same directory (sigkernel/
    holds the source tree and each arch's kernel, under different locks)."""
    with cache.atomic_dir(tmp_path / "src-6.1") as other:
        (tmp_path / f"{cache.PARTIAL_PREFIX}arm64-6.1-0123abcd").mkdir()
        (tmp_path / f"{cache.PARTIAL_PREFIX}arm64-6.1-x-0123abcd").mkdir()
        cache.remove_stale_partials(tmp_path, "arm64-6.1")
        assert other.is_dir()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
            other.name, f"{cache.PARTIAL_PREFIX}arm64-6.1-x-0123abcd"])


def test_remove_stale_partials_missing_parent_is_fine(tmp_path):
    cache.remove_stale_partials(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


def test_cache_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SIMPLE_PMU_CACHE", str(tmp_path / "c"))
    assert cache.cache_root() == tmp_path / "c"
    assert cache.subdir("kernels") == tmp_path / "c" / "kernels"
    assert (tmp_path / "c" / "kernels").is_dir()
    monkeypatch.delenv("SIMPLE_PMU_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "simple-pmu"
