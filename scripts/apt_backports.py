"""Install Debian packages from a backports suite through the machine's own configured Debian source.

`make setup-maniskill` needs Mesa >= 23's Vulkan driver, which Debian 12 ships only in bookworm-backports.
Many machines (labs, clusters, containers behind a proxy) reach Debian only through their own mirror, so
the backports line must point where apt already points, not at a public address this repository chooses.
This script reads apt's sources (one-line `.list` files and deb822 `.sources` files, as apt reads them),
picks the configured Debian archive, writes `deb URI <suite> main` next to it, installs the packages, and
removes the file again if the install fails. Where no Debian archive is configured, apt's configuration is
left untouched and the script says what to install instead.

Standard library only: it runs with the system python3, before or without the project's venv.

    python3 scripts/apt_backports.py show                 # print the line it would write (read-only)
    python3 scripts/apt_backports.py install PACKAGE...   # as root: write it, apt-get update, install

Exit codes: 0 done (or, for `show`, a source found), 1 the install failed (the added file is removed),
2 no Debian source is configured (nothing changed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass, field
from urllib.parse import urlsplit

ADDED_FILE = "diffrl-backports.list"
NO_SOURCE = 2
INSTALL_FAILED = 1
# Schemes that name a local medium rather than an archive that also carries the backports suite.
LOCAL_SCHEMES = ("cdrom", "file", "copy")
# Options worth carrying from the archive's entry to the backports line: the same archive is signed by
# the same key, and a `trusted` or architecture-restricted local mirror stays so for its backports.
CARRIED_OPTIONS = {"signed-by": "signed-by", "trusted": "trusted", "architectures": "arch", "arch": "arch"}


@dataclass
class Entry:
    """One (type, URI, suite) combination of an enabled source, with the options apt would apply."""

    type: str
    uri: str
    suite: str
    components: list[str]
    options: dict[str, str] = field(default_factory=dict)
    origin: str = ""


def _split_options(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    """Takes a leading `[key=value ...]` block (brackets may touch their first or last option)."""
    if not tokens or not tokens[0].startswith("["):
        return {}, tokens
    text = " ".join(tokens)
    end = text.find("]")
    if end < 0:
        return {}, []  # unterminated: apt rejects the line, so do we
    options = {}
    for item in text[1:end].split():
        key, _, value = item.partition("=")
        options[key.lower().rstrip("+-")] = value
    return options, text[end + 1 :].split()


def parse_one_line(text: str, origin: str = "") -> list[Entry]:
    """Entries of a `sources.list`-style file: `deb [options] URI suite [component...]`."""
    entries = []
    for line in text.splitlines():
        tokens = line.split("#", 1)[0].split()
        if len(tokens) < 3 or tokens[0] not in ("deb", "deb-src"):
            continue
        options, rest = _split_options(tokens[1:])
        if len(rest) < 2:
            continue
        entries.append(Entry(tokens[0], rest[0], rest[1], rest[2:], options, origin))
    return entries


def _stanzas(text: str) -> list[dict[str, str]]:
    """deb822 paragraphs as {lower-case field: value}; `#` lines are comments, indented lines continue a field."""
    stanzas, current, last = [], {}, None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                stanzas.append(current)
            current, last = {}, None
        elif line[0] in " \t" and last is not None:
            current[last] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            last = key.strip().lower()
            current[last] = value.strip()
    return stanzas


def parse_deb822(text: str, origin: str = "") -> list[Entry]:
    """Entries of a `.sources` file: every Types x URIs x Suites combination of each enabled stanza."""
    entries = []
    for stanza in _stanzas(text):
        if stanza.get("enabled", "yes").strip().lower() in ("no", "false", "0"):
            continue
        options = {k: v for k, v in stanza.items() if k not in ("types", "uris", "suites", "components")}
        for kind in stanza.get("types", "").split():
            for uri in stanza.get("uris", "").split():
                for suite in stanza.get("suites", "").split():
                    entries.append(Entry(kind, uri, suite, stanza.get("components", "").split(), options, origin))
    return entries


def read_sources(root: str) -> list[Entry]:
    """All enabled entries under an apt configuration directory, in the order apt reads the files."""
    files = [os.path.join(root, "sources.list")]
    parts = os.path.join(root, "sources.list.d")
    if os.path.isdir(parts):
        # apt reads only these two extensions; `foo.list.disabled` and the like are ignored.
        files += [os.path.join(parts, n) for n in sorted(os.listdir(parts)) if n.endswith((".list", ".sources"))]
    entries = []
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        parse = parse_deb822 if path.endswith(".sources") else parse_one_line
        entries += parse(text, path)
    return entries


def _is_security(entry: Entry) -> bool:
    """Security archives carry only `<codename>-security`, never backports."""
    path = urlsplit(entry.uri).path.rstrip("/")
    return entry.suite.endswith(("-security", "/updates")) or path.endswith("-security")


def _is_archive(entry: Entry, codename: str) -> bool:
    """A binary entry of Debian's main archive for this release: the suite is the codename or one of its
    update suites (a third-party repository names its own suites: `nodistro`, `cloud-sdk-bookworm`, ...)."""
    scheme = urlsplit(entry.uri).scheme.lower()  # empty for a fragment of a URI with spaces
    release_suites = (codename, f"{codename}-updates", f"{codename}-backports", f"{codename}-proposed-updates")
    return (
        entry.type == "deb"
        and scheme not in ("", *LOCAL_SCHEMES)
        and entry.suite in release_suites
        and "main" in entry.components
        and not _is_security(entry)
    )


def _preference(entry: Entry) -> int:
    """Lower is better: Debian's own keyring, then an archive path ending in /debian, then the rest."""
    signed = entry.options.get("signed-by", "")
    if "debian-archive" in signed:
        return 0
    return 1 if urlsplit(entry.uri).path.rstrip("/").endswith("/debian") else 2


