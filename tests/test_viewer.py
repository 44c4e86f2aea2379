"""`npu-sim view`: the self-contained HTML viewer, checked in a real headless browser."""
import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from npu_sim import api
from npu_sim.isa.errors import InputError
from npu_sim.trace import write_trace
from npu_sim.viewer import compact, load_trace, render_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    cfg = api.load_config("default")
    program = api.compile_model(api.default_model(), cfg)
    res = api.simulate(program, cfg, timing_only=True)
    path = tmp_path_factory.mktemp("viewer") / "mbv2.json"
    write_trace(path, program, cfg, res.sim, res.report)
    return path, program, res


def _cli(*args):
    return subprocess.run([sys.executable, "-I", "-m", "npu_sim", *map(str, args)],
                          capture_output=True, text=True)


def test_compact_form_keeps_every_slice_layer_and_counter(traced):
    path, program, res = traced
    data = compact(load_trace(path))
    assert [lane["name"] for lane in data["lanes"]] == ["dma0", "dma1", "mac", "vector"]
    assert sum(len(lane["s"]) for lane in data["lanes"]) == len(program.commands)
    for lane in data["lanes"]:
        ids = [a["id"] for a in lane["a"]]
        assert ids == res.sim.engines[lane["name"]]
        assert lane["s"] == [int(res.sim.start[i]) for i in ids]
    rows = {r["index"]: r for r in data["layers"]}
    assert [(r.start, r.cycles) for r in res.report.layers] == [
        (rows[i]["start"], rows[i]["cycles"]) for i in range(len(res.report.layers))]
    assert sum(r["commands"] for r in data["layers"]) == len(program.commands)
    assert {c["unit"] for c in data["counters"]} == {"%", "GB/s", "KiB"}
    assert data["meta"]["cycles"] == res.report.cycles


def test_compact_form_of_a_coarse_trace(traced, tmp_path):
    _, program, res = traced
    write_trace(tmp_path / "c.json", program, api.load_config("default"), res.sim, res.report,
                coarse=True)
    data = compact(load_trace(tmp_path / "c.json"))
    assert data["meta"]["coarse"] and len(data["layers"]) == len(program.layers)
    assert sum(r["commands"] for r in data["layers"]) == len(program.commands)
    assert sum(len(lane["s"]) for lane in data["lanes"]) < len(program.commands)


def test_view_open_uses_the_web_browser(traced, tmp_path, monkeypatch):
    from npu_sim import cli
    opened = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    shutil.copy(traced[0], tmp_path / "t.json")
    assert cli.main(["view", str(tmp_path / "t.json"), "--open"]) == 0
    assert opened == [(tmp_path / "t.html").resolve().as_uri()]


def test_html_is_self_contained(traced):
    path, _, _ = traced
    text = render_html(compact(load_trace(path)))
    assert "<canvas" in text and "__NPU_" not in text
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)   # nothing to fetch
    assert "http://" not in text and "https://" not in text
    payload = text.split('type="application/json">')[1].split("</script>")[0]
    assert json.loads(payload)["lanes"]


def test_view_command_paths_and_errors(traced, tmp_path):
    path, _, _ = traced
    trace = tmp_path / "run.json"
    shutil.copy(path, trace)
    r = _cli("view", trace)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run.html").exists() and "run.html" in r.stdout
    r = _cli("view", trace, "-o", tmp_path / "other.html")
    assert r.returncode == 0 and (tmp_path / "other.html").stat().st_size > 10000
    (tmp_path / "bad.json").write_text("{not json")
    for bad in (tmp_path / "bad.json", tmp_path / "absent.json"):
        r = _cli("view", bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("npu-sim:")


# A trace in miniature, with every kind of event compact() reads: the fuzzed variants below
# each break one field of it.
SMALL = {
    "otherData": {"model": "m", "config": "c", "clock_mhz": 1000.0, "cycles": 300,
                  "macs_per_cycle": 16, "onchip_bytes": 4096, "dram_peak_gbps": 16.0},
    "traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "mac"}},
        {"ph": "X", "name": "conv", "cat": "layer", "pid": 1, "tid": 1, "ts": 0, "dur": 0.3,
         "args": {"layer": 0, "ops": "conv2d", "unit": "mac", "start_cycle": 0,
                  "end_cycle": 300, "macs": 100, "cycles": 300, "mac_utilization": 0.5}},
        {"ph": "X", "name": "CONV2D", "cat": "mac", "pid": 1, "tid": 2, "ts": 0.1, "dur": 0.2,
         "args": {"id": 0, "layer": 0, "bytes": 64, "macs": 100, "deps": [],
                  "tile": {"n": 0, "of": 1, "at": [0, 0]}}},
        {"ph": "C", "name": "dram bandwidth", "pid": 1, "ts": 0.1, "args": {"GB/s": 3.5}},
    ]}


