"""What a researcher used to W&B and TensorBoard found on report.html, each
driven in headless Chromium with real input events (CDP Input.dispatchMouseEvent and
Input.dispatchKeyEvent, as a user's mouse and keyboard; never a JavaScript call where a user
would click): zoom by a drag, reset by a double-click, no stale zoom on a later click, an x
axis change after a zoom; EMA smoothing debiased as TensorBoard's, the raw curve under it,
none on sparse and schedule series; log y fitted to the data; the hover listing every
visible curve at the exact logged step; the legend's "only" and search, stable colours,
the tables and forest plot following the toggles; the FLOPs axis; export; --watch reloading
only on change, keeping the state; the page at 390 px, dark and in print. And without a
browser: `pip install ./analysis` writes the page; the verdicts in one line at the top of
report.md and the page, before the provenance."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import test_page as TP  # noqa: E402
import ablate_analysis as aa  # noqa: E402

FILES = {}
PY = os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3"


def page(tag="rep", *extra):
    """(report dir, its page's data) of the committed grid sweep (activation x lr, 2 seeds)."""
    if tag not in FILES:
        path = W.fixture("page", FILES["dir"])
        d = os.path.join(FILES["dir"], tag)
        rc, err = W.report(path, d, *extra)
        assert rc == 0, err
        with open(os.path.join(d, "report.html")) as f:
            FILES[tag] = (d, TP.embedded(f.read()))
    return FILES[tag]


# ---------------------------------------------------------------- real input events

def js(d, code, *args):
    """Reads the page's state (never to act where a user would click)."""
    return d.execute_script(code, *args)


def mouse(d, typ, x, y, buttons=0, button="none", count=0):
    d.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": typ, "x": x, "y": y,
                                                   "button": button, "buttons": buttons,
                                                   "clickCount": count})


def click(d, x, y, count=1):
    mouse(d, "mouseMoved", x, y)
    for c in range(1, count + 1):
        mouse(d, "mousePressed", x, y, 1, "left", c)
        mouse(d, "mouseReleased", x, y, 0, "left", c)


def drag(d, x1, x2, y):
    mouse(d, "mouseMoved", x1, y)
    mouse(d, "mousePressed", x1, y, 1, "left", 1)
    for k in range(1, 11):
        mouse(d, "mouseMoved", x1 + (x2 - x1) * k / 10, y, 1, "left")
    mouse(d, "mouseReleased", x2, y, 0, "left", 1)


def key(d, name, code, vk, text=None):
    for typ in ("keyDown", "keyUp"):
        ev = {"type": typ, "key": name, "code": code, "windowsVirtualKeyCode": vk}
        if text and typ == "keyDown":
            ev["text"] = text
        d.execute_cdp_cmd("Input.dispatchKeyEvent", ev)


def type_text(d, text):
    for ch in text:
        d.execute_cdp_cmd("Input.insertText", {"text": ch})


def rect(d, sel):
    """The element's box in the viewport, scrolled to the middle of it (the sticky control
    bar covers the top)."""
    return js(d, "const e = document.querySelector(arguments[0]);"
                    "e.scrollIntoView({block: 'center'});"
                    "const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height];",
                 sel)


def click_el(d, sel):
    x, y, w, h = rect(d, sel)
    click(d, x + w / 2, y + h / 2)


def choose(d, sel, value):
    """Chooses value in a <select> with the keyboard, as a user tabbing to it would: focus
    by a real click is a popup in headless Chromium, so the select is focused and the arrow
    keys move it."""
    opts = js(d, "return [...document.querySelector(arguments[0]).options].map(o => o.value)", sel)
    cur = js(d, "return document.querySelector(arguments[0]).value", sel)
    js(d, "document.querySelector(arguments[0]).focus()", sel)
    k = opts.index(value) - opts.index(cur)
    for _ in range(abs(k)):
        key(d, "ArrowDown" if k > 0 else "ArrowUp", "ArrowDown" if k > 0 else "ArrowUp",
            40 if k > 0 else 38)
    assert js(d, "return document.querySelector(arguments[0]).value", sel) == value


def xscale(d, fid):
    TP.wait_ready(d)
    return js(d, "const p = window.ablateReport.figures[arguments[0]].plot;"
                    "return [p.scales.x.min, p.scales.x.max]", fid)


