"""A conformance test folder as `npu-sim conformance` reads it: desc.json's fields checked for
the JSON types npu-sim uses them as, and every file the test names read only when it is a
regular file, an .npy's header checked before its data (the helpers `run --input` uses). What
fails is the folder's fault: a MalformedTestError naming the field or file and why."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from npu_sim.isa.errors import InputError, ModelError

from .cli_files import check_data_size, open_input, read_npy_header
from .paths import os_reason, why_unreadable
from .viewer import show_json_value

MAX_DESC_BYTES = 16 << 20            # Arm's desc.json files are a few KiB


class MalformedTestError(InputError):
    """A test folder that cannot be read as a conformance test (its desc.json, or a file it
    names, is missing, unreadable or inconsistent)."""

    kind = "malformed test"


_STRINGS = "a list of strings"
# The fields npu-sim reads, by dotted path, and their JSON types (all optional but tosa_file).
_FIELDS = {"tosa_file": str, "ifm_name": _STRINGS, "ifm_file": _STRINGS, "ofm_name": _STRINGS,
           "ofm_file": _STRINGS, "expected_result_file": _STRINGS, "expected_failure": bool,
           "test_details": dict, "test_details.operator": str, "test_requirements": dict,
           "test_requirements.profiles_supported": _STRINGS,
           "test_requirements.extensions_required": _STRINGS,
           "test_requirements.bounds_file_required": bool, "meta": dict, "meta.compliance": dict,
           "meta.compliance.tensors": dict, "meta.data_gen": dict, "meta.data_gen.tensors": dict}
_TYPE_NAMES = {str: "a string", bool: "true or false", dict: "an object", _STRINGS: _STRINGS}


def field(desc: dict, path: str, default=None):
    """desc's value at a dotted path (check_desc has checked the objects on the way)."""
    for key in path.split("."):
        if key not in desc:
            return default
        desc = desc[key]
    return desc


def _fits(value, want) -> bool:
    if want == _STRINGS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, want)


def check_desc(desc, name: str = "desc.json") -> dict:
    """desc when its fields have the types, counts and file names npu-sim needs, else a
    MalformedTestError naming the field."""
    def bad(why):
        return MalformedTestError(f"{name}: {why}")

    if not isinstance(desc, dict):
        raise bad(f"holds {show_json_value(desc)}, expected a JSON object")
    if "tosa_file" not in desc:
        raise bad("'tosa_file' (the graph's file) is missing")
    for path, want in _FIELDS.items():
        parent, _, key = path.rpartition(".")
        holder = field(desc, parent, {}) if parent else desc
        if key in holder and not _fits(holder[key], want):
            raise bad(f"'{path}' is {show_json_value(holder[key])}, expected {_TYPE_NAMES[want]}")
    for names, files in (("ifm_name", "ifm_file"), ("ofm_name", "ofm_file"),
                         ("ofm_file", "expected_result_file")):
        n, m = len(desc.get(names, [])), len(desc.get(files, []))
        if n != m and (files != "expected_result_file" or m):    # ([] there: none listed)
            raise bad(f"'{names}' has {n} entries, '{files}' {m}")
    for key in ("tosa_file", "ifm_file", "ofm_file", "expected_result_file"):
        names = desc.get(key, [])
        for f in [names] if isinstance(names, str) else names:
            if "\0" in f:                          # no OS takes it in a path
                raise bad(f"'{key}' entry {show_json_value(f)} holds a NUL character")
    for f in desc.get("ofm_file", []):
        if f in ("", ".", "..") or os.path.basename(f) != f:    # outputs are written by name
            raise bad(f"'ofm_file' entry {show_json_value(f)} is not a plain file name")
    for path in ("meta.compliance.tensors", "meta.data_gen.tensors"):
        for tensor, entry in field(desc, path, {}).items():
            if not isinstance(entry, dict):
                raise bad(f"'{path}.{tensor}' is {show_json_value(entry)}, expected an object")
    for tensor, entry in field(desc, "meta.compliance.tensors", {}).items():
        if not isinstance(entry.get("rescale_inexact_info", {}), dict):
            raise bad(f"'meta.compliance.tensors.{tensor}.rescale_inexact_info' is "
                      f"{show_json_value(entry['rescale_inexact_info'])}, expected an object")
    return desc


