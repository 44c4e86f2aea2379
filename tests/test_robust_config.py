"""Configs and YAML under abuse: ranges for every figure, bounded parsing, one line, fast and small."""

import copy
import math
import os
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from npu_sim.config import config_from_dict, load_config
from npu_sim.config_checks import MAX_MACS, RANGES
from npu_sim.dse.sweep import load_sweep
from npu_sim.isa.errors import ConfigError
from npu_sim.yamlparse import MAX_DEPTH, MAX_NODES
from npu_sim.yamlread import read_yaml

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def base() -> dict:
    return load_config("default").to_dict()


def _concrete(key: str) -> str:
    return key.replace("memories.*", "memories.dram").replace("mac_pj.*", "mac_pj.int8") \
              .replace("mac_mm2.*", "mac_mm2.int8") \
              .replace("precision.*.rate", "precision.fp16xfp16.rate").replace("precision.*", "precision.int8xint8") \
              .replace("ports.*", "ports.activations").replace("lane.*", "lane.add") \
              .replace("vector_op_pj.*", "vector_op_pj.add") \
              .replace("operating_points.*", "operating_points.low_power")


def _with(data: dict, dotted: str, value) -> dict:
    data = copy.deepcopy(data)
    node, *_ = data, None
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return data


def _refused(data, key) -> str:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    message = str(info.value)
    assert "\n" not in message and key in message, message
    return message


@pytest.mark.parametrize("key", sorted(RANGES))
def test_every_figure_has_a_range(base, key):
    lo, hi = RANGES[key]
    path = _concrete(key)
    integer = isinstance(lo, int) and isinstance(hi, int) and not key.startswith(("energy", "area"))
    for bad in ([hi * 2 + 1] + ([lo - 1] if lo > 0 else []) + [float("nan"), float("inf"), -float("inf"), 1e300]):
        if integer and isinstance(bad, float) and math.isfinite(bad) and bad < 1e300:
            bad = int(bad)
        data = _with(base, path, bad)
        if path == "sram.size":
            data["sram"]["banks"] = 1
        _refused(data, path)
    # the bounds themselves are accepted (sizes and bank counts adjusted to stay consistent)
    for good in (lo, hi):
        data = _with(base, path, good)
        if path == "sram.size" or path == "sram.banks":
            data["sram"]["size"], data["sram"]["banks"] = (good, 1) if path == "sram.size" else (1024 * good, good)
        if key.startswith("mac_array"):
            data["mac_array"]["rows" if key.endswith("cols") else "cols"] = 1
        config_from_dict(data)


def test_mac_array_size_is_bounded(base):
    data = _with(_with(base, "mac_array.rows", 4096), "mac_array.cols", 4096)
    assert f"{MAX_MACS:,}" in _refused(data, "mac_array")


@pytest.mark.parametrize("key, value", [
    ("clock_mhz", 1e300), ("clock_mhz", 1e-300), ("memories.dram.bandwidth_gbps", 1e-300),
    ("dma.bytes_per_cycle", 1e-300), ("dma.setup_cycles", 10**30), ("memories.dram.latency_ns", 1e300),
    ("energy.mac_pj.int8", 1e308), ("mac_array.cols", 10**30), ("mac_array.cols", 1e30),
])
def test_issue_extremes_refused(base, key, value):
    _refused(_with(base, key, value), key)


def _write(tmp_path, text: str, name="bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _preset_text() -> str:
    return (REPO / "configs" / "default.yaml").read_text()


def _bounded_error(path, loader=load_config) -> str:
    """The error, checked to come in one line and under 100 MB, without runaway work (the time
    cap only catches an expansion that would run for minutes; it measures no speed)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as info:
            loader(path)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 20
    assert peak < 100 << 20
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10))


def test_billion_laughs_refused_fast_and_small(tmp_path):
    text = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + LAUGHS
    text += _preset_text().replace("clock_mhz: 1000", "clock_mhz: *l9")
    assert "values once its aliases are expanded" in _bounded_error(_write(tmp_path, text))


def test_laughs_within_the_node_bound_are_named_by_key(tmp_path):
    # 1,000 values: within the YAML bound, refused by the schema, and shown briefly
    text = "x: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\ny: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    message = _bounded_error(_write(tmp_path, text + _preset_text().replace("clock_mhz: 1000", "clock_mhz: [*b, *b]")))
    assert "x: unknown key" in message and len(message) < 400


def test_recursive_alias_refused(tmp_path):
    text = _preset_text().replace("clock_mhz: 1000", "clock_mhz: &r [*r]")
    _bounded_error(_write(tmp_path, text))


def test_long_number_names_the_key(tmp_path):
    text = _preset_text().replace("clock_mhz: 1000", "clock_mhz: " + "9" * 5000)
    assert "clock_mhz: expected a positive number" in _bounded_error(_write(tmp_path, text))


def test_deep_nesting_refused(tmp_path):
    text = _preset_text().replace("clock_mhz: 1000", "clock_mhz: " + "[" * 5000 + "]" * 5000)
    assert f"nesting deeper than {MAX_DEPTH}" in _bounded_error(_write(tmp_path, text))
    flow = _preset_text().replace("clock_mhz: 1000", "clock_mhz: " + "{a: " * 200 + "1" + "}" * 200)
    assert "nesting deeper" in _bounded_error(_write(tmp_path, flow, "flow.yaml"))


def test_huge_file_refused_without_reading_it(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as f:
        f.write(_preset_text().encode())
        f.truncate(3 << 30)     # sparse: 3 GiB of zero bytes on no disk
    assert "larger than 1 MiB" in _bounded_error(path)


@pytest.mark.parametrize("text, expected", [
    (b"name: \xff\xfe\n", "not UTF-8"),
    (b"when: 2024-13-45\n", "invalid YAML"),
    (b"? [a, b]\n: 1\n", "invalid YAML"),
    (b"x: !!python/object:os.system {}\n", "invalid YAML"),
    (b"x: !!binary '@@@'\n", "odd.yaml"),
])
def test_odd_yaml_is_one_line(tmp_path, text, expected):
    path = tmp_path / "odd.yaml"
    path.write_bytes(text)
    assert expected in _bounded_error(path)


def test_symlink_loop_named(tmp_path):
    loop = tmp_path / "loop.yaml"
    os.symlink(loop, loop)
    assert "symlink loop" in _bounded_error(loop)


def test_sweep_files_share_the_bounds(tmp_path):
    text = "l0: &l0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" + LAUGHS + "base: default\n"
    assert "aliases" in _bounded_error(_write(tmp_path, text, "sweep.yaml"), load_sweep)


def test_node_bound_counts_expansion_not_text():
    # 10 x 10 x 10 x 10 x 10 = 100,000 leaves from a 5-line file
    text = "a: &a [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcd", "bcde"))
    from npu_sim.yamlread import parse_yaml
    with pytest.raises(yaml.YAMLError, match=f"{MAX_NODES:,}"):
        parse_yaml(text)
    assert parse_yaml(text.rsplit("e:", 1)[0])["d"][0][0][0] == [0] * 10


def test_read_yaml_plain_document(tmp_path):
    assert read_yaml(_write(tmp_path, "a: [1, 2]\nb: 1e3\n"), "file") == {"a": [1, 2], "b": 1000.0}
