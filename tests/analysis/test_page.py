"""report.html, the report's interactive page (docs/analysis.md, "The page"): written next to
report.md, self-contained (uPlot embedded, pinned by SHA-256; nothing fetched), under 10 MB
for a 1,000-run sweep with every spike kept by the downsampling; and, in headless Chromium
(Debian's chromium, chromium-driver and python3-selenium; skipped where absent): no
console errors, one trace per configuration in every figure, toggling a configuration, log-y,
group-by and a filter change what is drawn, the verdict table equals contrasts.csv, and the
1,000-run page is interactive within 5 s. Writes a screenshot (report-page.png, copied to
$ABLATE_SCREENSHOT when set: docs/img/ keeps one)."""
import math
import os
import re
import shutil
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweeps as W  # noqa: E402
import common as C  # noqa: E402
import ablate_analysis as aa  # noqa: E402
from ablate_analysis import analyze as A  # noqa: E402
from ablate_analysis import page as P  # noqa: E402
from ablate_analysis.load import Sweep  # noqa: E402
from ablate_analysis.report import Report  # noqa: E402

FILES = {}
CHROMEDRIVER = "/usr/bin/chromedriver"
MB = 1 << 20


def sweep():
    if "page" not in FILES:
        FILES["page"] = W.fixture("page", FILES["dir"])
        rc, err = W.report(FILES["page"], os.path.join(FILES["dir"], "rep"))
        assert rc == 0, err
    return FILES["page"], os.path.join(FILES["dir"], "rep")


def embedded(html):
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    import json
    return json.loads(m.group(1))


