#!/usr/bin/env python3
"""Dispatch efficiency of `ablate run` (driven by bench/sweep_dispatch.sh; see --help there).
With --join K: the same sweep as one MPI job of K workers and as K joined in-process
`ablate run --join` processes, interleaved (see "Joined processes" below).

Target (issue "the sweep"): a sweep of many short runs on W workers finishes within 5% of
(sum of run times) / W.

Method. `ablate run` is run unmodified under mpirun with an LD_PRELOAD shim
(bench/sweep_timeshim.c, the MPI profiling interface) that timestamps, on one clock
(CLOCK_MONOTONIC, shared by every process of the machine, = Python's time.monotonic()):
on each worker, the ASSIGN it receives (the run starts) and the END it sends (the run is
over); on rank 0, every ASSIGN sent and END received; MPI_Init/MPI_Finalize of every rank
and each rank's CPU time. The script timestamps the launch of mpirun and its exit.

  run time       = END sent - ASSIGN received, on the worker: everything the run needs
                   (data, model init, training, final evaluation, statistics, samples,
                   packing and sending its events), measured in the sweep itself, so under
                   the same CPU contention as the sweep
  sum of run times S = sum over all runs;  ideal = S / W
  actual         = wall time of the whole sweep: mpirun launch -> mpirun exit
  efficiency     = ideal / actual = the fraction of the workers' wall time spent inside runs
  PASS           if actual <= 1.05 * ideal

Every worker's wall time decomposes exactly into startup (launch -> its first ASSIGN),
busy (its runs), gaps (END sent -> next ASSIGN received) and tail (its last END -> mpirun
exit); the script prints that decomposition and the parts of it that rank 0 is
responsible for, plus rank 0's CPU time (rank 0 shares the cores with the workers: any CPU
it burns slows them) and the CPU used by other processes of the machine during the sweep.

Joined processes (--join K). K `ablate run SPEC -o OUT.h5 --join` processes, each training
in-process (no mpirun), are started together (one after the other, as fast as Popen goes)
with an LD_PRELOAD shim (bench/join_timeshim.c) that timestamps, on the same clock, every
claim change the process makes (the link() of claims/ID that claims a run, the rename() of
"done" over it once its RUN_END is synced) and every fdatasync. The script timestamps the
launch of the first process and the exit of the last.

  run time       = claim linked -> "done" renamed, in the process that trained the run: as
                   in the MPI job everything the run needs, plus what rank 0 does for it in
                   the MPI job and counts there as a gap: its RUN_BEGIN and RUN_END records
                   and the RUN_END's fdatasync (printed: "of which journal syncs")
  ideal          = S / K; actual = first launch -> last exit; efficiency = ideal / actual
Each process's wall time splits into startup (launch -> its first claim), runs, gaps (done
-> its next claim: the walk of the claims, the progress line, a periodic view) and tail
(its last done -> the last process's exit: waiting for the other's last run, which a
joined process notices within 1.2 s, and the final view build, one process at a time).
Repetitions alternate the order (MPI first, then joined first) and the summary gives the
medians and the ratio joined / MPI.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def read_proc_stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / hz  # busy core-seconds since boot


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def write_spec(path, a):
    with open(path, "w") as f:
        f.write(f"""# sweep_dispatch.py: {a.runs} short micro runs (Tiny Shakespeare), one per seed.
description: dispatch benchmark, {a.runs} runs x {a.steps} steps
data: {{path: "{a.corpus}", tokenizer: char, val_fraction: 0.1}}
base:
  preset: micro
  train: {{steps: {a.steps}, batch_size: 32, eval_every: 0, eval_tokens: {a.eval_tokens}, warmup_steps: 20}}
  stats: {{every: 0}}
  sample: {{tokens: {a.sample_tokens}}}
  save_weights: false
