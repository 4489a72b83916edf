"""kernels.resolve over a real PrivateApt reading hand-written Packages files."""

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.trees import kernels
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.matrix import SUITES

# List file names as apt makes them from a mirror's URL (made-up mirror).
MAIN = "mirror.invalid_debian"
SEC = "mirror.invalid_debian-security"


def stanza(name, version, arch, depends="", source="linux", filename=None):
    fn = filename or f"pool/main/l/linux/{name}_{version}_{arch}.deb"
    return (f"Package: {name}\nSource: {source}\nVersion: {version}\nArchitecture: {arch}\n"
            f"Depends: {depends}\nFilename: {fn}\nDescription: test\n")


def kernel(abi, version, arch, *, flavour=None, kbuild=None, image="unsigned", source="linux"):
    """Stanzas for one kernel ABI as Debian publishes them (per Packages file arch)."""
    flav = flavour or arch
    kbuild = kbuild or f"linux-kbuild-{abi.split('-')[0].rsplit('.', 1)[0]}"
    headers = stanza(
        f"linux-headers-{abi}-{flav}", version, arch,
        f"linux-headers-{abi}-common (= {version}), {kbuild} (>= {version}), gcc-12",
        source)
    common = stanza(f"linux-headers-{abi}-common", version, "all", source=source)
    out = [headers, common, stanza(kbuild, version, arch, source=source)]
    names = {"unsigned": [f"linux-image-{abi}-{flav}-unsigned", f"linux-image-{abi}-{flav}"],
             "binary": [f"linux-binary-{abi}-{flav}", f"linux-image-{abi}-{flav}"],
             "image": [f"linux-image-{abi}-{flav}"], "none": []}[image]
    out += [stanza(n, version, arch, source=source) for n in names]
    return out


class Repo:
    """A tmp PrivateApt root; `served` is what the fake registry answers to HEAD."""

    def __init__(self, tmp_path, monkeypatch):
        self.root = tmp_path / "apt"
        self.lists = self.root / "state" / "lists"
        self.lists.mkdir(parents=True)
        (self.root / "state" / "updated").touch()
        self.files: dict[str, list[str]] = {}
        self.unserved: set[str] = set()
        monkeypatch.setattr(PrivateApt, "available",
                            lambda _self, pkg: f"{pkg.name}={pkg.version}" not in self.unserved)

    def add(self, suite, arch, stanzas):
        host = SEC if suite.endswith("-security") else MAIN
        name = f"{host}_dists_{suite}_main_binary-{arch}_Packages"
        self.files.setdefault(name, []).extend(stanzas)
        (self.lists / name).write_text("\n".join(self.files[name]))

    def add_kernel(self, suite, arch, abi, version, host_arch="amd64", **kw):
        """Headers/common/image in `arch`'s list, kbuild in the host's (and arch's) list."""
        st = kernel(abi, version, arch, **kw)
        self.add(suite, arch, st)
        if host_arch != arch:
            kb = [s for s in st if s.startswith("Package: linux-kbuild-")]
            self.add(suite, host_arch, [s.replace(f"Architecture: {arch}",
                                                  f"Architecture: {host_arch}") for s in kb])

    def apt(self):
        return PrivateApt(root=self.root)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return Repo(tmp_path, monkeypatch)


def test_newest_across_suite_and_security(repo):
    repo.add_kernel("trixie", "arm64", "6.12.117+deb13", "6.12.117-1")
    repo.add_kernel("trixie-security", "arm64", "6.12.118+deb13", "6.12.118-1")
    repo.add_kernel("trixie", "arm64", "6.12.48+deb13", "6.12.48-1")
    kp = kernels.resolve(repo.apt(), SUITES["trixie"], "arm64")
    assert kp.release == "6.12.118+deb13-arm64"
    assert kp.version == "6.12.118-1"
    assert kp.headers.suite == "trixie-security"
    assert kp.headers.name == "linux-headers-6.12.118+deb13-arm64"


