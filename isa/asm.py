"""Text disassembly of a Program: one line per command, readable next to the trace."""
from __future__ import annotations

from .commands import Compute, DmaCopy, DmaFill, TensorView
from .program import Program


def format_view(v: TensorView, program: Program) -> str:
    shape = "x".join(map(str, v.shape)) or "scalar"
    text = f"{program.memory_name(v.mem)}:0x{v.addr:06x}[{shape}]{v.dtype}"
    dense = TensorView(v.mem, v.addr, v.shape, v.strides, v.dtype).contiguous_run() == v.nbytes
    return text if dense else f"{text}/{','.join(map(str, v.strides))}"


def _format_attr(value) -> str:
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(map(str, value)) + ")"
    return str(value)


def mnemonic(cmd) -> str:
    """LOAD (external -> on-chip), STORE, MOVE, FILL, or the compute opcode in capitals."""
    if isinstance(cmd, DmaCopy):
        src, dst = cmd.src.mem, cmd.dst.mem
        return "LOAD" if src and not dst else "STORE" if dst and not src else "MOVE"
    if isinstance(cmd, DmaFill):
        return "FILL"
    return cmd.op.upper()


def format_command(cmd, program: Program) -> str:
    if isinstance(cmd, DmaCopy):
        body = f"{mnemonic(cmd):<8}{format_view(cmd.src, program)} -> {format_view(cmd.dst, program)}"
    elif isinstance(cmd, DmaFill):
        body = f"{'FILL':<8}{format_view(cmd.dst, program)} = {cmd.value}"
    else:
        assert isinstance(cmd, Compute)
        ins = " ".join(f"{k}={format_view(v, program)}" for k, v in cmd.inputs.items())
        outs = " ".join(f"{k}={format_view(v, program)}" for k, v in cmd.outputs.items())
        attrs = " ".join(f"{k}={_format_attr(v)}" for k, v in cmd.attrs.items())
        body = f"{cmd.op.upper():<8}{outs} <- {ins}" + (f" {{{attrs}}}" if attrs else "")
    wait = f"  wait({','.join(map(str, cmd.deps))})" if cmd.deps else ""
    return f"{cmd.id:6d} L{cmd.layer:<4d}{cmd.engine:<7}{body}{wait}"


def disassemble(program: Program) -> str:
    lines = [f"; npu-sim program: {program.meta.get('model', '?')} for config "
             f"{program.meta.get('config', '?')}",
             f"; memories: onchip {program.memory_sizes[0]} B, " + ", ".join(
                 f"{n} {s} B" for n, s in zip(program.memories, program.memory_sizes[1:])),
             f"; {len(program.commands)} commands, {len(program.layers)} layers, "
             f"{sum(len(s.data) for s in program.segments)} B of constants"]
    for b in program.inputs:
        lines.append(f"; input  {b.name}: {format_view(b.view, program)}")
    for b in program.outputs:
        lines.append(f"; output {b.name}: {format_view(b.view, program)}")
    for i, layer in enumerate(program.layers):
        lines.append(f"; layer {i} {layer.name}: {'+'.join(layer.ops)} on {layer.unit}")
    lines.extend(format_command(c, program) for c in program.commands)
    return "\n".join(lines) + "\n"