def _with(where, value):
    """SMALL with one field set: where is "otherData[.key]" or "EVENT[.args].key"."""
    trace, *keys = copy.deepcopy(SMALL), *where.split(".")
    obj = trace if keys[0] == "otherData" else trace["traceEvents"]
    keys = keys if keys[0] == "otherData" else [int(keys[0])] + keys[1:]
    for k in keys[:-1]:
        obj = obj[k]
    obj[keys[-1]] = value
    return trace


def test_small_trace_compacts():
    data = compact(copy.deepcopy(SMALL))
    assert data["lanes"] == [{"name": "mac", "s": [100], "e": [300], "n": [0], "l": [0],
                              "a": [{"id": 0, "bytes": 64, "macs": 100, "deps": [],
                                     "tile": {"n": 0, "of": 1, "at": [0, 0]}}]}]
    assert data["layers"][0]["util"] == 0.5 and data["counters"][0]["peak"] == 16.0
    assert json.loads(render_html(data).split('type="application/json">')[1]
                      .split("</script>")[0])["meta"]["cycles"] == 300


BAD_FIELDS = [   # where, value, the message's tail after "t.json: "
    ("2.ts", "abc", "event 2: 'ts' is 'abc', expected a finite number >= 0"),
    ("2.ts", math.nan, "event 2: 'ts' is NaN, expected a finite number"),
    ("2.ts", 1e308, "event 2: 'ts' is 1e+308, expected a time under"),
    ("2.ts", 10 ** 400, "event 2: 'ts' is 1000000000000000000000000000000000000...,"),
    ("2.dur", -1, "event 2: 'dur' is -1, expected a finite number >= 0"),
    ("2.dur", math.inf, "event 2: 'dur' is Infinity"),
    ("2.ph", 5, "event 2: 'ph' is 5, expected a string"),
    ("2.name", ["x"], "event 2: 'name' is a list, expected a string"),
    ("2.tid", {}, "event 2: 'tid' is an object, expected an integer or a string"),
    ("3.pid", [], "event 3: 'pid' is a list, expected an integer or a string"),
    ("2.args", 5, "event 2: 'args' is 5, expected an object"),
    ("2.args.layer", "x", "event 2: 'args.layer' is 'x', expected an integer"),
    ("2.args.bytes", -3, "event 2: 'args.bytes' is -3, expected an integer in [0, 2**53]"),
    ("2.args.start_cycle", 1.5, "event 2: 'args.start_cycle' is 1.5, expected an integer"),
    ("2.args.end_cycle", 50, "event 2: ends at cycle 50, before it starts at cycle 100"),
    ("2.args.deps", 5, "event 2: 'args.deps' is 5, expected a list of command ids"),
    ("2.args.tile", "x", "event 2: 'args.tile' is 'x', expected an object"),
    ("2.args.extra", math.nan, "event 2: 'args.extra' is NaN, expected plain JSON"),
    ("2.args.extra", json.loads("[" * 40 + "]" * 40), "event 2: 'args.extra' is a list"),
    ("1.args.mac_utilization", math.nan, "event 1: 'args.mac_utilization' is NaN"),
    ("1.args.end_cycle", -1, "event 1: 'args.end_cycle' is -1, expected an integer"),
    ("1.name", 7, "event 1: 'name' is 7, expected a string"),
    ("0.args.name", 7, "event 0: 'args.name' is 7, expected a string"),
    ("3.args.GB/s", "x", "event 3: 'args.GB/s' is 'x', expected a finite number"),
    ("3.args.GB/s", None, "event 3: 'args.GB/s' is null, expected a finite number"),
    ("3.ts", True, "event 3: 'ts' is true, expected a finite number"),
    ("3", 5, "event 3 is 5, expected an object"),
    ("otherData", 5, "'otherData' is 5, expected an object"),
    ("otherData.clock_mhz", "fast", "otherData: 'clock_mhz' is 'fast', expected a finite"),
    ("otherData.cycles", 1.5, "otherData: 'cycles' is 1.5, expected an integer"),
    ("otherData.macs_per_cycle", 0.5, "otherData: 'macs_per_cycle' is 0.5, expected an int"),
    ("otherData.model", math.inf, "otherData: 'model' is Infinity, expected plain JSON"),
    ("otherData.dram_peak_gbps", "x", "otherData: 'dram_peak_gbps' is 'x', expected a fin"),
    ("otherData.onchip_bytes", -1, "otherData: 'onchip_bytes' is -1, expected a finite"),
]


