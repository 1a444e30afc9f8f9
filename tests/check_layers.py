"""The include order of src/ (docs/architecture.md, "Layers of the code"), checked: a file may
include its own layer and the layers below it, never one above. From the bottom:

  util/sizes.h   the shared sizes, which every layer may include (the model's too)
  util/          one utility per need
  model/         the GPT (util/sizes.h only: no other utility, no MPI, HDF5 or YAML)
  tokenizer/     GPT-2's tokens
  worker/        one run
  orchestrator/plan, orchestrator/record, orchestrator/schedule, orchestrator/process
  cli/

and the libraries where they belong: <mpi.h> in orchestrator/process and cli only, <hdf5.h>
in orchestrator/record and process only, <yaml.h> in orchestrator/plan only.

Usage: check_layers.py [SRC_DIR]. Prints every include that goes up, FILE:LINE, and exits 1
if there is one (a new door up the layers fails CTest's check_layers); exit 0 otherwise."""
import os
import re
import sys

ORDER = ["util", "model", "tokenizer", "worker", "orchestrator/plan", "orchestrator/record",
         "orchestrator/schedule", "orchestrator/process", "cli"]
BASE = {"util/sizes.h"}  # below every layer
SYSTEM = {"mpi.h": {"orchestrator/process", "cli"},
          "hdf5.h": {"orchestrator/record", "orchestrator/process"},
          "yaml.h": {"orchestrator/plan"}}
INCLUDE = re.compile(r'\s*#\s*include\s+([<"])([^">]+)[">]')


def layer(rel):
    """The index in ORDER of the layer a path under src/ belongs to, or None."""
    best = None
    for i, name in enumerate(ORDER):
        if rel.startswith(name + "/"):
            best = i
    return best


def check(src):
    bad = []
    for d, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, src)
            me = layer(rel)
            if me is None:
                continue
            with open(path, errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    kind, inc = m.groups()
                    if kind == "<":
                        allowed = SYSTEM.get(inc)
                        if allowed is not None and ORDER[me] not in allowed:
                            bad.append("%s:%d: <%s> in %s/ (only in %s)" % (
                                rel, n, inc, ORDER[me], ", ".join(sorted(allowed))))
                        continue
                    relative = "/" not in inc or inc.startswith(("./", "../"))
                    target = os.path.join(os.path.dirname(rel), inc) if relative else inc
                    target = os.path.normpath(target)
                    if target in BASE:
                        continue
                    them = layer(target)
                    if ORDER[me] == "model" and them == 0:
                        bad.append("%s:%d: includes %s: the model takes no utility but "
                                   "util/sizes.h" % (rel, n, inc))
                    elif them is not None and them > me:
                        bad.append("%s:%d: includes %s: %s/ may not include %s/ (above it)" % (
                            rel, n, inc, ORDER[me], ORDER[them]))
    return bad


def self_test():
    """The check finds what it should in a tree made for it (so it cannot pass by finding
    nothing): a door up, a library out of place, the model's utility; not the allowed ones."""
    import tempfile
    files = {"util/a.c": '#include "worker/x.h"\n#include "sizes.h"\n',
             "model/m.c": '#include "util/clock.h"\n#include "util/sizes.h"\n#include "gpt.h"\n',
             "worker/w.c": "#include <mpi.h>\n#include \"model/gpt.h\"\n",
             "orchestrator/record/r.c": '#include "orchestrator/plan/plan.h"\n#include <hdf5.h>\n',
             "orchestrator/plan/p.h": '#include "../record/r.h"\n'}
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        got = sorted(b.split(":")[0] + ":" + b.split(":")[1] for b in check(d))
    want = ["model/m.c:1", "orchestrator/plan/p.h:1", "util/a.c:1", "worker/w.c:1"]
    if got != want:
        print("check_layers --self-test: found %s, expected %s" % (got, want))
        return 1
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    bad = check(src)
    for b in bad:
        print(b)
    if bad:
        print("check_layers: %d include(s) go up the layers (tests/check_layers.py lists them)"
              % len(bad))
        return 1
    print("check_layers: every include of %s keeps to the layers" % src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
