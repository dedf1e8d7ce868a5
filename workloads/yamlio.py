"""Reading YAML input files safely: the one reader behind workload, architecture and mapping files.

``read_yaml(text, source, error)`` parses with PyYAML's safe loader and
turns everything a user's file can do wrong into one ``error`` (a
FrameworkError subclass) naming the file, the line and the reason:

* malformed YAML (tabs for indentation, an unclosed bracket, control bytes);
* a key given twice in one mapping (PyYAML silently keeps the last one);
* nesting deeper than ``MAX_DEPTH`` levels (``[[[[...]]]]`` would otherwise end
  in Python's RecursionError);
* aliases that expand to more than ``MAX_NODES`` nodes (a "billion laughs"
  document: a few lines whose value, once walked, has 10**9 elements) and an
  alias used inside its own anchor (a cyclic value);
* integers with more than ``MAX_INT_DIGITS`` digits.

``read_text_file(path, source, error)`` reads a file as UTF-8 text with the
same kind of one-line error (no such file, a directory, binary bytes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_DEPTH = 100             # nested collections; real input files nest fewer than 10 levels
MAX_NODES = 1_000_000       # nodes of the document with every alias expanded
MAX_INT_DIGITS = 30         # an integer written with more digits is no loop bound, size or count

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLLimitError(yaml.YAMLError):
    """A document that is valid YAML but exceeds one of this module's limits."""

    def __init__(self, problem: str, mark=None):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects repeated keys, deep nesting, alias bombs and huge integers."""

    _depth = 0

    def fetch_flow_collection_start(self, TokenClass):
        # '[' and '{' nest in the scanner first, which slows down quadratically with the depth: stop it there
        if self.flow_level >= MAX_DEPTH:
            raise YAMLLimitError(f"nesting too deep (more than {MAX_DEPTH} levels)", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YAMLLimitError(f"nesting too deep (more than {MAX_DEPTH} levels)", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _check_expansion(node)
        return node


def _check_expansion(root: yaml.Node) -> None:
    """Reject a node graph that is cyclic or whose aliases expand to more than MAX_NODES nodes."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_NODES:
                raise YAMLLimitError(f"aliases expand to more than {MAX_NODES:,} values (an alias bomb?)",
                                     node.start_mark)
            size[key] = total
            continue
        if key in size:
            continue
        if key in on_path:
            raise YAMLLimitError("an alias refers to the collection that contains it (a cyclic value)",
                                 node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise YAMLLimitError("an alias refers to the collection that contains it (a cyclic value)",
                                     child.start_mark)
            if id(child) not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # '<<: *defaults' merges; its keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            repeated = key in seen
        except TypeError:  # an unhashable key: construct_mapping reports it
            continue
        if repeated:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice (first on line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: StrictLoader, node: yaml.ScalarNode) -> int:
    digits = sum(ch.isdigit() or ch in "abcdefABCDEF" for ch in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise YAMLLimitError(f"integer with {digits} digits is too large", node.start_mark)
    return loader.construct_yaml_int(node)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_yaml(text: str) -> Any:
    """The parsed document; raises yaml.YAMLError (YAMLLimitError for this module's limits)."""
    try:
        return yaml.load(text, Loader=StrictLoader)
    except RecursionError:  # a limit above should come first; never a traceback
        raise YAMLLimitError("nesting too deep") from None
    except ValueError as exc:  # a scalar PyYAML's constructors cannot convert (e.g. a bad timestamp)
        raise YAMLLimitError(f"bad value: {exc}") from None


def yaml_error_reason(exc: yaml.YAMLError) -> str:
    """One line for a YAML error: what is wrong and where."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    problem = " ".join(str(problem).split())
    if isinstance(exc, YAMLLimitError):
        return f"{problem}{where}"
    return f"malformed YAML{where}: {problem}"


def read_yaml(text: str, source: str = "<string>", error: type[Exception] | None = None) -> Any:
    """Parse YAML text; ``error`` (WorkloadError by default) naming ``source``, the line and the reason."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise _error(error)(yaml_error_reason(exc), source=source) from None


def read_text_file(path: str | Path, source: str | None = None, error: type[Exception] | None = None) -> str:
    """The UTF-8 text of ``path``; ``error`` for a missing, unreadable or binary file."""
    source = str(path) if source is None else source
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _error(error)("cannot read: no such file", source=source) from None
    except IsADirectoryError:
        raise _error(error)("cannot read: a directory, not a file", source=source) from None
    except OSError as exc:
        raise _error(error)(f"cannot read: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise _error(error)(f"cannot read: not a text file (byte {exc.start} is not UTF-8)", source=source) from None


def _error(error: type[Exception] | None) -> type[Exception]:
    if error is not None:
        return error
    from .errors import WorkloadError

    return WorkloadError
