"""A compiled program: commands, memory image, I/O bindings and layer table."""
from __future__ import annotations

from dataclasses import field

from .commands import Command, TensorView
from .records import record


@record
class Segment:
    """Initial bytes of one memory region (weights, biases, tables, constant inputs)."""

    mem: int
    addr: int
    data: bytes


@record
class Binding:
    """A graph input or output: its TOSA name and where it lives."""

    name: str
    view: TensorView


@record
class Layer:
    """One NPU operation after fusion: the TOSA ops it covers and its static figures."""

    name: str
    ops: list[str]
    unit: str                 # "mac" | "vector" | "dma" | "host"
    macs: int = 0
    min_bytes: dict[str, int] = field(default_factory=dict)   # per external memory, for rooflines
    tiles: int = 0
    # Whole-layer MAC array problems [kind, m, n, k, dtype], for the attainable bound; the
    # machine chains the MAC commands of a layer of exactly one (npu_sim/simulator.py).
    array_problems: list[list] = field(default_factory=list)


@record
class Program:
    """A compiled program: memories, commands, constant image, bindings and layers."""

    memories: list[str]                 # external memory names; memory id = index + 1
    memory_sizes: list[int]             # bytes each needs; index 0 is the on-chip buffer
    commands: list[Command]
    segments: list[Segment]
    inputs: list[Binding]
    outputs: list[Binding]
    layers: list[Layer]
    meta: dict = field(default_factory=dict)   # model, config name and fingerprint, compiler options
    variables: list[Binding] = field(default_factory=list)   # state kept from run to run

    def memory_name(self, mem: int) -> str:
        return "onchip" if mem == 0 else self.memories[mem - 1]
