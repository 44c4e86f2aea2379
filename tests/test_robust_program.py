"""Compiled programs and the CLI under abuse: checksums, versions, structural validation before
anything runs, arguments and files refused in one line with their precise cause."""
import dataclasses
import io
import json
import os
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from npu_sim import api
from npu_sim.cli import main
from npu_sim.isa.commands import Compute, DmaCopy, DmaFill, dense
from npu_sim.isa.encoding import VERSION, decode, encode
from npu_sim.isa.errors import DoesNotFitError, ProgramError
from npu_sim.verify import verify

SMALL = Path(__file__).parent / "data" / "small_cnn"


@pytest.fixture(scope="module")
def program():
    return api.compile_model(SMALL / "model.tosa", api.load_config("edge-256"))


@pytest.fixture(scope="module")
def blob(program) -> bytes:
    return encode(program)


def _sections(blob: bytes):
    pos, out = 12, {}
    while pos < len(blob):
        length = struct.unpack_from("<Q", blob, pos + 4)[0]
        out[blob[pos:pos + 4]] = (pos, length)
        pos += 16 + length
    return out


def _refused(data: bytes, tmp_path, match: str):
    path = tmp_path / "p.npub"
    path.write_bytes(data)
    with pytest.raises(ProgramError, match=match) as info:
        api.load_program(path)
    assert "\n" not in str(info.value)


def _framing_refused(data: bytes, tmp_path, match: str):
    """Refused as bytes (a .npub given to npu-sim) and as a file read section by section (the
    program cache's entries), with the same message."""
    _refused(data, tmp_path, match)
    with open(tmp_path / "p.npub", "rb") as f, pytest.raises(ProgramError, match=match):
        decode(f, "cache")


