"""Bounded YAML reading for configs and sweep files.

A YAML file is small data written by hand, so anything far beyond that is refused before it
costs time or memory: the file's size, nesting depth, the nodes its aliases expand to (a
"billion laughs" file) and the digits of one number. Every failure is a ConfigError naming the
file (and the line, where there is one).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from npu_sim.isa.errors import ConfigError

from .digest import hexdigest
from .paths import os_reason, why_unreadable

MAX_BYTES = 1 << 20        # a preset is 4 KiB; a sweep with long value lists stays far below this


def read_yaml(path: Path, what: str):
    """The YAML document at `path`, with duplicate keys refused; every failure a ConfigError
    that names the file (and the line, for syntax errors)."""
    source = str(path)
    why = why_unreadable(path)
    if why == "no such file":
        raise ConfigError(f"{source}: {what} not found")
    if why:       # a FIFO would block and /dev/zero never end
        raise ConfigError(f"{source}: cannot read {what} ({why})")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {what} ({exc.__class__.__name__}: {os_reason(exc)})") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{source}: {what} larger than {MAX_BYTES >> 20} MiB; expected a small YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: cannot read {what} (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    memo = _memo_path(raw)
    if memo is not None:
        from .cache import read_memo
        try:
            # (a parsed form is no larger than the JSON of a file of MAX_BYTES, less its
            # comments; one that would be is damaged, parsed again below)
            return json.loads(read_memo(memo, 4 * MAX_BYTES))
        except ValueError:
            pass                 # none yet, or damaged: parsed again below
    import yaml
    try:
        doc = parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{source}: {where}invalid YAML: {' '.join(str(problem).split())}") from None
    except (ValueError, OverflowError, TypeError) as exc:   # e.g. a timestamp like 2024-13-45
        raise ConfigError(f"{source}: invalid YAML: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    if memo is not None:
        _remember(memo, doc)
    return doc


def parse_yaml(text: str):
    """The YAML document in `text`; yaml.YAMLError for anything malformed or beyond the bounds."""
    from .yamlparse import parse_yaml as parse
    return parse(text)


def _memo_path(raw: bytes) -> Path | None:
    """Where the parsed form of a file's bytes is kept (the program cache's directory, off with
    it): a cached run's config is then read without importing or running PyYAML."""
    from .cache import cache_dir
    root = cache_dir()
    return None if root is None else root / "yaml" / f"{hexdigest(raw)}.json"


def _remember(memo: Path, doc) -> None:
    try:
        text = json.dumps(doc)
        if json.loads(text) != doc:      # e.g. non-string keys: not kept, parsed each time
            return
        memo.parent.mkdir(parents=True, exist_ok=True)
        part = memo.with_name(f"{memo.name}.{os.getpid()}.part")
        part.write_text(text)
        os.replace(part, memo)
    except (OSError, TypeError, ValueError):   # a date, a read-only disk: only costs a parse
        pass
