"""Snakemake's between-workflow cache (``snakemake --cache``, SNAKEMAKE_OUTPUT_CACHE): what bertology adds to it.

Snakemake moves each output of a cached rule (a fine-tuned model, an attention store) into the cache directory as
``<hash><ext>`` and leaves a symlink (or, for the next experiment, a directory of symlinks) in its place; it
checks nothing it hands back, and leaves every entry writable by anyone (files 0666, directories 0777).
Here:

- :func:`record_digest`: the job that makes a model or a store writes :data:`DIGEST_FILE` into it last (sha256
  and size of every file of a model; of a store its metadata, the chunk and shard files having checksums of their
  own that every read checks), so the digest enters the cache with the output;
- :func:`verify_digest`: every read of a model directory or store checks it against that digest, in full once per
  process; a damaged entry is named by its
  cache path with the command that removes it (:func:`eviction`); an entry others can write is refused
  (:func:`check_not_world_writable`);
- :func:`share_permissions`: the workflow's entries get the modes a shared cache needs (:data:`FILE_MODE`,
  :data:`DIR_MODE`: group-writable directories at most) and the cache directory's group;
- :func:`check_cache_writable`: a cached job checks, before it computes anything, that it can store its output.

Standard library only (read by the Snakefile and by every step that loads a model or opens a store).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from bertology.pipeline.errors import UserError, snakemake_command

#: the digest of a model directory or store, a file inside it (so it enters the cache with the output)
DIGEST_FILE = "bertology-digest.json"
#: the cache directory Snakemake reads
CACHE_ENV = "SNAKEMAKE_OUTPUT_CACHE"
#: set by the workflow under --cache (to the cache directory), so a cached job checks it can store its output
CACHING_ENV = "BERTOLOGY_OUTPUT_CACHE"
#: a cache entry's files: read by all, written by the owner only (rw-r--r--)
FILE_MODE = 0o644
#: a cache entry's directories: the group may remove entries (rwxrwxr-x), nobody else
DIR_MODE = 0o775
#: files Snakemake puts in a directory output (never in the digest)
_IGNORED = (".snakemake_timestamp",)


class CacheEntryError(UserError, ValueError):
    """A cached model or store does not match its digest, or others can write it; or the cache cannot be written."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _files(directory: Path) -> list[str]:
    """Every file under `directory` (symlinks followed), relative, sorted; the digest and Snakemake's files out."""
    out = []
    for root, _, names in os.walk(directory, followlinks=True):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), directory)
            if rel != DIGEST_FILE and name not in _IGNORED:
                out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def record_digest(directory: str | Path, *, store: bool = False) -> Path:
    """Write :data:`DIGEST_FILE` into `directory` (a model directory, or with store=True a store; complete): per
    file its size and sha256; of a store only its metadata (``*.json``): every chunk and shard file carries its own
    checksum, which every read checks, and a missing one is found by the store's own checks. Returns the
    digest's path."""
    directory = Path(directory)
    files = {}
    for rel in _files(directory):
        if store and not rel.endswith(".json"):
            continue
        path = directory / rel
        files[rel] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    out = directory / DIGEST_FILE
    out.write_text(json.dumps({"format": 1, "algorithm": "sha256", "files": files}, indent=0, sort_keys=True))
    return out


def cache_entry(path: str | Path) -> Path | None:
    """The entry of $SNAKEMAKE_OUTPUT_CACHE an output resolves to: the target of `path` when it is a symlink into
    the cache (the experiment that stored it), the entry holding the targets of its files when it is a directory of
    such symlinks (one that fetched it), or the entry itself for a path inside the cache (a link already resolved).
    None without a cache or for an output that is not in it (a symlink elsewhere is no cache entry)."""
    cache = os.environ.get(CACHE_ENV)
    if not cache:
        return None
    root = Path(os.path.realpath(cache))

    def entry_of(p: Path) -> Path | None:
        real = Path(os.path.realpath(p))
        return root / real.relative_to(root).parts[0] if real != root and root in real.parents else None

    path = Path(path)
    entry = entry_of(path)
    if entry is not None or path.is_symlink() or not path.is_dir():
        return entry
    for child in sorted(path.iterdir()):
        if child.is_symlink() and child.name not in _IGNORED:
            return entry_of(child)
    return None


def is_entry(path: str | Path, entry: Path) -> bool:
    """Whether `path` is the cache entry itself (a link already resolved), not an experiment's link to it."""
    return not Path(path).is_symlink() and Path(os.path.realpath(path)) == entry