def opened(tag="rep", size=(1400, 1800), extra=()):
    d = TP.browser()
    d.set_window_size(*size)
    rep, data = page(tag, *extra)
    d.get("file://" + os.path.join(rep, "report.html"))
    TP.wait_ready(d)
    assert js(d, "return window.ablateReport.errors") == []
    return d, rep, data


# ---------------------------------------------------------------- 2. zoom

def test_zoom():
    """A drag zooms; a real double-click resets; a later click does not bring the zoom back;
    the x axis changed after a zoom shows the whole curve on the new axis (not the step
    range applied to tokens: an empty figure)."""
    d, _, _ = opened()
    try:
        full = xscale(d, "val_loss")
        x, y, w, h = rect(d, "#fig-val_loss .u-over")
        drag(d, x + 0.3 * w, x + 0.6 * w, y + h / 2)
        zoomed = xscale(d, "val_loss")
        assert zoomed[0] > full[0] + 0.2 * (full[1] - full[0]) and \
            zoomed[1] < full[1] - 0.3 * (full[1] - full[0]), (full, zoomed)
        x, y, w, h = rect(d, "#fig-val_loss .u-over")
        click(d, x + w / 2, y + h / 2, count=2)
        assert xscale(d, "val_loss") == full, "a double-click did not reset the zoom"
        click(d, x + w / 3, y + h / 2)
        click_el(d, "#head h1")
        assert xscale(d, "val_loss") == full, "a later click brought the zoom back"
        # zoom again, then change the x axis: the figure is whole on tokens
        x, y, w, h = rect(d, "#fig-val_loss .u-over")
        drag(d, x + 0.3 * w, x + 0.6 * w, y + h / 2)
        assert xscale(d, "val_loss") != full
        choose(d, "#xaxis", "tokens")
        tok = xscale(d, "val_loss")
        _, data = page()
        vl = next(f for f in data["figures"] if f["id"] == "val_loss")
        lo = min(v for ln in vl["lines"] for v in ln["tokens"])
        hi = max(v for ln in vl["lines"] for v in ln["tokens"])
        # (the x values drawn are the buckets' centres: within a bucket of each end)
        assert tok[0] <= lo + 0.02 * (hi - lo) and tok[1] >= hi - 0.02 * (hi - lo), (tok, lo, hi)
        drawn = js(d, "const p = window.ablateReport.figures.val_loss.plot;"
                         "return p.data.slice(1).some(s => s.some(v => v !== null))")
        assert drawn, "empty figure after the axis change"
        assert not TP.console_errors(d)
    finally:
        d.quit()


# ---------------------------------------------------------------- 3. smoothing

def tb_smooth(ys, a):
    """TensorBoard's debiased EMA."""
    out, last, n = [], 0.0, 0
    for v in ys:
        if v is None:
            out.append(None)
            continue
        last = last * a + (1 - a) * v
        n += 1
        out.append(last / (1 - a ** n))
    return out


def test_ema():
    """At 0.95 (set with the slider's keyboard, as a user would), the training loss is the
    debiased EMA of each run, the raw curve drawn faintly under it; the validation loss and
    the learning rate are drawn unsmoothed."""
    d, _, data = opened()
    try:
        before = js(d, "const o = {}; for (const [k, f] of Object.entries(window.ablateReport.figures))"
                          " o[k] = f.plot.data; return o;")
        js(d, "document.getElementById('ema').focus()")
        for _ in range(95):
            key(d, "ArrowRight", "ArrowRight", 39)
        TP.wait_ready(d)
        assert js(d, "return document.getElementById('ema').value") == "0.95"
        after = js(d, "const o = {}; for (const [k, f] of Object.entries(window.ablateReport.figures))"
                         " o[k] = [f.plot.data, f.plot.series.map(s => s.label)]; return o;")
        for fid in ("val_loss", "lr"):
            assert after[fid][0] == before[fid], "%s smoothed" % fid
        labels = after["train_loss"][1]
        assert any(str(s).endswith("(raw)") for s in labels), labels
        # the page's smoothing of one run's points is TensorBoard's (in seeds mode each run
        # is drawn: its smoothed points are the EMA of its points)
        tl = next(f for f in data["figures"] if f["id"] == "train_loss")
        ys = tl["lines"][0]["y"]
        got = js(d, "return window.ablateReport.ema(arguments[0], 0.95)", ys)
        want = tb_smooth(ys, 0.95)
        assert all(abs(g - w) < 1e-9 for g, w in zip(got, want)), (got[:5], want[:5])
        # and the figure: the smoothed mean's last value is the mean of the runs' smoothed
        # last values, close to the raw ones (a biased EMA started at the first value
        # reads high at the end of a falling curve)
        choose(d, "#mode", "seeds")
        TP.wait_ready(d)
        series = js(d, "const f = window.ablateReport.figures.train_loss.plot;"
                          "return f.series.map(s => s.label)")
        assert sum(1 for s in series[1:] if str(s).endswith("(raw)")) == len(tl["lines"])
    finally:
        d.quit()


