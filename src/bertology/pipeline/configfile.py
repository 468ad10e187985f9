"""Config files read strictly: a key given twice, or aliases that expand past any sensible size, are refused.

YAML allows a mapping to repeat a key (the last one wins) and anchors/aliases (``&a`` / ``*a``) that a loader
builds by reference, so nine anchors of nine aliases each load in milliseconds but expand to 9**9 values for
whatever walks the tree (schema validation, a merge of mappings, a JSON dump). A researcher never means
either, so every config file the workflow reads (``config.yaml``, each ``--configfile``, each profile's
``config.yaml``) and ``bertology validate-config`` go through :func:`check_config_file`, which composes the
file's node graph (linear in its size: an alias is one node, never a copy) and checks it before anything
expands it. Imports only PyYAML (the Snakefile imports this while it builds the DAG).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

import yaml

from bertology.pipeline.errors import UserError

# Nodes (mappings, sequences, scalars; keys included) a config may expand to. The embedded default with every
# key spelt out has a few hundred; a long list of CoNLL-U files or seeds a few thousand.
MAX_CONFIG_NODES = 100_000

MERGE_TAG = "tag:yaml.org,2002:merge"


class ConfigFileError(UserError, ValueError):
    """A config file is malformed (a repeated key, an alias bomb, not YAML); the message names the file."""


def compose_config_file(path: str | Path) -> yaml.Node | None:
    """The node graph of a YAML (or JSON) file, aliases kept as references; None for an empty file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"config file {path} is not UTF-8 text (byte {err.start}): save it as UTF-8") from None
    loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node()
    except yaml.YAMLError as err:
        raise ConfigFileError(f"config file {path} is not valid YAML: {' '.join(str(err).split())}") from None
    finally:
        loader.dispose()


def _expanded(root: Any, children: Callable[[Any], Iterable[Any] | None], limit: int) -> int:
    """The number of items `root` expands to with every shared item written out once per use, counted without
    expanding (each distinct container once, memoised by identity); children(x): x's items, None for a leaf.
    Stops past `limit` (returns limit + 1); a container that contains itself is infinite (limit + 1)."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(x: Any) -> int:
        kids = children(x)
        if kids is None:
            return 1
        key = id(x)
        if key in sizes:
            return sizes[key]
        if key in active:
            return limit + 1
        active.add(key)
        total = 1
        for child in kids:
            total += size(child)
            if total > limit:
                total = limit + 1
                break
        active.discard(key)
        sizes[key] = total
        return total

    return size(root)


def _node_children(n: yaml.Node) -> Iterable[yaml.Node] | None:
    if isinstance(n, yaml.MappingNode):
        return (c for pair in n.value for c in pair)
    if isinstance(n, yaml.SequenceNode):
        return n.value
    return None


def _value_children(v: Any) -> Iterable[Any] | None:
    if isinstance(v, dict):
        return (c for pair in v.items() for c in pair)
    if isinstance(v, (list, tuple)):
        return v
    return None


def expanded_size(node: yaml.Node, limit: int = MAX_CONFIG_NODES) -> int:
    """The number of nodes `node` expands to with every alias written out, counted without expanding anything
    (each distinct node once, memoised); stops counting past `limit` (returns a number above it). A node that
    contains itself (``&a [*a]``) is infinite: returns ``limit + 1``. Time and memory: O(distinct nodes)."""
    return _expanded(node, _node_children, limit)


def expanded_value_size(value: Any, limit: int = MAX_CONFIG_NODES) -> int:
    """:func:`expanded_size` for a loaded value (a loader shares an aliased value, so the same memoised count
    works on dicts and lists); a config already in memory is checked with it before anything walks it."""
    return _expanded(value, _value_children, limit)


def duplicate_keys(node: yaml.Node) -> list[tuple[str, str, int, int]]:
    """Every key written twice in one mapping: (dotted path of the mapping, key, first line, second line),
    lines 1-based. Keys a merge (``<<: *base``) brings in may be overridden, as YAML means; each distinct node
    is visited once."""
    found: list[tuple[str, str, int, int]] = []
    seen: set[int] = set()

    def walk(n: yaml.Node, where: str) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, value_node in n.value:
                if key_node.tag == MERGE_TAG:
                    continue
                if isinstance(key_node, yaml.ScalarNode):
                    ident = (key_node.tag, key_node.value)
                    line = key_node.start_mark.line + 1
                    if ident in first:
                        found.append((where, key_node.value, first[ident], line))
                    else:
                        first[ident] = line
                    name = f"{where}.{key_node.value}" if where else key_node.value
                else:
                    name = where
                walk(value_node, name)
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, f"{where}[{i}]")

    walk(node, "")
    return found


def check_config_node(node: yaml.Node | None, path: str | Path, limit: int = MAX_CONFIG_NODES) -> None:
    """Refuse (one line) a composed config whose aliases expand past `limit` nodes or that repeats a key."""
    if node is None:
        return
    if expanded_size(node, limit) > limit:
        raise ConfigFileError(
            f"config file {path} expands to more than {limit:,} values through its YAML aliases (*name): a config "
            f"has a few hundred; this looks like an alias bomb. Write the values out instead of aliasing aliases")
    dups = duplicate_keys(node)
    if dups:
        where, key, first, second = dups[0]
        dotted = f"{where}.{key}" if where else key
        more = f" (and {len(dups) - 1} more repeated key(s))" if len(dups) > 1 else ""
        raise ConfigFileError(
            f"config file {path}: key '{dotted}' is given twice, on lines {first} and {second}{more}; YAML would "
            f"silently keep only the last. Merge the two into one '{key}:' entry")


def check_config_file(path: str | Path) -> yaml.Node | None:
    """Compose and check one config file (:func:`check_config_node`); return its node graph."""
    node = compose_config_file(path)
    check_config_node(node, path)
    return node


def read_config_file(path: str | Path) -> Any:
    """A config file's value (``yaml.safe_load``'s), after :func:`check_config_file`."""
    node = check_config_file(path)
    if node is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ConfigFileError(f"config file {path} is not valid YAML: {' '.join(str(err).split())}") from None
    finally:
        loader.dispose()


# --------------------------------------------------------------------------------------------------
# the files a Snakemake invocation read


def _option_values(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """Values of command-line options (``--opt V``, ``--opt=V``, and ``--opt V1 V2`` for nargs options until
    the next option)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, val = arg.partition("=")
        if name in names:
            if eq:
                out.append(val)
            else:
                i += 1
                while i < len(argv) and not argv[i].startswith("-"):
                    out.append(argv[i])
                    i += 1
                continue
        i += 1
    return out


