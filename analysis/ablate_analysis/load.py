"""load(path): a sweep's HDF5 file (docs/hdf5-schema.md) as tidy pandas DataFrames.

Every metric table (steps, evals, acts, attn, samples) gets its run's identity columns
(name, seed, status, config, group, variant and one column per grid axis), so that a
`groupby("config")` or `groupby(["config", "layer"])` needs no join. Text is decoded to
str everywhere. Schema 2 files (ablate's own) and schema 1 files (ablate 0.1.0) are read;
what schema 2 records (`group`, `variant`, the grid-axis columns listed in /runs' `axes`
attribute, `/evals` tokens and time) is taken from the file, and derived for schema 1
files (see docs/analysis.md).
"""

import json
import os
import re
import warnings

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSIONS = (1, 2)
TABLES = ("steps", "evals", "acts", "attn", "samples")
# Files without /schema only (schema 1: ablate 0.1.0, tests/fixtures/v1; early schema 2
# views): the columns of each metric table when the dataset is absent (a sweep that had
# not produced any such row yet), so that code written against a finished sweep still
# runs. Newer files say their own columns (/schema) and write every table, empty or not.
V1_EMPTY_COLUMNS = {
    "steps": ["run", "step", "tokens", "loss", "lr", "grad_norm", "time"],
    "evals": ["run", "step", "val_loss", "val_acc", "tokens", "time"],
    "acts": ["run", "step", "layer", "zero_frac", "max", "min", "mean", "rms", "resid_rms",
             "grad_norm"],
    "attn": ["run", "step", "layer", "head", "entropy"],
    "samples": ["run", "kind", "temperature", "n_tokens", "text", "tokens_per_s",
                "distinct_ratio", "longest_run", "top_token_frac", "degenerate"],
}
# Identity columns copied from /runs onto every metric row.
RUN_KEYS = ["name", "seed", "status", "config", "group", "variant"]
# Files without /runs' attributes `unfinished` and `knobs` only (schema 1; early schema 2
# views): the statuses of runs that have not ended (the sweep is partial while any run
# has one), and the knob columns of /runs.
V1_UNFINISHED = ("pending", "running", "interrupted")
V1_KNOB_RE = re.compile(r"^(model|train|data|stats|sample|config)\.|^save_weights$")
SEED_RE = re.compile(r"^seed(\d+)$")
# The fixed (non-knob) columns of schema 1's /runs.
V1_RUN_COLUMNS = ("index", "id", "name", "seed", "status", "params", "flops_per_token",
                  "kv_bytes_per_token", "steps", "tokens", "train_seconds", "tokens_per_s",
                  "final_val_loss", "final_val_acc", "rank", "host", "attempts",
                  "resumed_from_step", "last_checkpoint_step", "message", "blas_core")


class SweepFileError(Exception):
    """The file is not a readable ablate sweep file; the message names the file."""


class UnavailableRowsError(SweepFileError):
    """Rows of a live view could not be read (load(..., unavailable="raise"))."""


class UnavailableRowsWarning(UserWarning):
    """Rows of a live view could not be read; they are left out and named (Sweep.unavailable)."""


# How often load() reopens a live view whose rows it could not read after the file was
# replaced meanwhile (the sweep's next view, or its final full build, took its place).
RELOADS = 3


def split_acts(acts):
    """(/acts rows of split train, rows of split val); files without the column: (all, none)."""
    if "split" not in acts:
        return acts, acts.iloc[:0]
    val = acts["split"].astype(str).str.strip() == "val"
    return acts[~val].reset_index(drop=True), acts[val].reset_index(drop=True)


