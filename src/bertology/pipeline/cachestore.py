"""One entry per key in Snakemake's between-workflow cache (``snakemake --cache``), however many experiments store it.

Snakemake's local cache (``snakemake.caching.local.OutputFileCache``) fetches an entry when it is there and
otherwise runs the job and stores its output with ``shutil.move``: two experiments that need the same entry at
once both miss it, both run, and the second move puts its output *inside* the first entry
(``<hash>/<hash>/...``). Here, patched into that class by :func:`canonical_entries` (the workflow's process,
under --cache):

- :func:`store_output`: holding the entry's lock (:func:`entry_lock`, an ``flock`` on a hidden file beside the
  entry while it is held), the output goes into the cache as Snakemake moves it, unless an entry is already
  there (stored by another experiment meanwhile): then both are checked against their digests
  (:func:`bertology.pipeline.outputcache.damage`, :func:`~bertology.pipeline.outputcache.stray`), the job's own
  copy is dropped and its output linked to the entry as a fetch links it (:func:`link_entry`). The final step is
  an ``os.rename``, which never moves a directory into another, so even without a working lock (a file system
  that ignores ``flock``) no entry is nested;
- :func:`check_entry`: a fetch refuses an entry that holds a file its digest does not list, naming the entry, the
  file and the command that removes it.

Standard library only (read by the Snakefile); Snakemake is imported by :func:`canonical_entries` alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bertology.pipeline.errors import snakemake_command
from bertology.pipeline.outputcache import DIGEST_FILE, FILE_MODE, CacheEntryError, damage, stray

#: what a lock file's name adds to its entry's (``.<hash><ext>.lock``, hidden beside the entry)
LOCK_SUFFIX = ".lock"


def lock_path(entry: Path) -> Path:
    """The lock file of a cache entry: ``.<name>.lock`` beside it."""
    return entry.parent / f".{entry.name}{LOCK_SUFFIX}"


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold the exclusive lock of cache entry `entry`: an ``flock`` on :func:`lock_path`, created readable by all
    so that any user of the cache can take it, and removed on release (so the cache holds no lock files between
    stores). A process that locked a file another has since removed tries again on the new one. Blocks while
    another process holds it."""
    path = lock_path(entry)
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # removed (or replaced) by its holder on release: lock the current one
    try:
        yield
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)  # releases the lock