@pytest.mark.parametrize("where, value, message", BAD_FIELDS, ids=[b[0] for b in BAD_FIELDS])
def test_a_bad_field_is_an_input_error_naming_event_and_field(where, value, message):
    with pytest.raises(InputError) as err:
        compact(_with(where, value), "t.json")
    assert str(err.value).startswith(f"t.json: {message}"), str(err.value)


@pytest.mark.parametrize("where, value", [("2.ts", "abc"), ("2.dur", math.nan),
                                          ("2.ts", 1e308), ("3.args.GB/s", "x"),
                                          ("otherData", 5), ("deep", None)])
def test_view_of_a_bad_trace_is_one_line_exit_2_and_no_file(where, value, tmp_path, capsys):
    from npu_sim import cli
    trace, out = tmp_path / "t.json", tmp_path / "t.html"
    # json.dumps writes NaN and Infinity as Python's json.load (and the fuzzer) read them
    trace.write_text("[" * 100_000 + "]" * 100_000 if where == "deep"
                     else json.dumps(_with(where, value)))
    assert cli.main(["view", str(trace), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"npu-sim: input error: {trace}: ")
    event, _, field = where.partition(".")
    assert (": not a JSON trace (arrays or objects nested too deeply)" if where == "deep"
            else ": 'otherData' is 5" if where == "otherData"
            else f": event {event}: '{field}' is ") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]     # no page, no .part


@pytest.mark.parametrize("target", ["DIR", "TRACE", "FIFO", "EMPTY"])
def test_view_to_a_directory_its_own_trace_or_a_fifo_is_refused(tmp_path, capsys, target):
    from npu_sim import cli
    (tmp_path / "t.json").write_text(json.dumps(SMALL))
    os.mkfifo(tmp_path / "fifo")
    out = {"DIR": tmp_path, "TRACE": tmp_path / "t.json", "FIFO": tmp_path / "fifo",
           "EMPTY": ""}[target]
    assert cli.main(["view", str(tmp_path / "t.json"), "-o", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "t.json"]
    assert json.loads((tmp_path / "t.json").read_text()) == SMALL and (tmp_path / "fifo").is_fifo()


def test_odd_but_valid_names_render(tmp_path, capsys):
    """A lane named like a DMA queue but not one, and a lone surrogate (valid JSON escape)."""
    from npu_sim import cli
    trace = _with("0.args.name", "dma\u00b2")
    trace["otherData"]["model"] = "\ud800"
    (tmp_path / "t.json").write_text(json.dumps(trace))
    assert cli.main(["view", str(tmp_path / "t.json"), "-o", str(tmp_path / "v.html")]) == 0
    page = (tmp_path / "v.html").read_text(encoding="utf-8")
    assert "dma\u00b2" in page or "dma\\u00b2" in page       # as itself, or JSON-escaped


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("no chromium/chromedriver here: install them (apt-get install chromium "
                    "chromium-driver; .ci/run does) to test the viewer in a browser")
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="npu-sim-chromium-")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--no-first-run", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--window-size=1400,1000", f"--user-data-dir={profile}"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _state(driver):
    return driver.execute_script("return window.npuViewer.state()")


