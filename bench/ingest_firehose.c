/* ingest_firehose: rank 0's ingest rate and memory under a firehose of events.
 *
 *   mpirun -n N ingest_firehose SPEC.yaml OUT.h5 [--view-interval S] [--batch-bytes B]
 *
 * Rank 0 runs the real sweep_rank0() (spec, plan, journal, scheduler, periodic and final
 * view rebuilds) exactly as `ablate run` does. Ranks > 0 do not train: they speak the
 * worker protocol (protocol.h) like sweep_worker() but, for each ASSIGN, emit the events a
 * real run of that config would emit as fast as they can: a start event, one step event per
 * step (train.log_every is ignored: every step), act events (n_layer of them, each with
 * n_head attention entropies) every stats.every steps and at the end, one final eval, then
 * END (done). Events are packed with the real event_pack and sent in batches of 64 KiB
 * (BATCH_BYTES of run_exec.c), TAG_EVENTS with the u32 run/attempt prefix.
 *
 * Metric values (what is counted): the measured numbers that land in the metric tables,
 * excluding the row keys (run, step, layer, head):
 *   /steps row  5 values: tokens, loss, lr, grad_norm, time
 *   /acts row   7 values: zero_frac, max, min, mean, rms, resid_rms, grad_norm
 *   /attn row   1 value : entropy
 *   /evals row  2 values: val_loss, val_acc
 * Counted from the rows of the finished file (h5view_build_stats of the journal), and
 * cross-checked against what the workers sent.
 *
 * Rank 0 prints one line "FIREHOSE key=value ..." (parsed by bench/ingest_firehose.sh):
 * wall of sweep_rank0, the streaming phase (first EVENTS received -> last END received,
 * timed by MPI_Recv below through the MPI profiling interface), the tail (last END ->
 * sweep_rank0 returns: final sync + final view build), a separate timed rebuild of the view,
 * rank 0's CPU time, VmHWM / ru_maxrss, and the counts. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/h5view.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/process/protocol.h"
#include "orchestrator/process/run_exec.h"
#include "orchestrator/process/sweep.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------- rank 0: timestamps through the profiling interface ---------------- */

static int g_rank = -1;
static double t_first_events, t_last_end, t_last_events, cpu_first_events, cpu_last_end;
static long long n_event_msgs, n_event_bytes;
static double cpu_s(void);

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    MPI_Status st;
    MPI_Status *sp = status == MPI_STATUS_IGNORE ? &st : status;
    int rc = PMPI_Recv(buf, count, dt, source, tag, comm, sp);
    if (g_rank == 0 && rc == MPI_SUCCESS) {
        if (sp->MPI_TAG == TAG_EVENTS) {
            double t = now_s();
            if (n_event_msgs++ == 0) t_first_events = t, cpu_first_events = cpu_s();
            t_last_events = t;
            int n = 0;
            PMPI_Get_count(sp, MPI_BYTE, &n);
            n_event_bytes += n;
        } else if (sp->MPI_TAG == TAG_END) {
            t_last_end = now_s();
            cpu_last_end = cpu_s();
        }
    }
    return rc;
}

/* ---------------- workers: a synthetic run ---------------- */

typedef struct {
    uint8_t *buf; /* u32 run, u32 attempt, packed events */
    size_t len, cap;
    long long sent_values, sent_events, sent_bytes, sent_msgs;
    double send_wait; /* seconds inside MPI_Send of EVENTS: waiting for rank 0 */
} Batch;

static void batch_send(Batch *b) {
    if (b->len <= 8) return;
    double t = now_s();
    MPI_Send(b->buf, (int)b->len, MPI_BYTE, 0, TAG_EVENTS, MPI_COMM_WORLD);
    b->send_wait += now_s() - t;
    b->sent_bytes += (long long)b->len;
    b->sent_msgs++;
    b->len = 8;
}

