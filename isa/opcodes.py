"""The compute opcodes: which unit runs each, its operands and attributes.

This table is the documentation of the instruction set (see isa/README.md) and is checked when a
program is encoded or decoded. Output-stage attributes shared by all MAC opcodes:
  scale32, rounding_mode, per_channel, output_zp, clamp=(lo, hi), acc_dtype ('int32'|'int48').
A MAC command either writes `ofm` (output stage applied) or `acc_out` (raw partial sums, for
splitting the reduction dimension); `acc_in` adds earlier partial sums.
"""
from __future__ import annotations


from .errors import ProgramError
from .records import record


@record(frozen=True)
class OpSpec:
    """An opcode: its unit, operand names and attributes."""

    unit: str
    inputs: tuple[str, ...]
    optional: tuple[str, ...]
    outputs: tuple[str, ...]          # exactly one of these is written
    attrs: tuple[str, ...]
    doc: str


MAX_HOST_ATTRS = 64
_STAGE = ("bias", "multiplier", "shift", "acc_in")
_STAGE_ATTRS = ("scale32", "rounding_mode", "per_channel", "output_zp", "clamp", "acc_dtype")
_MAC_OUT = ("ofm", "acc_out")

OPCODES: dict[str, OpSpec] = {
    "conv2d": OpSpec("mac", ("ifm", "weights"), _STAGE, _MAC_OUT,
                     ("pad", "stride", "dilation", "input_zp", "weight_zp") + _STAGE_ATTRS,
                     "2-D convolution of an IFM tile (NHWC) with OHWI weights; pad is tile-local"),
    "depthwise_conv2d": OpSpec("mac", ("ifm", "weights"), _STAGE, _MAC_OUT,
                               ("pad", "stride", "dilation", "input_zp", "weight_zp") + _STAGE_ATTRS,
                               "depthwise convolution, HWCM weights; pad is tile-local"),
    "conv3d": OpSpec("mac", ("ifm", "weights"), _STAGE, _MAC_OUT,
                     ("pad", "stride", "dilation", "input_zp", "weight_zp") + _STAGE_ATTRS,
                     "3-D convolution, NDHWC IFM, ODHWI weights; pad is tile-local"),
    "transpose_conv2d": OpSpec("mac", ("ifm", "weights"), _STAGE, _MAC_OUT,
                               ("stride", "out_pad_top", "out_pad_left", "in_origin", "out_origin",
                                "out_size", "input_zp", "weight_zp") + _STAGE_ATTRS,
                               "transposed convolution; origins place the tile in the full tensors"),
    "matmul": OpSpec("mac", ("a", "b"), _STAGE, _MAC_OUT, ("a_zp", "b_zp") + _STAGE_ATTRS,
                     "batched matrix product [N,H,C] x [N,C,W]"),
    "elementwise": OpSpec("vector", (), tuple(f"in{i}" for i in range(16))
                          + tuple(f"c{i}" for i in range(32)), ("out",), ("program",),
                          "a chain of elementwise TOSA functions (JSON `program`: fn, args "
                          "in*/c*/%i, tables, dtype, attributes) with broadcasting"),
    "avg_pool2d": OpSpec("vector", ("in0",), (), ("out",),
                         ("kernel", "stride", "pad", "input_zp", "output_zp"),
                         "average pool; pad is tile-local and excluded from the divisor"),
    "max_pool2d": OpSpec("vector", ("in0",), (), ("out",), ("kernel", "stride", "pad", "nan_mode"),
                         "max pool; pad is tile-local; nan_mode for floats"),
    "reduce": OpSpec("vector", ("in0",), ("acc_in",), ("out",), ("fn", "axis", "nan_mode", "acc_dtype"),
                     "REDUCE_{SUM,PRODUCT,MAX,MIN,ALL,ANY} along axis; acc_in combines a partial "
                     "result (float sums and products: acc_dtype fp32 partials)"),
    "argmax": OpSpec("vector", ("in0",), (), ("out",), ("axis", "nan_mode"),
                     "index of the first maximum (floats: nan_mode)"),
    "resize": OpSpec("vector", ("in0",), (), ("out",),
                     ("mode", "scale", "offset", "border", "in_origin", "out_origin", "out_size",
                      "in_size"),
                     "RESIZE of a tile; origins place the tile in the full tensors"),
    "permute": OpSpec("vector", ("in0",), (), ("out",), ("base", "strides"),
                      "out[i] = in0[base + sum(i[d] * strides[d])]: a block's elements (in0, "
                      "rank 1, as they lie in the banks) rearranged in the lanes: a transpose, "
                      "a reversal or repeats, read and written in whole words"),
    "host": OpSpec("host", (), tuple(f"in{i}" for i in range(64)), ("out0",),
                   ("tosa_op",),
                   "a TOSA operator run by the host CPU on external memory"),
}


def check(cmd) -> None:
    spec = OPCODES.get(cmd.op)
    if spec is None:
        raise ProgramError(f"command {cmd.id}: unknown opcode '{cmd.op}'")
    if spec.unit != cmd.unit:
        raise ProgramError(f"command {cmd.id}: opcode '{cmd.op}' runs on {spec.unit}, not {cmd.unit}")
    missing = [n for n in spec.inputs if n not in cmd.inputs]
    unknown = [n for n in cmd.inputs if n not in spec.inputs + spec.optional]
    if missing or unknown:
        raise ProgramError(f"command {cmd.id} {cmd.op}: operands missing {missing} unknown {unknown}")
    if spec.unit != "host" and (len(cmd.outputs) != 1 or next(iter(cmd.outputs)) not in spec.outputs):
        raise ProgramError(f"command {cmd.id} {cmd.op}: writes {list(cmd.outputs)}, expected one of "
                           f"{list(spec.outputs)}")
    # A host command carries its TOSA operator's own attributes (and its regions'), so only
    # their number is bounded: a decoded command owns a copy of its attributes.
    unknown = ([n for n in cmd.attrs if n not in spec.attrs] if spec.unit != "host"
               else [] if len(cmd.attrs) <= MAX_HOST_ATTRS else list(cmd.attrs)[MAX_HOST_ATTRS:])
    if unknown:
        raise ProgramError(f"command {cmd.id} {cmd.op}: unknown attributes {unknown[:8]}")


def mac_problem(opcode: str, out_shape, weight_shape, stride=(1, 1)) -> tuple[str, int, int, int]:
    """What a MAC opcode asks of the array: (kind, m outputs, n channels, k reduction terms).

    `out_shape` is the output's, `weight_shape` the weights' (a matmul's B [N, C, W]); kind is
    "depthwise" (k taps per channel, no reduction across channels) or "gemm". The compiler
    (tile estimates, layer bounds) and the machine (cost) both map commands through this one
    function."""
    m = 1
    for d in out_shape[:-1]:
        m *= int(d)
    n = int(out_shape[-1])
    if opcode == "matmul":
        return "gemm", m, n, int(weight_shape[1])
    if opcode == "depthwise_conv2d":
        return "depthwise", m, n, int(weight_shape[0]) * int(weight_shape[1])
    if opcode == "transpose_conv2d":
        _, kh, kw, ic = weight_shape
        return "gemm", m, n, -(-int(kh) // stride[0]) * -(-int(kw) // stride[1]) * int(ic)
    k = 1
    for d in weight_shape[1:]:
        k *= int(d)
    return "gemm", m, n, k
