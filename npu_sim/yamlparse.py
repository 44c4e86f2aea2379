"""The bounded YAML parser behind npu_sim/yamlread.py: PyYAML's SafeLoader with duplicate keys,
deep nesting, alias expansion and long numbers refused. Imported only when a document is
parsed, not on a run that finds its config already parsed."""
from __future__ import annotations

import re

import yaml

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