def _wait(driver, cond, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        s = _state(driver)
        if cond(s):
            return s
        time.sleep(0.05)
    return _state(driver)


def test_viewer_renders_zooms_pans_and_sorts_in_a_browser(browser, traced, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    path, program, res = traced
    html = tmp_path / "mbv2.html"
    html.write_text(render_html(compact(load_trace(path))))
    browser.get(html.as_uri())
    s = _state(browser)
    assert s["lanes"] == ["dma0", "dma1", "mac", "vector"] and s["slices"] == len(program.commands)
    assert s["t0"] == 0 and s["t1"] == res.report.cycles and 0 < s["drawn"] <= s["slices"]
    # the MAC lane has coloured pixels: the lanes are really drawn on the canvas
    painted = browser.execute_script("""
        const c = document.getElementById('view'), g = c.getContext('2d'), r = devicePixelRatio;
        const y = Math.round((arguments[0]) * r), row = g.getImageData(0, y, c.width, 1).data;
        let n = 0; for (let i = 0; i < row.length; i += 4)
          if (Math.abs(row[i] - row[i + 1]) > 40 || Math.abs(row[i + 1] - row[i + 2]) > 40) n++;
        return n;""", s["laneY"][2])
    assert painted > 50
    # smooth: a full redraw of the whole network takes well under a frame budget
    ms = browser.execute_script("const t = performance.now(); for (let i = 0; i < 20; i++) "
                                "window.npuViewer.draw(); return (performance.now() - t) / 20;")
    assert ms < 50
    canvas = browser.find_element(By.ID, "view")
    span0 = s["t1"] - s["t0"]
    browser.execute_script("""const c = arguments[0], r = c.getBoundingClientRect();
        c.dispatchEvent(new WheelEvent('wheel', {deltaY: -400, clientX: r.left + r.width / 2,
          clientY: r.top + 150, bubbles: true, cancelable: true}));""", canvas)
    s = _wait(browser, lambda st: st["t1"] - st["t0"] < span0 * 0.8)
    assert s["t1"] - s["t0"] < span0 * 0.8
    span1 = s["t1"] - s["t0"]
    canvas.click()
    ActionChains(browser).send_keys("+").perform()
    s = _wait(browser, lambda st: st["t1"] - st["t0"] < span1 * 0.6)
    assert s["t1"] - s["t0"] == pytest.approx(span1 / 2, rel=0.01)
    t0 = s["t0"]
    ActionChains(browser).send_keys("\ue014").perform()             # arrow right
    s = _wait(browser, lambda st: st["t0"] > t0)
    assert s["t0"] > t0
    ActionChains(browser).move_to_element_with_offset(canvas, 300, 0).click_and_hold() \
        .move_by_offset(-200, 0).release().perform()                  # drag left: later times
    assert _wait(browser, lambda st: st["t0"] > s["t0"])["t0"] > s["t0"]
    ActionChains(browser).send_keys("0").perform()
    s = _wait(browser, lambda st: st["t0"] == 0)
    assert s["t1"] == res.report.cycles
    # hover a MAC slice: the tooltip tells its cycles
    mac = next(a for a in compact(load_trace(path))["lanes"] if a["name"] == "mac")
    i = max(range(len(mac["s"])), key=lambda k: mac["e"][k] - mac["s"][k])
    x = browser.execute_script("return window.npuViewer.xOf(arguments[0])",
                               (mac["s"][i] + mac["e"][i]) / 2)
    rect = browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", canvas)
    ActionChains(browser).move_to_element_with_offset(
        canvas, int(x - rect["width"] / 2), int(s["laneY"][2] - rect["height"] / 2)).perform()
    tip = browser.find_element(By.ID, "tip")
    assert tip.is_displayed() and "cycles" in tip.text and "mac" in tip.text
    # sortable per-layer table: a click on "cycles" puts the longest layer first
    browser.find_element(By.CSS_SELECTOR, "th[data-key=cycles]").click()
    first = browser.find_element(By.CSS_SELECTOR, "#layers tbody tr").get_attribute("data-index")
    assert int(first) == max(res.report.layers, key=lambda r: r.cycles).index
    shot = tmp_path / "viewer.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10000
    if os.environ.get("NPU_SIM_ARTIFACTS"):            # CI keeps the screenshot
        Path(os.environ["NPU_SIM_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(os.environ["NPU_SIM_ARTIFACTS"]) / "viewer.png")
    print(f"viewer screenshot: {shot}")
