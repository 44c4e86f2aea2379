"""Area model: the config's area section, its validation, and npu_sim.area.area_mm2."""
from pathlib import Path

import pytest
import yaml

from npu_sim.isa.errors import ConfigError
from npu_sim.area import PARTS, area_mm2
from npu_sim.config import config_from_dict, load_config

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["default", "edge-256", "large-8k"])
def test_breakdown_sums_to_total(name):
    a = area_mm2(load_config(name))
    assert set(a) == set(PARTS) | {"total"}
    assert all(v >= 0 for v in a.values())
    assert a["total"] == pytest.approx(sum(a[p] for p in PARTS))


def test_edge_256_by_hand():
    a = area_mm2(load_config("edge-256"))
    assert a["mac_array"] == pytest.approx(256 * (0.00035 + 0.00025))  # int8 + int16 add-on
    assert a["sram"] == pytest.approx(48 * 0.0009 + 4 * 0.004)
    assert a["vector_unit"] == pytest.approx(16 * 0.0008)
    assert a["dma"] == pytest.approx(2 * 0.01)
    assert a["fixed"] == pytest.approx(0.2)


@pytest.mark.parametrize("overrides, part", [
    ({"mac_array.rows": 32}, "mac_array"),
    ({"sram.size": "96 KiB"}, "sram"),
    ({"sram.banks": 8}, "sram"),            # same capacity, more banks: more periphery
    ({"vector_unit.lanes": 32}, "vector_unit"),
    ({"dma.channels": 4}, "dma"),
])
def test_more_hardware_costs_more_area(overrides, part):
    base = load_config("edge-256")
    before, after = area_mm2(base), area_mm2(base.with_overrides(overrides))
    assert after[part] > before[part] and after["total"] > before["total"]
    assert all(after[p] == pytest.approx(before[p]) for p in PARTS if p != part)


def test_dropping_a_dtype_saves_area():
    base = load_config("edge-256")
    narrow = base.with_overrides({"mac_array.dtypes": ["int8"], "energy.mac_pj": {"int8": 0.3},
                                  "mac_array.precision": {"int8xint8": 1}})
    assert area_mm2(narrow)["mac_array"] == pytest.approx(256 * 0.00035)
    assert narrow.area.mac_mm2["int16"] == 0.00025  # an unused figure may stay


def test_round_trip_and_overrides_reach_area():
    cfg = load_config("edge-256")
    assert config_from_dict(cfg.to_dict()) == cfg
    cheaper = cfg.with_overrides({"area.fixed_mm2": 0.1})
    assert area_mm2(cheaper)["total"] == pytest.approx(area_mm2(cfg)["total"] - 0.1)
    assert cheaper.fingerprint() != cfg.fingerprint()


def test_area_section_is_optional_but_then_area_is_unknown():
    data = load_config("default").to_dict()
    del data["area"]
    cfg = config_from_dict(data, source="noarea.yaml")
    assert cfg.area is None and "area" not in cfg.to_dict()
    with pytest.raises(ConfigError, match="noarea.yaml: area: the config has no area section"):
        area_mm2(cfg)


@pytest.mark.parametrize("key, value, expected", [
    ("area.colour", 1, ["area.colour", "unknown key"]),
    ("area.fixed_mm2", "big", ["area.fixed_mm2", "non-negative number"]),
    ("area.sram_mm2_per_kib", -0.1, ["area.sram_mm2_per_kib", "non-negative number"]),
    ("area.mac_mm2", 0.001, ["area.mac_mm2", "expected a mapping"]),
    ("area.mac_mm2", {"int8": 0.001}, ["area.mac_mm2.int16", "missing entry for a dtype"]),
    ("area.mac_mm2", {"int8": 1, "int16": 1, "int2": 1}, ["area.mac_mm2.int2", "unknown key"]),
    ("area.dma_channel_mm2", None, ["area.dma_channel_mm2", "non-negative number"]),
])
def test_validation_names_file_and_key(tmp_path, key, value, expected):
    data = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
    node = data
    *parents, leaf = key.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and all(s in message for s in expected), message


def test_missing_area_key_reported():
    data = load_config("default").to_dict()
    del data["area"]["vector_lane_mm2"]
    with pytest.raises(ConfigError, match="area.vector_lane_mm2: missing required key"):
        config_from_dict(data)