def read_desc(path: Path) -> dict:
    """A desc.json file, read only when it is a regular file of at most MAX_DESC_BYTES."""
    why = why_unreadable(path) or (os.path.getsize(path) > MAX_DESC_BYTES
                                   and f"larger than {MAX_DESC_BYTES >> 20} MiB")
    if why:
        raise MalformedTestError(f"{path.name}: {why}")
    try:
        desc = json.loads(path.read_bytes())
    except OSError as exc:
        raise MalformedTestError(f"{path.name}: cannot read ({os_reason(exc)})") from None
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:120]
        raise MalformedTestError(f"{path.name}: not JSON ({why})") from None
    return check_desc(desc, path.name)


def named_file(test_dir: Path, name: str, key: str) -> Path:
    """test_dir/name when it is a regular file; `key` is the desc's field naming it."""
    path = test_dir / name
    why = why_unreadable(path)
    if why:
        raise MalformedTestError(f"{key} {show_json_value(name)}: cannot read {path} ({why})")
    return path


def npy_header(path: Path, what: str):
    """(shape, dtype) of an .npy file that is a regular file holding the data its header
    declares and nothing after it; only the header is read. `what` names the file in
    messages."""
    try:
        with open_input(str(path), what) as f:
            shape, dtype = read_npy_header(f, what)
            check_data_size(os.fstat(f.fileno()).st_size - f.tell(), shape, dtype, what)
    except InputError as exc:
        raise MalformedTestError(str(exc)) from None
    return tuple(shape), dtype


def read_npy(path: Path, what: str):
    """The array of an .npy file, its header checked first (npy_header)."""
    import numpy as np
    npy_header(path, what)
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise MalformedTestError(f"{what}: cannot read as .npy ({exc})") from None


def load_desc(test_dir: Path) -> dict:
    """desc.json, or desc_binary.json (tosa_verif_run_tests -b writes it) when the graph in
    desc.json is in JSON form; its fields checked (MalformedTestError)."""
    desc = read_desc(test_dir / "desc.json")
    if desc["tosa_file"].endswith(".json") and (test_dir / "desc_binary.json").is_file():
        desc = read_desc(test_dir / "desc_binary.json")
    return desc


def _generate_input(desc: dict, name: str, shape: tuple) -> np.ndarray:
    """An input the folder does not hold, from its data_gen recipe (tosa-tools' data generator
    library, as Arm's runner does), once the recipe's shape is the graph input's."""
    recipe = field(desc, "meta.data_gen.tensors", {}).get(name)
    if recipe is None:
        raise MalformedTestError(f"input '{name}' has no file and no meta.data_gen recipe")
    held = recipe.get("shape")
    if held != list(shape):
        raise MalformedTestError(f"'meta.data_gen.tensors.{name}.shape' is "
                                 f"{held[:8] if isinstance(held, list) else show_json_value(held)}, the "
                                 f"graph's input is {list(shape)}")
    try:
        from conformance import model_files as cmf
        from generator.datagenerator import GenerateError, GenerateLibrary
        from jsonschema import ValidationError as SchemaError
    except ImportError as exc:  # pragma: no cover - tosa-tools layout change
        raise InputError(f"input '{name}' is missing and tosa-tools' data generator is not "
                         f"available ({exc})") from None
    from .compliance import captured, checker_message

    def generate():
        try:
            gen = GenerateLibrary(Path(cmf.find_tosa_file(cmf.TosaFileType.GENERATE_LIBRARY, None)))
            gen.set_config(desc)
            return gen.get_tensor_data(name), None
        except (GenerateError, SchemaError) as exc:    # the generator's verdicts on the recipe
            return None, exc

    (value, exc), printed = captured(generate)     # (the native library prints its reasons)
    if exc is not None:
        where = f" at {exc.json_path}" if isinstance(exc, SchemaError) else ""
        why = " ".join(filter(None, (str(exc).splitlines()[0][:200], checker_message(printed)[:200])))
        raise MalformedTestError(f"meta.data_gen cannot generate '{name}'{where}: {why}")
    return value


def _json_input(path: Path, what: str, check) -> np.ndarray:
    """JSON-form input data ({"type": ..., "data": [...]}), its shape and type passed to
    `check` before the values are converted."""
    import numpy as np
    try:
        j = json.loads(path.read_bytes())
        data, dtype = np.asarray(j["data"]), np.dtype(j["type"])
        check(data.shape, dtype)
        return data.astype(dtype)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise MalformedTestError(f"{what}: cannot read {path} ({type(exc).__name__}: "
                                 f"{str(exc)[:120]})") from None