seeds: {a.runs}
""")


def parse_shim(d, nranks):
    ranks = {}
    for r in range(nranks):
        p = os.path.join(d, f"rank{r}.tsv")
        recs, cpu = [], None
        if not os.path.exists(p):
            raise RuntimeError(f"no timing file {p}: was the shim preloaded?")
        with open(p) as f:
            for line in f:
                x = line.rstrip("\n").split("\t")
                if x[0] == "cpu":
                    cpu = (float(x[2]), float(x[3]), int(x[4]))
                elif x[0] == "cpu_main":
                    continue  # the main thread's CPU (bench/rank0_memory.sh reads it)
                else:
                    recs.append((x[0], float(x[2]), int(x[3]), int(x[4])))
        ranks[r] = (recs, cpu)
    return ranks


def train_seconds(h5):
    try:
        import h5py

        with h5py.File(h5, "r") as f:
            runs = f["runs"][:]
            st = [s.decode() for s in runs["status"]]
            return list(runs["train_seconds"]), st
    except Exception as e:  # h5py missing: the figure is optional
        print(f"  (no train_seconds: {e})")
        return None, None


def one_sweep(a, W, rep, work):
    d = os.path.join(work, f"w{W}_r{rep}")
    os.makedirs(d, exist_ok=True)
    shim_dir = os.path.join(d, "shim")
    os.makedirs(shim_dir, exist_ok=True)
    out = os.path.join(d, "out.h5")
    cmd = ["mpirun", "--oversubscribe", "-n", str(W + 1),
           "-x", f"LD_PRELOAD={a.shim}", "-x", f"SWEEP_SHIM_DIR={shim_dir}",
           a.ablate, "run", a.spec, "-o", out, "--force"]
    if a.view_interval is not None:
        cmd += ["--view-interval", str(a.view_interval)]
    load = open("/proc/loadavg").read().split()[:3]
    busy0, kids0 = read_proc_stat(), children_cpu()
    log = open(os.path.join(d, "ablate.log"), "w")
    t_launch = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    progress = []  # (time, line): rank 0 prints one line per finished run when not a tty
    for line in p.stderr:
        progress.append((time.monotonic(), line))
        log.write(line)
    rc = p.wait()
    t_exit = time.monotonic()
    busy1, kids1 = read_proc_stat(), children_cpu()
    log.close()
    if rc != 0:
        sys.stdout.write("".join(l for _, l in progress[-5:]))
        raise RuntimeError(f"ablate run exited {rc} (W={W}); log in {d}/ablate.log")
    ranks = parse_shim(shim_dir, W + 1)

    wall = t_exit - t_launch
    per_worker = []
    durations = []
    for r in range(1, W + 1):
        recs, _ = ranks[r]
        starts = {run: t for kind, t, run, _ in recs if kind == "assign"}
        runs = []
        for kind, t, run, _ in recs:
            if kind == "end":
                runs.append((starts[run], t, run))
        runs.sort()
        busy = sum(e - s for s, e, _ in runs)
        gaps = [runs[i + 1][0] - runs[i][1] for i in range(len(runs) - 1)]
        per_worker.append(dict(n=len(runs), startup=runs[0][0] - t_launch if runs else wall, busy=busy,
                               gaps=sum(gaps), n_gaps=len(gaps), tail=t_exit - runs[-1][1] if runs else 0,
                               first=runs[0][0] if runs else None, last=runs[-1][1] if runs else None))
        durations += [e - s for s, e, _ in runs]
    n_runs = len(durations)
    S = sum(durations)
    ideal = S / W
    eff = ideal / wall

    # rank 0's side of the timeline
    r0, cpu0 = ranks[0]
    t_init0 = next(t for k, t, _, _ in r0 if k == "init")
    t_fin0 = next(t for k, t, _, _ in r0 if k == "finalize")
    sends = sorted((t, run, dst) for k, t, run, dst in r0 if k == "send_assign")
    recvs = sorted((t, run, src) for k, t, run, src in r0 if k == "recv_end")
    end_sent = {}
    assign_recv = {}
    for r in range(1, W + 1):
        for kind, t, run, _ in ranks[r][0]:
            if kind == "end":
                end_sent[run] = t
            elif kind == "assign":
                assign_recv[run] = t
    react = [t - end_sent[run] for t, run, _ in recvs if run in end_sent]  # END sent -> rank 0 has it
    send_of = {run: t for t, run, _ in sends}
    deliver = [assign_recv[run] - send_of[run] for run in assign_recv if run in send_of]
    # END received -> next ASSIGN sent to that worker (journal_sync, progress, view rebuild)
    turn = []
    for t, run, src in recvs:
        nxt = [s for s in sends if s[2] == src and s[0] >= t]
        if nxt:
            turn.append(nxt[0][0] - t)
    rank0_cpu = cpu0[0] + cpu0[1]
    workers_cpu = sum(ranks[r][1][0] + ranks[r][1][1] for r in range(1, W + 1))
    foreign = (busy1 - busy0) - (kids1 - kids0)

    ts, st = train_seconds(out)
    return dict(W=W, rep=rep, runs=n_runs, S=S, ideal=ideal, wall=wall, eff=eff,
                durations=durations, per_worker=per_worker, load=load,
                launch_to_init0=t_init0 - t_launch,
                init0_to_first_assign=(sends[0][0] - t_init0) if sends else float("nan"),
                last_recv_to_fin0=(t_fin0 - recvs[-1][0]) if recvs else float("nan"),
                fin0_to_exit=t_exit - t_fin0,
                react=react, deliver=deliver, turn=turn,
                rank0_cpu=rank0_cpu, workers_cpu=workers_cpu, foreign=foreign,
                train_seconds=ts, status=st)


def ms(x):
    return 1e3 * x


def print_training(res, lead):
    """Ends the run-time line: the mean training time from OUT.h5, and runs not done."""
    if res["train_seconds"]:
        tsm = statistics.fmean(res["train_seconds"])
        print(f"{lead} training {tsm:.3f} s (train_seconds in OUT.h5)", end="")
        bad = [s for s in res["status"] if s != "done"]
        if bad:
            print(f"\n  WARNING: {len(bad)} run(s) not done: {bad[:3]}", end="")
    print()


def report(res, ref_mean):
    W = res["W"]
    pw = res["per_worker"]
    mean = lambda k: statistics.fmean(w[k] for w in pw)
    d = res["durations"]
    ideal = res["ideal"]
    pct = lambda x: f"{x:.3f} s ({100 * x / ideal:.2f}%)"
    print(f"\nW={W} (rep {res['rep']}), load average before: {' '.join(res['load'])}")
    print(f"  runs {res['runs']} (per worker: {', '.join(str(w['n']) for w in pw)}), run time mean "
          f"{statistics.fmean(d):.3f} s (min {min(d):.3f}, max {max(d):.3f})", end="")
    print_training(res, "; of which")
    if ref_mean and W > 1:
        print(f"  run time vs W=1: x{statistics.fmean(d) / ref_mean:.3f} (CPU contention: 2 cores shared by "
              f"{W} workers + rank 0 + other load)")
    print(f"  worker wall time = startup {mean('startup'):.3f} + runs {mean('busy'):.3f} + gaps "
          f"{mean('gaps'):.3f} + tail {mean('tail'):.3f} s (mean over workers)")
    # actual - ideal = mean startup + mean gaps + mean tail, split by who is responsible
    first_assign = statistics.fmean(w["first"] for w in pw if w["first"] is not None)
    last_end = statistics.fmean(w["last"] for w in pw if w["last"] is not None)
    launch = res["launch_to_init0"]
    setup = res["init0_to_first_assign"]
    start_rest = mean("startup") - launch - setup  # first ASSIGNs reaching the workers
    final = res["last_recv_to_fin0"]
    exit_ = res["fin0_to_exit"]
    imbalance = mean("tail") - final - exit_  # workers idle while the last runs finish
    print(f"  overhead actual - ideal = {pct(res['wall'] - ideal)}:")
    row = lambda label, x: print(f"    {label:<56}{pct(x)}")
    row("MPI launch (mpirun -> rank 0 MPI_Init)", launch)
    row("rank 0 setup (spec, plan, journal, first view)", setup)
    row("first ASSIGNs reaching the workers", start_rest)
    ng = sum(w["n_gaps"] for w in pw)
    row(f"gaps between a worker's runs ({ng} in all; per worker)", mean("gaps"))
    if ng:
        print(f"      per gap {ms(sum(w['gaps'] for w in pw) / ng):.2f} ms = END sent -> rank 0 has it "
              f"{ms(statistics.fmean(res['react'])):.2f} ms (max {ms(max(res['react'])):.1f}) + -> next ASSIGN sent "
              f"{ms(statistics.fmean(res['turn'])):.2f} ms (max {ms(max(res['turn'])):.1f}; journal fdatasync, view "
              f"rebuilds) + -> received {ms(statistics.fmean(res['deliver'])):.2f} ms")
    row("end imbalance (idle while the last runs finish)", imbalance)
    row("rank 0 final sync + view build", final)
    row("MPI exit (rank 0 MPI_Finalize -> mpirun exit)", exit_)
    print(f"  CPU: rank 0 {res['rank0_cpu']:.3f} s ({100 * res['rank0_cpu'] / res['wall']:.2f}% of one core over "
          f"the sweep), workers {res['workers_cpu']:.1f} s, other processes on the machine "
          f"{max(res['foreign'], 0):.1f} core-s ({100 * max(res['foreign'], 0) / (os.cpu_count() * res['wall']):.0f}% "
          f"of the {os.cpu_count()} cores)")


def one_join(a, K, rep, work):
    d = os.path.join(work, f"join{K}_r{rep}")
    os.makedirs(d, exist_ok=True)
    shim_dir = os.path.join(d, "shim")
    os.makedirs(shim_dir, exist_ok=True)
    out = os.path.join(d, "out.h5")
    cmd = [a.ablate, "run", a.spec, "-o", out, "--join"]
    if a.view_interval is not None:
        cmd += ["--view-interval", str(a.view_interval)]
    env = dict(os.environ, LD_PRELOAD=a.join_shim, JOIN_SHIM_DIR=shim_dir)
    load = open("/proc/loadavg").read().split()[:3]
    busy0, kids0 = read_proc_stat(), children_cpu()
    logs = [open(os.path.join(d, f"ablate{k}.log"), "w") for k in range(K)]
    t_launch = time.monotonic()
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=logs[k], env=env) for k in range(K)]
    rcs = [p.wait() for p in procs]
    t_exit = time.monotonic()
    busy1, kids1 = read_proc_stat(), children_cpu()
    for f in logs:
        f.close()
    if any(rcs):
        raise RuntimeError(f"ablate run --join exited {rcs}; logs in {d}")
    per_proc, durations, syncs_in_runs, done_by = [], [], [], {}
    for p in procs:
        path = os.path.join(shim_dir, f"{p.pid}.tsv")
        if not os.path.exists(path):
            raise RuntimeError(f"no timing file {path}: was the shim preloaded?")
        ev = []
        with open(path) as f:
            for line in f:
                what, t, rid, dur = line.rstrip("\n").split("\t")
                ev.append((what, float(t), rid, float(dur)))
        claimed, runs = {}, []
        for what, t, rid, _ in ev:
            if what in ("claim", "held"):
                claimed[rid] = t
            elif what == "done" and rid in claimed:
                runs.append((claimed.pop(rid), t, rid))
                done_by[rid] = done_by.get(rid, 0) + 1
        runs.sort()
        syncs = [(t, dur) for what, t, _, dur in ev if what == "sync"]
        in_runs = sum(dur for t, dur in syncs if any(s <= t <= e for s, e, _ in runs))
        syncs_in_runs.append(in_runs)
        gaps = [runs[i + 1][0] - runs[i][1] for i in range(len(runs) - 1)]
        t_start = next((t for w, t, _, _ in ev if w == "start"), t_launch)
        per_proc.append(dict(n=len(runs), startup=runs[0][0] - t_launch if runs else t_exit - t_launch,
                             loaded=t_start - t_launch, busy=sum(e - s for s, e, _ in runs),
                             gaps=sum(gaps), n_gaps=len(gaps), gap_list=gaps,
                             tail=t_exit - runs[-1][1] if runs else 0.0,
                             last=runs[-1][1] if runs else t_launch,
                             exit=next((t for w, t, _, _ in ev if w == "exit"), t_exit)))
        durations += [e - s for s, e, _ in runs]
    twice = [r for r, n in done_by.items() if n > 1]
    wall = t_exit - t_launch
    S = sum(durations)
    ts, st = train_seconds(out)
    return dict(mode="joined", W=K, rep=rep, runs=len(done_by), trained=len(durations), twice=twice, S=S,
                t_exit=t_exit,
                ideal=S / K, wall=wall, eff=S / K / wall, durations=durations, per_proc=per_proc,
                syncs=sum(syncs_in_runs), load=load, cpu=kids1 - kids0,
                foreign=(busy1 - busy0) - (kids1 - kids0), train_seconds=ts, status=st)


def report_join(res):
    K = res["W"]
    pp = res["per_proc"]
    mean = lambda k: statistics.fmean(w[k] for w in pp)
    d = res["durations"]
    ideal = res["ideal"]
    pct = lambda x: f"{x:.3f} s ({100 * x / ideal:.2f}%)"
    print(f"\n{K} joined processes (rep {res['rep']}), load average before: {' '.join(res['load'])}")
    print(f"  runs {res['runs']} (per process: {', '.join(str(w['n']) for w in pp)}), run time mean "
          f"{statistics.fmean(d):.3f} s (min {min(d):.3f}, max {max(d):.3f}), of which journal syncs "
          f"{ms(res['syncs'] / len(d)):.1f} ms", end="")
    print_training(res, ";")
    if res["twice"]:
        print(f"  WARNING: {len(res['twice'])} run(s) trained to the end by two processes")
    print(f"  process wall time = startup {mean('startup'):.3f} + runs {mean('busy'):.3f} + gaps "
          f"{mean('gaps'):.3f} + tail {mean('tail'):.3f} s (mean over processes)")
    print(f"  overhead actual - ideal = {pct(res['wall'] - ideal)}:")
    row = lambda label, x: print(f"    {label:<56}{pct(x)}")
    last_done = max(w["last"] for w in pp)
    row("launch -> process loaded (exec, dynamic libraries)", mean("loaded"))
    row("-> first claim (MPI singleton, spec, plan, journal)", mean("startup") - mean("loaded"))
    ng = sum(w["n_gaps"] for w in pp)
    row(f"gaps between a process's runs ({ng} in all; per process)", mean("gaps"))
    if ng:
        allg = [g for w in pp for g in w["gap_list"]]
        print(f"      per gap {ms(statistics.fmean(allg)):.2f} ms (median {ms(statistics.median(allg)):.2f}, "
              f"max {ms(max(allg)):.1f}): done -> next claim")
    row("end imbalance (idle while the last runs finish)", statistics.fmean(last_done - w["last"] for w in pp))
    row("last run done -> own exit (notice it, final view)", statistics.fmean(w["exit"] - last_done for w in pp))
    row("own exit -> the last process's exit", statistics.fmean(res["t_exit"] - w["exit"] for w in pp))
    print(f"  CPU: all {K} processes {res['cpu']:.1f} s, other processes on the machine "
          f"{max(res['foreign'], 0):.1f} core-s ({100 * max(res['foreign'], 0) / (os.cpu_count() * res['wall']):.0f}% "
          f"of the {os.cpu_count()} cores)")


def summary_join(results, K):
    print(f"\nsummary: one MPI job of {K} workers (mpirun -n {K + 1}) against {K} joined in-process "
          f"`ablate run --join` processes, the same sweep; efficiency = (sum of run times / {K}) / actual")
    print(f"{'mode':>7} {'rep':>4} {'runs':>5} {'sum_runs_s':>11} {'ideal_s':>9} {'actual_s':>9} {'efficiency':>10} "
          f"{'run_mean_s':>10} {'other_load':>10}")
    for r in results:
        mode = r.get("mode", "mpi")
        share = 100 * max(r["foreign"], 0) / (os.cpu_count() * r["wall"])
        print(f"{mode:>7} {r['rep']:>4} {r['runs']:>5} {r['S']:>11.2f} {r['ideal']:>9.2f} {r['wall']:>9.2f} "
              f"{r['eff']:>10.3f} {statistics.fmean(r['durations']):>10.3f} {share:>9.0f}%")
    med = {}
    for mode in ("mpi", "joined"):
        rs = [r for r in results if r.get("mode", "mpi") == mode]
        med[mode] = {k: statistics.median(r[k] for r in rs) for k in ("eff", "wall", "S", "ideal")}
        med[mode]["load"] = statistics.median(100 * max(r["foreign"], 0) / (os.cpu_count() * r["wall"]) for r in rs)
    for mode in ("mpi", "joined"):
        m = med[mode]
        print(f"median {mode:>6}: efficiency {m['eff']:.3f}, actual {m['wall']:.2f} s, sum of run times "
              f"{m['S']:.2f} s, other load {m['load']:.0f}% of the cores")
    print(f"ratio joined / MPI (medians): efficiency {med['joined']['eff'] / med['mpi']['eff']:.3f}, "
          f"actual {med['joined']['wall'] / med['mpi']['wall']:.3f}, sum of run times "
          f"{med['joined']['S'] / med['mpi']['S']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ablate", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--eval-tokens", type=int, default=4096)
    ap.add_argument("--sample-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--view-interval", type=float, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--join", type=int, default=0)
    ap.add_argument("--join-shim", default=None)
    a = ap.parse_args()
    work = os.path.abspath(a.out) if a.out else tempfile.mkdtemp(prefix="sweep_dispatch.")
    os.makedirs(work, exist_ok=True)
    a.spec = os.path.join(work, "dispatch.yaml")
    write_spec(a.spec, a)
    Ws = [int(x) for x in a.workers.split(",")]
    print(f"sweep_dispatch: {os.cpu_count()} cores; {a.runs} runs x {a.steps} micro steps (eval {a.eval_tokens} "
          f"tokens at the end, stats at the end, 2 samples of {a.sample_tokens} tokens); ", end="")
    if a.join:
        if not a.join_shim:
            ap.error("--join needs --join-shim")
        print(f"one MPI job (mpirun -n {a.join + 1} --oversubscribe) against {a.join} joined `ablate run --join` "
              f"processes; {a.reps} rep(s), alternating which goes first")
        results = []
        try:
            for rep in range(1, a.reps + 1):
                order = ("mpi", "joined") if rep % 2 else ("joined", "mpi")
                for mode in order:
                    if mode == "mpi":
                        res = one_sweep(a, a.join, rep, work)
                        res["mode"] = "mpi"
                        report(res, None)
                    else:
                        res = one_join(a, a.join, rep, work)
                        report_join(res)
                    results.append(res)
        finally:
            if not a.out:
                subprocess.run(["rm", "-rf", work])
        summary_join(results, a.join)
        return
    print(f"W = {a.workers}; {a.reps} rep(s); mpirun -n W+1 --oversubscribe")
    results = []
    ref_mean = None
    try:
        for rep in range(1, a.reps + 1):
            for W in Ws:
                res = one_sweep(a, W, rep, work)
                if W == 1 and ref_mean is None:
                    ref_mean = statistics.fmean(res["durations"])
                report(res, ref_mean)
                results.append(res)
    finally:
        if not a.out:
            subprocess.run(["rm", "-rf", work])
    print("\nsummary (ideal = sum of run times / W; efficiency = ideal / actual; target: actual <= 1.05 x ideal)")
    print(f"{'W':>3} {'runs':>5} {'sum_runs_s':>11} {'ideal_s':>9} {'actual_s':>9} {'efficiency':>10} "
          f"{'rank0_cpu':>10} {'eff_in_mpi':>10} {'eff_vs_W1':>10}  target")
    s1 = next((r["S"] for r in results if r["W"] == 1), None)
    for r in results:
        ok = r["wall"] <= 1.05 * r["ideal"]
        v1 = f"{s1 / r['W'] / r['wall']:.3f}" if s1 else "-"
        in_mpi = r["wall"] - r["launch_to_init0"] - r["fin0_to_exit"]
        print(f"{r['W']:>3} {r['runs']:>5} {r['S']:>11.2f} {r['ideal']:>9.2f} {r['wall']:>9.2f} {r['eff']:>10.3f} "
              f"{r['rank0_cpu']:>9.2f}s {r['ideal'] / in_mpi:>10.3f} {v1:>10}  {'PASS' if ok else 'FAIL'} "
              f"(actual/ideal = {r['wall'] / r['ideal']:.3f})")
    print("eff_in_mpi: ideal / (rank 0 MPI_Init -> MPI_Finalize): without Open MPI's launch and exit")
    print("eff_vs_W1: (sum of run times at W=1) / W / actual: also charges the slowdown of runs sharing the cores")


if __name__ == "__main__":
    main()