def _digest(directory: Path) -> dict | None:
    """The files of `directory`'s digest ({relative path: {"size", "sha256"}}); None when it has none or it cannot
    be read."""
    try:
        return json.loads((directory / DIGEST_FILE).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def entry_problem(directory: Path) -> str | None:
    """What is wrong with a cached output or entry `directory` against its digest, in a few words ("holds X, which
    its digest does not list", "config.json is missing"); None when it matches or has no digest (nothing to
    check) or is not a directory."""
    if not directory.is_dir() or not (directory / DIGEST_FILE).exists():
        return None
    files = _digest(directory)
    if files is None:
        return f"its {DIGEST_FILE} cannot be read"
    extra = stray(directory, files)
    if extra is not None:
        return f"holds {extra}, which its digest does not list"
    return damage(directory, files)


def link_entry(entry: Path, output: Path) -> None:
    """Link `output` to cache entry `entry` as Snakemake's fetch does: a directory of symlinks, one per item of a
    directory entry; one symlink to a file entry."""
    if entry.is_dir():
        output.mkdir(parents=True, exist_ok=True)
        for item in sorted(entry.iterdir()):
            os.symlink(item, output / item.name)
    else:
        os.symlink(entry, output)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def store_output(output: Path, entry: Path,
                 set_permissions: Callable[[Path], None]) -> tuple[str, ...] | None:
    """Put job output `output` into the cache as `entry`, holding the entry's lock (:func:`entry_lock`). No entry
    there: the output is moved into a temporary directory of the cache (a copy across file systems), given the
    cache's permissions (`set_permissions`), renamed to `entry` and replaced by a symlink to it (Snakemake's
    store). An entry already there (another experiment stored it since this job missed it): the entry and the
    output are each checked against their own digest (:func:`entry_problem`), the output is removed and linked to
    the entry (:func:`link_entry`), and nothing in the cache changes. Returns None when this call stored the
    entry, else the files whose digest differs between the dropped copy and the entry (sorted; empty: identical;
    a fine-tuned model's ``training.json`` holds its timings, and a computation that is not deterministic, e.g.
    on a GPU, differs in its weights: the entry is kept all the same). A damaged entry already there, or
    an output that does not match its own digest, is one :class:`CacheEntryError` naming it and the fix; the
    output is then left in place."""
    with entry_lock(entry):
        if not os.path.lexists(entry):
            with tempfile.TemporaryDirectory(dir=entry.parent, prefix=".bertology-store-") as tmpdir:
                tmp = Path(tmpdir) / entry.name
                shutil.move(output, tmp, copy_function=shutil.copy)
                set_permissions(tmp)
                try:
                    os.rename(tmp, entry)  # never into a directory: a non-empty entry made meanwhile fails it
                except OSError:
                    if not os.path.isdir(entry):
                        raise
                    shutil.move(tmp, output)  # made without the lock (a file system that ignores flock): keep it
                else:
                    os.symlink(entry, output)
                    return None
        problem = entry_problem(entry)
        if problem is not None:
            raise CacheEntryError(f"cannot store {output} in the cache: the entry {entry} already there (stored by "
                                  f"another experiment) {problem}; remove it with `rm -rf {entry}` and re-run "
                                  f"(`{snakemake_command(str(output), cache=True)}`)")
        problem = entry_problem(output)
        if problem is not None:
            raise CacheEntryError(f"{output} does not match the digest written with it ({problem}), so it is not "
                                  f"stored in the cache; delete it and re-run "
                                  f"(`rm -rf {output}`; `{snakemake_command(str(output), cache=True)}`)")
        kept, dropped = _digest(entry) or {}, _digest(output) or {}
        differ = tuple(sorted(rel for rel in {*kept, *dropped} if kept.get(rel) != dropped.get(rel)))
        _remove(output)
        link_entry(entry, output)
        return differ


def check_entry(entry: Path, output: Path) -> None:
    """Refuse, in one line, to fetch cache entry `entry` for `output` when it holds a file its digest does not list
    (:func:`~bertology.pipeline.outputcache.stray`): naming the file and the command that removes the entry. The
    digests of its files are checked by every read, not here."""
    if not entry.is_dir():
        return
    files = _digest(entry)
    extra = stray(entry, files) if files is not None else None
    if extra is not None:
        raise CacheEntryError(f"the cache entry {entry} for {output} holds {extra}, which its digest does not list "
                              f"(a second copy stored inside it, or a file added), so it is not used; remove it with "
                              f"`rm -rf {entry}` and re-run (`{snakemake_command(str(output), cache=True)}` computes "
                              f"it afresh and caches it again)")


def canonical_entries() -> None:
    """Make Snakemake's local output cache store through :func:`store_output` (one entry per key, whichever
    experiment stores first) and fetch through :func:`check_entry`. Called by the workflow under --cache;
    Snakemake's class is patched in this process only."""
    from snakemake.caching.local import OutputFileCache
    from snakemake.exceptions import WorkflowError
    from snakemake.logging import logger

    if getattr(OutputFileCache.store, "_bertology", False):
        return
    fetch = OutputFileCache.fetch

    async def store(self, job) -> None:
        if not os.access(self.path, os.W_OK):
            raise WorkflowError(f"Cannot access cache location {self.path}. Please ensure that it is present and "
                                f"writeable.")
        for outputfile, cachefile in await self.get_outputfiles_and_cachefiles(job):
            if not os.path.exists(outputfile):
                raise WorkflowError(f"Cannot move output file {outputfile} to cache. It does not exist (maybe it "
                                    f"was not created by the job?).")
            self.check_writeable(cachefile)
            differ = store_output(Path(outputfile), cachefile, self.set_permissions)
            if differ is None:
                logger.info(f"Moved output file {outputfile} to cache as {cachefile}.")
            else:
                logger.info(f"{cachefile} was stored by another experiment meanwhile: {outputfile} now links to it "
                            f"and this job's copy is dropped ("
                            f"{'its files differ from the entry: ' + ', '.join(differ) if differ else 'identical'}).")

    async def checked_fetch(self, job) -> None:
        for outputfile, cachefile in await self.get_outputfiles_and_cachefiles(job):
            if cachefile.exists():
                check_entry(cachefile, Path(outputfile))
        await fetch(self, job)

    store._bertology = True
    OutputFileCache.store = store
    OutputFileCache.fetch = checked_fetch
