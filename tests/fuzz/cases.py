"""Seeded mutation cases for the fuzz suite: .tosa, .tflite, .npub, YAML configs, sweep files,
CLI args, NNAPI JSON cases and traces for the viewer.

Every case is a pure function of (seed, target, index), so a failure is reproduced by its name
alone (`python tests/fuzz/run.py --only npub#123`).
"""
from __future__ import annotations

import hashlib
import io
import random
import re
import struct
from functools import lru_cache
from pathlib import Path

import numpy as np

from harness import Case

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "data" / "small_cnn"
TARGETS = ("tosa", "tflite", "npub", "config", "sweep", "cli", "nnapi", "trace")
NNAPI_CASES = REPO / "tests" / "data" / "nnapi-cts" / "sample.jsonl"
TFLITE = REPO / "tests" / "data" / "tflite"

EXTREMES = ["0", "-1", "1e300", "1e-300", "-1e300", ".nan", ".inf", "-.inf", "1e30", "10" * 40,
            "9" * 5000, "0x7fffffffffffffff", "2147483648", "1.5", "true", "null", "''", "[]", "{}",
            "'1 KiB'", "'1 B'", "'17 TiB'", "'-1 MiB'", "1_000_000_000_000", "4096", "65537", "0.001"]


@lru_cache(maxsize=1)
def artifacts() -> dict:
    """The valid inputs that cases mutate, built once per process."""
    from npu_sim import api, zoo
    from npu_sim.isa.encoding import encode
    small = (SMALL / "model.tosa").read_bytes()
    ds8 = zoo.build("ds_cnn", channels=8)[0]
    out = {"small": small, "ds8": ds8, "small_input": (SMALL / "input-0.npy").read_bytes(),
           "tflite": [p.read_bytes() for p in sorted(TFLITE.glob("*/model.tflite"))],
           "config": (REPO / "configs" / "default.yaml").read_text(), "programs": {},
           "nnapi": NNAPI_CASES.read_text().splitlines()[:12]}
    for name, data, cfg_name in (("small", small, "edge-256"), ("ds8", ds8, "default")):
        cfg = api.load_config(cfg_name)
        path = Path(f"/tmp/npu-fuzz-{name}-{hashlib.sha256(data).hexdigest()[:8]}.tosa")
        path.write_bytes(data)
        program = api.compile_model(path, cfg, use_cache=False)
        result = api.simulate(program, cfg, seed=0, check_hazards=False)
        out["programs"][name] = {"bytes": encode(program), "inputs": [(b.name, b.view) for b in program.inputs],
                                 "outputs": [b.name for b in program.outputs], "digest": _digest(result.outputs)}
        if name == "small":
            from npu_sim.trace import write_trace
            trace = path.with_suffix(".json")
            write_trace(trace, program, cfg, result.sim, result.report)
            out["trace"] = trace.read_text()
            trace.unlink()
        path.unlink()
    return out


def _digest(outputs: dict) -> str:
    """As the harness hashes out/: file names in order, then each array's bytes."""
    h = hashlib.sha256()
    for name, value in sorted((f"{n.replace('/', '_')}.npy", v) for n, v in outputs.items()):
        h.update(name.encode())
        h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()[:16]


# --- byte mutations -------------------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    b = bytearray(data)
    kind = rng.choice(["flip", "flip", "overwrite", "truncate", "insert", "delete", "huge", "zero", "dup"])
    n = len(b)
    if n == 0:
        return bytes([rng.randrange(256)]), "one byte"
    pos = rng.randrange(n)
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
    elif kind == "overwrite":
        k = rng.randint(1, 16)
        b[pos:pos + k] = bytes(rng.randrange(256) for _ in range(k))
    elif kind == "truncate":
        b = b[:pos]
    elif kind == "insert":
        b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == "delete":
        del b[pos:pos + rng.randint(1, 64)]
    elif kind == "huge":
        value = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFFFFFFFFFF, 1 << 40, rng.getrandbits(32)])
        b[pos:pos + 8] = struct.pack("<Q", value)[: 8 if value >> 32 else 4]
    elif kind == "zero":
        b[pos:pos + rng.randint(1, 256)] = bytes(min(256, n - pos))[: rng.randint(1, 256)]
    else:
        k = rng.randint(1, 128)
        b[pos:pos] = b[max(0, pos - k):pos]
    return bytes(b), f"{kind}@{pos}"