class Sweep:
    """One sweep file, loaded.

    runs     one row per planned run (plan order), every /runs column plus `config`
             (the run name without its seed: the configuration's label), `group`,
             `variant` and one column per grid axis (values as written in the spec)
    steps, evals, acts, attn, samples
             the metric tables, each row with the identity columns of its run; acts the
             /acts rows of training batches (split train)
    val_acts the /acts rows over every validation batch of an evaluation (split val;
             stats.val), empty when the file has none
    attrs    root attributes (str/int); spec: the spec text; path
    data_files  schema 2's /data_files: path, bytes and sha256 of each data file as the
             (latest) session found it (no rows for schema 1)
    axes     the grid-axis columns (schema 2: those /runs' `axes` attribute lists; schema
             1: the labels of run names), e.g. ["n_head", "activation"], as `axis.<label>`
             when the label is also a table's column (`axis.lr`, `axis.steps`);
             axis_columns maps each label to its column
    knobs    the knob columns of /runs (e.g. "model.n_head"; schema 2: those /runs' `knobs`
             attribute lists)
    base_config  the spec's base configuration as ablate resolved it, {knob: value} (the
             file's /base_config), or None for files without it
    declared_family  True when the file pre-declares its family of contrasts (/contrasts,
             an adaptive sweep): its Holm family is not the report's to choose
    tuning   a tune: sweep's /tuning (one row per candidate of each configuration:
             configuration, config, candidate, knobs, values, value, rung, fraction, seeds,
             val_loss, chosen; tuning.py), or None for files without it
    tuning_rungs  its /tuning_rungs (successive halving: one row per rung result of each
             candidate: configuration, config, candidate, values, rung, fraction, val_loss,
             promoted), or None for files without it
    calibration  a calibrated fixed-time sweep's timing trials (/calibration, one row per
             trial in the order timed: configuration, group, trial, tokens_per_s, seconds,
             steps, warmup, host, load1, blas_core, utc), or None for files without it
    schema_version, status (the sweep's status attribute), partial (True while any run
    is pending, running or interrupted (schema 2: a status /runs' `unfinished` attribute
    lists; unfinished holds them), or the sweep itself is running)
    unavailable  {table: [run indices]} of rows that could not be read (a live view whose
             segment is gone, another view's, or not openable under the open-file limit):
             those runs' rows of that table are left out, never replaced by fill rows;
             unavailable_notes says why, one line per table. Empty when every row is there.
    """

    # a replicate: sweep's /contrasts and /decisions (read_replicate), else None
    replicate_contrasts = None
    replicate_decisions = None
    # a calibrated fixed-time sweep's /calibration (train.calibrate), else None
    calibration = None
    # a tune: sweep's /tuning (each configuration's candidates and choice), else None
    tuning = None
    # a tune: sweep's /tuning_rungs (every candidate's result at every rung), else None
    tuning_rungs = None

    def __init__(self, path, attrs, spec, runs, tables, axes, knobs, unfinished=V1_UNFINISHED,
                 base_config=None):
        self.path = path
        self.attrs = attrs
        self.spec = spec
        self.runs = runs
        self.steps = tables["steps"]
        self.evals = tables["evals"]
        # /acts holds the rows of both splits (stats.val, docs/metrics.md): acts the
        # statistics of training batches, as every file had them before; val_acts those
        # over a whole evaluation's validation batches (none in files without `split`)
        self.acts, self.val_acts = split_acts(tables["acts"])
        self.attn = tables["attn"]
        self.samples = tables["samples"]
        self.data_files = tables.get("data_files", pd.DataFrame(
            {c: pd.Series(dtype=object) for c in ("path", "bytes", "sha256")}))
        self.axes = axes
        self.knobs = knobs
        self.schema_version = int(attrs.get("ablate_schema_version", 1))
        self.status = str(attrs.get("status", ""))
        self.unfinished = tuple(unfinished)
        self.partial = self.status == "running" or bool(runs["status"].isin(unfinished).any())
        self.base_config = base_config
        self.unavailable = {}
        self.unavailable_notes = []
        self.declared_family = False

    @property
    def description(self):
        """The spec's top-level `description:` as YAML reads it (escapes such as "\\e"
        decoded, a block scalar's lines), or ""; the text as written on its line where the
        spec does not parse here."""
        try:
            import yaml
            doc = yaml.safe_load(self.spec)
            if isinstance(doc, dict):
                d = doc.get("description")
                return "" if d is None else str(d)
        except Exception:  # PyYAML absent, or a spec only libyaml's reader took
            pass
        for line in self.spec.splitlines():
            m = re.match(r"^description:\s*(.*?)\s*$", line)
            if m:
                text = m.group(1)
                if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
                    text = text[1:-1]
                return text
        return ""

    def configs(self):
        """Configurations in plan order: DataFrame with config, group, variant, axes."""
        cols = ["config", "group", "variant"] + self.axes
        return self.runs.drop_duplicates("config")[cols].reset_index(drop=True)

    def tuning_runs(self):
        """Boolean Series over /runs: True for a tune: sweep's tuning runs (docs/spec.md,
        "tune"), named `<configuration>/tune/<knob>=<value>.../seed<N>`: the segment `tune`
        followed by a segment per tuned knob (the short names /tuning's `knobs` lists). A
        file with /runs' `tune_rung` column says it directly (>= 0: a tuning run)."""
        none = pd.Series(False, index=self.runs.index)
        if self.tuning is None or not len(self.runs):
            return none
        if "tune_rung" in self.runs:
            return self.runs["tune_rung"].fillna(-1).astype(int) >= 0
        knobs = set()
        for k in self.tuning["knobs"].astype(str):
            knobs.update(x.strip().rpartition(".")[2] for x in k.split(",") if x.strip())

        def tuning_name(name):
            parts = str(name).split("/")[:-1]
            for i, p in enumerate(parts):
                tail = parts[i + 1:]
                if p == "tune" and tail and all(t.partition("=")[0] in knobs for t in tail):
                    return True
            return False
        return self.runs["name"].map(tuning_name).astype(bool)

    def comparison(self):
        """This sweep without a tune: sweep's tuning runs (tuning_runs): the runs whose
        contrasts, curves and tables the report's sections read (the tuning runs have a
        section of their own). A grid axis only the tuning runs' names have (the tuned
        knob's value) is dropped. The sweep itself when it has no tuning runs."""
        mask = self.tuning_runs()
        if not mask.any():
            return self
        import copy
        sw = copy.copy(self)
        keep = self.runs[~mask]
        idx = set(keep["index"])
        sw.runs = keep.reset_index(drop=True)
        for t in ("steps", "evals", "acts", "val_acts", "attn", "samples"):
            df = getattr(self, t)
            if df is not None and len(df) and "run" in df:
                setattr(sw, t, df[df["run"].isin(idx)].reset_index(drop=True))
        used = [a for a in self.axes if a in keep and
                keep[a].astype(str).replace({"nan": "", "None": ""}).ne("").any()]
        sw.axes = used
        if hasattr(self, "axis_columns"):
            sw.axis_columns = {k: c for k, c in self.axis_columns.items() if c in used}
        sw.n_tuning_runs = int(mask.sum())
        return sw

    def __repr__(self):
        counts = self.runs["status"].value_counts().to_dict()
        return "<Sweep %s: %d runs %s, %d configurations, status %s>" % (
            self.path, len(self.runs), counts, self.runs["config"].nunique(), self.status)