def eviction(path: str | Path) -> str:
    """How to remove a damaged output: its cache entry and the experiment's link when it came from the cache
    (Snakemake then computes it afresh and caches it again), the output alone otherwise."""
    entry = cache_entry(path)
    if entry is None:
        return f"delete {path} and re-run (`rm -rf {path}`; `{snakemake_command(path)}` re-creates it)"
    if is_entry(path, entry):
        return (f"it is the cache entry {entry} ($SNAKEMAKE_OUTPUT_CACHE): remove it with `rm -rf {entry}` and re-run "
                f"with --cache (the experiment's link to it then dangles: Snakemake computes the output afresh, a "
                f"directory of links to it must be removed too)")
    return (f"it is the cache entry {entry} ($SNAKEMAKE_OUTPUT_CACHE): remove it and this experiment's link with "
            f"`rm -rf {entry} {path}` and re-run (`{snakemake_command(path, cache=True)}` computes it afresh and "
            f"caches it again)")


def _world_writable(paths: Iterable[Path]) -> Path | None:
    for p in paths:
        if os.stat(p).st_mode & stat.S_IWOTH:
            return p
    return None


def check_not_world_writable(path: str | Path) -> None:
    """Refuse, in one line, an output taken from the cache whose entry (a file or directory of it) anyone can
    write: a model or store others could have changed. Outputs that are not cache entries are not checked."""
    entry = cache_entry(path)
    if entry is None:
        return
    inside = [entry] + ([Path(r) / n for r, ds, fs in os.walk(entry) for n in [*ds, *fs]] if entry.is_dir() else [])
    bad = _world_writable(inside)
    if bad is not None:
        raise CacheEntryError(f"{path}: its cache entry {entry} can be written by anyone ({bad} is "
                              f"{stat.filemode(os.stat(bad).st_mode)}), so it cannot be trusted; take write "
                              f"permission away from others with `chmod -R o-w {entry}` if you trust its contents, "
                              f"else remove it with `rm -rf {entry} {path}` and re-run")


#: per resolved directory, the state (:func:`_state`) of its digest and hashed files when it was last verified
_VERIFIED: dict[str, tuple] = {}


def _state(directory: Path, rels: Iterable[str]) -> tuple:
    """(path, inode, size, mtime) of each of `rels` under `directory`; None for a file that cannot be stat'ed."""
    out = []
    for rel in rels:
        try:
            s = os.stat(directory / rel)
        except OSError:
            return None
        out.append((rel, s.st_ino, s.st_size, s.st_mtime_ns))
    return tuple(out)


def damage(directory: Path, files: dict) -> str | None:
    """The first file of a digest's `files` ({relative path: {"size", "sha256"}}) that `directory` does not hold as
    recorded, with what is wrong ("config.json is missing", "... has 12 bytes, not the 14 recorded", "... differs
    from the digest ..."); None when every one matches."""
    for rel, want in sorted(files.items()):
        path = directory / rel
        if not path.exists():
            problem = "is missing"
        elif path.stat().st_size != want.get("size"):
            problem = f"has {path.stat().st_size} bytes, not the {want.get('size')} recorded"
        elif "sha256" in want and _sha256(path) != want["sha256"]:
            problem = "differs from the digest recorded when it was made (its sha256 does not match)"
        else:
            continue
        return f"{rel} {problem}"
    return None


def stray(directory: str | Path, listed: Iterable[str]) -> str | None:
    """The first file under `directory` (relative, sorted; links followed) that a digest listing `listed` does not
    account for, None when there is none. Accounted for: the digest itself, Snakemake's timestamp file, every
    listed file, and every file inside an array of a store whose ``zarr.json`` is listed (``attention/c/0/0`` for a
    listed ``attention/zarr.json``: chunk and shard files carry their own checksums, so a store's digest lists its
    metadata only). A whole second output moved inside an entry (``<hash>/<hash>/...``) is such a file."""
    listed = set(listed)
    arrays = tuple(rel[: -len("zarr.json")] for rel in listed if rel.endswith("/zarr.json"))
    for rel in _files(Path(directory)):
        if rel not in listed and not rel.startswith(arrays):
            return rel
    return None


