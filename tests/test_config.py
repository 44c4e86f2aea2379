"""Hardware config loading: presets, strict validation with one-line messages, overrides, caching keys."""

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from npu_sim.isa.errors import ConfigError
from npu_sim.config import (
    HardwareConfig,
    config_from_dict,
    load_config,
    preset_names,
    preset_path,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def base() -> dict:
    """The default preset as plain YAML data, to mutate into broken configs."""
    return yaml.safe_load((REPO / "configs" / "default.yaml").read_text())


def _set(data: dict, dotted: str, value) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        data = data[part]
    if value is _DELETE:
        del data[leaf]
    else:
        data[leaf] = value


_DELETE = object()


def _write(tmp_path: Path, data, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def _error(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- presets ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, macs, sram, clock, weights, fmaps", [
    ("default", 1024, 1 << 20, 1000.0, "dram", "dram"),
    ("edge-256", 256, 48 << 10, 500.0, "flash", "system_sram"),
    ("large-8k", 8192, 8 << 20, 1000.0, "dram", "dram"),
    ("tpu-v4-core", 4 * 128 * 128, 16 << 20, 1050.0, "hbm", "hbm"),
])
def test_preset_key_figures(name, macs, sram, clock, weights, fmaps):
    cfg = load_config(name)
    assert cfg.name == name
    assert cfg.mac_array.macs_per_cycle == macs
    assert cfg.sram.size == sram
    assert cfg.clock_mhz == clock
    assert (cfg.placement.weights, cfg.placement.feature_maps) == (weights, fmaps)
    assert cfg.tosa.profiles[0] == "PRO-INT" and cfg.tosa.level == "8K"
    assert set(cfg.energy.mac_pj) == set(cfg.mac_array.dtypes)
    assert set(cfg.energy.memories) == set(cfg.memories)


def test_default_preset_details():
    cfg = load_config()  # None means the default preset
    assert cfg.name == "default"
    assert (cfg.mac_array.rows, cfg.mac_array.cols, cfg.mac_array.dtypes) == (
        32, 32, ("int8", "int16", "fp16", "bf16"))
    assert cfg.mac_array.float_acc == {"fp16xfp16": "fp32", "bf16xbf16": "fp32"}
    assert (cfg.sram.banks, cfg.sram.bytes_per_cycle, cfg.sram.bank_size) == (8, 64.0, 128 << 10)
    assert (cfg.dma.channels, cfg.dma.bytes_per_cycle, cfg.dma.setup_cycles) == (2, 32.0, 32)
    assert list(cfg.memories) == ["dram"] and cfg.memories["dram"].size == 512 << 20
    assert cfg.tosa.extensions == ("EXT-INT16", "EXT-INT4", "EXT-DOUBLEROUND", "EXT-INEXACTROUND",
                                   "EXT-CONTROLFLOW", "EXT-VARIABLE", "EXT-BF16",
                                   "EXT-SHAPE")
    assert cfg.tosa.profiles == ("PRO-INT", "PRO-FP")
    assert cfg.cpu_baseline.name == "Cortex-A55-like" and cfg.driver_overhead_us == 20.0


def test_presets_are_the_repository_configs_installed_as_package_data():
    assert {"default", "edge-256", "large-8k"} <= set(preset_names())
    for name in preset_names():       # the installed copies (a wheel's, or this checkout's)
        assert preset_path(name).read_bytes() == (REPO / "configs" / f"{name}.yaml").read_bytes()
    assert not any(p.is_symlink() for p in (REPO / "npu_sim").rglob("*"))


def test_load_by_path_str_and_pathlike():
    path = REPO / "configs" / "edge-256.yaml"
    assert load_config(str(path)) == load_config(path) == load_config("edge-256")
    assert load_config(path).source == str(path)


def test_unknown_preset_lists_available():
    message = str(pytest.raises(ConfigError, load_config, "edge-512").value)
    assert "edge-512" in message and "default" in message and "large-8k" in message


# --- validation: each broken file names itself and the key path --------------------------

FLASH = {"size": "32 MiB", "bandwidth_gbps": 0.5, "latency_ns": 200}

BAD = [
    # (dotted key to change, new value or _DELETE, substrings the message must contain)
    ("colour", "blue", ["colour", "unknown key"]),
    ("mac_array.colz", 32, ["mac_array.colz", "unknown key", "rows, cols, dataflow, fold_overlap, dtypes"]),
    ("memories.dram.sped", 1, ["memories.dram.sped", "unknown key"]),
    ("mac_array.rows", "abc", ["mac_array.rows", "expected a positive integer, got 'abc'"]),
    ("mac_array.rows", 32.5, ["mac_array.rows", "positive integer"]),
    ("vector_unit.lanes", True, ["vector_unit.lanes", "positive integer"]),
    ("mac_array", [32, 32], ["mac_array", "expected a mapping"]),
    ("description", 5, ["description", "string"]),
    ("clock_mhz", 0, ["clock_mhz", "positive number"]),
    ("sram.banks", 0, ["sram.banks", "positive integer"]),
    ("dma.setup_cycles", -1, ["dma.setup_cycles", "non-negative integer"]),
    ("memories.dram.latency_ns", -5, ["memories.dram.latency_ns", "non-negative number"]),
    ("memories.dram.bandwidth_gbps", ".nan", ["memories.dram.bandwidth_gbps", "positive number"]),
    ("energy.leakage_mw", -1, ["energy.leakage_mw", "non-negative"]),
    ("cpu_baseline.power_mw", _DELETE, ["cpu_baseline.power_mw", "missing"]),
    ("sram.size", "1 MB/s", ["sram.size", "bytes", "KiB"]),
    ("sram.size", "12 parsecs", ["sram.size", "bytes"]),
    ("sram.size", "-1 KiB", ["sram.size", "bytes"]),
    ("sram.size", "\uff11 MiB", ["sram.size", "bytes"]),        # a fullwidth digit one
    ("memories.dram.size", "0.3 B", ["memories.dram.size", "whole number of bytes"]),
    ("memories.dram.size", "1.3 KiB", ["memories.dram.size", "whole number of bytes"]),
    ("memories.dram.size", "9" * 5000 + " B", ["memories.dram.size", "whole number of bytes"]),
    ("memories.dram.size", "1." + "0" * 5000 + "1 GiB", ["memories.dram.size", "whole number of bytes"]),
    ("memories.dram.size", 1 << 64, ["memories.dram.size", "2**64"]),
    ("clock_mhz", 10**400, ["clock_mhz", "positive number"]),
    ("sram.size", "512 B", ["sram.size", "at least 1 KiB"]),
    ("sram.size", 1030, ["sram.size", "multiple of sram.banks"]),
    ("placement.weights", "flash", ["placement.weights", "expected one of: dram", "'flash'"]),
    ("energy.mac_pj.int16", _DELETE, ["energy.mac_pj.int16", "missing", "mac_array.dtypes"]),
    ("energy.mac_pj.int3", 0.1, ["energy.mac_pj.int3", "unknown key"]),
    ("energy.memories.hbm", {"read_pj_per_byte": 1, "write_pj_per_byte": 1}, ["energy.memories.hbm", "unknown key"]),
    ("memories.flash", FLASH, ["energy.memories.flash", "missing"]),
    ("memories", {}, ["memories", "at least one"]),
    ("memories.my-dram", FLASH, ["memories.my-dram", "identifier"]),
    ("tosa.level", "16K", ["tosa.level", "8K, none", "'16K'"]),
    ("tosa.profiles", ["PRO-FP"], ["tosa.profiles", "PRO-INT among the profiles"]),
    ("tosa.profiles", ["PRO-INT", "PRO-MI"], ["tosa.profiles[1]", "PRO-INT, PRO-FP", "'PRO-MI'"]),
    ("tosa.profiles", "PRO-INT", ["tosa.profiles", "expected a list"]),
    ("tosa.profile", "PRO-INT", ["tosa.profiles", "exactly one of profiles"]),
    ("tosa.profiles", ["PRO-INT"], ["tosa.extensions[6]", "EXT-BF16 extends PRO-FP"]),
    ("vector_unit.cycles_per_lane.fp_special", _DELETE,
     ["vector_unit.cycles_per_lane.fp_special", "missing", "PRO-FP"]),
    ("energy.vector_op_pj.fp_add", _DELETE, ["energy.vector_op_pj.fp_add", "missing", "PRO-FP"]),
    ("vector_unit.cycles_per_lane.fp_special", 0, ["vector_unit.cycles_per_lane.fp_special", "positive"]),
    ("tosa.extensions", ["EXT-INT16", "EXT-MXFP"], ["tosa.extensions[1]", "EXT-MXFP", "EXT-BF16"]),
    ("tosa.extensions", ["EXT-INT4"], ["mac_array.dtypes", "int16 needs EXT-INT16"]),
    ("mac_array.dtypes", ["int16"], ["mac_array.dtypes", "int8"]),
    ("mac_array.dtypes", ["int8", "int8"], ["mac_array.dtypes", "duplicates"]),
    ("mac_array.dataflow", "row_stationary", ["mac_array.dataflow", "weight_stationary"]),
]


@pytest.mark.parametrize("key, value, expected", BAD, ids=[f"{k}={v!r}"[:40] for k, v, _ in BAD])
def test_invalid_config_names_file_and_key(tmp_path, base, key, value, expected):
    data = copy.deepcopy(base)
    if isinstance(value, str) and value == ".nan":
        value = float("nan")
    _set(data, key, value)
    message = _error(_write(tmp_path, data))
    assert "bad.yaml" in message
    for text in expected:
        assert text in message, message


def test_yaml_syntax_error_has_line(tmp_path):
    message = _error(_write(tmp_path, "name: x\nmac_array: [1, 2\nsram: {}\n", "broken.yaml"))
    assert "broken.yaml" in message and "line 3" in message and "invalid YAML" in message


def test_duplicate_yaml_key_rejected(tmp_path):
    message = _error(_write(tmp_path, "name: a\nclock_mhz: 1\nname: b\n", "dup.yaml"))
    assert "dup.yaml" in message and "line 3" in message and "duplicate key 'name'" in message


@pytest.mark.parametrize("text", ["", "- 1\n- 2\n", "just a string\n"])
def test_top_level_must_be_mapping(tmp_path, text):
    message = _error(_write(tmp_path, text, "top.yaml"))
    assert "top.yaml" in message and "(top level)" in message and "expected a mapping" in message


def test_missing_file(tmp_path):
    message = _error(tmp_path / "nope.yaml")
    assert "nope.yaml" in message and "not found" in message


def test_directory_instead_of_file(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    message = _error(tmp_path / "dir.yaml")
    assert "dir.yaml" in message and "cannot read" in message


def test_config_from_dict_rejects_non_mapping():
    with pytest.raises(ConfigError, match=r"<dict>: \(top level\): expected a mapping"):
        config_from_dict(["not", "a", "dict"])


@pytest.mark.parametrize("size, nbytes", [
    (4096, 4096), ("1 MiB", 1 << 20), ("1.5 KiB", 1536), ("2MB", 2_000_000), ("4 GiB", 4 << 30), ("2048 B", 2048),
    ("0002.50 KiB", 2560), ("1." + "0" * 5000 + " MiB", 1 << 20),
    ("1.000000000931322574615478515625 GiB", (1 << 30) + 1),      # 2**-30 GiB is a byte
])
def test_size_forms(base, size, nbytes):
    data = copy.deepcopy(base)
    data["sram"]["size"], data["sram"]["banks"] = size, 1
    assert config_from_dict(data).sram.size == nbytes


def test_yaml_exponent_without_dot_is_a_number(tmp_path, base):
    text = (REPO / "configs" / "default.yaml").read_text().replace("bandwidth_gbps: 16", "bandwidth_gbps: 16e0")
    assert load_config(_write(tmp_path, text, "exp.yaml")).memories["dram"].bandwidth_gbps == 16.0


def test_optional_keys_default(base):
    data = copy.deepcopy(base)
    del data["description"], data["tosa"]["level"]
    data["tosa"]["extensions"] = ["EXT-INT16", "EXT-BF16"]   # the PEs' bf16 needs its extension
    cfg = config_from_dict(data)
    assert cfg.description == "" and cfg.tosa.level == "8K" and cfg.source == "<dict>"


# --- overrides, round trip, fingerprint, derived figures --------------------------------------

def test_with_overrides_applies_and_leaves_original():
    cfg = load_config("default")
    new = cfg.with_overrides({"mac_array.rows": 64, "sram.size": "256 KiB", "memories.dram.bandwidth_gbps": 8})
    assert new.mac_array.macs_per_cycle == 64 * 32 and new.sram.size == 256 << 10
    assert new.memory_bytes_per_cycle("dram") == 8.0
    assert cfg.mac_array.rows == 32 and cfg.sram.size == 1 << 20  # frozen original untouched
    assert new.source == cfg.source


def test_with_overrides_can_add_a_memory_and_move_weights():
    cfg = load_config("default").with_overrides({
        "memories.flash": FLASH,
        "energy.memories.flash": {"read_pj_per_byte": 50, "write_pj_per_byte": 500},
        "placement.weights": "flash",
    })
    assert list(cfg.memories) == ["dram", "flash"] and cfg.placement.weights == "flash"


@pytest.mark.parametrize("overrides, expected", [
    ({"mac_array.rows": -1}, "mac_array.rows: expected a positive integer"),
    ({"sram.size": "lots"}, "sram.size"),
    ({"mac_array.colz": 4}, "mac_array.colz: unknown key"),
    ({"macarray.rows": 4}, "macarray: unknown key"),
    ({"mac_array.rows.x": 4}, "mac_array.rows.x"),
    ({"placement.weights": "flash"}, "placement.weights"),
    ({"": 1}, "dotted key"),
])
def test_with_overrides_validates(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config("default").with_overrides(overrides)
    assert expected in str(info.value) and "default.yaml (overrides)" in str(info.value)


@pytest.mark.parametrize("name", ["default", "edge-256", "large-8k"])
def test_round_trip(tmp_path, name):
    cfg = load_config(name)
    data = cfg.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain data only
    assert config_from_dict(data) == cfg
    again = load_config(_write(tmp_path, data, "copy.yaml"))  # through YAML too
    assert again == cfg and again.fingerprint() == cfg.fingerprint()


def test_fingerprint_stable_and_sensitive():
    cfg = load_config("default")
    fp = cfg.fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert load_config("default").fingerprint() == fp
    assert cfg.with_overrides({"clock_mhz": 1000}).fingerprint() == fp  # 1000 and 1000.0 are one value
    assert cfg.with_overrides({"dma.setup_cycles": 33}).fingerprint() != fp
    assert cfg.with_overrides({"energy.mac_pj.int8": 0.3}).fingerprint() != fp
    assert len({load_config(n).fingerprint() for n in ("default", "edge-256", "large-8k")}) == 3


def test_configs_are_frozen_and_hashable():
    cfg = load_config("default")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.clock_mhz = 2000
    assert {cfg: 1}[load_config("default")] == 1
    assert isinstance(cfg, HardwareConfig)


def test_memory_bytes_and_latency_cycles():
    edge = load_config("edge-256")
    assert edge.memory_bytes_per_cycle("system_sram") == pytest.approx(8.0)   # 4 GB/s / 500 MHz
    assert edge.memory_bytes_per_cycle("flash") == pytest.approx(1.0)         # 0.5 GB/s / 500 MHz
    assert edge.memory_latency_cycles("system_sram") == 15                    # 30 ns * 0.5 GHz
    assert edge.memory_latency_cycles("flash") == 100
    large = load_config("large-8k")
    assert large.memory_bytes_per_cycle("dram") == pytest.approx(200.0)
    assert large.memory_latency_cycles("dram") == 120
    odd = load_config("default").with_overrides({"memories.dram.latency_ns": 100.5})
    assert odd.memory_latency_cycles("dram") == 101  # partial cycles round up
    with pytest.raises(ConfigError, match="memories.hbm: unknown memory"):
        large.memory_bytes_per_cycle("hbm")


def test_schedule_section_is_optional_and_its_figures_reach_the_compiler():
    from npu_sim.compiler.driver import resident_share
    from npu_sim.config import ScheduleConfig
    cfg = load_config("edge-256")
    assert cfg.schedule == ScheduleConfig()              # no preset sets it: the defaults
    assert resident_share(cfg) == (48 << 10) - (16 << 10)
    wider = cfg.with_overrides({"schedule.tile_floor": "8 KiB", "schedule.resident_fraction": 0.5})
    assert resident_share(wider) == 24 << 10 and wider.fingerprint() != cfg.fingerprint()
    with pytest.raises(ConfigError, match="schedule.room_slack"):
        cfg.with_overrides({"schedule.room_slack": 0.5})


def test_parsed_yaml_kept_by_content_and_reused(tmp_path, monkeypatch):
    """A file read once is kept parsed (JSON, keyed by its bytes) and read back without PyYAML;
    an edited file is parsed again, and a document JSON cannot hold is parsed each time."""
    from npu_sim import yamlread
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    first = load_config("edge-256")
    memos = list((tmp_path / "cache" / "yaml").glob("*.json"))
    assert len(memos) == 1
    monkeypatch.setattr(yamlread, "parse_yaml", lambda text: pytest.fail("parsed again"))
    assert load_config("edge-256") == first
    monkeypatch.undo()
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "c.yaml"
    f.write_text(Path(preset_path("edge-256")).read_text().replace("clock_mhz: 500", "clock_mhz: 400"))
    assert load_config(f).clock_mhz == 400
    f.write_text("{1: 2}\n")               # an int key: JSON would make it "1"
    assert yamlread.read_yaml(f, "file") == {1: 2} == yamlread.read_yaml(f, "file")
    assert len(list((tmp_path / "cache" / "yaml").glob("*.json"))) == 2