def _text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        return _text(v[()])
    if isinstance(v, np.generic):
        return v.item()
    return v


def _frame(arr):
    """A structured array as a DataFrame with every string column decoded to str."""
    df = pd.DataFrame({name: arr[name] for name in arr.dtype.names})
    for name in arr.dtype.names:
        kind = arr.dtype[name].kind
        enum = h5py.check_enum_dtype(arr.dtype[name])
        if enum and kind in "iu":  # an enum of names (booleans come back as bool)
            names = {v: k for k, v in enum.items()}
            df[name] = [names.get(int(v), str(v)) for v in arr[name]]
        elif kind == "S":
            df[name] = np.char.decode(arr[name], "utf-8", "replace").astype(object)
        elif kind == "O":
            df[name] = [_text(v) for v in arr[name]]
        elif kind == "U":
            df[name] = df[name].astype(object)
    return df


def fnv1a64(text):
    """FNV-1a 64-bit of the UTF-8 text, as 16 hex digits (the hash plan.c uses for ids)."""
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def parse_run_name(name):
    """(variant, [(axis label, value)], seed) from a run name as plan.c writes it:
    [variant/]label=value/.../seed<N>. variant is "" when the name has none (grid-only
    specs); seed is None when the name does not end in seed<N>."""
    parts = name.split("/")
    m = SEED_RE.match(parts[-1])
    seed = int(m.group(1)) if m else None
    body = parts[:-1] if m else parts
    variant = ""
    if body and "=" not in body[0]:
        variant, body = body[0], body[1:]
    axes = []
    for p in body:
        k, _, v = p.partition("=")
        axes.append((k, v))
    return variant, axes, seed