def verify_digest(directory: str | Path, what: str = "model") -> None:
    """Check a model directory or store against its :data:`DIGEST_FILE` (none: only the permissions are
    checked): every file present, of its size, with its sha256 (:func:`damage`); for an output taken from the
    cache, also that its entry holds nothing else (:func:`stray`). A mismatch is one
    :class:`CacheEntryError` naming the file, the cache entry and the command that removes it
    (:func:`eviction`). An output taken from the cache is also refused when others can write it
    (:func:`check_not_world_writable`). Checked in full once per process; a later call (a store is opened once per
    chunk read) only compares the inode, size and mtime of the digest and of the files it hashes with those of that
    check."""
    directory = Path(directory)
    digest_path = directory / DIGEST_FILE
    key = str(directory.resolve())
    seen = _VERIFIED.get(key)
    if seen is not None and _state(directory, [r for r, *_ in seen]) == seen:
        return
    check_not_world_writable(directory)
    if not digest_path.exists():
        _VERIFIED[key] = ()  # nothing more to check
        return
    try:
        files = json.loads(digest_path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CacheEntryError(f"{digest_path} is unreadable ({type(err).__name__}): the {what} cannot be checked; "
                              f"{eviction(directory)}") from None
    hashed = [DIGEST_FILE, *(rel for rel, want in sorted(files.items()) if "sha256" in want)]
    state = _state(directory, hashed)
    problem = damage(directory, files)
    if problem is not None:
        raise CacheEntryError(f"the {what} {directory} is damaged: {problem}; {eviction(directory)}")
    entry = cache_entry(directory)
    extra = stray(entry, files) if entry is not None and entry.is_dir() else None
    if extra is not None:
        raise CacheEntryError(f"the {what} {directory} is damaged: its cache entry {entry} holds {extra}, which its "
                              f"digest does not list (a second copy stored inside it, or a file added); "
                              f"{eviction(directory)}")
    if state is not None:
        _VERIFIED[key] = state


def check_cache_writable(cache: str | Path | None = None) -> None:
    """Refuse, in one line, a cache directory this job cannot store its output in (missing, not a directory, not
    writable): checked by a cached job before it computes anything, since Snakemake finds out only when it moves
    the finished output and then deletes it. `cache`: default the workflow's (:data:`CACHING_ENV`; nothing to check
    when the job is not cached)."""
    cache = cache if cache is not None else os.environ.get(CACHING_ENV)
    if not cache:
        return
    try:
        fd, probe = tempfile.mkstemp(dir=cache, prefix=".bertology-write-check-")
    except OSError as err:
        raise CacheEntryError(f"the output cache {cache} (${CACHE_ENV}) cannot be written ({err.strerror or err}), "
                              f"so this job's output could not be stored in it: create it or fix its permissions "
                              f"(`mkdir -p {cache} && chmod {DIR_MODE | stat.S_ISGID:o} {cache}`), or run without "
                              f"--cache") from None
    os.close(fd)
    os.unlink(probe)


def check_cache_dir(cache: str | Path | None) -> str | None:
    """The workflow's check at start under --cache: why the cache directory is unusable (unset, missing, not a
    readable directory), in one line; None when it can be read. Whether it can be written is checked by each
    cached job that has to run (an entry already there is only read): :func:`check_cache_writable`."""
    if not cache:
        return (f"--cache needs ${CACHE_ENV} set to a directory every experiment can read "
                f"(`export {CACHE_ENV}=/shared/bertology-cache`)")
    p = Path(cache)
    if not p.is_dir():
        return f"${CACHE_ENV}={cache} is not a directory: create it (`mkdir -p {cache}`) or point it at one"
    if not os.access(p, os.R_OK | os.X_OK):
        return f"${CACHE_ENV}={cache} cannot be read: give yourself read access (`chmod u+rx {cache}`)"
    return None


def set_entry_permissions(entry: str | Path, group: int | None = None) -> None:
    """Give a cache entry the modes of a shared cache: files :data:`FILE_MODE`, directories :data:`DIR_MODE`; and
    `group` (the cache directory's) where the user may give it (else the entry keeps its own)."""
    entry = Path(entry)

    def one(p: Path, mode: int) -> None:
        os.chmod(p, mode)
        if group is not None:
            try:
                os.chown(p, -1, group)
            except OSError:
                pass

    if entry.is_dir():
        for root, dirs, files in os.walk(entry):
            for d in dirs:
                one(Path(root) / d, DIR_MODE)
            for f in files:
                one(Path(root) / f, FILE_MODE)
        one(entry, DIR_MODE)
    else:
        one(entry, FILE_MODE)


def share_permissions() -> None:
    """Make Snakemake's local output cache give its entries :func:`set_entry_permissions`' modes instead of its own
    (files 0666, directories 0777: anyone could change another user's models and stores). Called by the workflow
    under --cache; Snakemake's class is patched in this process only."""
    from snakemake.caching.local import OutputFileCache

    if getattr(OutputFileCache.set_permissions, "_bertology", False):
        return

    def set_permissions(self, entry):
        try:
            group = os.stat(self.path).st_gid
        except OSError:
            group = None
        set_entry_permissions(entry, group)

    set_permissions._bertology = True
    OutputFileCache.set_permissions = set_permissions
