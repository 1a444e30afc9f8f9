#include "worker/event_schema.h"
#include "worker/provenance.h"
#include "worker/weights_file.h"
#include "util/log.h"
#include "run_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/file_io.h"
#include "util/test_hooks.h"
#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/journal.h"

#define BATCH_BYTES   (64u << 10)
#define BATCH_SECONDS 1.0

/* The sink of a run: packs events into a batch sent when it fills, at every evaluation and
 * sample, at least every BATCH_SECONDS (so the live view sees a run's progress), before a
 * checkpoint and at the end. Memory stays at one batch however long the run: its history
 * lives in the journal, not here. */
typedef struct {
    EventSink base;
    const RunAssignment *a;
    const RunOutput *out;
    uint8_t batch[BATCH_BYTES + EVENT_PACK_MAX];
    size_t len;
    double sent_at; /* clock_seconds() of the last send */
    int failed;
} BatchSink;

static void batch_flush(BatchSink *s) {
    if (s->len == 0) return;
    if (s->out->send_events(s->out->ctx, s->a, s->batch, s->len) != 0) s->failed = 1;
    s->len = 0;
    s->sent_at = clock_seconds();
}

static void batch_emit(EventSink *self, const Event *ev) {
    BatchSink *s = (BatchSink *)self;
    if (ev->kind == EV_END) return; /* travels in the run's end message */
    size_t n = event_pack(ev, s->batch + s->len, EVENT_PACK_MAX);
    if (n == 0) {
        s->failed = 1;
        return;
    }
    s->len += n;
    if (s->len >= BATCH_BYTES || ev->kind == EV_EVAL || ev->kind == EV_SAMPLE ||
        clock_seconds() - s->sent_at >= BATCH_SECONDS)
        batch_flush(s);
}

int run_ckpt_path(const char *out_path, const char *id, int64_t step, char *buf, size_t n) {
    char dir[ABL_PATH_MAX];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) return -1;
    return snprintf(buf, n, "%s/ckpt/%s-%lld.ckpt", dir, id, (long long)step) < (int)n ? 0 : -1;
}

int run_weights_path(const char *out_path, const char *id, char *buf, size_t n) {
    char dir[ABL_PATH_MAX];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) return -1;
    return weights_file_path(dir, id, buf, n);
}

/* Writes a file durably (file_write_atomic) in a directory created if missing: 0, or the
 * errno of what failed. */
