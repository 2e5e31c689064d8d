"""``flydeps diff``: which factories/kernels changed between two git revisions, and why.

Contract: reads revisions with ``git ls-tree -r -z`` (NUL-separated: any file name works,
newlines, tabs and undecodable bytes included) and one ``git cat-file --batch`` process fed
by object ids, never by ``rev:path`` names (a name with a newline would shift every answer);
never checks anything out and never touches the working tree; the second side is another
revision or the working tree's *tracked* files (:class:`TrackedTree`: what ``git ls-files``
lists, with their current contents; ignored and untracked files, such as built ``.so``
extensions, are not part of a revision and are not read). A symbolic link inside the revision reads as the file it
points to, as on disk; one that leaves the tree, dangles or loops is not a file. Both sides
go through the same static analysis; a root changed when its transitive digest differs, and
the helpers that changed are the nodes under it whose own digest differs (or that appeared /
disappeared).
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ..graph import DepGraph
from .analyze import Analysis, analyze
from .project import Diagnostic, FileSystemTree

__all__ = [
    "DiffResult",
    "GitError",
    "GitTree",
    "RootChange",
    "TrackedTree",
    "diff_revisions",
    "render_diff",
    "repo_root",
]


class GitError(RuntimeError):
    """A git command failed; the message carries git's own explanation."""