def find_backports(entries: list[Entry], suite: str) -> Entry | None:
    """An already configured entry for the backports suite, if any (then nothing needs to be written)."""
    codename = suite.rsplit("-", 1)[0]
    return next((e for e in entries if e.suite == suite and _is_archive(e, codename)), None)


def find_debian_source(entries: list[Entry], codename: str) -> Entry | None:
    """The configured Debian archive to take the backports suite from, or None where there is none."""
    candidates = [e for e in entries if _is_archive(e, codename)]
    return min(candidates, key=_preference) if candidates else None


def backports_line(source: Entry, suite: str) -> str:
    """`deb [options] URI suite main`, keeping the archive's key and trust options."""
    carried = []
    for key, value in source.options.items():
        name = CARRIED_OPTIONS.get(key)
        if name and value and "\n" not in value:  # an inline key block cannot go on one line
            value = ",".join(value.split()) if name == "arch" else value
            carried.append(f"{name}={value}")
    options = f"[{' '.join(carried)}] " if carried else ""
    return f"deb {options}{source.uri} {suite} main"


def _note(suite: str, packages: list[str]) -> str:
    return (
        f"note: no Debian package source is configured in apt; its configuration is left as it was. "
        f"Install {' '.join(packages)} from {suite} (or any Vulkan 1.2+ driver, such as a GPU's) yourself."
    )


def install(root: str, suite: str, packages: list[str], apt_get: str = "apt-get") -> int:
    """Adds the backports line where needed, installs, and undoes the addition if anything fails."""
    entries = read_sources(root)
    added = None
    if find_backports(entries, suite) is None:
        source = find_debian_source(entries, suite.rsplit("-", 1)[0])
        if source is None:
            print(_note(suite, packages))
            return NO_SOURCE
        added = os.path.join(root, "sources.list.d", ADDED_FILE)
        os.makedirs(os.path.dirname(added), exist_ok=True)
        with open(added, "w", encoding="utf-8") as f:
            f.write(f"# Added by diffrl's `make setup-maniskill`: {suite} from {source.origin}\n")
            f.write(backports_line(source, suite) + "\n")
        print(f"added {added}: {backports_line(source, suite)}")
    try:
        subprocess.run([apt_get, "update", "-qq"], check=True)
        command = [apt_get, "install", "-y", "-qq", "-t", suite, *packages]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as err:
        if added:
            os.remove(added)
            print(f"removed {added} again")
        print(f"warning: could not install {' '.join(packages)} from {suite} ({err})")
        return INSTALL_FAILED
    return 0


def show(root: str, suite: str) -> int:
    """Prints what `install` would do, touching nothing."""
    entries = read_sources(root)
    existing = find_backports(entries, suite)
    if existing is not None:
        print(f"already configured in {existing.origin}: {existing.uri} {suite}")
        return 0
    source = find_debian_source(entries, suite.rsplit("-", 1)[0])
    if source is None:
        print(_note(suite, ["mesa-vulkan-drivers"]))
        return NO_SOURCE
    print(f"would write {os.path.join(root, 'sources.list.d', ADDED_FILE)} (from {source.origin}):")
    print(backports_line(source, suite))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/etc/apt", help="apt's configuration directory")
    parser.add_argument("--suite", default="bookworm-backports")
    parser.add_argument("--apt-get", default="apt-get", help="the apt-get command (tests substitute one)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("show")
    sub.add_parser("install").add_argument("packages", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "show":
        return show(args.root, args.suite)
    return install(args.root, args.suite, args.packages, args.apt_get)


if __name__ == "__main__":
    sys.exit(main())
