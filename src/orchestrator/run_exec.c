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

#include "../worker/clock.h"
#include "event_codec.h"
#include "fsutil.h"
#include "journal.h"

#define BATCH_BYTES   (64u << 10)
#define BATCH_SECONDS 1.0

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Bytes;

static int bytes_add(Bytes *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

/* The sink of a run on a worker: packs events into a batch sent when it fills, at every
 * evaluation and sample, at least every BATCH_SECONDS (so the live view sees a run's
 * progress) and at the end; keeps the history for checkpoints. */
typedef struct {
    EventSink base;
    const RunAssignment *a;
    const RunOutput *out;
    Bytes batch, history;
    double sent_at; /* clock_seconds() of the last send */
    int failed;
} BatchSink;

static void batch_flush(BatchSink *s) {
    if (s->batch.len == 0) return;
    if (s->out->send_events(s->out->ctx, s->a, s->batch.p, s->batch.len) != 0) s->failed = 1;
    s->batch.len = 0;
    s->sent_at = clock_seconds();
}

static void batch_emit(EventSink *self, const Event *ev) {
    BatchSink *s = (BatchSink *)self;
    if (ev->kind == EV_END) return; /* travels in the run's end message */
    uint8_t buf[EVENT_PACK_MAX];
    size_t n = event_pack(ev, buf, sizeof buf);
    if (n == 0 || bytes_add(&s->batch, buf, n) != 0 || bytes_add(&s->history, buf, n) != 0) {
        s->failed = 1;
        return;
    }
    if (s->batch.len >= BATCH_BYTES || ev->kind == EV_EVAL || ev->kind == EV_SAMPLE ||
        clock_seconds() - s->sent_at >= BATCH_SECONDS)
        batch_flush(s);
}

int run_ckpt_path(const char *out_path, const char *id, char *buf, size_t n) {
    char dir[ABL_PATH_MAX];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) return -1;
    return snprintf(buf, n, "%s/ckpt/%s.ckpt", dir, id) < (int)n ? 0 : -1;
}

int run_weights_path(const char *out_path, const char *id, char *buf, size_t n) {
    char dir[ABL_PATH_MAX];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) return -1;
    return snprintf(buf, n, "%s/weights/%s.f32", dir, id) < (int)n ? 0 : -1;
}

typedef struct {
    BatchSink *sink;
    const RunAssignment *a;
    int64_t *ckpt_step;
    const Trainer *t;
} SaveCtx;

/* Writes a file durably: write(ctx) into path.tmp, fsync, rename, fsync the directory. */
static int write_durably(const char *path, int (*write)(FILE *f, const void *ctx),
                         const void *ctx) {
    char tmp[ABL_PATH_MAX + 8], dir[ABL_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    mkdir(dirname(dir), 0777);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    int bad = write(f, ctx) != 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0 || fs_fsync_dir_of(path) != 0) return -1;
    return 0;
}

static int write_checkpoint(FILE *f, const void *ctx) {
    const SaveCtx *sc = ctx;
    uint64_t n = sc->sink->history.len;
    if (trainer_save(sc->t, f) != 0 || fwrite(&n, sizeof n, 1, f) != 1) return -1;
    return n && fwrite(sc->sink->history.p, 1, n, f) != n ? -1 : 0;
}

static int save_checkpoint(void *ctx, const Trainer *t) {
    SaveCtx *sc = ctx;
    batch_flush(sc->sink);
    sc->t = t;
    if (write_durably(sc->a->ckpt_path, write_checkpoint, sc) != 0) return -1;
    *sc->ckpt_step = t->step;
    return 0;
}

static int write_weights(FILE *f, const void *ctx) {
    const GPT *g = ctx;
    WeightsHeader h = {RUN_WEIGHTS_MAGIC, g->cfg.vocab_size, 0, g->n_params};
    if (fwrite(&h, sizeof h, 1, f) != 1) return -1;
    return fwrite(g->params, sizeof(float), g->n_params, f) == g->n_params ? 0 : -1;
}

static int load_checkpoint(Trainer *t, BatchSink *s, const char *path, char err[ABL_ERR_MAX]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, ABL_ERR_MAX, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    uint64_t n = 0;
    int rc = trainer_load(t, f, err);
    if (rc == 0 && fread(&n, sizeof n, 1, f) != 1) rc = -1;
    if (rc == 0 && n > 0) {
        uint8_t *p = malloc(n);
        if (!p || fread(p, 1, n, f) != n || bytes_add(&s->history, p, n) != 0) rc = -1;
        free(p);
    }
    fclose(f);
    if (rc != 0 && !err[0]) snprintf(err, ABL_ERR_MAX, "checkpoint %s is truncated", path);
    return rc;
}

RunStatus run_execute(const RunAssignment *a, VocabCache *vc, const RunOutput *out, EndEvent *end,
                      int64_t *ckpt_step) {
    char err[ABL_ERR_MAX] = "";
    memset(end, 0, sizeof *end);
    *ckpt_step = 0;
    BatchSink sink = {.base = {batch_emit}, .a = a, .out = out, .sent_at = clock_seconds()};
    Trainer t;
    int have_trainer = 0;
    RunStatus st = RUN_FAILED;
    const Dataset *d = vocab_dataset(vc, &a->cfg, err);
    if (!d || trainer_init(&t, &a->cfg, a->seed, d, err) != 0) goto fail;
    have_trainer = 1;
    if (a->resume_step > 0) {
        if (load_checkpoint(&t, &sink, a->ckpt_path, err) != 0) goto fail;
        /* replay what the run reported before its checkpoint into this attempt */
        if (sink.history.len && out->send_events(out->ctx, a, sink.history.p, sink.history.len))
            sink.failed = 1;
    }
    SaveCtx sc = {&sink, a, ckpt_step, NULL};
    TrainControl ctl = {out->poll, out->ctx, save_checkpoint, &sc};
    st = trainer_run(&t, &sink.base, &ctl, end);
    batch_flush(&sink);
    if (st == RUN_DONE && a->cfg.save_weights && a->weights_path[0] &&
        write_durably(a->weights_path, write_weights, &t.gpt) != 0) {
        st = RUN_FAILED;
        end->status = RUN_FAILED;
        snprintf(end->message, sizeof end->message, "could not write the weights to %s: %s",
                 a->weights_path, strerror(errno));
    }
    if (sink.failed && st == RUN_DONE) {
        st = RUN_FAILED;
        end->status = RUN_FAILED;
        snprintf(end->message, sizeof end->message, "could not deliver the run's events");
    }
    goto done;
fail:
    end->status = RUN_FAILED;
    end->final_val_loss = end->final_val_acc = NAN;
    snprintf(end->message, sizeof end->message, "%s", err);
done:
    if (have_trainer) trainer_free(&t);
    free(sink.batch.p);
    free(sink.history.p);
    return st;
}