def config_label(name):
    """The run name without its trailing /seed<N>: the configuration's label."""
    head, _, last = name.rpartition("/")
    return head if SEED_RE.match(last) and head else name


def _derive_groups(runs, knobs, plan_text):
    """Stable id of each run's configuration without its seed: FNV-1a over the run's
    canonical knob lines (/plan_text, as journal_plan_config reads them) when the file has
    them, else over the knob columns."""
    if plan_text is not None and len(plan_text) == len(runs):
        return [fnv1a64(t) for t in plan_text]
    out = []
    for row in runs[knobs].itertuples(index=False):
        out.append(fnv1a64("".join("%s=%r\n" % (k, v) for k, v in zip(knobs, row))))
    return out


def _read_attrs(f):
    return {k: _text(v) for k, v in f.attrs.items()}


def _open(path):
    """The file opened read-only without taking HDF5's lock (the view is replaced by
    rename, never written in place). HDF5 refuses a second open with another locking
    flag in one process (a notebook that has the file open in h5py already): then the
    file is opened as that first open was."""
    try:
        try:
            return h5py.File(path, "r", locking=False)
        except TypeError:  # h5py < 3.5 has no locking argument
            return h5py.File(path, "r")
        except OSError as e:
            if "locking" not in str(e):
                raise
            return h5py.File(path, "r")
    except OSError as e:
        raise SweepFileError("%s: cannot open as HDF5 (%s)" % (path, e)) from None


def _identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _segment_problem(base, table, file, file_rows, generation):
    """What is wrong with a live view's segment for one table, or None."""
    try:
        with _open(os.path.join(base, file)) as g:
            gen = _text(g.attrs.get("view_generation", ""))
            rows = g.attrs.get("rows_" + table)
            n = len(g[table]) if table in g else -1
    except (SweepFileError, OSError, KeyError):
        return "segment %s cannot be opened (gone or damaged)" % file
    if gen != generation:
        return "segment %s is another view's (view_generation %s, not %s)" % (
            file, gen or "none", generation)
    if rows is None or int(rows) != file_rows or n != file_rows:
        return "segment %s holds %s rows of /%s, not %d" % (file, n, table, file_rows)
    return None


def _problems(f, base, blocks, t, generation):
    """[(runs, why)] for each segment of table t in /view_blocks that a reader cannot trust
    ("." is the view file itself). None for a table that is no virtual dataset (a live view
    copied out with its rows, `h5repack -l CONTI`: its /view_blocks names segments it
    no longer reads)."""
    out = []
    if t in f and not f[t].is_virtual:
        return out
    if blocks is not None and len(blocks):
        mine = blocks[(blocks["table"] == t) & (blocks["file"] != ".")]
        for file, g in mine.groupby("file", sort=False):
            p = _segment_problem(base, t, file, int(g["file_rows"].iloc[0]), generation)
            if p:  # the runs [run, last_run] of each block (a live view before: run)
                last = g["last_run"] if "last_run" in g.columns else g["run"]
                out.append((set(r for a, b in zip(g["run"], last)
                                for r in range(int(a), int(b) + 1)), p))
    return out