def _odd_file(rng: random.Random, name: str) -> tuple[dict, str]:
    kind = rng.choice(["empty", "dir", "loop", "dangling", "fifo", "text", "zero-dev", "sparse", "npy"])
    spec = {"empty": b"", "dir": ("dir",), "loop": ("symlink", name), "dangling": ("symlink", "nowhere"),
            "fifo": ("fifo",), "text": b"name: not a model\n", "zero-dev": ("symlink", "/dev/zero"),
            "sparse": ("sparse", 3 << 30), "npy": _npy(np.zeros((2, 2), np.int8))}[kind]
    return {name: spec}, kind


def _npy(a: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.save(f, a, allow_pickle=False)
    return f.getvalue()


# --- targets -------------------------------------------------------------------------------

def tosa_case(rng: random.Random, index: int) -> Case:
    art = artifacts()
    base = art[rng.choice(["small", "ds8"])]
    if rng.random() < 0.12:
        files, note = _odd_file(rng, "m.tosa")
    else:
        data, note = mutate_bytes(rng, base)
        files = {"m.tosa": data}
    argv = rng.choice([["run", "m.tosa", "--output-dir", "out"], ["run", "m.tosa", "--timing-only"],
                       ["compile", "m.tosa", "-o", "p.npub"]])
    return Case("tosa", index, argv, files, "outputs", note=note)


def tflite_case(rng: random.Random, index: int) -> Case:
    if rng.random() < 0.1:
        files, note = _odd_file(rng, "m.tflite")
    else:
        data, note = mutate_bytes(rng, rng.choice(artifacts()["tflite"]))
        files = {"m.tflite": data}
    argv = rng.choice([["run", "m.tflite", "--output-dir", "out"], ["run", "m.tflite", "--timing-only"],
                       ["compile", "m.tflite", "-o", "p.npub"]])
    return Case("tflite", index, argv, files, "outputs", note=note)


def _structured_npub(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A program changed field by field and re-encoded: checksums valid, structure not."""
    import json

    from npu_sim.isa.encoding import decode, encode
    p = decode(data)
    cmds = p.commands
    i = rng.randrange(len(cmds))
    c = cmds[i]
    kind = rng.choice(["view", "view", "deps", "attr", "attr", "op", "channel", "layer", "meta", "segment",
                       "binding", "operand"])
    views = [k for k in ("src", "dst") if hasattr(c, k)]
    if hasattr(c, "inputs"):
        views += [("in", k) for k in c.inputs] + [("out", k) for k in c.outputs]
    if kind == "view" and views:
        which = rng.choice(views)
        get = (lambda: getattr(c, which)) if isinstance(which, str) else \
            (lambda: (c.inputs if which[0] == "in" else c.outputs)[which[1]])
        v = get()
        field = rng.choice(["mem", "addr", "shape", "strides", "dtype"])
        if field == "mem":
            v = v._replace(mem=rng.choice([v.mem + 1, 7, 200]))
        elif field == "addr":
            v = v._replace(addr=rng.choice([v.addr + rng.randint(1, 1 << 20), 1 << 40, (1 << 63) - 1]))
        elif field == "shape" and v.shape:
            d = rng.randrange(len(v.shape))
            v = v._replace(shape=v.shape[:d] + (rng.choice([0, v.shape[d] + 1, v.shape[d] * 7, 1 << 30]),) + v.shape[d + 1:])
        elif field == "strides" and v.strides:
            d = rng.randrange(len(v.strides))
            v = v._replace(strides=v.strides[:d] + (rng.choice([0, -v.strides[d], v.strides[d] * 3, 1 << 40]),) + v.strides[d + 1:])
        else:
            v = v._replace(dtype=rng.choice(["bool", "int4", "int8", "int16", "int32", "int48", "int64"]))
        if isinstance(which, str):
            setattr(c, which, v)
        else:               # a decoded compute shares read-only operand maps: its own copy
            group = "inputs" if which[0] == "in" else "outputs"
            setattr(c, group, {**getattr(c, group), which[1]: v})
        note = f"view {which} {field}"
    elif kind == "deps":
        c.deps = rng.choice([c.deps + (i,), c.deps + (i + 1,), c.deps + (1 << 30,), (), tuple(range(i))[:3]])
        note = "deps"
    elif kind == "attr" and getattr(c, "attrs", None):
        name = rng.choice(sorted(c.attrs))
        choice = rng.choice(["delete", "str", "int", "tuple", "none", "float", "huge", "neg"])
        c.attrs = dict(c.attrs)         # a decoded command shares a read-only block
        if choice == "delete":
            del c.attrs[name]
        else:
            c.attrs[name] = {"str": "x", "int": 3, "tuple": (1, 2, 3), "none": None, "float": 1.5,
                             "huge": 1 << 62, "neg": -5}[choice]
        if name == "program" and choice == "str":
            c.attrs[name] = rng.choice(["[]", "[{}]", '[{"fn": "ADD", "args": ["in9"], "tables": [], "dtype": "int8"}]',
                                        "[" * 3000 + "]" * 3000])
        note = f"attr {name} {choice}"
    elif kind == "op" and hasattr(c, "op"):
        c.op = rng.choice(["conv2d", "matmul", "elementwise", "reduce", "host", "nope"])
        note = "opcode"
    elif kind == "operand" and hasattr(c, "inputs") and c.inputs:
        name = rng.choice(sorted(c.inputs))
        c.inputs = dict(c.inputs)       # a decoded compute shares read-only operand maps
        c.inputs[rng.choice(["in63", "ifm", "bias", "zz"])] = c.inputs.pop(name)
        note = "operand renamed"
    elif kind == "channel" and hasattr(c, "channel"):
        c.channel = rng.choice([c.channel + 1, 9, 255])
        note = "channel"
    elif kind == "layer":
        c.layer = rng.choice([len(p.layers), -2, 1 << 30])
        note = "layer"
    elif kind == "segment" and p.segments:
        s = rng.choice(p.segments)
        s.addr, s.mem = rng.choice([(s.addr + (1 << 32), s.mem), (s.addr, 5), (s.addr + 1, s.mem)])
        note = "segment"
    elif kind == "binding":
        b = rng.choice(p.inputs + p.outputs)
        b.view = b.view._replace(shape=b.view.shape + (2,), strides=b.view.strides + (1,))
        note = "binding"
    else:
        blob = encode(p)
        meta_len = struct.unpack_from("<Q", blob, 16)[0]
        meta = json.loads(blob[28:28 + meta_len])
        key = rng.choice(["memories", "memory_sizes", "inputs", "outputs", "layers", "meta", "variables"])
        choice = rng.choice(["rename", "delete", "type", "huge"])
        if choice == "rename":
            meta[key + "_x"] = meta.pop(key)
        elif choice == "delete":
            meta.pop(key)
        elif choice == "type":
            meta[key] = rng.choice([None, 5, "x", [None], {"a": 1}])
        else:
            meta["memory_sizes"] = [1 << 60] * len(meta["memory_sizes"])
        if key == "meta" and choice == "type":
            meta["meta"] = {"config_dict": rng.choice([None, {}, {"clock_mhz": 1e300}])}
        new = json.dumps(meta).encode()
        import zlib
        head = blob[:12] + b"META" + struct.pack("<QI", len(new), zlib.crc32(new))
        return head + new + blob[28 + meta_len:], f"meta {key} {choice}"
    return encode(p), note


def npub_case(rng: random.Random, index: int) -> Case:
    art = artifacts()
    name = rng.choice(["small", "ds8"])
    prog = art["programs"][name]
    if rng.random() < 0.5:
        data, note = mutate_bytes(rng, prog["bytes"])
        check = f"same:{prog['digest']}"
    else:
        try:
            data, note = _structured_npub(rng, prog["bytes"])
        except Exception as exc:   # the encoder refused the change itself: a refusal too
            data, note = prog["bytes"][:100], f"unencodable ({type(exc).__name__})"
        check = "outputs"
    argv = rng.choice([["run", "p.npub", "--output-dir", "out"], ["run", "p.npub", "--timing-only"],
                       ["disasm", "p.npub"]])
    return Case("npub", index, argv, {"p.npub": data}, check, note=note)


_NUMBER_LINE = re.compile(r"^(\s*)([a-z_0-9]+):\s*([-+0-9.eE]+|[0-9.]+ [KMG]i?B)\b(.*)$")


def mutate_yaml(rng: random.Random, text: str) -> tuple[str, str]:
    lines = text.splitlines()
    kind = rng.choice(["number", "number", "number", "delete", "dup", "rename", "junk", "bytes", "flow"])
    numeric = [i for i, line in enumerate(lines) if _NUMBER_LINE.match(line)]
    if kind == "number" and numeric:
        for _ in range(rng.choice([1, 1, 2, 3])):
            i = rng.choice(numeric)
            m = _NUMBER_LINE.match(lines[i])
            if m:
                lines[i] = f"{m.group(1)}{m.group(2)}: {rng.choice(EXTREMES)}"
        return "\n".join(lines) + "\n", "number"
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[a-z_]+:", line)]
    if kind in ("delete", "dup", "rename") and keyed:
        i = rng.choice(keyed)
        if kind == "delete":
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        else:
            lines[i] = re.sub(r"^(\s*)([a-z_]+):", lambda m: f"{m.group(1)}{m.group(2)}x:", lines[i])
        return "\n".join(lines) + "\n", kind
    if kind == "junk":
        junk = rng.choice(["laughs", "deep", "python", "tab", "anchor", "binary", "long"])
        extra = {"laughs": "l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n" + "".join(
                     f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 10)}]\n" for k in range(1, 9)),
                 "deep": "deep: " + "[" * 20000 + "]" * 20000 + "\n",
                 "python": "x: !!python/object/apply:os.system ['true']\n",
                 "tab": "\tclock_mhz: 5\n", "anchor": "y: *nowhere\n",
                 "binary": "\x00\x01\x02\n", "long": "z: '" + "a" * 200000 + "'\n"}[junk]
        return extra + text if rng.random() < 0.5 else text + extra, f"junk {junk}"
    if kind == "flow":
        i = rng.choice(keyed) if keyed else 0
        lines[i] = lines[i] + rng.choice([" [1, 2", " {a: 1}", " &x 1", " *x", " ? a", " - 1"])
        return "\n".join(lines) + "\n", "flow"
    data, note = mutate_bytes(rng, text.encode())
    return data.decode("utf-8", "replace") if rng.random() < 0.5 else data, f"bytes {note}"


def _as_bytes(text) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")


def config_case(rng: random.Random, index: int) -> Case:
    art = artifacts()
    text, note = mutate_yaml(rng, art["config"])
    argv = ["run", "m.tosa", "--config", "c.yaml", "--timing-only", "--report", "r.json"]
    check = "report"
    if rng.random() < 0.3:
        argv, check = ["run", "m.tosa", "--config", "c.yaml", "--output-dir", "out"], "outputs"
    return Case("config", index, argv, {"m.tosa": art["ds8"], "c.yaml": _as_bytes(text)}, check, note=note)


SWEEP = """name: fz
base: {base}
networks: [m.tosa]
axes:
  sram.size: [64 KiB, 256 KiB]
  mac_array.rows,mac_array.cols: [[16, 16], [32, 32]]
fixed: {{dma.channels: 2}}
objectives: {{latency_ms: min, energy_uj: min}}
constraints: ["power_mw <= 3000"]
strategy: {strategy}
"""


def sweep_case(rng: random.Random, index: int) -> Case:
    art = artifacts()
    base = rng.choice(["default", "edge-256", "c.yaml"])
    strategy = rng.choice(["grid", "{kind: random, budget: 2, seed: 1}", "{kind: nsga2, budget: 2, population: 2, seed: 0}"])
    text, note = mutate_yaml(rng, SWEEP.format(base=base, strategy=strategy))
    files = {"m.tosa": art["ds8"], "s.yaml": _as_bytes(text)}
    if base == "c.yaml":
        files["c.yaml"] = art["config"].encode()
    argv = ["dse", "s.yaml", "-j", "1", "-q", "--no-plots", "-o", "out"]
    return Case("sweep", index, argv, files, "sweep", keep=("out/",), note=note)


def _raw_npy(descr: str, shape: tuple, payload: bytes = b"") -> bytes:
    """An .npy whose header says anything, followed by whatever payload."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


@lru_cache(maxsize=1)
def _bad_npys() -> dict:
    raw = artifacts()["small_input"]
    good = np.load(io.BytesIO(raw))
    return {"good.npy": raw, "huge.npy": _raw_npy("|i1", (1000000, 1000000, 1000)),
            "huge-match.npy": _raw_npy("|i1", (1, 3, 48, 48)),
            "dtype.npy": _npy(good.astype(np.int16)), "shape.npy": _npy(good[:, :2]),
            "fortran.npy": _npy(np.asfortranarray(good)), "trunc.npy": raw[:300],
            "pickle.npy": _raw_npy("|O", (1, 3, 48, 48), b"\x80\x04N."),
            "big-endian.npy": _npy(good.astype(">i2")), "empty.npy": b"", "text.npy": b"hello"}


def cli_case(rng: random.Random, index: int) -> Case:
    art = artifacts()
    prog = art["programs"]["small"]
    in_name, out_name = prog["inputs"][0][0], prog["outputs"][0]
    files = {"m.tosa": art["small"], "p.npub": prog["bytes"], "dir": ("dir",), "loop": ("symlink", "loop"),
             "fifo": ("fifo",), "c.yaml": art["config"].encode(), "bad.npz": b"PK\x03\x04junk",
             "trace.json": b"{not json", **{f"npy/{k}": v for k, v in _bad_npys().items()}}
    paths = ["m.tosa", "p.npub", "dir", "loop", "fifo", "missing.tosa", "c.yaml", "", "-", "npy/good.npy"]
    sub = rng.choice(["run"] * 6 + ["compile", "disasm", "view", "dse", "junk"])
    check = "outputs"
    if sub == "run":
        argv = ["run", rng.choice(["m.tosa", "p.npub", "m.tosa", rng.choice(paths)])]
        if rng.random() < 0.6:
            npy = rng.choice(list(_bad_npys()) + ["missing.npy"])
            name = rng.choice([in_name, in_name, "nope", ""])
            argv += ["--input", rng.choice([f"{name}=npy/{npy}", f"{name}=", "=x", "noequals", f"{name}=dir"])]
        if rng.random() < 0.5:
            argv += ["--seed", rng.choice(["-1", "0", "7", str(1 << 64), str(1 << 70), "abc", "1e3", "", "0x10"])]
        if rng.random() < 0.4:
            argv += ["--config", rng.choice(["default", "edge-256", "nope", "c.yaml", "dir", "loop", "fifo", ""])]
        if rng.random() < 0.4:
            argv += ["--output-dir", rng.choice(["out", "m.tosa", "loop", "out/deep/er", "/proc/nope"])]
            if rng.random() < 0.3:
                files[f"out/{out_name}.npy"] = ("dir",)
        else:
            argv += ["--output-dir", "out"]
        for flag, values in (("--report", ["r.json", "dir", "/proc/x/r.json"]), ("--csv", ["l.csv", "dir"]),
                             ("--trace", ["t.json", "dir", "/proc/x/t.json"]),
                             ("--state", ["s.npz", "bad.npz", "dir", "npy/good.npy"])):
            if rng.random() < 0.2:
                argv += [flag, rng.choice(values)]
        for flag in ("--timing-only", "--trace-coarse", "--timeline", "--check-hazards", "--bogus"):
            if rng.random() < 0.15:
                argv.append(flag)
    elif sub == "compile":
        argv = ["compile", rng.choice(paths), "-o", rng.choice(["p2.npub", "dir", "/proc/x.npub", "loop"])]
        if rng.random() < 0.5:
            argv += ["--config", rng.choice(["default", "nope", "c.yaml", "fifo"])]
    elif sub == "disasm":
        argv = ["disasm", rng.choice(paths)]
    elif sub == "view":
        argv = ["view", rng.choice(["trace.json", "missing.json", "dir", "loop"]), "-o", "v.html"]
    elif sub == "dse":
        argv = ["dse", rng.choice(["missing.yaml", "c.yaml", "dir", "loop"]), "-q", "--no-plots", "-o", "dout",
                "-j", rng.choice(["1", "0", "-3", "x"])]
        check = "none"
    else:
        argv = [rng.choice(["", "--help", "runn", "-x", "run --x", "\x00"])] + rng.choice([[], ["--seed"], ["a", "b"]])
        check = "none"
    return Case("cli", index, argv, files, check, note=" ".join(argv)[:120])


# What a JSON field is set to: wrong types, non-finite and out-of-range numbers, deep nesting.
JSON_EXTREMES = [None, "x", "", [], {}, [None], True, -1, 0, 3.5, 2 ** 31, 2 ** 63, -2 ** 63,
                 10 ** 400, 1e308, -1e308, 1e-45, float("nan"), float("inf"), [[[[[[1]]]]]]]


def _json_paths(value, path=()):
    """Every (path, value) in a JSON document, containers included."""
    yield path, value
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from _json_paths(v, path + (k,))


def mutate_json(rng: random.Random, doc) -> tuple[object, str]:
    """One field of `doc` replaced by an extreme, deleted, or its list grown or emptied."""
    import copy
    doc = copy.deepcopy(doc)
    paths = [p for p, _ in _json_paths(doc) if p]
    path = rng.choice(paths)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key, kind = path[-1], rng.choice(["value", "value", "value", "delete", "grow"])
    if kind == "delete":
        del parent[key]
    elif kind == "grow" and isinstance(parent[key], list):
        parent[key] = parent[key] * rng.choice([0, 3, 1000])
    else:
        parent[key] = rng.choice(JSON_EXTREMES)
    return doc, f"{kind} {'.'.join(map(str, path))[:80]}"


def _dumps(doc) -> bytes:
    import json
    try:
        return json.dumps(doc).encode()
    except (ValueError, RecursionError):            # 10**400 and friends
        return json.dumps(doc, default=str).encode()


def nnapi_case(rng: random.Random, index: int) -> Case:
    import json
    line = rng.choice(artifacts()["nnapi"])
    if rng.random() < 0.15:
        data, note = mutate_bytes(rng, line.encode())
    else:
        doc, note = mutate_json(rng, json.loads(line))
        data = _dumps(doc)
    argv = rng.choice([["supported-ops", "c.json"], ["supported-ops", "c.jsonl", "--case", "x"],
                       ["run", "c.json", "--preference", "FAST_SINGLE_ANSWER"]])
    if "--case" in argv:                        # the case's own name, unless mutated away
        argv[-1] = str(json.loads(line).get("name"))
    return Case("nnapi", index, argv, {"c.json": data, "c.jsonl": data + b"\n"}, "none", note=note)


def trace_case(rng: random.Random, index: int) -> Case:
    import json
    text = artifacts()["trace"]
    if rng.random() < 0.2:
        data, note = mutate_bytes(rng, text.encode())
    else:
        trace = json.loads(text)
        events = trace["traceEvents"]
        if rng.random() < 0.3:
            doc, note = mutate_json(rng, {"otherData": trace.get("otherData", {})})
            trace["otherData"] = doc.get("otherData")
        else:
            i = rng.randrange(len(events))
            doc, note = mutate_json(rng, {"e": events[i]})
            events[i] = doc.get("e")
        data = _dumps(trace)
    return Case("trace", index, ["view", "t.json", "-o", "v.html"], {"t.json": data}, "none",
                note=note)


MAKERS = {"tosa": tosa_case, "tflite": tflite_case, "npub": npub_case, "config": config_case,
          "sweep": sweep_case, "cli": cli_case, "nnapi": nnapi_case, "trace": trace_case}


def make_case(seed: int, target: str, index: int) -> Case:
    rng = random.Random(f"{seed}:{target}:{index}")
    return MAKERS[target](rng, index)


def make_cases(seed: int, per_target: dict[str, int]) -> list[Case]:
    """Interleaved by target, so a partial run still samples every target."""
    cases, n = [], max(per_target.values(), default=0)
    for i in range(n):
        for target in TARGETS:
            if i < per_target.get(target, 0):
                cases.append(make_case(seed, target, i))
    return cases
