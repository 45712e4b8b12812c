"""Hostile archives against `bench.core.unpack`, on any Python at hand: each crafted archive (CVE-2025-4517's
PATH_MAX chain, links then files through them, `..` and absolute names, links and devices, zip links, bombs,
members that clash) is unpacked into `outer/dest/` of a fresh temporary folder that also holds `outer/flag`. Each
must be refused (`UnsafeArchive`, naming the member), with nothing outside `outer/dest/` written or changed and no
link in it. A good tar.gz and a good zip of one tree unpack to that tree.

Standard library only, so that a bare interpreter runs it (no pytest, no numpy):

    PYTHONPATH=<checkout> python3.X tests/archive_attacks.py

prints one line per case and exits 1 if any failed; tests/test_unpack.py runs the cases in-process and this
script under every Python it finds.
"""
from __future__ import annotations

import hashlib
import io
import os
import platform
import stat
import sys
import tarfile
import tempfile
import traceback
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from bench.core.unpack import UnsafeArchive, unpack

Member = Tuple[str, str, object]  # (name, kind, payload): kind file|dir|sym|hard|chr|fifo; bytes or a link target


class Case(NamedTuple):
    name: str
    build: Callable[[Path, Path], Path]  # (folder for the archive, the dest folder) -> the archive
    refuses: str  # what the refusal names (a member); "" for a good archive
    limits: Dict[str, int] = {}
    prepare: Optional[Callable[[Path, Path], None]] = None  # (outer, dest): what is there before unpacking