def check_rows(path, f, runs, raw):
    """The rows that could not be read, as {table: (runs, note)}: in a live view, rows of
    /runs whose index is not their position (the fill value is -1: "runs" names those runs);
    rows of each metric table per run against /runs rows_<table>, rows with the fill value
    (run = -1), and each segment's view_generation and row counts (/view_blocks). A file
    without rows_* columns (before this check existed) is taken as it is."""
    bad = {}
    live = _text(f.attrs.get("view", "")) == "live"
    generation = _text(f.attrs.get("view_generation", ""))
    blocks = None
    if live and "view_blocks" in f:
        blocks = _frame(f["view_blocks"][()])
    base = os.path.dirname(os.path.abspath(path))
    if live and "index" in runs.columns:
        lost = np.nonzero(runs["index"].to_numpy(dtype=np.int64) != np.arange(len(runs)))[0]
        if len(lost):
            why = [p for _, p in _problems(f, base, blocks, "runs", generation)]
            note = ("%s: /runs: %d of %d rows unavailable (run%s %s; read as fill rows, index "
                    "-1): those runs are left out" % (
                        path, len(lost), len(runs), "s" if len(lost) > 1 else "",
                        ", ".join(map(str, lost[:20].tolist())) +
                        (", ..." if len(lost) > 20 else "")))
            if why:
                note += "; " + "; ".join(why[:3])
            bad["runs"] = (lost.tolist(), note)
    for t in TABLES:
        col = "rows_" + t
        if col not in runs.columns:
            continue
        expect = runs[col].to_numpy(dtype=np.int64)
        df = raw[t]
        run = df["run"].to_numpy(dtype=np.int64) if len(df) else np.zeros(0, np.int64)
        ok = (run >= 0) & (run < len(expect))
        fill = int((~ok).sum())
        got = np.bincount(run[ok], minlength=len(expect))[:len(expect)]
        # a run whose /runs row is unavailable (rows_* -1) is named under "runs"
        wrong = set(np.nonzero((got != expect) & (expect >= 0))[0].tolist())
        why = []
        for hit, p in _problems(f, base, blocks, t, generation):
            wrong |= hit
            why.append(p)
        if not wrong:
            continue
        runs_bad = sorted(wrong)
        lost = int(np.clip(expect[runs_bad], 0, None).sum())
        note = "%s: /%s: %d of %d rows unavailable (run%s %s); %d read as fill rows (run = -1)" % (
            path, t, lost, int(np.clip(expect, 0, None).sum()), "s" if len(runs_bad) > 1 else "",
            ", ".join(map(str, runs_bad[:20])) + (", ..." if len(runs_bad) > 20 else ""), fill)
        if why:
            note += "; " + "; ".join(why[:3]) + ("; %d more segments" % (len(why) - 3)
                                               if len(why) > 3 else "")
        elif fill:
            note += "; HDF5 could not open some segments (open-file limit?)"
        bad[t] = (runs_bad, note)
    return bad


def load(path, unavailable="warn"):
    """Reads the sweep file at path (schema 1 or 2; any sweep status) into a Sweep.

    A live view's rows that cannot be read (docs/hdf5-schema.md, the live view) are never
    used: the runs whose rows of a table are incomplete have none of that table's rows in
    the Sweep, Sweep.unavailable names them, and an UnavailableRowsWarning says why
    (unavailable="raise": an UnavailableRowsError instead). A view replaced while it was
    read (the sweep's next or final view) is read again first."""
    for attempt in range(RELOADS + 1):
        before = _identity(path)
        sw, bad = _load_once(path)
        if not bad or attempt == RELOADS or _identity(path) == before:
            break
    if bad:
        notes = [note for _, note in bad.values()]
        if unavailable == "raise":
            raise UnavailableRowsError("\n".join(notes))
        for note in notes:
            warnings.warn(note, UnavailableRowsWarning, stacklevel=2)
        sw.unavailable = {t: runs for t, (runs, _) in bad.items()}
        sw.unavailable_notes = notes
    return sw