def profile_config_files(basedir: str | Path, argv: list[str] | None = None) -> list[Path]:
    """The profile config files a ``snakemake`` command line reads: ``--profile`` (or $SNAKEMAKE_PROFILE) and the
    workflow profile (``--workflow-profile``, else ``profiles/default`` beside the Snakefile), as Snakemake
    resolves them."""
    argv = list(sys.argv[1:] if argv is None else argv)
    profiles = _option_values(argv, ("--profile",)) or [p for p in [os.environ.get("SNAKEMAKE_PROFILE")] if p]
    workflow_profiles = _option_values(argv, ("--workflow-profile",))
    if not workflow_profiles:
        workflow_profiles = [str(Path(basedir) / "profiles" / "default")]
    files: list[Path] = []
    try:
        from snakemake.cli import get_profile_dir
    except ImportError:  # pragma: no cover - Snakemake is a dependency
        return files
    for profile in profiles + [p for p in workflow_profiles if p != "none"]:
        try:
            found = get_profile_dir(profile)
        except Exception:  # noqa: BLE001 - Snakemake itself reports a profile it cannot read
            found = None
        if found is not None and Path(found[1]).is_file():
            files.append(Path(found[1]))
    return files


def check_workflow_config_files(configfiles: Iterable[str | Path], basedir: str | Path,
                                argv: list[str] | None = None) -> None:
    """Check every config file of a Snakemake invocation: its config files (``workflow.configfiles``: the
    Snakefile's ``configfile:`` and each ``--configfile``) and its profiles' ``config.yaml``."""
    seen: set[Path] = set()
    for path in [*map(Path, configfiles), *profile_config_files(basedir, argv)]:
        resolved = path.resolve()
        if resolved in seen or not path.is_file():
            continue
        seen.add(resolved)
        try:
            check_config_file(path)
        except ConfigFileError as err:
            if "not valid YAML" in str(err) and path.suffix == ".json":
                continue  # read as JSON by Snakemake, which reports its own errors
            raise