static int write_durably(const char *what, const char *path, int (*write)(FILE *f, void *ctx),
                         void *ctx) {
    char dir[ABL_PATH_MAX], err[ABL_ERR_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    mkdir(dirname(dir), 0777);
    return file_write_atomic(what, path, write, ctx, err) == 0 ? 0 : errno;
}

/* ---------------------------------------------------------------- checkpoint files */

/* A checkpoint: trainer_save's bytes, then this trailer. The CRC covers every byte before
 * the trailer, so a flipped bit or a truncated copy is caught before anything is loaded. */
#define CKPT_TRAILER_MAGIC "ABLCKSUM"
typedef struct {
    char magic[8];
    uint64_t data_bytes;
    uint32_t crc, reserved;
} CkptTrailer;

/* CRC-32C of the first n bytes of f (from its start). */
static int crc_of_file(FILE *f, uint64_t n, uint32_t *crc) {
    static uint8_t buf[1 << 16];
    *crc = 0;
    if (fseeko(f, 0, SEEK_SET) != 0) return -1;
    while (n) {
        size_t want = n > sizeof buf ? sizeof buf : (size_t)n;
        if (fread(buf, 1, want, f) != want) return -1;
        *crc = journal_crc32c(*crc, buf, want);
        n -= want;
    }
    return 0;
}

static int write_checkpoint(FILE *f, void *ctx) {
    const Trainer *t = ctx;
    if (trainer_save(t, f) != 0 || fflush(f) != 0) return -1;
    off_t n = ftello(f);
    CkptTrailer tr;
    memset(&tr, 0, sizeof tr);
    memcpy(tr.magic, CKPT_TRAILER_MAGIC, 8);
    tr.data_bytes = (uint64_t)n;
    /* read back what reached the file: the checksum then vouches for the bytes written */
    if (n < 0 || crc_of_file(f, (uint64_t)n, &tr.crc) != 0) return -1;
    if (fseeko(f, 0, SEEK_END) != 0) return -1;
    return fwrite(&tr, sizeof tr, 1, f) == 1 ? 0 : -1;
}

int run_ckpt_verify(const char *path, char err[ABL_ERR_MAX]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, ABL_ERR_MAX, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    CkptTrailer tr;
    uint32_t crc = 0;
    int rc = -1;
    off_t size = fseeko(f, 0, SEEK_END) == 0 ? ftello(f) : -1;
    if (size < (off_t)sizeof tr || fseeko(f, size - (off_t)sizeof tr, SEEK_SET) != 0 ||
        fread(&tr, sizeof tr, 1, f) != 1 || memcmp(tr.magic, CKPT_TRAILER_MAGIC, 8) != 0 ||
        tr.data_bytes != (uint64_t)size - sizeof tr)
        snprintf(err, ABL_ERR_MAX, "checkpoint %s is truncated or not an ablate checkpoint", path);
    else if (crc_of_file(f, tr.data_bytes, &crc) != 0)
        snprintf(err, ABL_ERR_MAX, "cannot read checkpoint %s: %s", path, strerror(errno));
    else if (crc != tr.crc)
        snprintf(err, ABL_ERR_MAX, "checkpoint %s fails its checksum (damaged)", path);
    else
        rc = 0;
    fclose(f);
    return rc;
}

static int load_checkpoint(Trainer *t, const RunAssignment *a, char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX];
    if (run_ckpt_path(a->out_path, a->id, a->resume_step, path, sizeof path) != 0) {
        snprintf(err, ABL_ERR_MAX, "the checkpoint path of run %s is too long", a->id);
        return -1;
    }
    if (run_ckpt_verify(path, err) != 0) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, ABL_ERR_MAX, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    char why[ABL_ERR_MAX] = "";
    int rc = trainer_load(t, f, why);
    fclose(f);
    if (rc == 0 && t->step != a->resume_step) {
        snprintf(why, sizeof why, "it is at step %ld, the journal expects %lld", t->step,
                 (long long)a->resume_step);
        rc = -1;
    }
    if (rc != 0) snprintf(err, ABL_ERR_MAX, "checkpoint %s: %s", path, why);
    return rc;
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    BatchSink *sink;
    const RunAssignment *a;
    RunResult *res;
    double next_save; /* monotonic seconds of the next periodic checkpoint */
    long polls;       /* of this attempt: one before each step */
} RunCtx;

/* Test-only hook (util/test_hooks.h). With ABLATE_TEST_HOLD_DIR set, an
 * attempt that has taken ABLATE_TEST_HOLD_STEP steps (default 1) creates DIR/ID.held and
 * waits before each further step, still in progress, until the sweep asks it to stop (a
 * signal, a stop from rank 0) or DIR/ID.go or DIR/go exists; a periodic checkpoint that
 * falls due meanwhile is taken (and lets one step through). ABLATE_TEST_HOLD_RUNS, a
 * comma-separated list of run ids, holds only those. A fault test then signals or kills a
 * run that cannot have ended, whatever the machine's speed, instead of racing it. */
