"""Bounded YAML reading for configs and sweep files.

A YAML file is small data written by hand, so anything far beyond that is refused before it
costs time or memory: the file's size, nesting depth, the nodes its aliases expand to (a
"billion laughs" file) and the digits of one number. Every failure is a ConfigError naming the
file (and the line, where there is one).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from npu_sim.isa.errors import ConfigError

from .paths import os_reason, why_unreadable

MAX_BYTES = 1 << 20        # a preset is 4 KiB; a sweep with long value lists stays far below this
MAX_DEPTH = 64             # a config nests 4 levels
MAX_NODES = 100_000        # after alias expansion
MAX_NUMBER_CHARS = 100     # characters of one number


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently) and deep
    nesting."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        # The composer recurses once per level: bound it before Python's recursion limit.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def fetch_flow_collection_start(self, TokenClass):
        # The scanner's cost grows with the square of bracket depth: stop it early too.
        if self.flow_level >= MAX_DEPTH:
            raise yaml.scanner.ScannerError(None, None, f"nesting deeper than {MAX_DEPTH} levels",
                                            self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable key; SafeLoader reports it itself
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)

    # A number too long to be a real figure stays its text, which every numeric field refuses
    # with its key path (Python's int() also refuses 4,300+ digits, with a ValueError).
    def construct_yaml_int(self, node):
        if len(node.value) > MAX_NUMBER_CHARS:
            return self.construct_scalar(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        if len(node.value) > MAX_NUMBER_CHARS:
            return self.construct_scalar(node)
        return super().construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
# YAML 1.1 wants a dot in floats, so `bandwidth_gbps: 1e3` would load as a string; accept it as a number.
_Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                              re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def _expanded_nodes(root) -> int:
    """Nodes the document holds once every alias is expanded (capped just past MAX_NODES);
    a shared subtree counts once per reference but is walked once, so an exponential file
    costs no more than its text. A recursive alias counts as too many."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack[-1]
        kids = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else node.value if isinstance(node, yaml.SequenceNode) else [])
        todo = [k for k in kids if id(k) not in sizes]
        if any(id(k) in open_nodes for k in todo):
            return MAX_NODES + 1
        if todo and id(node) not in open_nodes:
            open_nodes.add(id(node))
            stack.extend(todo)
            continue
        stack.pop()
        if id(node) not in sizes:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(k)] for k in kids), MAX_NODES + 1)
    return sizes[id(root)]


def parse_yaml(text: str):
    """The YAML document in `text`; yaml.YAMLError for anything malformed or beyond the bounds."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node) > MAX_NODES:
            raise yaml.composer.ComposerError(None, None, f"more than {MAX_NODES:,} values once its "
                                              "aliases are expanded", node.start_mark)
        return loader.construct_document(node)
    finally:
        loader.dispose()


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
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{source}: {where}invalid YAML: {' '.join(str(problem).split())}") from None
    except (ValueError, OverflowError, TypeError) as exc:   # e.g. a timestamp like 2024-13-45
        raise ConfigError(f"{source}: invalid YAML: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