def _git(args: Sequence[str], cwd: str, data: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


_SYMLINK = "120000"


def _list_tree(listing: bytes) -> dict[str, tuple[str, str]]:
    """``path -> (mode, object id)`` of the blobs in ``git ls-tree -r -z`` output; each
    record is ``<mode> SP <type> SP <oid> TAB <path> NUL`` (submodules are skipped)."""
    objects: dict[str, tuple[str, str]] = {}
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split(" ")
        if kind == "blob":
            objects[name.decode("utf-8", "surrogateescape")] = (mode, oid)
    return objects


def _directories(files: frozenset[str]) -> frozenset[str]:
    """Every directory holding one of ``files`` (POSIX paths), ``"."`` included."""
    dirs: set[str] = {"."}
    for path in files:
        parent = posixpath.dirname(path)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    return frozenset(dirs)


def repo_root(cwd: str = ".") -> str:
    out = _git(["rev-parse", "--show-toplevel"], cwd)
    return os.fsdecode(out[:-1] if out.endswith(b"\n") else out)


class GitTree:
    """The files of one revision, paths relative to the repository root."""

    def __init__(self, repo: str, rev: str) -> None:
        self.repo, self.rev = repo, rev
        self._objects = _list_tree(_git(["ls-tree", "-r", "-z", "--full-tree", rev], repo))
        self._blobs: dict[str, bytes] = {}  # object id -> bytes
        links = [oid for mode, oid in self._objects.values() if mode == _SYMLINK]
        if links:
            self._prefetch(links)
        self.files = frozenset(p for p, (mode, _) in self._objects.items() if mode != _SYMLINK or self._resolve(p))
        self.dirs = _directories(self.files)

    def read(self, path: str) -> bytes:
        path = posixpath.normpath(path)
        oid = self._resolve(path)
        if oid is None:
            raise FileNotFoundError(2, f"not in revision {self.rev}", path)
        if oid not in self._blobs:
            wanted = [o for p, (_, o) in self._objects.items() if p.endswith(".py") and o not in self._blobs]
            self._prefetch([*wanted, oid])  # every source at once; metadata (pyproject.toml) too
        return self._blobs[oid]

    def _resolve(self, path: str) -> str | None:
        """The blob id of ``path``, following symbolic links inside the revision."""
        for _ in range(40):  # as many hops as the kernel allows before ELOOP
            entry = self._objects.get(path)
            if entry is None:
                return None
            mode, oid = entry
            if mode != _SYMLINK:
                return oid
            if oid not in self._blobs:
                self._prefetch([oid])
            target = self._blobs[oid].decode("utf-8", "surrogateescape")
            if target.startswith("/"):
                return None
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            if path.startswith("../") or path == "..":
                return None
        return None

    def _prefetch(self, oids: list[str]) -> None:
        """Blobs by object id through one ``git cat-file --batch`` process: each answer is
        ``<oid> blob <size>\\n<bytes>\\n``, sized, so the contents never shift the parse."""
        unique = list(dict.fromkeys(oids))
        out = _git(["cat-file", "--batch"], self.repo, "".join(f"{o}\n" for o in unique).encode("ascii"))
        pos = 0
        for oid in unique:
            header_end = out.index(b"\n", pos)
            header = out[pos:header_end].split()
            if len(header) != 3 or header[0].decode() != oid or header[1] != b"blob":
                raise GitError(f"git cat-file --batch: unexpected answer {out[pos:header_end]!r} for object {oid}")
            size = int(header[2])
            self._blobs[oid] = out[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1

    def is_file(self, path: str) -> bool:
        return posixpath.normpath(path) in self.files

    def is_dir(self, path: str) -> bool:
        return posixpath.normpath(path) in self.dirs

    def python_files(self, directory: str) -> list[str]:
        directory = posixpath.normpath(directory)
        prefix = "" if directory == "." else directory + "/"
        return sorted(p for p in self.files if p.endswith(".py") and p.startswith(prefix))


class TrackedTree(FileSystemTree):
    """The working tree as ``git diff`` sees it: the files git tracks (``git ls-files``),
    read from disk as they are now (edited, or gone when deleted); an untracked or ignored
    file (a built ``.so``, a scratch module) does not exist here."""

    def __init__(self, repo: str) -> None:
        super().__init__(repo)
        listing = _git(["ls-files", "-z", "--cached", "--full-name"], repo)
        self.tracked = frozenset(os.fsdecode(p) for p in listing.split(b"\0") if p)
        self.tracked_dirs = _directories(self.tracked)

    def read(self, path: str) -> bytes:
        if posixpath.normpath(path) not in self.tracked:
            raise FileNotFoundError(2, "not tracked by git (untracked or ignored)", path)
        return super().read(path)

    def is_file(self, path: str) -> bool:
        return posixpath.normpath(path) in self.tracked and super().is_file(path)

    def is_dir(self, path: str) -> bool:
        return posixpath.normpath(path) in self.tracked_dirs and super().is_dir(path)

    def lexists(self, path: str) -> bool:
        return posixpath.normpath(path) in self.tracked and super().lexists(path)

    def python_files(self, directory: str) -> list[str]:
        return [p for p in super().python_files(directory) if posixpath.normpath(p) in self.tracked]


@dataclass(frozen=True)
class RootChange:
    """One root whose transitive digest differs; ``changed`` are (node id, what) pairs."""

    root: str
    status: str  # "changed", "added", "removed"
    changed: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DiffResult:
    changes: tuple[RootChange, ...]
    unchanged: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...]
    old: Analysis
    new: Analysis


def diff_revisions(
    repo: str,
    rev: str,
    rev2: str | None,
    paths: Sequence[str],
    *,
    roots: Sequence[str] = (),
    use_cache: bool = True,
) -> DiffResult:
    """Compare the roots under ``paths`` (repository-relative, like ``roots``) between two
    revisions; ``rev2=None`` means the working tree."""
    old = analyze(paths, roots=roots, tree=GitTree(repo, rev), use_cache=use_cache)
    new_tree = GitTree(repo, rev2) if rev2 else TrackedTree(repo)
    new = analyze(paths, roots=roots, tree=new_tree, use_cache=use_cache)
    old_digests, new_digests = old.digests, new.digests
    changes, unchanged = [], []
    for root in dict.fromkeys((*new.graph.roots, *old.graph.roots)):
        if root not in old.graph.nodes:
            changes.append(RootChange(root, "added", ()))
        elif root not in new.graph.nodes:
            changes.append(RootChange(root, "removed", ()))
        elif old_digests[root] != new_digests[root]:
            changes.append(RootChange(root, "changed", tuple(_changed_nodes(old.graph, new.graph, root))))
        else:
            unchanged.append(root)
    diagnostics = tuple(sorted(set(old.diagnostics) | set(new.diagnostics)))
    return DiffResult(tuple(changes), tuple(unchanged), diagnostics, old, new)


def _changed_nodes(old: DepGraph, new: DepGraph, root: str) -> list[tuple[str, str]]:
    before = set(old.reachable(root))
    after = list(new.reachable(root))
    out = []
    for nid in after:
        if nid not in before:
            out.append((nid, "added"))
        elif old.nodes[nid].digest != new.nodes[nid].digest:
            out.append((nid, "changed"))
    out.extend((nid, "removed") for nid in sorted(before - set(after)))
    return out


def render_diff(result: DiffResult) -> str:
    """Human-readable diff report: each changed root, then the helpers that changed."""
    lines = []
    for change in result.changes:
        lines.append(f"{change.status:8} {change.root}")
        for nid, what in change.changed:
            node = result.new.graph.nodes.get(nid) or result.old.graph.nodes.get(nid)
            where = f"  {node.location}" if node is not None and node.location else ""
            lines.append(f"    {what:8} {nid}{where}")
    lines.append(f"{len(result.changes)} changed, {len(result.unchanged)} unchanged")
    return "\n".join(lines) + "\n"
