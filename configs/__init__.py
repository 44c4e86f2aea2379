"""Hardware presets: one YAML file per design, read like a datasheet (installed as npu_sim.configs)."""
