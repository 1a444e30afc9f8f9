"""load(path): a sweep's HDF5 file (docs/hdf5-schema.md) as tidy pandas DataFrames.

Every metric table (steps, evals, acts, attn, samples) gets its run's identity columns
(name, seed, status, config, group, variant and one column per grid axis), so that a
`groupby("config")` or `groupby(["config", "layer"])` needs no join. Text is decoded to
str everywhere. Schema 1 files (today's) and schema 2 files are read; the columns schema 2
adds (`group`, `variant`, grid-axis columns, `/evals` tokens and time) are used when
present and derived otherwise (see docs/analysis.md).
"""

import os
import re

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSIONS = (1, 2)
TABLES = ("steps", "evals", "acts", "attn", "samples")
# Columns of each metric table when the dataset is absent (a sweep that has not produced
# any such row yet), so that code written against a finished sweep still runs.
EMPTY_COLUMNS = {
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
# Run statuses of runs that have not ended (the sweep is partial while any run has one).
UNFINISHED = ("pending", "running", "interrupted")
KNOB_RE = re.compile(r"^(model|train|data|stats|sample|config)\.|^save_weights$")
SEED_RE = re.compile(r"^seed(\d+)$")
# The fixed (non-knob) columns of schema 1's /runs.
V1_RUN_COLUMNS = ("index", "id", "name", "seed", "status", "params", "flops_per_token",
                  "kv_bytes_per_token", "steps", "tokens", "train_seconds", "tokens_per_s",
                  "final_val_loss", "final_val_acc", "rank", "host", "attempts",
                  "resumed_from_step", "last_checkpoint_step", "message", "blas_core")


class SweepFileError(Exception):
    """The file is not a readable ablate sweep file; the message names the file."""


class Sweep:
    """One sweep file, loaded.

    runs     one row per planned run (plan order), every /runs column plus `config`
             (the run name without its seed: the configuration's label), `group`,
             `variant` and one column per grid axis (values as written in the spec)
    steps, evals, acts, attn, samples
             the metric tables, each row with the identity columns of its run
    attrs    root attributes (str/int); spec: the spec text; path
    axes     the grid-axis columns: the labels of run names (e.g. ["n_head", "activation"]),
             as `axis.<label>` when the label is also a table's column (`axis.lr`);
             axis_columns maps each label to its column
    knobs    the knob columns of /runs (e.g. "model.n_head")
    schema_version, status (the sweep's status attribute), partial (True while any run
    is pending, running or interrupted, or the sweep itself is running)
    """

    def __init__(self, path, attrs, spec, runs, tables, axes, knobs):
        self.path = path
        self.attrs = attrs
        self.spec = spec
        self.runs = runs
        self.steps = tables["steps"]
        self.evals = tables["evals"]
        self.acts = tables["acts"]
        self.attn = tables["attn"]
        self.samples = tables["samples"]
        self.axes = axes
        self.knobs = knobs
        self.schema_version = int(attrs.get("ablate_schema_version", 1))
        self.status = str(attrs.get("status", ""))
        self.partial = self.status == "running" or bool(runs["status"].isin(UNFINISHED).any())

    @property
    def description(self):
        """The spec's top-level `description:` (one line), or ""."""
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


def load(path):
    """Reads the sweep file at path (schema 1 or 2; any sweep status) into a Sweep."""
    if not os.path.isfile(path):
        raise SweepFileError("%s: no such file" % path)
    try:
        f = h5py.File(path, "r", locking=False)
    except TypeError:  # h5py < 3.5 has no locking argument
        f = h5py.File(path, "r")
    except OSError as e:
        raise SweepFileError("%s: cannot open as HDF5 (%s)" % (path, e)) from None
    with f:
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
        plan_text = None
        if "plan_text" in f:
            plan_text = [_text(v) for v in f["plan_text"][()]]
        raw = {}
        for t in TABLES:
            if t in f and f[t].dtype.names:
                raw[t] = _frame(f[t][()])
            else:
                raw[t] = pd.DataFrame({c: pd.Series(dtype=float) for c in EMPTY_COLUMNS[t]})
    return _assemble(path, attrs, spec, runs, plan_text, raw)


def _assemble(path, attrs, spec, runs, plan_text, raw):
    if "index" not in runs:
        runs["index"] = np.arange(len(runs))
    runs["seed"] = runs["seed"].astype(np.int64)
    knobs = [c for c in runs.columns if KNOB_RE.search(c)]
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
    # Grid axes, in name order (every run of a plan has the same axis labels). A label
    # that is already a column name somewhere (`lr` is a /steps column, `tokens` a /runs
    # column) is stored as `axis.<label>` so that no data is shadowed.
    labels = []
    for _, ax, _ in parsed:
        for k, _ in ax:
            if k not in labels:
                labels.append(k)
    taken = set(V1_RUN_COLUMNS) | set(knobs) | set(RUN_KEYS) | {"run", "index"}
    for t, df in raw.items():
        taken |= set(df.columns)
    axis_columns = {}
    for k in labels:
        col = k if k not in taken else "axis." + k
        axis_columns[k] = col
        if k in runs.columns and k not in taken and runs[k].dtype == object:  # schema 2
            runs[col] = runs[k].astype(str)
        else:
            runs[col] = [dict(ax).get(k, "") for _, ax, _ in parsed]
    axes = list(axis_columns.values())
    keys = runs.set_index("index")[RUN_KEYS + axes]
    tables = {}
    for t, df in raw.items():
        df = df.join(keys, on="run") if len(df) else df.assign(**{c: pd.Series(dtype=object)
                                                                   for c in RUN_KEYS + axes})
        tables[t] = df
    tables["evals"] = _eval_positions(tables["evals"], tables["steps"])
    sw = Sweep(path, attrs, spec, runs, tables, axes, knobs)
    sw.axis_columns = axis_columns
    return sw


def _eval_positions(evals, steps):
    """Schema 1 /evals has no tokens or time: take them from /steps, interpolated in step
    between logged steps (tokens are exact: they are linear in step; time is exact at
    logged steps, which with the default log_every 1 is every step)."""
    need = [c for c in ("tokens", "time") if c not in evals.columns]
    if not need or not len(evals):
        for c in need:
            evals[c] = pd.Series(dtype=float)
        return evals
    out = {c: np.full(len(evals), np.nan) for c in need}
    sgroups = {r: g for r, g in steps.groupby("run")} if len(steps) else {}
    for r, idx in evals.groupby("run").indices.items():
        g = sgroups.get(r)
        if g is None or not len(g):
            continue
        s = g["step"].to_numpy(dtype=float)
        x = evals["step"].to_numpy(dtype=float)[idx]
        for c in need:
            out[c][idx] = np.interp(x, s, g[c].to_numpy(dtype=float), left=np.nan,
                                    right=np.nan)
    for c in need:
        evals[c] = out[c]
    return evals