# ---------------------------------------------------------------- 4. log y

def test_log_y():
    """Log y: the range fits the data (a loss of 1.9-2.4 is not drawn in 1-10), with ticks
    inside it."""
    d, _, data = opened()
    try:
        click_el(d, "#logy")
        TP.wait_ready(d)
        for fid in ("val_loss", "train_loss"):
            f = js(d, "const p = window.ablateReport.figures[arguments[0]].plot;"
                         "const ys = p.data.slice(1).flat().filter(v => v !== null && v > 0);"
                         "return [p.scales.y.distr, p.scales.y.min, p.scales.y.max,"
                         " Math.min(...ys), Math.max(...ys), p.axes[1]._splits || null]", fid)
            distr, lo, hi, dlo, dhi, splits = f
            assert distr == 3
            # robust limits may cut the top; the range stays within the data's, padded
            assert lo >= dlo / 1.3 and hi <= dhi * 1.3 and lo < dlo * 1.0001, (fid, f)
            assert splits and sum(lo <= s <= hi for s in splits) >= 3, (fid, f)
    finally:
        d.quit()


# ---------------------------------------------------------------- 8. hover

def test_hover():
    """Hovering lists every visible curve with its value at the logged step nearest the
    cursor: the mean over the configuration's runs at exactly that step."""
    d, _, data = opened()
    try:
        vl = next(f for f in data["figures"] if f["id"] == "val_loss")
        x, y, w, h = rect(d, "#fig-val_loss .u-over")
        mouse(d, "mouseMoved", x + 0.55 * w, y + h / 2)
        rows = js(d, "return [...document.querySelectorAll('#fig-val_loss .tip .row')]"
                        ".map(r => [r.dataset.name, +r.dataset.value, +r.dataset.x])")
        xcur = js(d, "const p = window.ablateReport.figures.val_loss.plot;"
                        "return p.posToVal(p.cursor.left, 'x')")
        names = [c["name"] for c in data["configs"]]
        assert sorted(r[0] for r in rows) == sorted(names), rows
        for name, v, step in rows:
            ci = names.index(name)
            lines = [ln for ln in vl["lines"] if ln["c"] == ci]
            steps = sorted({s for ln in lines for s in ln["step"]})
            want_step = min(steps, key=lambda s: abs(s - xcur))
            assert step == want_step, (name, step, want_step, xcur)
            vals = [ln["y"][ln["step"].index(step)] for ln in lines if step in ln["step"]]
            assert abs(v - sum(vals) / len(vals)) < 1e-9, (name, v, vals)
        # a configuration hidden from the legend leaves the list
        click_el(d, "#legend .item[data-unit='%s'] .name" % names[0])
        TP.wait_ready(d)
        x, y, w, h = rect(d, "#fig-val_loss .u-over")
        mouse(d, "mouseMoved", x + 0.5 * w, y + h / 2)
        shown = js(d, "return [...document.querySelectorAll('#fig-val_loss .tip .row')]"
                         ".map(r => r.dataset.name)")
        assert sorted(shown) == sorted(names[1:]), shown
    finally:
        d.quit()


# ---------------------------------------------------------------- 7. many configurations

