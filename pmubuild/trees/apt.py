"""A private apt configuration: Debian's package index and downloads, no change to the host's apt.

Everything lives under the cache (`apt/`): sources, lists, downloaded .debs.
"""

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say, step
from pmubuild.trees import cache
from pmubuild.trees.debversion import version_key

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Suites the matrix draws from; trixie-security carries trixie's newest kernels.
ARCHIVE_SUITES = ("bullseye", "bookworm", "bookworm-backports", "trixie", "sid")
SECURITY_SUITES = ("bullseye-security", "bookworm-security", "trixie-security")
ARCHES = ("amd64", "arm64")
INDEX_MAX_AGE_S = 6 * 3600
_LIST_NAME = re.compile(r"_dists_(?P<suite>[^_]+)_main_binary-(?P<arch>[a-z0-9]+)_Packages$")


@dataclass(frozen=True)
class Package:
    """One stanza of a Packages index."""

    name: str
    version: str
    arch: str
    suite: str
    source: str
    depends: str
    filename: str

    @property
    def spec(self) -> str:
        """name[:arch]=version, as apt-get download takes it (no qualifier for arch all)."""
        qual = "" if self.arch == "all" else f":{self.arch}"
        return f"{self.name}{qual}={self.version}"

    @property
    def deb_name(self) -> str:
        return Path(self.filename).name

    def dependency_names(self) -> list[str]:
        """Names in Depends (first alternative of each), without version constraints."""
        names = []
        for item in self.depends.split(","):
            first = item.split("|")[0].strip()
            if first:
                names.append(first.split()[0].split(":")[0])
        return names


# Suite names (less -updates, -backports, -security) that mark a source of the machine's
# apt as Debian's archive: the matrix's, their neighbours and the release aliases.
DEBIAN_SUITES = frozenset({"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                           "experimental", "oldoldstable", "oldstable", "stable", "testing",
                           "unstable"})
# What a security archive's path is called beside the main archive's on a mirror.
_SECURITY_PATH = "-security"