def _load_once(path):
    if not os.path.isfile(path):
        raise SweepFileError("%s: no such file" % path)
    with _open(path) as f:
        attrs = _read_attrs(f)
        version = attrs.get("ablate_schema_version")
        if version is None or "runs" not in f:
            raise SweepFileError("%s: not an ablate sweep file (no ablate_schema_version "
                                 "attribute or /runs table)" % path)
        if int(version) not in SCHEMA_VERSIONS:
            raise SweepFileError("%s: schema version %s is newer than this reader (reads %s)"
                                 % (path, version, ", ".join(map(str, SCHEMA_VERSIONS))))
        spec = _text(f["spec"][()]) if "spec" in f else ""
        runs = _frame(f["runs"][()])
        # schema 2: the grid-axis columns of /runs, one name a line (absent in schema 1)
        axes_attr = f["runs"].attrs.get("axes")
        axis_cols = None if axes_attr is None else \
            [c for c in _text(axes_attr).split("\n") if c]
        # schema 2: the knob columns and the statuses of unfinished runs, likewise
        listed = {}
        for a in ("knobs", "unfinished"):
            v = f["runs"].attrs.get(a)
            if v is not None:
                listed[a] = [c for c in _text(v).split("\n") if c]
        base_config = None
        if "base_config" in f:
            try:
                base_config = json.loads(_text(f["base_config"][()]))
            except ValueError:
                raise SweepFileError("%s: /base_config is not a JSON object" % path)
        schema_cols = _schema_columns(f) if "schema" in f else None
        plan_text = None
        if "plan_text" in f:
            plan_text = [_text(v) for v in f["plan_text"][()]]
        raw = {}
        for t in TABLES:
            if t in f and f[t].dtype.names:
                raw[t] = _frame(f[t][()])
            else:
                cols = V1_EMPTY_COLUMNS[t] if schema_cols is None else schema_cols.get(t, [])
                raw[t] = pd.DataFrame({c: pd.Series(dtype=float) for c in cols})
        data_files = _frame(f["data_files"][()]) if "data_files" in f else None
        # an adaptive sweep's pre-declared family of contrasts (/contrasts)
        declared = "contrasts" in f
        replicate = read_replicate(f)
        calibration = _frame(f["calibration"][()]) if "calibration" in f and \
            f["calibration"].dtype.names else None
        tuning = _frame(f["tuning"][()]) if "tuning" in f and f["tuning"].dtype.names else None
        tuning_rungs = _frame(f["tuning_rungs"][()]) if "tuning_rungs" in f and \
            f["tuning_rungs"].dtype.names else None
        bad = check_rows(path, f, runs, raw)
    lost = bad["runs"][0] if "runs" in bad else []
    for t in raw:  # never fill rows, never part of a run's rows, nothing of an unknown run
        runs_bad = (bad[t][0] if t in bad else []) + lost
        df = raw[t]
        if len(df):
            raw[t] = df[(df["run"] >= 0) & ~df["run"].isin(runs_bad)].reset_index(drop=True)
    if lost:
        runs = runs.drop(index=lost).reset_index(drop=True)
    sw = _assemble(path, attrs, spec, runs, plan_text, raw, axis_cols, listed, base_config)
    if data_files is not None:
        sw.data_files = data_files
    sw.declared_family = declared
    sw.calibration = calibration
    sw.tuning = tuning
    sw.tuning_rungs = tuning_rungs
    if replicate is not None:
        sw.replicate_contrasts, sw.replicate_decisions = replicate
    return sw, bad


def read_replicate(f):
    """A replicate: sweep's contrasts as the sweep defined them (/contrasts: contrast,
    configuration, baseline, pairing, and each one's last verdict, n, difference, lo, hi;
    kind and the factor columns for main effects and interactions, where the file has them)
    and its sequential decisions (/decisions, in the order made), as two frames; None for
    other files. The rule's settings are the root attributes replicate_*."""
    if "contrasts" not in f or "decisions" not in f:
        return None
    return _frame(f["contrasts"][()]), _frame(f["decisions"][()])


def _axis_label(column):
    """The label of a grid axis from its /runs column: the view names an axis column
    `axis.<label>` when the label is also a fixed column of /runs (`name`, `seed`)."""
    return column[5:] if column.startswith("axis.") else column


def _schema_columns(f):
    """{table: [column, ...]} from the file's /schema (schema 2), in the tables' order."""
    cols = {}
    for row in f["schema"][()]:
        cols.setdefault(_text(row["table"]), []).append(_text(row["column"]))
    return cols