def test_legend():
    """"only" isolates one configuration in every figure, the tables and the forest plot
    (again: all back); the search box keeps the matching ones; colours stay with their
    configuration through both."""
    d, _, data = opened()
    try:
        names = [c["name"] for c in data["configs"]]

        def colours():
            return js(d, "const o = {}; for (const it of document.querySelectorAll('#legend .item'))"
                            " o[it.dataset.unit] = it.querySelector('.sw').style.background; return o;")

        def drawn():
            TP.wait_ready(d)
            return js(d, "const o = {}; for (const [k, f] of Object.entries(window.ablateReport.figures))"
                            " o[k] = f.units; o._runs = [...new Set([...document.querySelectorAll("
                            "'#table-runs tbody td[data-key=config]')].map(t => t.textContent))];"
                            " o._verdict = [...document.querySelectorAll('#table-verdict tbody td[data-key=config]')]"
                            ".map(t => t.textContent); o._forest = [...document.querySelectorAll("
                            "'#forest text[data-config]')].map(t => t.dataset.config); return o;")
        before = colours()
        click_el(d, "#legend .item[data-unit='%s'] .only" % names[2])
        got = drawn()
        for k, v in got.items():
            if k in ("_verdict", "_forest"):
                assert v == [names[2]], (k, v)
            else:
                assert v == [names[2]], (k, v)
        assert colours()[names[2]] == before[names[2]]
        click_el(d, "#legend .item[data-unit='%s'] .only" % names[2])
        assert drawn()["val_loss"] == names
        # search: "gelu" keeps the gelu configurations, in their colours
        click_el(d, "#search")
        type_text(d, "gelu")
        got = drawn()
        want = [n for n in names if "gelu" in n]
        assert got["val_loss"] == want and got["_runs"] == want, got
        assert all(colours()[n] == before[n] for n in want)
    finally:
        d.quit()


# ---------------------------------------------------------------- 10: the grid at a glance

def test_grid_glance():
    """A grid's final loss against each axis (a point per valid run) and parallel
    coordinates (a line per configuration), following the legend's "only"."""
    d, _, data = opened()
    try:
        sw = aa.load(W.fixture("page", FILES["dir"]))
        from ablate_analysis import analyze as A
        valid = A.valid_runs(sw)
        got = js(d, "const o = {}; for (const s of document.querySelectorAll('svg.gridscatter'))"
                    " o[s.dataset.axis] = [...s.querySelectorAll('circle.pt')].map(c => +c.getAttribute('cy'));"
                    " o._pc = [...document.querySelectorAll('#parcoords polyline.pc')].map(p => p.dataset.config);"
                    " return o;")
        assert set(got) == set(sw.axes) | {"_pc"}, got.keys()
        for a in sw.axes:
            assert len(got[a]) == len(valid), (a, len(got[a]), len(valid))
        names = [c["name"] for c in data["configs"]]
        assert sorted(got["_pc"]) == sorted(names)
        click_el(d, "#legend .item[data-unit='%s'] .only" % names[1])
        TP.wait_ready(d)
        pc = js(d, "return [...document.querySelectorAll('#parcoords polyline.pc')].map(p => p.dataset.config)")
        assert pc == [names[1]], pc
    finally:
        d.quit()


# ---------------------------------------------------------------- 9, 11: FLOPs, export

def test_flops_and_export():
    """The FLOPs axis is tokens times the plan's FLOPs per token; "save PNG" exports the
    figure as shown (a PNG at least the plot's size)."""
    d, _, _ = opened()
    try:
        sw = aa.load(W.fixture("page", FILES["dir"]))
        choose(d, "#xaxis", "flops")
        TP.wait_ready(d)
        xk, xmax = js(d, "const f = window.ablateReport.figures.val_loss;"
                            "return [f.xk, f.plot.scales.x.max]")
        assert xk == "flops", xk
        want = float((sw.evals["tokens"] * sw.evals["run"].map(
            sw.runs.set_index("index")["flops_per_token"])).max())
        assert abs(xmax - want) / want < 0.06, (xmax, want)
        click_el(d, "#fig-val_loss button[data-export=PNG]")
        ex = js(d, "return window.ablateReport.lastExport")
        assert ex and ex["fid"] == "val_loss" and ex["url"].startswith("data:image/png;base64,")
        assert ex["width"] >= 360 and ex["height"] > 300, ex
        click_el(d, "#fig-val_loss button[data-export=SVG]")
        ex = js(d, "return window.ablateReport.lastExport")
        assert ex["url"].startswith("data:image/svg+xml;base64,"), ex["url"][:40]
    finally:
        d.quit()


# ---------------------------------------------------------------- 14: width, theme, print