def read_inputs(test_dir: Path, desc: dict, graph) -> dict[str, np.ndarray]:
    """Input arrays by graph input name, in the storage dtype of the graph's tensors. Every
    graph input must be named once in ifm_name; an .npy file's header is checked against its
    tensor before its data is read, a generated input's shape before it is generated."""
    import numpy as np
    from npu_sim.isa.dtypes import STORAGE, accepts, as_storage
    names = desc.get("ifm_name", [])
    for name in graph.inputs:
        if name not in names:
            raise MalformedTestError(f"'ifm_name' lacks the graph's input '{name}'")
    for name in names:
        if name not in graph.inputs or names.count(name) > 1:
            raise MalformedTestError(f"'ifm_name' names '{name}' twice" if name in graph.inputs
                                     else f"'ifm_name' names '{name}', which is no input of the "
                                     f"graph (inputs: {', '.join(graph.inputs) or 'none'})")
    inputs = {}
    for name, file in zip(names, desc.get("ifm_file", [])):
        tensor = graph.tensors[name]
        shape, want = tuple(tensor.shape), np.dtype(STORAGE[tensor.dtype])
        what, path = f"ifm_file {show_json_value(file)} (input '{name}')", test_dir / file

        def check(held, dtype):
            # the type's .npy forms (bf16 as |V2, fp8 as |V1 or uint8, ...) or bit patterns
            # of its width (uint8 for int8)
            if held != shape or not (accepts(tensor.dtype, dtype) or dtype.kind in "iubV"
                                     and dtype.itemsize == want.itemsize):
                raise MalformedTestError(f"{what}: holds {dtype}{list(held)[:8]}, the graph's "
                                         f"input is {want}{list(shape)} (TOSA {tensor.dtype})")

        if os.path.lexists(path):
            check(*npy_header(path, what))
            value = read_npy(path, what)
        elif os.path.lexists(path.with_suffix(".json")):           # JSON-form data
            value = _json_input(named_file(test_dir, str(Path(file).with_suffix(".json")),
                                           "ifm_file"), what, check)
        elif "data_gen" in field(desc, "meta", {}):
            value = _generate_input(desc, name, shape)
            check(value.shape, value.dtype)
        else:
            raise MalformedTestError(f"{what}: {path} is missing")
        inputs[name] = as_storage(value, tensor.dtype) if accepts(tensor.dtype, value.dtype) \
            else np.ascontiguousarray(value).view(want).reshape(shape)
    return inputs


def _tosa_tools_file(kind: str) -> Path:
    from conformance import model_files as cmf
    return Path(cmf.find_tosa_file(getattr(cmf.TosaFileType, kind), None))


def json_graph_bytes(path: Path) -> bytes:
    """A graph in JSON form (the conformance generator's default output), compiled to the
    binary flatbuffer with the flatc and schema that tosa-tools ships."""
    try:
        flatc, schema = _tosa_tools_file("FLATC"), _tosa_tools_file("SCHEMA")
    except ImportError as exc:  # pragma: no cover - tosa-tools layout change
        raise ModelError(f"{path}: a JSON graph needs tosa-tools' flatc ({exc})") from None
    with tempfile.TemporaryDirectory(prefix="npu_sim_json_") as tmp:
        proc = subprocess.run([str(flatc), "-o", tmp, "--binary", str(schema), str(path)],
                              capture_output=True, text=True)
        out = Path(tmp) / (path.stem + ".tosa")
        if proc.returncode or not out.is_file():
            raise ModelError(f"{path}: flatc cannot convert the JSON graph: "
                             f"{(proc.stderr or proc.stdout).strip()[:300]}")
        return out.read_bytes()


def load_graph(test_dir: Path, desc: dict):
    """The test's graph: tosa_file read as `compile` reads a model (a regular file), a JSON
    graph converted by flatc."""
    from npu_sim.compiler.loader import load_bytes
    from .api import read_model_file
    path = named_file(test_dir, desc["tosa_file"], "tosa_file")
    data = json_graph_bytes(path) if path.suffix == ".json" else \
        read_model_file(path, "a .tosa file", ((4, b"TOSA"),))
    if data[4:8] != b"TOSA":        # another kind of file: no graph to judge
        raise MalformedTestError(f"tosa_file {show_json_value(desc['tosa_file'])}: {path} is not a TOSA "
                                 "flatbuffer (file identifier 'TOSA' missing)")
    return load_bytes(data, str(path))