static TrainPoll test_hold(RunCtx *rc, TrainPoll p) {
    const TestHooks *h = test_hooks();
    const char *dir = h->hold_dir;
    if (!dir[0] || p == TRAIN_CHECKPOINT || p == TRAIN_ABORT) return p;
    if (rc->polls <= h->hold_step) return p;
    if (h->hold_runs[0] && !strstr(h->hold_runs, rc->a->id)) return p;
    char held[ABL_PATH_MAX], go[ABL_PATH_MAX], all[ABL_PATH_MAX];
    snprintf(go, sizeof go, "%s/%s.go", dir, rc->a->id);
    snprintf(all, sizeof all, "%s/go", dir);
    if (access(go, F_OK) == 0 || access(all, F_OK) == 0) return p;
    snprintf(held, sizeof held, "%s/%s.held", dir, rc->a->id);
    FILE *f = fopen(held, "w");
    if (f) fclose(f);
    for (;;) {
        if (p == TRAIN_CHECKPOINT || p == TRAIN_ABORT || p == TRAIN_SAVE || access(go, F_OK) == 0 ||
            access(all, F_OK) == 0)
            return p;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        p = rc->sink->out->poll(rc->sink->out->ctx);
        if (p == TRAIN_CONTINUE && rc->a->ckpt_every > 0 && clock_seconds() >= rc->next_save)
            p = TRAIN_SAVE;
    }
}

/* The sweep's poll, plus the periodic checkpoint clock. */
static TrainPoll run_poll(void *ctx) {
    RunCtx *rc = ctx;
    rc->polls++;
    TrainPoll p = test_hold(rc, rc->sink->out->poll(rc->sink->out->ctx));
    if (p == TRAIN_CONTINUE && rc->a->ckpt_every > 0 && clock_seconds() >= rc->next_save)
        p = TRAIN_SAVE;
    return p;
}

/* Every event before the checkpoint goes out first, then the file, then the notice: the
 * journal then holds the run's history up to the checkpoint before it names the file. */
static int save_checkpoint(void *ctx, const Trainer *t) {
    RunCtx *rc = ctx;
    const RunAssignment *a = rc->a;
    rc->next_save = clock_seconds() + a->ckpt_every;
    batch_flush(rc->sink);
    if (rc->sink->failed) return -1;
    char path[ABL_PATH_MAX];
    if (run_ckpt_path(a->out_path, a->id, t->step, path, sizeof path) != 0) return -1;
    int e = write_durably("checkpoint", path, write_checkpoint, (void *)t);
    if (e) {
        log_warn("run %s: could not write checkpoint %s: %s", a->id, path, strerror(e));
        rc->res->io_errno = e;
        return -1;
    }
    if (rc->sink->out->checkpointed(rc->sink->out->ctx, a, t->step, path) != 0) {
        rc->sink->failed = 1;
        return -1;
    }
    rc->res->ckpt_step = t->step;
    return 0;
}

static int write_weights(FILE *f, void *ctx) {
    return weights_file_write(f, ctx);
}

/* The run's data, when it is the sweep's (else NULL with a message). */
static const Dataset *sweep_data(const RunAssignment *a, VocabCache *vc, char err[ABL_ERR_MAX]) {
    const Dataset *d = vocab_dataset(vc, &a->cfg, err);
    if (d && a->data_sha256[0] && strcmp(d->identity.sha256, a->data_sha256) != 0) {
        /* another copy on this node, or the file changed since the sweep read it: training
         * on it would mix two data sets in one sweep */
        char host[HOST_MAX] = "";
        gethostname(host, sizeof host - 1);
        snprintf(err, ABL_ERR_MAX,
                 "data file %s on %s is not the sweep's: sha256 %.12s... (%lld bytes) here, "
                 "the sweep's is %.12s...",
                 a->cfg.data.path, host, d->identity.sha256, d->identity.bytes, a->data_sha256);
        return NULL;
    }
    return d;
}

/* Test-only hook (util/test_hooks.h): ABLATE_TEST_FLAG_UNSTABLE, a comma-separated list of
 * run ids, ends those runs flagged by the instability rule when they end done, so that a
 * test of what a sweep does with a flagged run picks which one, whatever the training
 * gives (a natural blow-up flags every seed of a configuration alike). */