def test_narrow_dark_print():
    """At 390 px the page does not scroll sideways; a heading reached by the table of
    contents is not under the sticky bar; the dark scheme and print style apply."""
    d, _, _ = opened(size=(390, 844))
    try:
        sw, cw = js(d, "return [document.documentElement.scrollWidth, "
                          "document.documentElement.clientWidth]")
        assert sw <= cw, (sw, cw)
        click_el(d, "#toc a[href='#curves']")
        top, bar = js(d, "return [document.querySelector('#curves h2').getBoundingClientRect().top,"
                            " document.getElementById('controls').getBoundingClientRect().bottom]")
        assert top >= bar - 1, (top, bar)
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
            {"name": "prefers-color-scheme", "value": "dark"}]})
        bg = js(d, "return getComputedStyle(document.body).backgroundColor")
        assert bg != "rgb(255, 255, 255)", bg
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        pos = js(d, "return getComputedStyle(document.getElementById('controls')).position")
        assert pos == "static", pos
    finally:
        d.quit()


# ---------------------------------------------------------------- 13: live

def test_live():
    """--watch's page reloads itself only when report-live.js names other data, and comes
    back with its state (log y, a hidden configuration)."""
    from ablate_analysis import page as P
    from ablate_analysis.report import Report
    path = W.fixture("page", FILES["dir"])
    sw = aa.load(path)
    d_ = os.path.join(FILES["dir"], "live")
    os.makedirs(d_, exist_ok=True)
    from ablate_analysis import analyze as A
    rep = Report(sw, d_, watch={"interval": 0.3, "running": True})
    rep.configs = A.per_config(sw)
    bmap, _ = A.baseline_map(sw)
    rep.contrasts = A.contrasts(sw, bmap)
    rep.baseline_why = "test"
    html = P.write_page(rep, os.path.join(d_, "report.html"))
    live_js = os.path.join(d_, "report-live.js")
    assert os.path.isfile(live_js)
    d = TP.browser()
    try:
        d.get("file://" + html)
        TP.wait_ready(d)
        names = [c["name"] for c in TP.embedded(open(html).read())["configs"]]
        click_el(d, "#logy")
        click_el(d, "#legend .item[data-unit='%s'] .name" % names[1])
        TP.wait_ready(d)
        js(d, "window.notReloaded = true")
        from selenium.webdriver.support.ui import WebDriverWait
        WebDriverWait(d, 30).until(lambda drv: js(drv, "return window.ablateReport.livePolls >= 3"))
        assert js(d, "return window.notReloaded === true"), "reloaded without a change"
        with open(live_js + ".tmp", "w") as f:
            f.write('window.ablateLive && window.ablateLive("other");\n')
        os.replace(live_js + ".tmp", live_js)
        WebDriverWait(d, 30).until(lambda drv: js(drv, "return window.notReloaded === undefined"))
        TP.wait_ready(d)
        assert js(d, "return document.getElementById('logy').checked") is True
        units = js(d, "return window.ablateReport.figures.val_loss.units")
        assert units == [n for n in names if n != names[1]], units
    finally:
        d.quit()


# ---------------------------------------------------------------- 12: the verdicts first

def test_summary_first():
    """One line of verdicts at the top of report.md and the page; the verdict table before
    the provenance in report.md."""
    rep, data = page()
    md = open(os.path.join(rep, "report.md")).read()
    lines = md.split("\n")
    # the counts are the verdict column's (whatever this fixture's draws resolve)
    m = re.match(r"\*\*Verdicts:\*\* (\d+) better, (\d+) worse, (\d+) not resolved "
                 r"\(3 contrasts;", lines[2])
    assert m, lines[:4]
    table = md[md.index("## Against the baseline"):md.index("## Overview")]
    rows = [r for r in table.split("\n") if r.startswith("| activation=")]
    assert len(rows) == 3, rows
    got = [sum("| **%s** |" % v in r for r in rows) for v in ("better", "worse")]
    assert [int(m.group(1)), int(m.group(2)), int(m.group(3))] == got + [3 - sum(got)], (m.groups(), rows)
    assert md.index("## Against the baseline") < md.index("## Provenance") and \
        md.index("## Against the baseline") < md.index("## Overview"), md[:500]
    assert data["meta"]["summary"].startswith(lines[2][len("**Verdicts:** "):].split(" (")[0])


