"""The Debian archive the tooling uses is the machine's: read from its apt configuration
(here a stand-in machine configuration in tmp_path, given to apt as APT_CONFIG, read by
apt itself), with SIMPLE_PMU_DEBIAN_MIRROR / SIMPLE_PMU_SECURITY_MIRROR still winning."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.trees import apt

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt")

# Made-up addresses: a caching proxy's URL form and a local mirror's.
PROXIED = "http://127.0.0.1:3142/archive.example/debian"
LOCAL = "http://mirror.invalid/debian"


def machine(tmp: Path, monkeypatch, sources: dict[str, str], conf: str = "") -> None:
    """An apt configuration standing in for the machine's: APT_CONFIG names it."""
    etc = tmp / "machine-etc"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "apt.conf.d").mkdir()
    (tmp / "machine-state" / "lists").mkdir(parents=True)
    for name, text in sources.items():
        (etc / name).write_text(text)
    cfg = tmp / "machine-apt.conf"
    cfg.write_text(f'Dir::Etc "{etc}";\nDir::State "{tmp / "machine-state"}";\n'
                   'APT::Architecture "amd64";\n' + conf)
    monkeypatch.setenv("APT_CONFIG", str(cfg))
    monkeypatch.delenv("SIMPLE_PMU_DEBIAN_MIRROR", raising=False)
    monkeypatch.delenv("SIMPLE_PMU_SECURITY_MIRROR", raising=False)
    apt._machine_mirrors.cache_clear()
    apt._machine_proxies.cache_clear()


DEB822 = f"""\
Types: deb
URIs: {PROXIED}
Suites: trixie trixie-updates
Components: main

Types: deb deb-src
URIs: {PROXIED}-security/
Suites: trixie-security
Components: main
"""


def test_deb822_sources_through_a_caching_proxy(tmp_path, monkeypatch):
    machine(tmp_path, monkeypatch, {"sources.list.d/debian.sources": DEB822})
    assert apt.mirrors() == (PROXIED, PROXIED + "-security")


def test_one_line_sources_without_a_security_source(tmp_path, monkeypatch):
    """Only the main archive configured: the security archive is its sibling path."""
    machine(tmp_path, monkeypatch, {"sources.list": (
        "deb-src http://src.invalid/debian bookworm main\n"
        "deb http://other.invalid/ubuntu noble main\n"
        f"deb [arch=amd64] {LOCAL}/ bookworm main contrib\n")})
    assert apt.mirrors() == (LOCAL, LOCAL + "-security")


def test_the_environment_wins(tmp_path, monkeypatch):
    machine(tmp_path, monkeypatch, {"sources.list.d/debian.sources": DEB822})
    monkeypatch.setenv("SIMPLE_PMU_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
    assert apt.mirrors() == ("http://127.0.0.1:9/debian", PROXIED + "-security")
    monkeypatch.setenv("SIMPLE_PMU_SECURITY_MIRROR", "http://127.0.0.1:9/sec")
    assert apt.mirrors() == ("http://127.0.0.1:9/debian", "http://127.0.0.1:9/sec")


def test_no_debian_source_is_an_error_not_a_built_in_address(tmp_path, monkeypatch):
    machine(tmp_path, monkeypatch, {"sources.list": "deb http://other.invalid/ubuntu noble main\n"})
    with pytest.raises(PipelineError, match="set SIMPLE_PMU_DEBIAN_MIRROR"):
        apt.mirrors()


def test_private_apt_uses_the_machines_mirror_and_proxy(tmp_path, monkeypatch):
    """The private configuration (what apt-get update/download and debootstrap get) names
    the machine's archive, and apt, reading it, sees the machine's proxy setting."""
    machine(tmp_path, monkeypatch, {"sources.list": f"deb {LOCAL} bookworm main\n"},
            conf='Acquire::http::Proxy "http://127.0.0.1:3128/";\n'
                 'Acquire::http::Proxy::mirror.invalid "DIRECT";\n')
    private = apt.PrivateApt(tmp_path / "private")
    env = private._env()
    lines = (tmp_path / "private" / "etc" / "sources.list").read_text().splitlines()
    assert lines and all(f"] {LOCAL} " in ln or f"] {LOCAL}-security " in ln for ln in lines)
    assert any(ln.endswith(f"{LOCAL} bookworm main") for ln in lines)
    dump = subprocess.run(["apt-config", "dump"], env=env, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert 'Acquire::http::Proxy "http://127.0.0.1:3128/";' in dump
    assert 'Acquire::http::Proxy::mirror.invalid "DIRECT";' in dump
    assert env["APT_CONFIG"] != os.environ["APT_CONFIG"]