def hostile():
    """(sweep, report dir, ablate-report's stdout) of tests/e2e/test_hostile_text.py's
    sweep: "<!--", "<script>", "</script>", "&", "|", "$...$", ESC and C1 in the
    description, the run names and the samples."""
    if "hostile" not in FILES:
        import subprocess
        path = W.fixture("hostile", FILES["dir"])
        d = os.path.join(FILES["dir"], "hostile-rep")
        p = subprocess.run([os.environ.get("ABLATE_PYTHON") or "/usr/bin/python3", W.REPORT,
                            path, "-o", d], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        FILES["hostile"] = (path, d, p.stdout)
    return FILES["hostile"]


def test_hostile_page():
    """Strings holding "<!--" and later "<script" (which put the HTML
    parser in its double-escaped state, where "</script>" no longer ends the data element:
    a blank page) are embedded with <, > and & escaped; the page has the template's script
    elements and no more; the JSON holds the exact strings. A page embedded the old way
    makes ablate-report fail (exit 1, no report.html) instead of writing a blank page."""
    import json
    from ablate_analysis import report as R
    import test_hostile_text as H
    path, d, _ = hostile()
    with open(os.path.join(d, "report.html")) as f:
        html = f.read()
    with open(P.TEMPLATE) as f:
        template = f.read()
    for tag in ("<script", "</script", "<!--"):
        assert html.lower().count(tag) == template.lower().count(tag), \
            "%s: %d in the page, %d in its template" % (tag, html.lower().count(tag),
                                                        template.lower().count(tag))
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    raw = set("<>&\u2028\u2029") & set(m.group(1))
    assert not raw, "unescaped %r in the embedded JSON" % sorted(raw)
    data = embedded(html)
    assert data["meta"]["title"] == H.DESCRIPTION, data["meta"]["title"]
    sw = aa.load(path)
    assert [r["name"] for r in data["runs"]] == list(sw.runs["name"])
    assert any(r["name"].startswith("prompt=" + H.PROMPTS[0]) for r in data["runs"])
    texts = [x["text"] for v in data["samples"].values() for x in v]
    assert any("<script>" in t or "<!--" in t for t in texts), texts
    # the old embedding ("</" written "<\\/", the rest as it is): refused, nothing written
    saved = P.script_json
    P.script_json = lambda obj: json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")
    try:
        import contextlib
        import io
        out, err = io.StringIO(), io.StringIO()
        old = os.path.join(FILES["dir"], "hostile-old")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = R.main([path, "-o", old])
    finally:
        P.script_json = saved
    assert rc == 1 and "report.html not written" in err.getvalue() and \
        "<script> element" in err.getvalue(), (rc, err.getvalue())
    assert not os.path.exists(os.path.join(old, "report.html"))
    assert not os.path.exists(os.path.join(old, "report.html.tmp"))


def md_outside_code(md):
    """report.md's text outside fenced blocks and code spans (where raw HTML renders)."""
    out, fence = [], None
    for line in md.split("\n"):
        f = re.match(r"^(`{3,})", line)
        if fence:
            if f and f.group(1) == fence:
                fence = None
            continue
        if f:
            fence = f.group(1)
            continue
        out.append(re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", line))
    return out


def test_hostile_md():
    """In report.md a user's string reads as the text it is: no raw HTML
    outside code (& < > as entities), a | escaped in a table cell, control characters as
    \\u00XX (the samples too: samples.csv keeps them), the description on one line; the
    verdict table on the terminal escapes control characters; the figures take "$...$"
    (mathtext) as text."""
    import test_hostile_text as H
    path, d, stdout = hostile()
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    want = ("see &lt;!-- old notes; the page uses a &lt;script&gt; tag &lt;/script&gt; &amp; "
            "&lt;b&gt;bold&lt;/b&gt; | a pipe, \\u001b[31mred\\u001b[0m")
    assert md.startswith("# Sweep report: %s\n" % want), md[:300]
    assert "\nDescription: %s\n" % want in md
    assert not H.raw_controls(md), H.raw_controls(md)
    for line in md_outside_code(md):
        assert not re.search(r"<|&(?!amp;|lt;|gt;)", line), line
    # the grid marginals: 6 cells a row, the | in a value escaped
    rows = [ln for ln in md.split("\n") if ln.startswith("| prompt | ")]
    assert len(rows) == 3, rows
    for ln in rows:
        assert len(re.split(r"(?<!\\)\|", ln)) == 8, ln
    assert any("&lt;_script&gt;\\|&amp;$\\frac$\\u009b" in ln for ln in rows), rows
    # the samples as lines, ESC shown as text; the exact text in samples.csv
    assert "\\u001b" in md.split("## Samples")[1]
    csv = pd.read_csv(os.path.join(d, "samples.csv"))
    assert any("\x1b" in t for t in csv["text"])
    assert not H.raw_controls(stdout) and "prompt=\\u001b[31m<!--<script>" in stdout, stdout


def test_page_written():
    """report.html next to report.md: the pinned uPlot inside, no external reference, the
    verdict table's data the contrasts'."""
    _, d = sweep()
    path = os.path.join(d, "report.html")
    assert os.path.isfile(path), "no report.html"
    with open(path) as f:
        html = f.read()
    with open(os.path.join(P.uplot_dir(), "uPlot.iife.min.js")) as f:
        lib = f.read().replace("</", "<\\/")
    assert lib in html, "uPlot not embedded"
    assert not re.search(r"<(script|link|img)[^>]+(src|href)\s*=", html), "external reference"
    data = embedded(html)
    con = pd.read_csv(os.path.join(d, "contrasts.csv"))
    v = next(t for t in data["tables"] if t["id"] == "verdict")
    keys = [c["key"] for c in v["columns"]]
    assert len(v["rows"]) == len(con) == 3, (v["rows"], con)
    for row, (_, r) in zip(v["rows"], con.iterrows()):
        assert row[keys.index("config")] == r["config"]
        for k in ("diff", "lo", "hi", "p", "p_holm"):
            assert math.isclose(row[keys.index(k)], r[k], rel_tol=1e-9), (k, row, r[k])
    # the hashes the report checks are the ones install-deps.sh pins
    with open(os.path.join(C.SOURCE_DIR, "scripts", "install-deps.sh")) as f:
        script = f.read()
    for name, sha in P.UPLOT_FILES.items():
        assert sha in script, name
    assert "uplot@%s" % P.UPLOT_VERSION in script


def test_no_uplot():
    """Without uPlot (or with other files in its place) the page says why it cannot be
    written (ablate-report prints that and writes the rest of the report)."""
    saved = os.environ.get("ABLATE_UPLOT")
    try:
        os.environ["ABLATE_UPLOT"] = os.path.join(FILES["dir"], "nowhere")
        try:
            P.library()
            raise AssertionError("no PageUnavailable without uPlot")
        except P.PageUnavailable as e:
            assert "report.html not written: uPlot" in str(e) and "install-deps.sh" in str(e), e
        fake = os.path.join(FILES["dir"], "fake-uplot")
        os.makedirs(fake, exist_ok=True)
        for name in P.UPLOT_FILES:
            with open(os.path.join(fake, name), "w") as f:
                f.write("/* not uPlot */")
        os.environ["ABLATE_UPLOT"] = fake
        try:
            P.library()
            raise AssertionError("no PageUnavailable for files that are not uPlot's")
        except P.PageUnavailable as e:
            assert "SHA-256" in str(e), e
    finally:
        if saved is None:
            os.environ.pop("ABLATE_UPLOT", None)
        else:
            os.environ["ABLATE_UPLOT"] = saved


def test_minmax_keep():
    """The downsampling keeps the extremes of every bucket: a single spike survives any
    budget; plain striding would drop it."""
    y = np.sin(np.arange(10000) / 50.0)
    y[4321] = 13000.0
    y[777] = -50.0
    for budget in (16, 100, 600):
        k = P.minmax_keep(y, budget)
        assert len(k) <= budget + 2, (budget, len(k))
        assert 4321 in k and 777 in k and 0 in k and 9999 in k, budget
        assert np.all(np.diff(k) > 0)
    assert len(P.minmax_keep(y[:50], 100)) == 50


def replicate(sw, copies):
    """sw with its runs copied `copies` times as distinct configurations (`cK/<config>`),
    every metric table with them: a large sweep's page without training it."""
    n = int(sw.runs["index"].max()) + 1

    def rep(df, col="run"):
        parts = []
        for k in range(copies):
            c = df.copy()
            c[col] = c[col] + k * n
            for lab in ("name", "config", "group"):
                if lab in c:
                    c[lab] = "c%d/" % k + c[lab].astype(str)
            parts.append(c)
        return pd.concat(parts, ignore_index=True)

    tables = {t: rep(getattr(sw, t)) for t in ("steps", "evals", "acts", "attn", "samples")}
    big = Sweep(sw.path, sw.attrs, sw.spec, rep(sw.runs, "index"), tables, sw.axes, sw.knobs)
    big.axis_columns = sw.axis_columns
    return big


def big_page(d):
    """The page of the test sweep copied to 1,000 runs (500 configurations), with one
    training-loss spike of 13,000 in one run."""
    if "big" in FILES:
        return FILES["big"]
    path, _ = sweep()
    sw = aa.load(path)
    bmap, _ = A.baseline_map(sw)
    copies = 1000 // len(sw.runs)
    big = replicate(sw, copies)
    assert len(big.runs) == 1000, len(big.runs)
    spike = big.steps.index[(big.steps["run"] == 517) & (big.steps["step"] == 23)]
    big.steps.loc[spike, "loss"] = 13000.0
    rep = Report(big, d)
    # the tables of the copies are the original's, relabelled (computing 375 contrasts'
    # power figures again would take minutes and test nothing about the page)
    small_configs, small_con = A.per_config(sw), A.contrasts(sw, bmap)

    def relabel(df, cols):
        parts = []
        for k in range(copies):
            c = df.copy()
            for col in cols:
                c[col] = "c%d/" % k + c[col].astype(str)
            parts.append(c)
        return pd.concat(parts, ignore_index=True)
    rep.configs = relabel(small_configs, ["config"])
    rep.contrasts = relabel(small_con, ["config", "baseline"])
    rep.baseline_why = "test"
    os.makedirs(d, exist_ok=True)
    FILES["big"] = P.write_page(rep, os.path.join(d, "report.html"))
    return FILES["big"]


def test_thousand_runs():
    """1,000 runs: the page stays under 10 MB and the spike is in it."""
    path = big_page(os.path.join(FILES["dir"], "big"))
    size = os.path.getsize(path)
    C.log("  1,000-run page: %.2f MB" % (size / MB))
    assert size < 10 * MB, size
    with open(path) as f:
        data = embedded(f.read())
    assert len(data["runs"]) == 1000
    tl = next(f for f in data["figures"] if f["id"] == "train_loss")
    line = next(ln for ln in tl["lines"] if data["runs"][ln["r"]]["name"].startswith("c64/"))
    spiked = [ln for ln in tl["lines"] if 13000.0 in ln["y"]]
    assert len(spiked) == 1 and data["runs"][spiked[0]["r"]]["name"] == \
        big_runs_name(data, 517), "the spike did not survive the downsampling"
    assert line["y"], line


def big_runs_name(data, index):
    return data["runs"][index]["name"]


# ---------------------------------------------------------------- in Chromium

def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise C.Skip("python3-selenium is not installed (scripts/install-deps.sh installs it)")
    if not os.path.exists(CHROMEDRIVER) or not shutil.which("chromium"):
        raise C.Skip("chromium and chromium-driver are not installed "
                     "(scripts/install-deps.sh installs them)")
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1800"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)


def js(d, code):
    return d.execute_script(code)


def wait_ready(d):
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(d, 60).until(lambda drv: js(drv, "return !!(window.ablateReport && "
                                                   "window.ablateReport.ready)"))


def snapshot(d):
    """{figure: (units drawn, PNG data URL of its canvas, y distribution)}, once every
    figure is drawn (the page draws them one per task)."""
    wait_ready(d)
    return js(d, """const out = {};
      for (const [k, f] of Object.entries(window.ablateReport.figures))
        out[k] = [f.units, f.plot.ctx.canvas.toDataURL(), f.plot.scales.y.distr];
      return out;""")


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def test_browser():
    from selenium.webdriver.common.by import By
    path, rep = sweep()
    sw = aa.load(path)
    configs = list(sw.runs["config"].drop_duplicates())
    d = browser()
    try:
        d.get("file://" + os.path.join(rep, "report.html"))
        wait_ready(d)
        assert js(d, "return window.ablateReport.errors") == [], "page errors"
        errs = console_errors(d)
        assert not errs, errs
        snap = snapshot(d)
        for fid in ("val_loss", "train_loss", "grad_norm", "lr", "throughput", "layers"):
            assert fid in snap, "figure %s not drawn (%s)" % (fid, list(snap))
        for fid, (units, _, _) in snap.items():
            assert units == configs, "%s: traces %s, configurations %s" % (fid, units, configs)
        shot = os.path.join(FILES["dir"], "report-page.png")
        d.save_screenshot(shot)
        assert os.path.getsize(shot) > 20000
        if os.environ.get("ABLATE_SCREENSHOT"):
            shutil.copy(shot, os.environ["ABLATE_SCREENSHOT"])
        # the verdict table: the numbers of contrasts.csv (full precision in data-value,
        # the text rounded to 4 places)
        con = pd.read_csv(os.path.join(rep, "contrasts.csv"))
        rows = d.find_elements(By.CSS_SELECTOR, "#table-verdict tbody tr")
        assert len(rows) == len(con) == 3, (len(rows), len(con))
        for tr, (_, r) in zip(rows, con.iterrows()):
            cells = {td.get_attribute("data-key"): td for td in tr.find_elements(By.TAG_NAME, "td")}
            assert cells["config"].text == r["config"], (cells["config"].text, r["config"])
            assert cells["verdict"].text == r["verdict"]
            for k in ("diff", "lo", "hi", "p", "p_holm"):
                v = float(cells[k].get_attribute("data-value"))
                assert math.isclose(v, r[k], rel_tol=1e-9), (k, v, r[k])
                assert cells[k].text == js_fixed4(r[k]), (k, cells[k].text, r[k])
        # toggling a configuration from the legend: one trace fewer, a different drawing
        d.find_element(By.CSS_SELECTOR, "#legend .item[data-unit='%s']" % configs[1]).click()
        after = snapshot(d)
        for fid, (units, png, _) in after.items():
            assert units == [c for c in configs if c != configs[1]], (fid, units)
            assert png != snap[fid][1], "%s: toggling %s changed nothing" % (fid, configs[1])
        d.find_element(By.CSS_SELECTOR, "#legend .item[data-unit='%s']" % configs[1]).click()
        back = snapshot(d)
        assert all(back[f][0] == configs for f in back)
        # log-y
        d.find_element(By.ID, "logy").click()
        logy = snapshot(d)
        for fid, (_, png, distr) in logy.items():
            assert distr == 3 and png != back[fid][1], "%s: log-y changed nothing" % fid
        d.find_element(By.ID, "logy").click()
        # group by activation: one trace per value
        js(d, "const s = document.getElementById('groupby'); s.value = 'activation';"
              "s.dispatchEvent(new Event('change'));")
        grouped = snapshot(d)
        for fid, (units, _, _) in grouped.items():
            assert units == ["activation=relu", "activation=gelu"], (fid, units)
        js(d, "const s = document.getElementById('groupby'); s.value = '';"
              "s.dispatchEvent(new Event('change'));")
        # filter: lr 3e-3 left out
        d.find_element(By.CSS_SELECTOR, "input[data-axis$='lr'][value='3e-3']").click()
        filt = snapshot(d)
        want = [c for c in configs if "lr=3e-3" not in c]
        for fid, (units, _, _) in filt.items():
            assert units == want, (fid, units)
        # hover: the tooltip names a run or configuration and a value
        from selenium.webdriver.common.action_chains import ActionChains
        over = d.find_element(By.CSS_SELECTOR, "#fig-train_loss .u-over")
        tip = d.find_element(By.CSS_SELECTOR, "#fig-train_loss .tip")
        for dy in range(-140, 141, 4):
            ActionChains(d).move_to_element_with_offset(over, 0, dy).perform()
            if tip.is_displayed():
                break
        # (the step logged nearest the cursor, then each visible curve: test_page_items.py
        # checks the values)
        assert tip.is_displayed() and re.search(r"^step \d+\n(activation=\w+/lr=[\de-]+.*: "
                                                r"[\d.]+\n?)+$", tip.text), tip.text
        assert not console_errors(d)
        # 1,000 runs: interactive (every figure drawn) within 5 s of navigation start
        big = big_page(os.path.join(FILES["dir"], "big"))
        d.get("file://" + big)
        wait_ready(d)
        ms, all_ms = js(d, "return [window.ablateReport.interactiveMs, "
                           "window.ablateReport.readyMs]")
        C.log("  1,000-run page: interactive after %.0f ms (tables, legend and the first "
              "figure), every figure drawn after %.0f ms" % (ms, all_ms))
        # a bound in seconds only means something on a machine that is not overloaded
        # (with a load of 9 per core, as when several engineers test on 2 cores, the same
        # page takes ~9 s): asserted when the load average is at most the core count
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
        if load <= cores:
            assert ms < 5000, ms
        else:
            C.log("  5 s bound not asserted: load average %.1f on %d cores" % (load, cores))
        assert len(snapshot(d)["train_loss"][0]) == 500
        assert not console_errors(d)
    finally:
        d.quit()


def test_hostile_browser():
    """In Chromium: the page whose description, run names and samples hold
    "<!--", "<script>", "</script>" (blank before the fix) loads: no errors, the heading,
    the verdict table (contrasts.csv's rows), the runs table and a sample show each string
    as text, exactly."""
    from selenium.webdriver.support.ui import WebDriverWait
    import test_hostile_text as H
    path, rep, _ = hostile()
    sw = aa.load(path)
    d = browser()
    try:
        d.get("file://" + os.path.join(rep, "report.html"))
        try:  # a small page: ready in well under a second when it loads at all
            WebDriverWait(d, 30).until(lambda drv: js(drv, "return !!(window.ablateReport "
                                                           "&& window.ablateReport.ready)"))
        except Exception:
            raise AssertionError("the page never became ready; it shows: %r" % js(
                d, "return document.body ? document.body.innerText.slice(0, 300) : null"))
        assert js(d, "return window.ablateReport.errors") == [], "page errors"
        assert not console_errors(d), console_errors(d)
        h1 = js(d, "return document.querySelector('#head h1').textContent")
        assert h1 == "Sweep report: " + H.DESCRIPTION, h1
        cells = js(d, "return [...document.querySelectorAll('#table-verdict tbody "
                      "td[data-key=config]')].map(td => td.textContent)")
        con = pd.read_csv(os.path.join(rep, "contrasts.csv"), keep_default_na=False)
        assert cells == list(con["config"]), (cells, list(con["config"]))
        assert any(c.startswith("prompt=" + H.PROMPTS[0]) for c in cells), cells
        names = js(d, "return [...document.querySelectorAll('#table-runs tbody "
                      "td[data-key=name]')].map(td => td.textContent)")
        assert sorted(names) == sorted(sw.runs["name"]), names
        shown = js(d, "return [...document.querySelectorAll('#samples pre')]"
                      ".map(p => p.textContent)")
        r = js(d, "return document.getElementById('samplerun').value")
        with open(os.path.join(rep, "report.html")) as f:
            want = [x["text"] for x in embedded(f.read())["samples"][r]]
        assert shown and shown == want, (shown, want)
        assert not console_errors(d)
    finally:
        d.quit()


def js_fixed4(v):
    """The text page.html's fmt(v, 4) shows: 4 places, or JavaScript's toExponential(2)
    for magnitudes at or above 1e6 or below 1e-3 (a p-value of 4.68e-4 on other data)."""
    if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
        mant, exp = ("%.2e" % v).split("e")
        return "%se%s%d" % (mant, "-" if int(exp) < 0 else "+", abs(int(exp)))
    return "%.4f" % v


def main():
    """The page as written, then in Chromium (browser, hostile_browser: skipped, CTest's
    exit 77, without chromium, chromium-driver or python3-selenium)."""
    W.main_in_workdir("analysis-page", FILES, [
        ("page_written", test_page_written), ("no_uplot", test_no_uplot),
        ("minmax_keep", test_minmax_keep), ("thousand_runs", test_thousand_runs),
        ("hostile_page", test_hostile_page), ("hostile_md", test_hostile_md),
        ("browser", test_browser), ("hostile_browser", test_hostile_browser)])


if __name__ == "__main__":
    main()