def machine_sources(env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(archive URI, suite) of each `deb` source of the machine's own apt configuration
    (one-line and deb822 files alike, as apt reads them; APT_CONFIG in `env` honoured),
    in apt's order. Empty without apt."""
    if not shutil.which("apt-get"):
        return []
    proc = subprocess.run(["apt-get", "indextargets", "--no-release-info", "--format",
                           "$(TARGET_OF) $(REPO_URI) $(RELEASE)", "Created-By: Packages"],
                          env=os.environ if env is None else env, capture_output=True,
                          text=True)
    out: list[tuple[str, str]] = []
    for line in proc.stdout.splitlines():
        kind, uri, suite = (line.split() + ["", "", ""])[:3]
        row = (uri.rstrip("/"), suite)
        if kind == "deb" and uri and row not in out:
            out.append(row)
    return out


def debian_mirrors(sources: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """The machine's Debian archive and Debian security archive among its apt sources: the
    first source of a Debian suite, and the first of a -security suite (else the main
    archive's sibling path, as mirrors lay them out: .../debian and .../debian-security)."""
    main = security = None
    for uri, suite in sources:
        base, _, flavour = suite.partition("-")
        if base not in DEBIAN_SUITES:
            continue
        if flavour == "security":
            security = security or uri
        else:
            main = main or uri
    if security is None and main is not None and main.endswith("/debian"):
        security = main + _SECURITY_PATH
    return main, security


def mirrors() -> tuple[str, str]:
    """Debian's and Debian-security's archive URLs: from SIMPLE_PMU_DEBIAN_MIRROR and
    SIMPLE_PMU_SECURITY_MIRROR when set, else from the machine's own apt sources, so a
    local mirror or a caching proxy the machine uses is what the tooling uses too."""
    main = os.environ.get("SIMPLE_PMU_DEBIAN_MIRROR")
    security = os.environ.get("SIMPLE_PMU_SECURITY_MIRROR")
    if main and security:
        return main, security
    found_main, found_security = _machine_mirrors(os.environ.get("APT_CONFIG", ""))
    main = main or found_main
    security = security or found_security
    if not main or not security:
        which = "SIMPLE_PMU_DEBIAN_MIRROR" if not main else "SIMPLE_PMU_SECURITY_MIRROR"
        raise PipelineError(
            f"no Debian {'archive' if not main else 'security archive'} among this machine's "
            f"apt sources (apt-get indextargets lists none of Debian's suites): set {which} "
            "to a Debian mirror's URL")
    return main, security


@functools.cache
def _machine_mirrors(apt_config: str) -> tuple[str | None, str | None]:
    # Once per process (and APT_CONFIG): every apt call writes the private configuration.
    return debian_mirrors(machine_sources())


@functools.cache
def _machine_proxies(apt_config: str) -> tuple[str, ...]:
    return tuple(machine_proxy_settings())


def machine_proxy_settings(env: dict[str, str] | None = None) -> list[str]:
    """The machine's Acquire::<protocol>::Proxy settings (apt-config dump lines): the
    private configuration reads none of /etc/apt/apt.conf.d, so they are carried over."""
    if not shutil.which("apt-config"):
        return []
    proc = subprocess.run(["apt-config", "dump"], env=os.environ if env is None else env,
                          capture_output=True, text=True)
    return [ln for ln in proc.stdout.splitlines()
            if re.match(r"Acquire::(https?|ftp)::Proxy(-Auto-Detect)?(::\S+)? ", ln)]


class PrivateApt:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache.subdir("apt")
        self.debs = self.root / "debs"
        self._index: dict[tuple[str, str], list[Package]] | None = None

    # -- configuration ---------------------------------------------------------------
    def _write_config(self) -> Path:
        main, security = mirrors()
        etc = self.root / "etc"
        for sub in ("etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d",
                    "state/lists/partial", "cache/archives/partial"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        arches = ",".join(ARCHES)
        lines = [f"deb [arch={arches} signed-by={KEYRING}] {main} {s} main"
                 for s in ARCHIVE_SUITES]
        lines += [f"deb [arch={arches} signed-by={KEYRING}] {security} {s} main"
                  for s in SECURITY_SUITES]
        (etc / "sources.list").write_text("\n".join(lines) + "\n")
        status = self.root / "state" / "status"
        status.touch()
        conf = self.root / "apt.conf"
        conf.write_text(
            f'Dir::Etc "{etc}";\n'
            f'Dir::State "{self.root / "state"}";\n'
            f'Dir::State::status "{status}";\n'
            f'Dir::Cache "{self.root / "cache"}";\n'
            'APT::Architecture "amd64";\n'
            'APT::Architectures { "amd64"; "arm64"; };\n'
            'Acquire::Languages "none";\n'
            # Archived suites (bullseye) carry expired Valid-Until dates.
            'Acquire::Check-Valid-Until "false";\n'
            'Acquire::Retries "2";\n'
            'Acquire::http::Timeout "30";\n'
            + "".join(f"{ln}\n" for ln in _machine_proxies(os.environ.get("APT_CONFIG", "")))
        )
        return conf

    def _env(self) -> dict[str, str]:
        return {**os.environ, "APT_CONFIG": str(self._write_config())}

    def _apt(self, args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        if not shutil.which("apt-get"):
            raise PipelineError("apt-get not found: this tool needs a Debian or Ubuntu host")
        return subprocess.run(["apt-get", *args], env=self._env(), cwd=cwd,
                              capture_output=True, text=True)

    # -- index ----------------------------------------------------------------------------
    def _lists(self) -> list[Path]:
        lists = self.root / "state" / "lists"
        return sorted(p for p in lists.glob("*_Packages")) if lists.is_dir() else []

    def index_age(self) -> float | None:
        stamp = self.root / "state" / "updated"
        if not stamp.exists() or not self._lists():
            return None
        return time.time() - stamp.stat().st_mtime

    def update(self, force: bool = False) -> None:
        """Refresh the index if it is missing or older than INDEX_MAX_AGE_S."""
        age = self.index_age()
        if not force and age is not None and age < INDEX_MAX_AGE_S:
            return
        with cache.locked("apt"):
            self._update(age)

    def _update(self, age: float | None) -> None:
        cache.ensure_free_space(self.root, 300, "the Debian package index")
        with step("updating the Debian package index (" + ", ".join(
                ARCHIVE_SUITES + SECURITY_SUITES) + ")"):
            proc = self._apt(["update", "-q"])
            problems = [ln for ln in (proc.stdout + proc.stderr).splitlines()
                        if ln.startswith(("E:", "W:", "Err:"))]
            if proc.returncode != 0 or any(ln.startswith(("E:", "Err:")) for ln in problems):
                detail = "\n  ".join(problems[-6:]) or proc.stderr.strip()[-500:]
                if age is not None:
                    say(f"warning: could not refresh the package index; using the one from "
                        f"{age / 3600:.1f} h ago:\n  {detail}")
                    return
                raise PipelineError(
                    "could not download the Debian package index (registry unreachable or "
                    f"failing; mirror {mirrors()[0]}):\n  {detail}")
        (self.root / "state" / "updated").touch()
        self._index = None

    def packages(self, suite: str, arch: str) -> list[Package]:
        if self._index is None:
            self._index = {}
            for path in self._lists():
                m = _LIST_NAME.search(path.name)
                if m:
                    self._index[(m["suite"], m["arch"])] = self._parsed(path, m["suite"],
                                                                        m["arch"])
        if not self._index:
            raise PipelineError("the Debian package index is empty: run with network access "
                                "to Debian's mirror so it can be downloaded")
        return self._index.get((suite, arch), [])

    def _parsed(self, path: Path, suite: str, arch: str) -> list[Package]:
        """parse_packages of one list, memoized on disk by the list's size and mtime:
        parsing all ten lists takes seconds, every task needs them."""
        st = path.stat()
        stamp = f"{st.st_size}:{st.st_mtime_ns}:{','.join(_KEPT)}"
        memo = self.root / "parsed" / f"{path.name}.json"
        try:
            data = json.loads(memo.read_text())
            if data["stamp"] == stamp:
                return [Package(*row) for row in data["packages"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        pkgs = list(parse_packages(path.read_text(errors="replace"), suite, arch))
        memo.parent.mkdir(parents=True, exist_ok=True)
        # Per process and thread: test-qemu's threads may parse the same list at once.
        tmp = memo.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"stamp": stamp,
                                   "packages": [dataclasses.astuple(p) for p in pkgs]}))
        tmp.replace(memo)
        return pkgs

    def find(self, name_re: str, suites: Iterable[str], arch: str) -> list[Package]:
        """Every stanza whose name matches, newest version last."""
        pattern = re.compile(name_re)
        found = [p for s in suites for p in self.packages(s, arch) if pattern.fullmatch(p.name)]
        return sorted(found, key=lambda p: version_key(p.version))

    def newest(self, name: str, suites: Iterable[str], arch: str) -> Package:
        """The newest `name` in `suites` (by version); the index is refreshed only when
        the cached one lacks it."""
        suites = list(suites)
        found = self.find(name, suites, arch)
        if not found:
            self.update()
            found = self.find(name, suites, arch)
        if not found:
            raise PipelineError(f"{name}:{arch} not found in Debian {' or '.join(suites)}")
        return found[-1]

    def exact(self, name: str, version: str, arch: str) -> Package:
        for _key, pkgs in self._all():
            for p in pkgs:
                if p.name == name and p.version == version and p.arch == arch:
                    return p
        raise PipelineError(f"package {name}:{arch}={version} is not in the Debian index")

    def _all(self) -> Iterator[tuple[tuple[str, str], list[Package]]]:
        self.packages(ARCHIVE_SUITES[0], ARCHES[0])
        assert self._index is not None
        yield from self._index.items()

    # -- downloads ---------------------------------------------------------------------------
    def available(self, pkg: Package) -> bool:
        """Whether the registry really serves the file (an index can list what a mirror
        lacks: bullseye-security's arm64 pool is such a case here). Cached .debs count."""
        if (self.debs / pkg.deb_name).exists():
            return True
        base = mirrors()[1] if pkg.suite.endswith("-security") else mirrors()[0]
        req = urllib.request.Request(f"{base}/{pkg.filename}", method="HEAD")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False
            raise PipelineError(f"Debian registry error {e.code} for {req.full_url}") from e
        except (urllib.error.URLError, TimeoutError) as e:
            raise PipelineError(f"Debian registry unreachable ({base}): {e}") from e

    def download(self, pkgs: list[Package]) -> list[Path]:
        """Fetch .debs into the cache (each file whole or absent); cached files are reused."""
        self.debs.mkdir(parents=True, exist_ok=True)
        missing = [p for p in pkgs if not (self.debs / p.deb_name).exists()]
        if missing:
            with cache.locked("debs"):
                self._fetch_missing(pkgs)
        return [self.debs / p.deb_name for p in pkgs]

    def _fetch_missing(self, pkgs: list[Package]) -> None:
        cache.remove_stale_partials(self.debs)
        missing = [p for p in pkgs if not (self.debs / p.deb_name).exists()]
        if missing:
            cache.ensure_free_space(self.debs, 400 + 60 * len(missing), "kernel packages")
            names = ", ".join(f"{p.name}:{p.arch}" for p in missing)
            with step(f"downloading {len(missing)} package(s): {names}"), \
                    tempfile.TemporaryDirectory(dir=self.debs, prefix=cache.PARTIAL_PREFIX) as t:
                self._download_into(missing, Path(t))

    def _download_into(self, missing: list[Package], tmp: Path) -> None:
        proc = self._apt(["download", "-q", *[p.spec for p in missing]], cwd=tmp)
        if proc.returncode != 0:
            err = [ln for ln in proc.stderr.splitlines() if ln.startswith(("E:", "Err"))]
            raise PipelineError("download from the Debian registry failed:\n  "
                                + "\n  ".join(err[-6:] or [proc.stderr.strip()[-500:]]))
        for p in missing:
            # apt names the file name_version_arch.deb with the epoch as %3a.
            got = [f for f in tmp.glob(f"{p.name}_*.deb") if f.name.split("_")[0] == p.name]
            if len(got) != 1:
                raise PipelineError(f"apt-get download did not produce {p.deb_name}")
            got[0].rename(self.debs / p.deb_name)


_KEPT = ("Package: linux-", "Package: gcc", "Package: busybox", "Package: python3",
         "Package: lib", "Package: pahole", "Package: dwarves", "Package: zlib1g")


def parse_packages(text: str, suite: str, arch: str) -> Iterator[Package]:
    """Parse a Packages file, keeping only what the matrix and chroots need (speed)."""
    for stanza in text.split("\n\n"):
        if not stanza.startswith(_KEPT):
            continue
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        if "Package" not in fields or "Version" not in fields:
            continue
        yield Package(
            name=fields["Package"], version=fields["Version"],
            arch=fields.get("Architecture", arch), suite=suite,
            source=fields.get("Source", fields["Package"]).split()[0],
            depends=fields.get("Depends", ""), filename=fields.get("Filename", ""),
        )