def test_newest_in_base_suite_beats_older_security(repo):
    repo.add_kernel("trixie", "amd64", "6.12.120+deb13", "6.12.120-1")
    repo.add_kernel("trixie-security", "amd64", "6.12.118+deb13", "6.12.118-1")
    kp = kernels.resolve(repo.apt(), SUITES["trixie"], "amd64")
    assert kp.version == "6.12.120-1" and kp.headers.suite == "trixie"


def test_debian_order_not_string_order(repo):
    repo.add_kernel("bookworm-backports", "amd64", "6.12.9+deb12", "6.12.9-1~bpo12+1")
    repo.add_kernel("bookworm-backports", "amd64", "6.12.43+deb12", "6.12.43-1~bpo12+1")
    kp = kernels.resolve(repo.apt(), SUITES["bookworm-backports"], "amd64")
    assert kp.version == "6.12.43-1~bpo12+1"


def test_tilde_backport_sorts_before_release(repo):
    repo.add_kernel("bookworm-backports", "arm64", "6.12.95+deb12", "6.12.95-1~bpo12+1")
    repo.add_kernel("bookworm-backports", "arm64", "6.12.95+deb12", "6.12.95-1")
    kp = kernels.resolve(repo.apt(), SUITES["bookworm-backports"], "arm64")
    assert kp.version == "6.12.95-1"
    assert kp.common.version == kp.kbuild.version == kp.image.version == "6.12.95-1"


def test_flavours_and_bullseye_backport_ignored(repo):
    repo.add_kernel("bullseye", "arm64", "5.10.0-32", "5.10.223-1")
    # Newer, but not the generic flavour of a bullseye kernel:
    repo.add_kernel("bullseye-security", "arm64", "6.1.0-0.deb11.52", "6.1.192-1~deb11u1")
    repo.add_kernel("bullseye-security", "arm64", "5.10.0-99", "5.10.999-1", flavour="rt-arm64")
    repo.add_kernel("bullseye-security", "arm64", "5.10.0-98", "5.10.998-1",
                    flavour="cloud-arm64")
    repo.add_kernel("bullseye-security", "arm64", "5.10.0-97", "5.10.997-1",
                    flavour="arm64-16k")
    kp = kernels.resolve(repo.apt(), SUITES["bullseye"], "arm64")
    assert kp.release == "5.10.0-32-arm64"
    assert kp.version == "5.10.223-1"


def test_non_linux_source_ignored(repo):
    repo.add_kernel("bookworm", "amd64", "6.1.0-57", "6.1.192-3")
    repo.add_kernel("bookworm-security", "amd64", "6.12.118+deb12", "6.12.118-1~deb12u1",
                    source="linux-6.12")
    kp = kernels.resolve(repo.apt(), SUITES["bookworm"], "amd64")
    assert kp.release == "6.1.0-57-amd64"


@pytest.mark.parametrize(("style", "want"), [
    ("unsigned", "linux-image-{abi}-arm64-unsigned"),
    ("binary", "linux-binary-{abi}-arm64"),
    ("image", "linux-image-{abi}-arm64"),
])
def test_image_package_preference(repo, style, want):
    abi = "7.2.13+deb14"
    repo.add_kernel("sid", "arm64", abi, "7.2.13-1", image=style)
    kp = kernels.resolve(repo.apt(), SUITES["sid"], "arm64")
    assert kp.image.name == want.format(abi=abi)
    assert kp.image.version == "7.2.13-1" and kp.image.arch == "arm64"


def test_image_at_other_version_is_not_used(repo):
    repo.add_kernel("sid", "arm64", "7.2.13+deb14", "7.2.13-1", image="none")
    repo.add("sid", "arm64", [stanza("linux-image-7.2.13+deb14-arm64-unsigned", "7.2.13-2",
                                     "arm64")])
    with pytest.raises(PipelineError) as e:
        kernels.resolve(repo.apt(), SUITES["sid"], "arm64")
    assert "linux-headers-7.2.13+deb14-arm64 7.2.13-1" in str(e.value)