static void test_flag_unstable(const RunAssignment *a, RunStatus st, EndEvent *end) {
    const char *ids = test_hooks()->flag_unstable;
    if (!ids[0] || st != RUN_DONE || end->instability != INSTAB_NONE || !strstr(ids, a->id)) return;
    end->instability = INSTAB_ABOVE_UNIFORM;
    end->unstable_step = end->steps;
    end->unstable_loss = end->final_val_loss; /* the rule would give a training loss */
}

int run_calibrate(const RunAssignment *a, VocabCache *vc, CalibTrial *out, char err[ABL_ERR_MAX]) {
    const Dataset *d = sweep_data(a, vc, err);
    return d ? calib_trial(&a->cfg, a->seed, d, out, err) : -1;
}

RunStatus run_execute(const RunAssignment *a, VocabCache *vc, const RunOutput *out,
                      RunResult *res) {
    char err[ABL_ERR_MAX] = "";
    memset(res, 0, sizeof *res);
    EndEvent *end = &res->end;
    BatchSink *sink = calloc(1, sizeof *sink);
    Trainer t;
    int have_trainer = 0;
    RunStatus st = RUN_FAILED;
    if (!sink) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    *sink = (BatchSink){.base = {batch_emit}, .a = a, .out = out, .sent_at = clock_seconds()};
    const TrainConfig *tc = &a->cfg.train;
    if (tc->seconds > 0 && tc->calibrate > 0 && tc->calibrated_steps <= 0) {
        /* never train a calibrated configuration by the clock: it would be silently unfair */
        snprintf(err, sizeof err,
                 "train.calibrate: the configuration has no calibrated budget "
                 "(its calibration failed)");
        goto fail;
    }
    const Dataset *d = sweep_data(a, vc, err);
    if (!d || trainer_init(&t, &a->cfg, a->seed, d, err) != 0) goto fail;
    have_trainer = 1;
    if (a->resume_step > 0 && load_checkpoint(&t, a, err) != 0) {
        /* rank 0 verified the file before it copied the run's history into this attempt,
         * so this is rare (a file replaced since); the attempt ends without training and
         * rank 0 starts the run again from step 0 */
        log_warn("%s; run %s will restart from step 0", err, a->id);
        res->ckpt_step = -1;
        end->status = RUN_INTERRUPTED;
        snprintf(end->message, sizeof end->message, "%s", err);
        st = RUN_INTERRUPTED;
        goto done;
    }
    t.stop_step = a->stop_step;
    RunCtx rc = {sink, a, res, clock_seconds() + a->ckpt_every, 0};
    TrainControl ctl = {run_poll, &rc, save_checkpoint, &rc};
    st = trainer_run(&t, &sink->base, &ctl, end);
    test_flag_unstable(a, st, end);
    batch_flush(sink);
    char weights[ABL_PATH_MAX] = "";
    if (st == RUN_DONE && a->cfg.save_weights) {
        int e = run_weights_path(a->out_path, a->id, weights, sizeof weights) != 0
                    ? ENAMETOOLONG
                    : write_durably("weights", weights, write_weights, &t.gpt);
        if (e) {
            st = RUN_INTERRUPTED;
            end->status = RUN_INTERRUPTED;
            res->io_errno = e;
            snprintf(end->message, sizeof end->message, "could not write the weights to %s: %s",
                     weights, strerror(e));
        }
    }
    if (sink->failed && st != RUN_FAILED) {
        st = RUN_INTERRUPTED;
        end->status = RUN_INTERRUPTED;
        res->io_errno = res->io_errno ? res->io_errno : EIO;
        snprintf(end->message, sizeof end->message, "could not deliver the run's events");
    }
    goto done;
fail:
    /* nothing trained; what this process knows of the attempt (its memory, its SLURM job,
     * when) is filled in, the rest keeps its "unknown" sentinel */
    event_end_unknown(end, RUN_FAILED, err);
    provenance_fill_end(end, "");
done:
    end->tune_rung = a->rung1 - 1;
    if (have_trainer) trainer_free(&t);
    free(sink);
    return st;
}