def tar(path: Path, members: List[Member], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as out:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            data = b""
            if kind == "file":
                data = payload if isinstance(payload, bytes) else b""
                info.size, info.mode = len(data), 0o644
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o777
            elif kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = str(payload)
            else:
                info.type = tarfile.CHRTYPE if kind == "chr" else tarfile.FIFOTYPE
                info.devmajor, info.devminor = (1, 3) if kind == "chr" else (0, 0)
            if kind == "file" and isinstance(payload, tuple):  # (bytes, mode)
                data, info.mode = payload
                info.size = len(data)
            out.addfile(info, io.BytesIO(data) if info.size else None)
    return path


def zipped(path: Path, members: List[Tuple[str, bytes, int]]) -> Path:
    """Members (name, bytes, Unix mode incl. its file type), deflated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a name written twice: the clash case means it
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
            for name, data, mode in members:
                info = zipfile.ZipInfo(name)
                info.create_system, info.external_attr = 3, mode << 16
                if stat.S_ISDIR(mode):
                    info.external_attr |= 0x10
                out.writestr(info, data, zipfile.ZIP_DEFLATED)
    return path


def path_max_chain(folder: Path, dest: Path) -> Path:
    """CVE-2025-4517, as CPython's own test builds it (test_realpath_limit_attack): 16 nested folders, each
    reached by a one-letter symlink, sized so that the path fits in PATH_MAX unexpanded but not expanded; a last
    symlink through them all back to the top, `escape` pointing above the destination through it, a hard link
    `flaglink` to `escape/flag` (outside), then a regular member `flaglink` overwriting it and `escape/newfile`."""
    steps = "abcdefghijklmnop"
    max_path = os.pathconf(str(dest.parent), "PC_PATH_MAX") if "PC_PATH_MAX" in os.pathconf_names else 4096
    component = "d" * min(255, (max_path - len(str(dest)) - 1) // (len(steps) + 1))
    members: List[Member] = []
    path, step_path = "", ""
    for step in steps:
        members += [(os.path.join(path, component), "dir", None), (os.path.join(path, step), "sym", component)]
        path, step_path = os.path.join(path, component), os.path.join(step_path, step)
    link = os.path.join(*steps, "l" * 254)
    members += [(link, "sym", os.path.join(*[".."] * len(steps))),
                ("escape", "sym", os.path.join(link, "..")),
                ("flaglink", "hard", os.path.join("escape", "flag")),
                ("flaglink", "file", b"overwrite"),
                ("escape/newfile", "file", b"new")]
    return tar(folder / "chain.tar", members, "w")


def bomb_declared(folder: Path, dest: Path) -> Path:
    """A tar whose one member declares 1 TiB and holds a few bytes: refused at its header (the default bound)."""
    info = tarfile.TarInfo("huge.bin")
    info.size = 1 << 40
    (folder / "declared.tar").write_bytes(info.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096)
    return folder / "declared.tar"


def link_outside(outer: Path, dest: Path) -> None:
    """dest/data is a symlink to the sentinel folder before unpacking: writing under it would leave dest."""
    dest.mkdir(parents=True)
    (dest / "data").symlink_to(outer)


def sources() -> Dict[str, bytes]:
    """The good archives' tree: nested folders, an empty file, bytes of every value."""
    return {"ds/": b"", "ds/train/": b"", "ds/train/a.bin": bytes(range(256)) * 40, "ds/train/b.bin": b"b" * 7,
            "ds/test/": b"", "ds/test/empty": b"", "ds/empty-folder/": b"", "ds/meta.txt": "café\n".encode()}


def good_tar(folder: Path, dest: Path) -> Path:
    members: List[Member] = [("./", "dir", None)]
    for name, data in sources().items():
        mode = 0o6777 if name.endswith("a.bin") else 0o644  # setuid and setgid bits: not unpacked
        members.append((name.rstrip("/"), "dir", None) if name.endswith("/") else (name, "file", (data, mode)))
    return tar(folder / "good.tar.gz", members)


def good_zip(folder: Path, dest: Path) -> Path:
    return zipped(folder / "good.zip", [(n, d, (stat.S_IFDIR | 0o755) if n.endswith("/") else (stat.S_IFREG | 0o4755))
                                        for n, d in sources().items()])


FILE, DIR, LINK = stat.S_IFREG | 0o644, stat.S_IFDIR | 0o755, stat.S_IFLNK | 0o777
CASES = [
    Case("cve-2025-4517-path-max-chain", path_max_chain, "'a' is a symbolic link"),
    Case("symlink-then-file-through-it", lambda f, d: tar(f / "x.tgz", [
        ("sub", "sym", str(d.parent)), ("sub/flag", "file", b"overwrite")]), "'sub' is a symbolic link"),
    Case("symlink-then-file-of-its-name", lambda f, d: tar(f / "x.tgz", [
        ("flag", "sym", "../flag"), ("flag", "file", b"overwrite")]), "'flag' is a symbolic link"),
    Case("dotdot-name", lambda f, d: tar(f / "x.tgz", [("ok.txt", "file", b"ok"), ("../escaped.txt", "file", b"x")]),
         "'../escaped.txt' has a `..` part"),
    Case("dotdot-inside-name", lambda f, d: tar(f / "x.tgz", [("a/../../escaped.txt", "file", b"x")]), "`..` part"),
    Case("absolute-name", lambda f, d: tar(f / "x.tgz", [(str(d.parent / "abs.txt"), "file", b"x")]),
         "has an absolute name"),
    Case("symlink-to-outside", lambda f, d: tar(f / "x.tgz", [("out", "sym", "../flag")]), "'out' is a symbolic link"),
    Case("symlink-absolute", lambda f, d: tar(f / "x.tgz", [("out", "sym", str(d.parent / "flag"))]),
         "is a symbolic link"),
    Case("hardlink-to-outside-then-file", lambda f, d: tar(f / "x.tgz", [
        ("hl", "hard", "../flag"), ("hl", "file", b"overwrite")]), "'hl' is a hard link"),
    Case("hardlink-inside", lambda f, d: tar(f / "x.tgz", [("a", "file", b"a"), ("b", "hard", "a")]),
         "'b' is a hard link"),
    Case("device", lambda f, d: tar(f / "x.tgz", [("null", "chr", None)]), "'null' is a device"),
    Case("fifo", lambda f, d: tar(f / "x.tgz", [("pipe", "fifo", None)]), "'pipe' is a fifo"),
    Case("existing-link-in-dest", lambda f, d: tar(f / "x.tgz", [("data/flag", "file", b"overwrite")]),
         "'data/flag' needs a folder 'data' where there is a link", prepare=link_outside),
    Case("zip-dotdot", lambda f, d: zipped(f / "x.zip", [("ok.txt", b"ok", FILE), ("../escaped.txt", b"x", FILE)]),
         "'../escaped.txt' has a `..` part"),
    Case("zip-absolute", lambda f, d: zipped(f / "x.zip", [(str(d.parent / "abs.txt"), b"x", FILE)]),
         "has an absolute name"),
    Case("zip-symlink", lambda f, d: zipped(f / "x.zip", [("link", b"../flag", LINK), ("link/x", b"x", FILE)]),
         "'link' is a symbolic link"),
    Case("zip-backslash", lambda f, d: zipped(f / "x.zip", [("..\\escaped.txt", b"x", FILE)]), "backslash"),
    Case("tar-bomb-declared", bomb_declared, "'huge.bin' takes what the members declare past"),
    Case("tar-bomb-bytes", lambda f, d: tar(f / "x.tgz", [(f"z{i}", "file", b"\0" * 65536) for i in range(20)]),
         "'z15' takes what the members declare past 976.6 KiB", {"max_bytes": 1_000_000}),
    Case("tar-bomb-members", lambda f, d: tar(f / "x.tgz", [(f"e{i}", "file", b"") for i in range(50)]),
         "'e20' is beyond the 20 members", {"max_members": 20}),
    Case("zip-bomb-declared", lambda f, d: zipped(f / "x.zip", [("zeros", b"\0" * 4_000_000, FILE)]),
         "'zeros' takes what the members declare past", {"max_bytes": 1_000_000}),
    Case("zip-bomb-members", lambda f, d: zipped(f / "x.zip", [(f"e{i}", b"", FILE) for i in range(50)]),
         "'e20' is beyond the 20 members", {"max_members": 20}),
    Case("clash-file-twice", lambda f, d: tar(f / "x.tgz", [("a", "file", b"1"), ("a", "file", b"2")]),
         "'a' is a file where there is a file"),
    Case("clash-folder-then-file", lambda f, d: tar(f / "x.tgz", [("a", "dir", None), ("a", "file", b"2")]),
         "'a' is a file where there is a folder"),
    Case("clash-file-then-folder", lambda f, d: tar(f / "x.tgz", [("a", "file", b"1"), ("a/b", "file", b"2")]),
         "'a/b' needs a folder 'a' where there is a file"),
    Case("zip-clash-twice", lambda f, d: zipped(f / "x.zip", [("a", b"1", FILE), ("a", b"2", FILE)]),
         "'a' comes twice"),
    Case("good-tar", good_tar, ""),
    Case("good-zip", good_zip, ""),
]


def tree(root: Path, skip: Optional[Path] = None) -> Dict[str, object]:
    """Everything under `root` (links not followed), but `skip`: each path's type and content or link target."""
    found: Dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        if skip is not None and Path(folder) == skip:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = Path(folder, name)
            if skip is not None and path == skip:
                continue
            mode = os.lstat(path).st_mode
            key = str(path.relative_to(root))
            if stat.S_ISLNK(mode):
                found[key] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                found[key] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                found[key] = ("folder" if stat.S_ISDIR(mode) else oct(stat.S_IFMT(mode)),)
    return found


def check(case: Case, work: Path, unpack_fn: Callable[..., object] = unpack) -> str:
    """Run one case in the empty folder `work`; what happened, in words. AssertionError where it failed."""
    archives, outer = work / "archives", work / "outer"
    archives.mkdir()
    outer.mkdir()
    (outer / "flag").write_bytes(b"original")
    dest = outer / "dest"
    if case.prepare is not None:
        case.prepare(outer, dest)
    archive = case.build(archives, dest)
    before = tree(work, skip=dest)
    try:
        unpack_fn(archive, dest, **case.limits)
        error: Optional[BaseException] = None
    except Exception as err:  # noqa: BLE001  (whatever it raised is reported)
        error = err
    outside = tree(work, skip=dest)
    changed = sorted(k for k in set(before) | set(outside) if before.get(k) != outside.get(k))
    assert not changed, f"written outside {dest}: {changed}; {type(error).__name__}: {error}"
    inside = tree(dest) if dest.is_dir() else {}
    odd = sorted(k for k, v in inside.items() if v[0] not in ("file", "folder") and k != "data")
    assert not odd, f"made in {dest} what is not a file or folder: {odd}"
    if case.refuses:
        assert isinstance(error, UnsafeArchive), f"not refused: {type(error).__name__}: {error}"
        assert case.refuses in str(error), f"the refusal does not say {case.refuses!r}: {error}"
        return f"refused: {error}"
    assert error is None, f"a good archive failed: {type(error).__name__}: {error}"
    want = {k.rstrip("/"): ("folder",) if k.endswith("/") else ("file", hashlib.sha256(v).hexdigest())
            for k, v in sources().items()}
    assert tree(dest) == want, f"unpacked {tree(dest)}, not {want}"
    for path in dest.rglob("*"):
        mode = os.lstat(path).st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), f"{path} has mode {oct(mode)}"
        assert mode & stat.S_IRUSR and mode & stat.S_IWUSR, f"{path} has mode {oct(mode)}"
    return f"unpacked {len(want)} members as they were packed"


def main(unpack_fn: Callable[..., object] = unpack) -> int:
    print(f"archive attacks on Python {platform.python_version()} ({sys.executable})")
    failed = 0
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="bench-archive-") as work:
            try:
                said, ok = check(case, Path(work), unpack_fn), True
            except AssertionError as err:
                said, ok = str(err), False
            except Exception:  # noqa: BLE001  (a case that crashed fails, with where)
                said, ok = traceback.format_exc().strip().splitlines()[-1], False
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {case.name}: {said[:300]}")
    print(f"{len(CASES) - failed} of {len(CASES)} cases passed" if failed else f"all {len(CASES)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
