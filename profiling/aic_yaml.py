"""A per-process cache of the YAML files AIConfigurator re-reads on every compile.

AIConfigurator 0.12 parses its system spec and `query_versions.yaml` again (with PyYAML's
pure-Python SafeLoader) for each `EngineHandle.compile` and `estimate_kv_cache`: about six
files per compile, ~23 ms each, which was 2/3 of the time of the full auto profiling grid
(cProfile of one GPU's chunk: 768 YAML loads, 18 of 26 s).

`install()` points the `yaml` name inside AIConfigurator's modules (only those) at a proxy
whose `safe_load` / `load(..., Loader=SafeLoader)` parse each file once per process with
libyaml's CSafeLoader when PyYAML has it (the same YAML 1.1 resolver and constructors, so the
same values) and return a deep copy, so a caller that mutates what it got cannot change the
cache. Files are keyed by (real path, mtime, size): AIConfigurator's data is read-only
package data, and an edited file is re-read. Streams without a file name are not cached.

This is module-level state in a worker process, on purpose: it lives as long as the Dask
worker, which is what lets later compiles on that worker skip the parsing. Nothing else
in the process sees it (PyYAML itself is untouched).
"""

from __future__ import annotations

import copy
import importlib
import os
from typing import IO, Any

import yaml

_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PATCHED_MODULES = (
    "aiconfigurator_core.sdk.perf_database",
    "aiconfigurator_core.sdk.attention_lanes",
    "aiconfigurator_core.sdk.operations.base",
    "aiconfigurator_core.sdk.utils",
)
_parsed: dict[tuple[str, int, int], Any] = {}


def _file_key(stream: Any) -> tuple[str, int, int] | None:
    name = getattr(stream, "name", None)
    if not isinstance(name, str) or not os.path.isfile(name):
        return None
    stat = os.stat(name)
    return os.path.realpath(name), stat.st_mtime_ns, stat.st_size


def cached_safe_load(stream: IO[str] | str) -> Any:
    """`yaml.safe_load`, parsed once per file and process; returns a private copy."""
    key = _file_key(stream)
    if key is None:
        return yaml.load(stream, Loader=_SAFE_LOADER)
    if key not in _parsed:
        _parsed[key] = yaml.load(stream, Loader=_SAFE_LOADER)
    return copy.deepcopy(_parsed[key])


class _CachedYaml:
    """Stands in for the `yaml` module inside AIConfigurator: cached safe loads, the rest
    delegated to PyYAML."""

    def __getattr__(self, name: str) -> Any:
        return getattr(yaml, name)

    @staticmethod
    def safe_load(stream: IO[str] | str) -> Any:
        return cached_safe_load(stream)

    @staticmethod
    def load(stream: IO[str] | str, Loader: Any = None) -> Any:
        if Loader in (yaml.SafeLoader, _SAFE_LOADER):
            return cached_safe_load(stream)
        return yaml.load(stream, Loader=Loader)


def install() -> None:
    """Route AIConfigurator's YAML reads through the cache (idempotent)."""
    proxy = _CachedYaml()
    for name in _PATCHED_MODULES:
        module = importlib.import_module(name)
        if getattr(module, "yaml", None) is yaml:
            module.yaml = proxy  # type: ignore[attr-defined]


def cached_files() -> int:
    """How many files this process holds parsed (for tests and diagnostics)."""
    return len(_parsed)