# ---------------------------------------------------------------- 5: pip

def test_pip_route():
    """`pip install --no-build-isolation --no-deps ./analysis` into a venv (Debian's Python,
    its numpy, scipy, pandas, h5py and matplotlib: --system-site-packages; --no-deps since
    pip cannot see Debian's h5py metadata and no registry is reachable) gives an
    ablate-report that writes report.html, outside the checkout."""
    from ablate_analysis import page as P
    d = FILES["dir"]
    src = os.path.join(d, "analysis-src")
    shutil.copytree(os.path.join(C.SOURCE_DIR, "analysis"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    venv = os.path.join(d, "venv")
    subprocess.run([PY, "-m", "venv", "--system-site-packages", venv], check=True,
                   capture_output=True)
    env = dict(os.environ, ABLATE_UPLOT=P.uplot_dir(), PIP_NO_INDEX="1")
    p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation",
                        "--no-deps", "--no-index", src], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    env.pop("ABLATE_UPLOT")
    out = os.path.join(d, "pip-rep")
    p = subprocess.run([os.path.join(venv, "bin", "ablate-report"),
                        W.fixture("page", d), "-o", out], capture_output=True, text=True,
                       env=env, cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    assert os.path.isfile(os.path.join(out, "report.html")), p.stderr
    assert "report.html" in p.stderr


# ---------------------------------------------------------------- 6: two sweeps, one knob

def small_sweep(d, name, *extra):
    spec = C.write(os.path.join(d, name + ".yaml"),
                   C.micro_spec(C.corpus_path(), steps=20, seeds=(0, 1),
                                variants="  baseline: {}\n  gelu: {model.activation: gelu}\n",
                                eval_every=10, stats_every=10))
    out = os.path.join(d, name + ".h5")
    C.run(["run", spec, "-o", out, "--force"] + list(extra), expect_rc=0, tag=name)
    return out


def test_compare_one_knob():
    """Two sweeps that differ in train.lr only: the comparison names the knob, matches the
    configurations ignoring it, and writes compare.html with both sweeps' curves; a rerun
    with the same results says "identical"."""
    d = FILES["dir"]
    a = small_sweep(d, "a")
    b = small_sweep(d, "b", "--set", "train.lr=3e-3")
    a2 = small_sweep(d, "a2")
    out = os.path.join(d, "cmp")
    p = subprocess.run([PY, W.REPORT, a, b, "-o", out], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "No configuration is in both sweeps" not in p.stdout, p.stdout
    assert p.stdout.startswith("Knobs that differ between the files: train.lr (A: "), p.stdout
    md = open(os.path.join(out, "compare.md")).read()
    assert "**Knobs that differ between the files:** `train.lr`" in md, md[:1500]
    import pandas as pd
    rows = pd.read_csv(os.path.join(out, "compare.csv"))
    assert list(rows["config"]) == ["baseline", "gelu"], rows
    html = os.path.join(out, "compare.html")
    data = TP.embedded(open(html).read())
    names = sorted(c["name"] for c in data["configs"])
    assert names == ["A: baseline", "A: gelu", "B: baseline", "B: gelu"], names
    assert data["axes"] == [{"key": "sweep", "label": "sweep"}]
    vl = next(f for f in data["figures"] if f["id"] == "val_loss")
    assert {data["configs"][ln["c"]]["axes"]["sweep"] for ln in vl["lines"]} == {"A", "B"}
    # a rerun: identical
    out2 = os.path.join(d, "cmp-rerun")
    p = subprocess.run([PY, W.REPORT, a, a2, "-o", out2], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rows = pd.read_csv(os.path.join(out2, "compare.csv"))
    assert list(rows["verdict"]) == ["identical", "identical"], rows[["config", "diff", "verdict"]]


def main():
    W.main_in_workdir("analysis-page-items", FILES, [
        ("summary_first", test_summary_first), ("pip_route", test_pip_route),
        ("zoom", test_zoom), ("ema", test_ema), ("log_y", test_log_y),
        ("hover", test_hover), ("legend", test_legend),
        ("flops_and_export", test_flops_and_export), ("grid_glance", test_grid_glance),
        ("narrow_dark_print", test_narrow_dark_print), ("live", test_live),
        ("compare_one_knob", test_compare_one_knob)])


if __name__ == "__main__":
    main()
