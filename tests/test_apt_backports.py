"""scripts/apt_backports.py: the backports line comes from the Debian source apt is configured with.

Each test writes sample apt configurations into a temporary directory (never the machine's own /etc/apt),
and the install path runs a stand-in for apt-get, so nothing here needs root or a network.
"""

import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "apt_backports.py"
_spec = importlib.util.spec_from_file_location("apt_backports", SCRIPT)
apt = importlib.util.module_from_spec(_spec)
sys.modules["apt_backports"] = apt  # dataclasses look their module up by name
_spec.loader.exec_module(apt)

SUITE = "bookworm-backports"
DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.lab.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.lab.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def apt_root(tmp_path, sources_list=None, **parts):
    """An apt configuration directory: `sources.list` and files of `sources.list.d` (dots as `_` in names)."""
    root = tmp_path / "apt"
    (root / "sources.list.d").mkdir(parents=True)
    if sources_list is not None:
        (root / "sources.list").write_text(sources_list)
    for name, text in parts.items():
        (root / "sources.list.d" / name.replace("_", ".")).write_text(text)
    return str(root)


def derived(root):
    source = apt.find_debian_source(apt.read_sources(root), "bookworm")
    return None if source is None else apt.backports_line(source, SUITE)


def test_one_line_format(tmp_path):
    root = apt_root(tmp_path, "deb http://mirror.lab.example/debian bookworm main contrib\n")
    assert derived(root) == "deb http://mirror.lab.example/debian bookworm-backports main"


def test_one_line_options_and_comments(tmp_path):
    text = (
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src-only.example/debian bookworm main\n"
        "deb [ arch=amd64 signed-by=/usr/share/keyrings/lab.gpg ] http://proxy.example:3142/debian bookworm main"
        "  # the lab's proxy\n"
    )
    root = apt_root(tmp_path, text)
    options = "[arch=amd64 signed-by=/usr/share/keyrings/lab.gpg]"
    assert derived(root) == f"deb {options} http://proxy.example:3142/debian bookworm-backports main"
    # Brackets touching the options, and an option apt knows but the backports line need not carry.
    root2 = apt_root(tmp_path / "b", "deb [trusted=yes lang=none] file:///srv/cd bookworm main\n"
                     "deb [trusted=yes lang=none] http://local.example/debian/ bookworm main\n")
    assert derived(root2) == "deb [trusted=yes] http://local.example/debian/ bookworm-backports main"


def test_deb822_format_skips_security(tmp_path):
    root = apt_root(tmp_path, debian_sources=DEB822)
    assert derived(root) == (
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://mirror.lab.example/debian bookworm-backports main"
    )


def test_deb822_disabled_multiple_uris_and_inline_key(tmp_path):
    text = """\
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src deb
URIs: cdrom:[Debian GNU/Linux 12]/ http://first.example/mirror http://second.example/debian
Suites: bookworm
Components: main non-free-firmware
Architectures: amd64 arm64
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBGPL0BUBEADmW5NdOOHwPIJlgPu6JDcKw/NZJPR
 -----END PGP PUBLIC KEY BLOCK-----
"""
    root = apt_root(tmp_path, lab_sources=text)
    # The inline key cannot go on a one-line entry; of the two archives, the one under a /debian path.
    assert derived(root) == "deb [arch=amd64,arm64] http://second.example/debian bookworm-backports main"


def test_only_security_or_other_distributions_give_nothing(tmp_path):
    security = "deb http://security.debian.org/debian-security bookworm-security main\n"
    ubuntu = "deb http://archive.ubuntu.com/ubuntu jammy main universe\n"
    third_party = "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"
    disabled = "deb http://deb.example/debian bookworm main\n"  # in a file apt does not read
    root = apt_root(tmp_path, security + ubuntu, google_list=third_party, old_list_disabled=disabled)
    assert derived(root) is None
    assert apt.show(root, SUITE) == apt.NO_SOURCE
    assert derived(apt_root(tmp_path / "empty")) is None


def test_existing_backports_entry_is_reused(tmp_path):
    root = apt_root(tmp_path, "deb http://mirror.lab.example/debian bookworm main\n"
                    "deb http://mirror.lab.example/debian bookworm-backports main\n")
    assert apt.find_backports(apt.read_sources(root), SUITE) is not None
    assert apt.show(root, SUITE) == 0


def fake_apt_get(tmp_path, fail_on):
    """A stand-in for apt-get that logs its arguments and fails on the named sub-command."""
    log = tmp_path / "apt-get.log"
    path = tmp_path / "apt-get"
    path.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"sys.exit(1 if sys.argv[1] == {fail_on!r} else 0)\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path), log


@pytest.mark.parametrize("fail_on", [None, "update", "install"])
def test_install_adds_the_line_and_removes_it_on_failure(tmp_path, fail_on):
    root = apt_root(tmp_path, debian_sources=DEB822)
    added = os.path.join(root, "sources.list.d", apt.ADDED_FILE)
    apt_get, log = fake_apt_get(tmp_path, fail_on)
    code = apt.install(root, SUITE, ["mesa-vulkan-drivers", "libvulkan1"], apt_get)
    calls = log.read_text().splitlines()
    if fail_on is None:
        assert code == 0
        assert "http://mirror.lab.example/debian bookworm-backports main" in Path(added).read_text()
        assert calls == ["update -qq", "install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1"]
        # A second run finds its own line and writes nothing new.
        assert apt.install(root, SUITE, ["mesa-vulkan-drivers"], apt_get) == 0
    else:
        assert code == apt.INSTALL_FAILED
        assert not os.path.exists(added)
        assert calls[-1].startswith(fail_on)


def test_install_without_debian_source_changes_nothing(tmp_path, capsys):
    root = apt_root(tmp_path, "deb http://archive.ubuntu.com/ubuntu jammy main\n")
    before = sorted(os.listdir(os.path.join(root, "sources.list.d")))
    apt_get, log = fake_apt_get(tmp_path, None)
    assert apt.install(root, SUITE, ["mesa-vulkan-drivers"], apt_get) == apt.NO_SOURCE
    assert sorted(os.listdir(os.path.join(root, "sources.list.d"))) == before
    assert not log.exists()
    assert "mesa-vulkan-drivers from bookworm-backports" in capsys.readouterr().out


def test_missing_apt_get_still_cleans_up(tmp_path):
    root = apt_root(tmp_path, "deb http://mirror.lab.example/debian bookworm main\n")
    missing = str(tmp_path / "no-such-apt-get")
    assert apt.install(root, SUITE, ["mesa-vulkan-drivers"], missing) == apt.INSTALL_FAILED
    assert os.listdir(os.path.join(root, "sources.list.d")) == []


def test_command_line_show(tmp_path, capsys):
    root = apt_root(tmp_path, "deb http://mirror.lab.example/debian bookworm main\n")
    assert apt.main(["--root", root, "show"]) == 0
    assert "deb http://mirror.lab.example/debian bookworm-backports main" in capsys.readouterr().out


def test_set_up_scripts_name_no_package_index():
    """Set-up takes its sources from the machine's configuration; addresses belong in the docs."""
    repo = SCRIPT.parents[1]
    for path in [repo / "Makefile", *sorted((repo / "scripts").iterdir())]:
        if path.is_file():
            assert "://" not in path.read_text(), path