static void batch_add(Batch *b, const Event *ev, size_t limit) {
    if (b->len + EVENT_PACK_MAX > b->cap) {
        b->cap = b->len + EVENT_PACK_MAX + limit;
        b->buf = realloc(b->buf, b->cap);
        if (!b->buf) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    size_t n = event_pack(ev, b->buf + b->len, b->cap - b->len);
    if (n == 0) MPI_Abort(MPI_COMM_WORLD, 4);
    b->len += n;
    b->sent_events++;
    if (b->len >= limit) batch_send(b);
}

static void emit_acts(Batch *b, const RunAssignment *a, long step, size_t limit) {
    int nh = a->cfg.model.n_head;
    if (nh > ABL_MAX_HEADS) nh = ABL_MAX_HEADS;
    for (int l = 0; l < a->cfg.model.n_layer; l++) {
        Event ev = {.kind = EV_ACT};
        ActEvent *x = &ev.u.act;
        x->step = step;
        x->layer = l;
        x->zero_frac = 0.5 + 1e-6 * (double)step;
        x->max = 3.0 + l;
        x->min = -0.1;
        x->mean = 0.25;
        x->rms = 0.7 + 1e-7 * (double)step;
        x->resid_rms = 1.1;
        x->grad_norm = 0.05;
        x->n_head = nh;
        for (int h = 0; h < nh; h++)
            x->attn_entropy[h] = 1.0 + 0.01 * h;
        batch_add(b, &ev, limit);
        b->sent_values += 7 + nh;
    }
}

static void synthetic_run(const RunAssignment *a, Batch *b, size_t limit, EndEvent *end) {
    memcpy(b->buf, &a->run, 4);
    memcpy(b->buf + 4, &a->attempt, 4);
    b->len = 8;
    const RunConfig *c = &a->cfg;
    long steps = c->train.steps > 0 ? c->train.steps : 1000;
    long tok_per_step = (long)c->train.batch_size * c->model.context;
    double t0 = now_s();
    Event ev = {.kind = EV_START};
    ev.u.start.params = 29248;
    ev.u.start.flops_per_token = 2e5;
    ev.u.start.kv_bytes_per_token = 512;
    snprintf(ev.u.start.blas_core, sizeof ev.u.start.blas_core, "firehose");
    batch_add(b, &ev, limit);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ a->seed;
    for (long s = 1; s <= steps; s++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: noisy losses, like real ones */
        Event e = {.kind = EV_STEP};
        e.u.step.step = s;
        e.u.step.tokens = s * tok_per_step;
        e.u.step.loss =
            4.2 - 2.0 * (double)s / (double)steps + 1e-3 * (double)(x >> 40) / 16777216.0;
        e.u.step.lr = c->train.lr * (0.5 + 0.5 * cos(M_PI * (double)s / (double)steps));
        e.u.step.grad_norm = 0.3 + (double)(x & 0xffff) / 65536.0;
        e.u.step.time = now_s() - t0;
        batch_add(b, &e, limit);
        b->sent_values += 5;
        if (c->stats.every > 0 && s % c->stats.every == 0 && s != steps) emit_acts(b, a, s, limit);
    }
    emit_acts(b, a, steps, limit);
    Event ev2 = {.kind = EV_EVAL};
    ev2.u.eval.step = steps;
    ev2.u.eval.val_loss = 2.3;
    ev2.u.eval.val_acc = 0.3;
    batch_add(b, &ev2, limit);
    b->sent_values += 2;
    batch_send(b);
    memset(end, 0, sizeof *end);
    end->status = RUN_DONE;
    end->steps = steps;
    end->tokens = steps * tok_per_step;
    end->train_seconds = now_s() - t0;
    end->tokens_per_s = end->train_seconds > 0 ? (double)end->tokens / end->train_seconds : 0;
    end->final_val_loss = 2.3;
    end->final_val_acc = 0.3;
}

static void synthetic_worker(int rank, int nranks, size_t limit, long long out[4],
                             double times[2]) {
    sweep_gather_hostnames(rank, nranks); /* collective, as sweep_worker */
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    MPI_Send(host, (int)strlen(host) + 1, MPI_CHAR, 0, TAG_READY, MPI_COMM_WORLD);
    Batch b = {0};
    b.cap = limit + 2 * EVENT_PACK_MAX;
    b.buf = malloc(b.cap);
    double busy = 0;
    for (;;) {
        MPI_Status st;
        MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP) {
            int32_t mode;
            MPI_Recv(&mode, 1, MPI_INT32_T, 0, TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (mode == STOP_EXIT) break;
            continue;
        }
        RunAssignment a;
        MPI_Recv(&a, (int)sizeof a, MPI_BYTE, 0, TAG_ASSIGN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EndEvent end;
        double t = now_s();
        synthetic_run(&a, &b, limit, &end);
        busy += now_s() - t;
        WorkerEnd we = {a.run, a.attempt, (int32_t)RUN_DONE, rank, 0, {0}};
        memcpy(we.host, host, sizeof we.host);
        uint8_t msg[sizeof we + EVENT_PACK_MAX];
        Event ev = {.kind = EV_END};
        ev.u.end = end;
        size_t n = event_pack(&ev, msg + sizeof we, EVENT_PACK_MAX);
        memcpy(msg, &we, sizeof we);
        MPI_Send(msg, (int)(sizeof we + n), MPI_BYTE, 0, TAG_END, MPI_COMM_WORLD);
    }
    out[0] = b.sent_values;
    out[1] = b.sent_events;
    out[2] = b.sent_bytes;
    out[3] = b.sent_msgs;
    times[0] = b.send_wait;
    times[1] = busy;
    free(b.buf);
}

/* ---------------- rank 0 ---------------- */

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = atol(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    g_rank = rank;
    if (argc < 3 || nranks < 2) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: mpirun -n N (N >= 2) %s SPEC.yaml OUT.h5 [--view-interval S] "
                    "[--batch-bytes B]\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }
    double view_interval = 0;
    size_t limit = 64u << 10;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--view-interval"))
            view_interval = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch-bytes"))
            limit = (size_t)atol(argv[i + 1]);
    }
    sweep_install_signals(rank);
    long long sent[4] = {0}, total[4] = {0};
    double times[2] = {0, 0}, ttotal[2] = {0, 0};
    int rc = 0;
    if (rank == 0) {
        SweepOptions o;
        memset(&o, 0, sizeof o);
        o.spec_path = argv[1];
        o.out_path = argv[2];
        o.force = 1;
        o.view_interval = view_interval;
        long rss0 = status_kib("VmRSS");
        double c0 = cpu_s(), t0 = now_s();
        rc = sweep_rank0(&o, nranks);
        double t1 = now_s(), c1 = cpu_s();
        long hwm = status_kib("VmHWM"), rss1 = status_kib("VmRSS");
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        MPI_Reduce(sent, total, 4, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(times, ttotal, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        /* Count what is in the file: rebuild the view once more from the journal, timed. */
        char jpath[ABL_PATH_MAX], err[ABL_ERR_MAX] = "", vpath[ABL_PATH_MAX + 16];
        journal_path_for(o.out_path, jpath, sizeof jpath);
        snprintf(vpath, sizeof vpath, "%s.rebuild.h5", o.out_path);
        H5ViewStats vs;
        memset(&vs, 0, sizeof vs);
        double tv0 = now_s();
        int vrc = h5view_build_stats(jpath, vpath, &vs, err);
        double tv1 = now_s();
        unlink(vpath);
        long long values = vs.steps * 5 + vs.acts * 7 + vs.attn + vs.evals * 2;
        printf("FIREHOSE rc=%d ranks=%d workers=%d wall=%.4f stream=%.4f tail=%.4f "
               "first_events=%.4f cpu=%.4f rss_start_kib=%ld vmhwm_kib=%ld rss_end_kib=%ld "
               "maxrss_kib=%ld values=%lld sent_values=%lld steps=%lld acts=%lld attn=%lld "
               "evals=%lld events=%lld sent_events=%lld event_msgs=%lld event_bytes=%lld "
               "journal_bytes=%llu runs=%ld runs_done=%ld skipped=%lld rebuild=%.4f "
               "rebuild_rc=%d stream_cpu=%.4f worker_send_wait=%.4f worker_busy=%.4f\n",
               rc, nranks, nranks - 1, t1 - t0, t_last_end - t_first_events, t1 - t_last_end,
               t_first_events - t0, c1 - c0, rss0, hwm, rss1, ru.ru_maxrss, values, total[0],
               vs.steps, vs.acts, vs.attn, vs.evals, vs.events, total[1], n_event_msgs,
               n_event_bytes, vs.journal_bytes, vs.runs, vs.runs_done, vs.skipped, tv1 - tv0, vrc,
               cpu_last_end - cpu_first_events, ttotal[0], ttotal[1]);
        if (vrc != 0) fprintf(stderr, "ingest_firehose: rebuild: %s\n", err);
        fflush(stdout);
    } else {
        synthetic_worker(rank, nranks, limit, sent, times);
        MPI_Reduce(sent, total, 4, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(times, ttotal, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return rc;
}