@pytest.mark.parametrize("tag", [b"META", b"CMDS", b"SEGS"])
def test_a_flip_in_any_section_fails_its_checksum(blob, tmp_path, tag):
    pos, length = _sections(blob)[tag]
    for offset in (0, length // 2, length - 1):
        bad = bytearray(blob)
        bad[pos + 16 + offset] ^= 0x10
        _framing_refused(bytes(bad), tmp_path, f"section {tag.decode()} fails its checksum")


def test_other_format_version_names_both(blob, tmp_path):
    old = blob[:4] + struct.pack("<HH", 2, 0) + blob[8:]
    _framing_refused(old, tmp_path,
                     rf"program format 2\.0; this npu-sim reads format {VERSION[0]}\.{VERSION[1]}")


@pytest.mark.parametrize("cut", [3, 5, 20, 100, -1])
def test_truncations_and_trailing_bytes(blob, tmp_path, cut):
    _framing_refused(blob[:cut], tmp_path, "truncated|corrupt|not an npu-sim program")
    _framing_refused(blob + b"\0", tmp_path, "after the last section")


def test_a_section_longer_than_the_file_is_truncated_not_allocated(blob, tmp_path):
    """A length field of 2^60 is compared with what the file holds, never read or allocated."""
    pos, _ = _sections(blob)[b"CMDS"]
    huge = blob[:pos + 4] + struct.pack("<Q", 1 << 60) + blob[pos + 12:]
    _framing_refused(huge, tmp_path, "truncated program: section CMDS holds")


def test_a_program_read_from_its_file_holds_its_constants_alone(program, tmp_path):
    """Read from a file, section by section, a program is the one its bytes decode to, and
    its constant segments are views of the constants' section alone: the command records
    are not kept alive beside them once decoded."""
    path = tmp_path / "p.npub"
    path.write_bytes(encode(program))
    with open(path, "rb") as f:
        read = decode(f, "p.npub")
    assert read == decode(encode(program))
    held = {id(seg.data.obj): len(seg.data.obj) for seg in read.segments}
    assert held and len(held) == 1
    assert next(iter(held.values())) == _sections(encode(program))[b"SEGS"][1]


def _resealed(blob: bytes, meta: dict) -> bytes:
    pos, length = _sections(blob)[b"META"]
    new = json.dumps(meta).encode()
    return blob[:pos] + b"META" + struct.pack("<QI", len(new), zlib.crc32(new)) + new + blob[pos + 16 + length:]


@pytest.mark.parametrize("edit", ["rename inputs", "drop meta", "sizes", "bad view", "layer type"])
def test_metadata_with_a_valid_checksum_is_still_checked(blob, tmp_path, edit):
    pos, length = _sections(blob)[b"META"]
    meta = json.loads(blob[pos + 16:pos + 16 + length])
    if edit == "rename inputs":
        meta["inputz"] = meta.pop("inputs")
    elif edit == "drop meta":
        del meta["meta"]["config_dict"]
    elif edit == "sizes":
        meta["memory_sizes"] = ["x"] * len(meta["memory_sizes"])
    elif edit == "bad view":
        meta["outputs"][0]["view"]["shape"] = "big"
    else:
        meta["layers"][0]["macs"] = "many"
    _refused(_resealed(blob, meta), tmp_path, ".")


def _mutated(program, change):
    p = decode(encode(program))
    change(p)
    return p


def _edit_attrs(c, **changes):
    """A decoded command's attributes are a read-only view of the block it shares: edited by
    giving it a dict of its own (None: the attribute removed)."""
    c.attrs = {k: v for k, v in {**c.attrs, **changes}.items() if v is not None}


def _edit_operands(c, group, changes):
    """Decoded computes with the same operands share read-only maps of them: edited by giving
    the command a dict of its own (None: the operand removed)."""
    setattr(c, group, {k: v for k, v in {**getattr(c, group), **changes}.items()
                       if v is not None})


def _first(p, kind):
    return next(c for c in p.commands if type(c).__name__ == kind or getattr(c, "op", "") == kind)


CHANGES = {
    "view outside memory": (lambda p: setattr(_first(p, "DmaCopy"), "src",
                                              _first(p, "DmaCopy").src._replace(addr=1 << 40)), "spans bytes"),
    "memory that does not exist": (lambda p: setattr(_first(p, "DmaCopy"), "dst",
                                                     _first(p, "DmaCopy").dst._replace(mem=9)), "does not exist"),
    "missing attribute": (lambda p: _edit_attrs(_first(p, "conv2d"), pad=None), "attribute pad missing"),
    "permute without strides": (lambda p: _edit_attrs(_first(p, "permute"), strides=None),
                                "attribute strides missing"),
    "multiplier without shift": (lambda p: _edit_operands(_first(p, "conv2d"), "inputs", {"shift": None}),
                                 "both multiplier and shift"),
    "a write over a constant": (lambda p: setattr(_first(p, "DmaCopy"), "dst", _first(p, "DmaCopy").src._replace(
        mem=p.segments[0].mem, addr=p.segments[0].addr)), "read-only"),
    "a MAC output of bool": (lambda p: _edit_operands(_first(p, "conv2d"), "outputs",
        {k: v._replace(dtype="bool") for k, v in _first(p, "conv2d").outputs.items()}), "not bool"),
    "attribute of the wrong type": (lambda p: _edit_attrs(_first(p, "conv2d"), stride="2"), "attribute stride"),
    "attribute of the wrong length": (lambda p: _edit_attrs(_first(p, "conv2d"), pad=(0, 0)), "length 4"),
    "zero stride": (lambda p: _edit_attrs(_first(p, "conv2d"), stride=(0, 1)), "stride"),
    "output shape": (lambda p: _edit_operands(_first(p, "conv2d"), "outputs",
        {k: v._replace(shape=v.shape[:3] + (v.shape[3] + 1,)) for k, v in _first(p, "conv2d").outputs.items()}),
        "output shape should be"),
    "copy shapes": (lambda p: setattr(_first(p, "DmaCopy"), "dst", _first(p, "DmaCopy").dst._replace(
        shape=(1,) * len(_first(p, "DmaCopy").dst.shape))), "copies"),
    "forward dependency": (lambda p: setattr(p.commands[3], "deps", (4,)), "earlier commands"),
    "dependency out of range": (lambda p: setattr(p.commands[3], "deps", (10**6,)), "earlier commands"),
    "self dependency": (lambda p: setattr(p.commands[3], "deps", (3,)), "earlier commands"),
    "DMA channel": (lambda p: setattr(_first(p, "DmaCopy"), "channel", 7), "DMA channel 7"),
    "layer index": (lambda p: setattr(p.commands[0], "layer", 999), "layer 999"),
    "segment outside memory": (lambda p: setattr(p.segments[0], "addr", 1 << 41), "falls outside"),
    "numbering": (lambda p: setattr(p.commands[2], "id", 7), "numbered in order"),
    # a copy of 2^40 elements with strides of 0 fits any memory, and would run for hours
    "repeating view": (lambda p: setattr(_first(p, "DmaCopy"), "dst", _first(p, "DmaCopy").dst._replace(
        shape=(1 << 20, 1 << 20), strides=(0, 0))), "more elements than a memory"),
    # the report's bounds compute with the layer table
    "array problem's dtype": (lambda p: setattr(p.layers[0], "array_problems", [
        ["gemm", 4, 4, 4, "int8", "ift8", "int8"]]), "array problem"),
    "empty array problem": (lambda p: setattr(p.layers[0], "array_problems", [["gemm", 0, 4, 4]]),
                            "positive sizes"),
    "layer MACs": (lambda p: setattr(p.layers[0], "macs", 10 ** 30), "macs"),
    "layer ops": (lambda p: setattr(p.layers[0], "ops", [1, 2]), "are not names"),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_structural_validation(program, tmp_path, name):
    change, match = CHANGES[name]
    bad = _mutated(program, change)
    with pytest.raises(ProgramError, match=match):
        verify(bad, 2)
    _refused(encode(bad), tmp_path, match)          # and through a file, resealed checksums


def test_valid_programs_verify(program):
    verify(decode(encode(program)), api.load_config("edge-256").dma.channels)


def test_decoded_commands_are_what_their_constructors_make(program):
    """Decoding sets a command's attributes without calling its dataclass __init__: they must
    be the same attributes, in the same order, and no __post_init__ may be skipped."""
    fill = DmaFill(id=len(program.commands), deps=(0,), layer=0, channel=1, value=-3,
                   dst=dense(0, 64, (2, 8), "int8"))
    program = dataclasses.replace(program, commands=[*program.commands, fill])
    decoded = decode(encode(program)).commands
    assert {type(c) for c in decoded} == {DmaCopy, DmaFill, Compute}
    for cls in (DmaCopy, DmaFill, Compute):
        assert not hasattr(cls, "__post_init__")
    for c in decoded:
        values = {f.name: getattr(c, f.name) for f in dataclasses.fields(c)}
        made = type(c)(**values)
        assert made == c and all(getattr(made, name) is value for name, value in values.items())
    assert decoded == program.commands


def test_decoded_computes_share_read_only_operand_maps():
    """Computes with the same operator and operands (a layer's tiles reuse a few buffers:
    the ExecuTorch MobileNetV2's weight-streaming tiles on edge-256) share one read-only map
    each of their inputs and outputs: a dict each cost a large program megabytes. A map is
    never shared by computes whose operands differ."""
    program = api.compile_model(SMALL.parent / "mbv2_050_128" / "model.tosa",
                                api.load_config("edge-256"))
    computes = [c for c in decode(encode(program)).commands if isinstance(c, Compute)]
    by_operands = {}
    for c in computes:
        key = (c.op, tuple(c.inputs.items()), tuple(c.outputs.items()))
        first = by_operands.setdefault(key, c)
        assert c.inputs is first.inputs and c.outputs is first.outputs
    assert len(by_operands) < len(computes)          # the fixture's tiles do share
    maps = {id(c.inputs): key for key, c in by_operands.items()}
    assert len(maps) == len(by_operands)
    with pytest.raises(TypeError):
        computes[0].inputs["ifm"] = computes[0].outputs[next(iter(computes[0].outputs))]


def test_decoded_dependencies_are_their_commands_ids(program):
    """A dependency is the same int object as the id of the command it names (ids past 256
    are objects of their own in Python: one per command, not one per mention)."""
    start = len(program.commands)
    fills = [DmaFill(id=i, deps=(i - 1, i - 2), layer=0, channel=1, value=0,
                     dst=dense(0, 64, (2, 8), "int8")) for i in range(start, start + 300)]
    program = dataclasses.replace(program, commands=[*program.commands, *fills])
    commands = decode(encode(program)).commands
    assert commands == program.commands
    named = [(d, commands[d].id) for c in commands[start:] for d in c.deps]
    assert all(d is i for d, i in named) and max(d for d, _ in named) > 256


def test_a_field_outside_the_formats_range_is_refused_naming_its_command(program):
    """A command record holds a dependency count in 16 bits and a channel in 8: a program
    past them (made through the API) is refused in one line, not with struct's error."""
    deps = tuple(range(len(program.commands))) * (1 + 65_536 // len(program.commands))
    fill = DmaFill(id=len(deps), deps=deps, layer=0, channel=1, value=0,
                   dst=dense(0, 64, (2, 8), "int8"))
    with pytest.raises(ProgramError, match=f"cannot encode command {len(deps)}: "):
        encode(dataclasses.replace(program, commands=[*program.commands, fill]))


def test_unknown_attributes_are_refused_before_the_commands_are_built(program, monkeypatch):
    """A block of 255 attribute names no opcode has, which the file stores once and every
    command shares, is refused when it is first read (and by the encoder), before any
    command is built."""
    from npu_sim.isa import encoding
    bad = decode(encode(program))
    for c in bad.commands:
        if isinstance(c, Compute) and c.unit != "host":
            _edit_attrs(c, **{f"x{i}": i for i in range(255 - len(c.attrs))})
    with pytest.raises(ProgramError, match="unknown attributes"):
        encode(bad)
    monkeypatch.setattr(encoding, "check", lambda cmd: None)
    blob = encode(bad)
    monkeypatch.undo()
    with pytest.raises(ProgramError, match="unknown attributes"):
        decode(blob)


# --- the CLI, in process -------------------------------------------------------------------

def _run(capsys, *argv) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return rc, err


def _one_line(rc, err, needle):
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert needle in err, err


@pytest.mark.parametrize("seed", ["-1", str(1 << 64), "abc"])
def test_seed_is_validated(capsys, tmp_path, seed):
    with pytest.raises(SystemExit) as info:
        main(["run", str(SMALL / "model.tosa"), "--seed", seed, "--output-dir", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--seed" in err, err
    with pytest.raises(Exception, match="seed"):
        api.random_inputs(api.compile_model(SMALL / "model.tosa", api.load_config("edge-256")), seed=-1)


def test_npy_header_checked_before_anything_is_allocated(capsys, tmp_path):
    header = b"{'descr': '|i1', 'fortran_order': False, 'shape': (1000000000, 1000000), }"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    huge = tmp_path / "huge.npy"
    huge.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
    name = "quantized_decomposed_quantize_per_tensor_default"
    t0 = time.perf_counter()
    rc, err = _run(capsys, "run", SMALL / "model.tosa", "--config", "edge-256", "--input", f"{name}={huge}",
                   "--output-dir", tmp_path / "out")
    _one_line(rc, err, "shape mismatch")
    assert time.perf_counter() - t0 < 5


def test_output_name_taken_by_a_directory_leaves_nothing(capsys, tmp_path):
    out = tmp_path / "out"
    (out / "tosa_reshape_default.npy").mkdir(parents=True)
    rc, err = _run(capsys, "run", SMALL / "model.tosa", "--config", "edge-256", "--output-dir", out,
                   "--report", tmp_path / "r.json")
    _one_line(rc, err, "is a directory")
    assert not (tmp_path / "r.json").exists()
    assert [p.name for p in out.iterdir()] == ["tosa_reshape_default.npy"]
    assert not list(tmp_path.rglob("*.part"))


def test_outputs_pass_over_a_staged_file_a_killed_run_left(capsys, tmp_path):
    """Staged files are named by the process; one of that name already there is left alone.
    The outputs get the umask's permissions, as any file the user writes."""
    out = tmp_path / "out"
    out.mkdir()
    stale = out / f".tosa_reshape_default.npy.{os.getpid()}-0.part"
    stale.write_text("left by a killed run")
    umask = os.umask(0o027)
    try:
        rc, err = _run(capsys, "run", SMALL / "model.tosa", "--config", "edge-256",
                       "--output-dir", out)
    finally:
        os.umask(umask)
    assert rc == 0, err
    assert stale.read_text() == "left by a killed run"
    written = out / "tosa_reshape_default.npy"
    assert np.load(written).dtype == np.int8
    assert written.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in out.iterdir()) == [stale.name, written.name]


def test_a_program_a_kernel_refuses_is_named_by_its_command(tmp_path, capsys):
    """What the structural checks let through and a kernel then refuses (here an elementwise
    program's rounding mode, inside its JSON) ends in one line naming the command."""
    program = api.compile_model(SMALL.parent / "attn_block" / "model.tosa", api.load_config("default"))

    def bad_rounding(p):
        cmd = _first(p, "elementwise")
        steps = json.loads(cmd.attrs["program"])
        for step in steps:
            step["rounding_mode"] = "NOPE"
        _edit_attrs(cmd, program=json.dumps(steps))
        p.commands[cmd.id] = cmd

    path = tmp_path / "bad.npub"
    path.write_bytes(encode(_mutated(program, bad_rounding)))
    rc, err = _run(capsys, "run", path, "--output-dir", tmp_path / "out")
    _one_line(rc, err, f"command {_first(program, 'elementwise').id} (elementwise")
    assert not (tmp_path / "out").exists()


def test_a_failed_run_removes_the_folders_it_made(capsys, tmp_path):
    rc, err = _run(capsys, "run", SMALL / "model.tosa", "--output-dir", tmp_path / "new" / "deeper",
                   "--report", tmp_path / "missing" / "r.json")
    _one_line(rc, err, "r.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    rc, err = _run(capsys, "run", SMALL / "model.tosa", "--output-dir", tmp_path / "both",
                   "--csv", tmp_path / "both")
    _one_line(rc, err, "named as the output folder and as an output file")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_late_failure_leaves_no_earlier_file(capsys, tmp_path):
    """The report would be written before the outputs: it is staged and dropped with them."""
    (tmp_path / "file").write_text("x")
    rc, err = _run(capsys, "run", SMALL / "model.tosa", "--config", "edge-256", "--output-dir",
                   tmp_path / "file" / "out", "--report", tmp_path / "r.json", "--csv", tmp_path / "l.csv")
    assert rc == 2 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("kind, needle", [("loop", "a symlink loop"), ("dangling", "dangling symlink"),
                                          ("fifo", "a FIFO"), ("zero", "a character device")])
def test_odd_model_paths_are_named(capsys, tmp_path, kind, needle):
    path = tmp_path / "m.tosa"
    if kind == "loop":
        os.symlink(path, path)
    elif kind == "dangling":
        os.symlink(tmp_path / "nowhere", path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    for sub in ("run", "disasm"):
        rc, err = _run(capsys, sub, path)
        _one_line(rc, err, needle)
    (tmp_path / "c.yaml").symlink_to(path)
    rc, err = _run(capsys, "run", SMALL / "model.tosa", "--config", tmp_path / "c.yaml")
    _one_line(rc, err, needle)


def test_unsupported_dtype_is_not_called_corrupt(capsys, tmp_path):
    from oracle import DType, GraphBuilder
    g = GraphBuilder()
    x = g.tensor((1, 4), DType.INT64)          # a TOSA 1.1 draft type
    out = g.output((1, 4), DType.INT64)
    g.op("ABS", [x], [out])
    path = tmp_path / "int64.tosa"
    path.write_bytes(g.serialize())
    rc, err = _run(capsys, "run", path, "--output-dir", tmp_path / "out")
    _one_line(rc, err, "unsupported")
    assert "corrupt" not in err and "INT64" in err


def test_large_file_without_magic_is_refused_from_its_head(capsys, tmp_path):
    path = tmp_path / "big.tosa"
    with open(path, "wb") as f:
        f.truncate(3 << 30)          # sparse
    t0 = time.perf_counter()
    rc, err = _run(capsys, "run", path)
    _one_line(rc, err, "not a TOSA flatbuffer")
    assert time.perf_counter() - t0 < 2


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--bogus"])
    assert info.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# --- bounded compilation -------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [{"sram.size": "1 KiB", "sram.banks": 1}, {"sram.size": "2 KiB"}])
def test_tiny_buffer_fails_fast_naming_layer_and_bytes(overrides):
    cfg = api.load_config("default").with_overrides(overrides)
    t0 = time.perf_counter()
    with pytest.raises(DoesNotFitError, match=r"layer '[^']+': .* B of working space"):
        api.compile_model(api.default_model(), cfg, use_cache=False)
    assert time.perf_counter() - t0 < 10


def test_huge_array_compiles(tmp_path):
    cfg = api.load_config("large-8k").with_overrides({"mac_array.rows": 4096, "mac_array.cols": 256})
    program = api.compile_model(SMALL / "model.tosa", cfg, use_cache=False)
    assert api.simulate(program, cfg, timing_only=True).report.cycles > 0


def test_a_program_past_the_command_limit_is_refused_as_it_passes_it(monkeypatch):
    """The limit bounds the compile: the command past it is never emitted, whichever layer
    (or staged weight copy) it belongs to, and the refusal names that layer."""
    from npu_sim.compiler import driver, emit
    cfg = api.load_config("edge-256")
    full = len(api.compile_model(SMALL / "model.tosa", cfg, use_cache=False).commands)
    emitted = []
    real = emit.Emitter.__init__

    def recording(self, limit=None):
        real(self, limit)
        emitted.append(self)

    monkeypatch.setattr(emit.Emitter, "__init__", recording)
    monkeypatch.setattr(driver, "MACS_PER_COMMAND", 1 << 60)     # the floor alone
    monkeypatch.setattr(driver, "MAX_COMMANDS", full // 2)
    with pytest.raises(DoesNotFitError, match=rf"layer '[^']+': the program passes "
                                              rf"{full // 2:,} commands by this layer"):
        api.compile_model(SMALL / "model.tosa", cfg, use_cache=False)
    assert len(emitted[0].commands) == full // 2
    monkeypatch.setattr(driver, "MAX_COMMANDS", full)      # exactly at the limit: compiled
    assert len(api.compile_model(SMALL / "model.tosa", cfg, use_cache=False).commands) == full


def test_the_command_limit_grows_with_the_graphs_work(monkeypatch):
    """A graph of more multiply-accumulates may take more commands than the floor, one per
    MACS_PER_COMMAND of them: a large network's honest tiling on a small buffer compiles,
    while the same program under the floor alone is refused."""
    from npu_sim.compiler import driver
    cfg = api.load_config("edge-256")
    program = api.compile_model(SMALL / "model.tosa", cfg, use_cache=False)
    full, macs = len(program.commands), sum(layer.macs for layer in program.layers)
    monkeypatch.setattr(driver, "MAX_COMMANDS", full // 2)
    monkeypatch.setattr(driver, "MACS_PER_COMMAND", macs // full)
    assert len(api.compile_model(SMALL / "model.tosa", cfg, use_cache=False).commands) == full
    monkeypatch.setattr(driver, "MACS_PER_COMMAND", macs // (full // 2) + 1)
    with pytest.raises(DoesNotFitError, match=rf"the program passes {full // 2:,} commands"):
        api.compile_model(SMALL / "model.tosa", cfg, use_cache=False)


def test_a_limit_passed_by_the_first_steps_staged_constants_names_that_step(monkeypatch):
    """The constants packed for the first step are copied before any step: a limit they
    pass is refused naming that step, as any other."""
    from npu_sim.compiler import driver
    monkeypatch.setattr(driver, "MACS_PER_COMMAND", 1 << 60)
    monkeypatch.setattr(driver, "MAX_COMMANDS", 0)
    model = Path(__file__).parent / "data" / "tflite" / "image_example1" / "model.tflite"
    with pytest.raises(DoesNotFitError, match=r"layer 'tfl.quantize': the program passes 0 "):
        api.compile_model(model, api.load_config("default"), use_cache=False)