def test_common_and_kbuild_from_depends_same_version_host_arch(repo):
    repo.add_kernel("bookworm", "arm64", "6.1.0-57", "6.1.192-3")
    # Decoys: the same packages at other versions/arches.
    repo.add("bookworm", "arm64", [stanza("linux-headers-6.1.0-57-common", "6.1.192-2", "all"),
                                   stanza("linux-kbuild-6.1", "6.1.192-4", "arm64")])
    repo.add("bookworm", "amd64", [stanza("linux-kbuild-6.1", "6.1.192-2", "amd64")])
    apt = repo.apt()
    kp = kernels.resolve(apt, SUITES["bookworm"], "arm64")
    assert (kp.common.name, kp.common.version, kp.common.arch) == (
        "linux-headers-6.1.0-57-common", "6.1.192-3", "all")
    assert (kp.kbuild.name, kp.kbuild.version, kp.kbuild.arch) == (
        "linux-kbuild-6.1", "6.1.192-3", "amd64")
    assert kp.headers.arch == kp.image.arch == "arm64"
    assert [p.name for p in kp.all] == [kp.headers.name, kp.common.name, kp.kbuild.name,
                                        kp.image.name]
    kp_arm = kernels.resolve(apt, SUITES["bookworm"], "arm64", host_arch="arm64")
    assert kp_arm.kbuild.arch == "arm64" and kp_arm.kbuild.version == "6.1.192-3"


def test_fallback_when_newest_not_served(repo, capsys):
    repo.add_kernel("trixie", "arm64", "6.12.117+deb13", "6.12.117-1")
    repo.add_kernel("trixie-security", "arm64", "6.12.118+deb13", "6.12.118-1")
    repo.unserved.add("linux-image-6.12.118+deb13-arm64-unsigned=6.12.118-1")
    kp = kernels.resolve(repo.apt(), SUITES["trixie"], "arm64")
    assert kp.version == "6.12.117-1"
    err = capsys.readouterr().err
    assert "linux-headers-6.12.118+deb13-arm64 6.12.118-1" in err
    assert "not served" in err


def test_fallback_when_newest_lacks_companions(repo):
    repo.add_kernel("trixie", "amd64", "6.12.117+deb13", "6.12.117-1")
    # The newest headers whose common package left the index.
    repo.add("trixie-security", "amd64", [stanza(
        "linux-headers-6.12.118+deb13-amd64", "6.12.118-1", "amd64",
        "linux-headers-6.12.118+deb13-common (= 6.12.118-1), linux-kbuild-6.12.118+deb13")])
    kp = kernels.resolve(repo.apt(), SUITES["trixie"], "amd64")
    assert kp.version == "6.12.117-1"


def test_error_when_none_served(repo):
    repo.add_kernel("trixie", "arm64", "6.12.117+deb13", "6.12.117-1")
    repo.add_kernel("trixie-security", "arm64", "6.12.118+deb13", "6.12.118-1",
                    kbuild="linux-kbuild-6.12.118+deb13")
    repo.unserved |= {"linux-headers-6.12.117+deb13-common=6.12.117-1",
                      "linux-kbuild-6.12.118+deb13=6.12.118-1"}
    with pytest.raises(PipelineError) as e:
        kernels.resolve(repo.apt(), SUITES["trixie"], "arm64")
    msg = str(e.value)
    assert msg.startswith("trixie/arm64")
    assert "serves none" in msg
    assert "linux-headers-6.12.118+deb13-arm64 6.12.118-1" in msg
    assert "linux-headers-6.12.117+deb13-arm64 6.12.117-1" in msg


def test_error_when_no_headers(repo):
    repo.add_kernel("trixie", "amd64", "6.12.117+deb13", "6.12.117-1")
    with pytest.raises(PipelineError) as e:
        kernels.resolve(repo.apt(), SUITES["trixie"], "arm64")
    assert "no linux-headers-*-arm64" in str(e.value)
    assert "trixie, trixie-security" in str(e.value)


def test_empty_index_says_so(tmp_path):
    (tmp_path / "state" / "lists").mkdir(parents=True)
    with pytest.raises(PipelineError, match="index is empty"):
        kernels.resolve(PrivateApt(root=tmp_path), SUITES["bookworm"], "amd64")