def _assemble(path, attrs, spec, runs, plan_text, raw, axis_cols=None, listed=None,
              base_config=None):
    listed = listed or {}
    if "index" not in runs:
        runs["index"] = np.arange(len(runs))
    runs["seed"] = runs["seed"].astype(np.int64)
    if "knobs" in listed:
        knobs = [c for c in listed["knobs"] if c in runs.columns]
    else:
        knobs = [c for c in runs.columns if V1_KNOB_RE.search(c)]
    names = list(runs["name"])
    parsed = [parse_run_name(n) for n in names]
    runs["config"] = [config_label(n) for n in names]
    if "variant" in runs.columns:  # schema 2
        runs["variant"] = runs["variant"].fillna("").astype(str)
    else:
        runs["variant"] = [p[0] for p in parsed]
    if "group" in runs.columns:  # schema 2
        runs["group"] = runs["group"].astype(str)
    else:
        runs["group"] = _derive_groups(runs, knobs, plan_text)
    # Grid axes: schema 2 lists its axis columns (attribute `axes` of /runs, in name
    # order); schema 1 has none, so the labels and values are parsed from the run names.
    # An axis is given the column `<label>`, or `axis.<label>` when the label is already a
    # column name somewhere (`lr` is a /steps column, `tokens` a /runs column), so that no
    # data is shadowed; a schema 2 axis column is renamed accordingly.
    if axis_cols is not None:
        missing = [c for c in axis_cols if c not in runs.columns]
        if missing:
            raise SweepFileError("%s: /runs lacks the grid-axis column(s) %s that its `axes` "
                                 "attribute lists" % (path, ", ".join(missing)))
        source = {_axis_label(c): c for c in axis_cols}
    else:
        source = {}
        for _, ax, _ in parsed:
            for k, _ in ax:
                source.setdefault(k, None)
    taken = set(V1_RUN_COLUMNS) | set(RUN_KEYS) | {"run", "index"}
    taken |= set(runs.columns) - {c for c in source.values() if c}
    for t, df in raw.items():
        taken |= set(df.columns)
    axis_columns = {}
    for k, src in source.items():
        col = k if k not in taken else "axis." + k
        axis_columns[k] = col
        if src is not None:
            values = runs.pop(src).astype(str)
            runs[col] = values
        else:
            runs[col] = [dict(ax).get(k, "") for _, ax, _ in parsed]
    # The view names a grid axis before the other columns of /runs, so an axis labelled
    # like one of them (`steps`, for a grid over train.steps) pushed that column to
    # `end.steps` (or `start.`, `run.`, `config.`): it gets its own name back here, the
    # axis being `axis.steps` (schema 2's docs/hdf5-schema.md, "/runs").
    for src in source.values():
        if src and src not in runs.columns:
            for prefix in ("config.", "start.", "end.", "run."):
                if prefix + src in runs.columns:
                    runs.rename(columns={prefix + src: src}, inplace=True)
                    if prefix == "config.":
                        knobs = [src if k == prefix + src else k for k in knobs]
                    break
    axes = list(axis_columns.values())
    raw["evals"] = _eval_positions(raw["evals"], raw["steps"])
    keys = runs.set_index("index")[RUN_KEYS + axes]
    tables = {}
    for t, df in raw.items():
        df = df.join(keys, on="run") if len(df) else df.assign(**{c: pd.Series(dtype=object)
                                                                   for c in RUN_KEYS + axes})
        tables[t] = df
    sw = Sweep(path, attrs, spec, runs, tables, axes, knobs,
               listed.get("unfinished", V1_UNFINISHED), base_config)
    sw.axis_columns = axis_columns
    return sw


def _eval_positions(evals, steps):
    """/evals tokens and time where the file lacks them: schema 1 has neither column, and a
    schema 2 view of a version-1 journal has time NaN. They are taken from /steps,
    interpolated in step between logged steps (tokens are exact: they are linear in step;
    time is exact at logged steps, which with the default log_every 1 is every step)."""
    fill = {}
    for c in ("tokens", "time"):
        if c not in evals.columns:
            evals[c] = np.full(len(evals), np.nan)
        elif not len(evals) or not evals[c].isna().any():
            continue
        fill[c] = evals[c].isna().to_numpy()
    if not fill or not len(evals) or not len(steps):
        return evals
    out = {c: evals[c].to_numpy(dtype=float, copy=True) for c in fill}
    sgroups = {r: g for r, g in steps.groupby("run")}
    for r, idx in evals.groupby("run").indices.items():
        g = sgroups.get(r)
        if g is None or not len(g):
            continue
        s = g["step"].to_numpy(dtype=float)
        x = evals["step"].to_numpy(dtype=float)[idx]
        for c in fill:
            v = np.interp(x, s, g[c].to_numpy(dtype=float), left=np.nan, right=np.nan)
            m = fill[c][idx]
            out[c][idx[m]] = v[m]
    for c in fill:
        v = out[c]
        # tokens stay integers, as schema 2 stores them, when every one is known
        evals[c] = v.astype(np.int64) if c == "tokens" and np.isfinite(v).all() else v
    return evals
