/* The live view (h5view.h, "Live"): OUT.h5 kept current while a sweep runs at a cost that
 * follows what is new, not everything recorded so far.
 *
 * A full build (h5view.c) reads the whole journal and recompresses every row: on a 1 GB
 * journal that is minutes, for each update. Here the state of pass 1 is kept between
 * updates and the journal is read on from where the last update stopped; the rows that
 * arrived since are written once, compressed, into a new segment file OUT.h5.d/view/
 * seg-PID-K.h5 (the metric tables, those rows only); and OUT.h5 is rewritten small: the
 * root attributes and /runs as in a full build, and each metric table as an HDF5 virtual
 * dataset (VDS) concatenating the blocks of rows of every segment. A run whose attempt
 * changes (it continued from a checkpoint: the new attempt's records hold its whole
 * history) has its old blocks dropped and is written again. OUT.h5 is replaced by rename
 * as always, so readers open a complete file; segment paths are relative to OUT.h5's
 * directory, which HDF5 resolves wherever the reader runs.
 *
 * The cost of an update: the new journal bytes, the new rows, plus /runs (one row per
 * planned run) and one mapping per block. The sweep ends with a full build, which writes
 * the self-contained file and lets the segments go.
 *
 * Finished runs are packed (a mapping per finished run made a 10,000-run view
 * slow to write and to open): once PACK_MIN_RUNS runs have ended for good, they are
 * written, whole and in run order, into a packed segment, instead of into the update's
 * segment. Packed segments form a stack whose weights (EVENTS records)
 * at least halve from bottom to top: a new one first absorbs every packed segment above
 * it lighter than twice its weight, rewriting their runs (from the journal) with its own,
 * as a binary counter carries. A row is so rewritten O(log runs) times, and OUT.h5 maps
 * O(log runs) packed segments, one mapping each (consecutive blocks of one segment are one
 * mapping), then the blocks of the runs still in progress. Every run's rows are
 * contiguous: the packed runs first, segment by segment, then the others by run.
 *
 * /runs is paged (written whole, its 10^5 rows of text cost 3-5 s an update):
 * pages of H5LIVE_RUNS_PAGE runs whose rows have not changed since the last update (every
 * run kept by h5view_runs.c's row cache, with the same rows counts) are written once into
 * a segment's own "runs" dataset and mapped there; the pages that change (runs in flight)
 * are written into OUT.h5's /view_runs at every update; /runs is a virtual dataset over
 * both, in plan order. Pages written to segments merge as the packed runs do: a new range
 * absorbs the segment range just before it while that one holds fewer than twice its
 * rows, so a sweep run in plan order maps O(log pages) ranges, and an update writes the
 * pages of its runs in flight. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/clock.h"
#include "util/fsutil.h"
#include "util/grow.h"
#include "h5view_internal.h"
#include "h5user.h"
#include "orchestrator/plan/run_id.h"

typedef struct {
    uint32_t seg, run;
    hsize_t start, count;
} LiveBlock;

typedef struct {
    LiveBlock *b;
    int n;
    size_t cap;
} BlockList;

/* A page of /runs (see the top): runs [p * page_runs, (p + 1) * page_runs). */
typedef struct {
    uint32_t seg;   /* the segment whose "runs" holds its rows; NO_SEG: OUT.h5's /view_runs */
    uint32_t count; /* its rows: its planned runs */
    hsize_t start;  /* its first row there */
    uint64_t sig;   /* its rows as written (h5v_runs_rows_sig of each) */
} RunsPage;
#define NO_SEG UINT32_MAX
#define RUNS_T N_TABLES /* seg_rows[k][RUNS_T]: rows of segment k's "runs" */

typedef struct {
    uint32_t attempt, emitted; /* the attempt whose rows are in segments, and its records */
    uint32_t pseg;             /* packed: the packed segment holding all its rows */
    uint8_t packed;            /* ended for good, its rows whole in segment pseg */
} LiveRun;

/* A packed segment (see the top): its index and its runs' EVENTS records. */
typedef struct {
    uint32_t seg;
    double weight;
} Packed;

/* A segment as written: a later update finds it gone, truncated or replaced if these differ
 * (a reader of OUT.h5 would get fill rows for it, or another generation's rows). */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    uint8_t lost;    /* reported; its blocks were dropped and their runs written again */
    uint8_t removed; /* no OUT.h5 maps it any more, and it is gone (collect_segments) */
    long unmapped;   /* the update whose OUT.h5 first left it out (0: mapped) */
    double unmapped_at;
} SegId;

struct H5Live {
    View v;
    JournalReader *r;
    uint64_t next; /* journal offset where pass 1 goes on */
    char out[ABL_PATH_MAX], dir[ABL_PATH_MAX + 16], rel[ABL_PATH_MAX + 16];
    char **segs; /* file names in dir */
    hsize_t (*seg_rows)[N_TABLES + 1];
    SegId *seg_id;
    size_t cap_segs, cap_seg_rows, cap_seg_id; /* allocated entries (util/grow.h) */
    char gen[17]; /* this live view's generation: in OUT.h5 and in each of its segments */
    int nseg;
    LiveRun *lr;
    uint32_t nlr;
    size_t cap_lr;
    BlockList blocks[N_TABLES];
    Metric layout[N_METRICS];
    Packed *packed; /* the stack, bottom (heaviest) first */
    int npacked;
    size_t cap_packed;
    RunsPage *pages;
    uint32_t npages, page_runs;
    size_t cap_pages;
    TableBlock *runs_blocks;  /* /runs as the last OUT.h5 maps it (file names borrowed) */
    uint32_t *runs_block_run; /* the first run of each */
    int nruns_blocks;
    size_t cap_runs_blocks, cap_runs_block_run;
    long long mappings; /* of the last OUT.h5, all tables */
    long updates;       /* made (OUT.h5 written) */
    double grace;       /* seconds a segment is kept once no OUT.h5 maps it */
    int packing;        /* this update packs the finished runs (PACK_MIN_RUNS) */
};

static int segdir_of(const char *out, char *dir, size_t dn, char *rel, size_t rn) {
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    if (snprintf(dir, dn, "%s.d/view", out) >= (int)dn) return -1;
    return snprintf(rel, rn, "%s.d/view", base) >= (int)rn ? -1 : 0;
}

/* A generation id no other live view has (segment names may be reused: a later session of
 * the sweep can have the same PID), 16 hex digits. */
static void new_generation(char gen[17]) {
    uint64_t x = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&x, sizeof x, 1, f) != 1)
        x = (uint64_t)(clock_seconds() * 1e9) ^ ((uint64_t)getpid() << 40);
    if (f) fclose(f);
    snprintf(gen, 17, "%016llx", (unsigned long long)x);
}

H5Live *h5live_open(const char *journal_path, const char *out_path, char err[ABL_ERR_MAX]) {
    H5Live *lv = calloc(1, sizeof *lv);
    if (!lv) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    snprintf(lv->out, sizeof lv->out, "%s", out_path);
    if (segdir_of(out_path, lv->dir, sizeof lv->dir, lv->rel, sizeof lv->rel) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s: path too long", out_path);
        free(lv);
        return NULL;
    }
    if (!(lv->r = journal_reader_open(journal_path, err))) {
        free(lv);
        return NULL;
    }
    lv->v.rd = &lv->r;
    lv->v.nrd = 1;
    lv->v.header_into = &lv->v.header;
    if (h5v_runs_cache_enable(&lv->v) != 0) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        journal_reader_close(lv->r);
        free(lv);
        return NULL;
    }
    h5v_metrics_layout(lv->layout);
    new_generation(lv->gen);
    lv->page_runs = H5LIVE_RUNS_PAGE;
    lv->grace = H5LIVE_SEGMENT_GRACE;
    return lv;
}

void h5live_close(H5Live *lv) {
    if (!lv) return;
    journal_reader_close(lv->r);
    h5v_view_free(&lv->v);
    for (int k = 0; k < lv->nseg; k++)
        free(lv->segs[k]);
    free(lv->segs);
    free(lv->seg_rows);
    free(lv->seg_id);
    free(lv->lr);
    free(lv->packed);
    free(lv->pages);
    free(lv->runs_blocks);
    free(lv->runs_block_run);
    for (int t = 0; t < N_TABLES; t++)
        free(lv->blocks[t].b);
    free(lv);
}

void h5live_set_segment_grace(H5Live *lv, double seconds) {
    lv->grace = seconds;
}

void h5live_set_runs_page(H5Live *lv, uint32_t runs) {
    lv->page_runs = runs ? runs : H5LIVE_RUNS_PAGE;
    lv->npages = 0; /* laid out again by the next update */
}

int h5live_remove_segments(const char *out_path) {
    char dir[ABL_PATH_MAX + 16], rel[ABL_PATH_MAX + 16];
    if (segdir_of(out_path, dir, sizeof dir, rel, sizeof rel) != 0) return -1;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "seg-", 4)) {
            char f[ABL_PATH_MAX + 300];
            snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
            unlink(f);
        }
    closedir(d);
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

/* ---------------------------------------------------------------- bookkeeping */

static int add_block(BlockList *l, uint32_t seg, uint32_t run, hsize_t start, hsize_t count) {
    if (count == 0) return 0;
    if (GROW(l->b, l->cap, (size_t)l->n + 1) != 0) return -1;
    l->b[l->n++] = (LiveBlock){seg, run, start, count};
    return 0;
}

/* The runs marked in mask have their rows written again, whole, by the next segment (a new
 * attempt: the rows so far are the old one's; a segment lost; a packed segment absorbed):
 * their blocks go, in one pass over the block lists (a pass per run made an update at 10^5
 * runs quadratic in the runs ended). */
static void rewrite_runs(H5Live *lv, const uint8_t *mask) {
    for (int t = 0; t < N_TABLES; t++) {
        BlockList *l = &lv->blocks[t];
        int k = 0;
        for (int i = 0; i < l->n; i++)
            if (!mask[l->b[i].run]) l->b[k++] = l->b[i];
        l->n = k;
    }
    for (uint32_t run = 0; run < lv->v.nruns; run++) {
        if (!mask[run]) continue;
        RunState *rs = &lv->v.runs[run];
        lv->lr[run].emitted = 0;
        lv->lr[run].packed = 0;
        rs->has_start = rs->has_step = 0; /* pass-2 state, rebuilt from the first event */
        rs->last_step = rs->last_tokens = 0;
        rs->last_time = 0;
    }
}

/* The runs with a block in segment seg (NO_SEG: in any segment found lost) written again:
 * 0, or -1 (memory: nothing changed). */
static int rewrite_segment_runs(H5Live *lv, uint32_t seg) {
    uint8_t *mask = calloc((size_t)lv->v.nruns + 1, 1);
    if (!mask) return -1;
    int any = 0;
    for (int t = 0; t < N_TABLES; t++)
        for (int i = 0; i < lv->blocks[t].n; i++) {
            const LiveBlock *b = &lv->blocks[t].b[i];
            if (seg == NO_SEG ? lv->seg_id[b->seg].lost : b->seg == seg) any = mask[b->run] = 1;
        }
    if (any) rewrite_runs(lv, mask);
    free(mask);
    return 0;
}

static int grow_runs(H5Live *lv) {
    if (lv->v.nruns <= lv->nlr) return 0;
    if (GROW(lv->lr, lv->cap_lr, lv->v.nruns) != 0) return -1;
    memset(lv->lr + lv->nlr, 0, sizeof *lv->lr * (lv->v.nruns - lv->nlr));
    lv->nlr = lv->v.nruns;
    return 0;
}

static H5Table *metric_table(Metric *m, int t) {
    return t % 2 ? &m[t / 2].c : &m[t / 2].t;
}

/* Ended for good (done, diverged, failed): its rows will not change in this session. An
 * interrupted run may continue in a new attempt. */
static int finished(const H5Live *lv, uint32_t i) {
    const RunState *rs = &lv->v.runs[i];
    return rs->planned && rs->has_end && rs->end_status != RUN_INTERRUPTED &&
           rs->attempt == lv->lr[i].attempt;
}

/* Finished runs are packed once at least this many wait: packing a few gains nothing, and
 * a small sweep's view stays one segment per update. */
#define PACK_MIN_RUNS 16

static uint32_t unpacked_finished(const H5Live *lv) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < lv->v.nruns; i++)
        n += finished(lv, i) && !lv->lr[i].packed;
    return n;
}

/* Whether run i goes into the segment being written: only[i] when given, else every run
 * but, when this update packs, the finished ones not yet packed (the packed segment gets
 * them). */
static int selected(const H5Live *lv, const uint8_t *only, uint32_t i) {
    if (only) return only[i];
    return !(lv->packing && finished(lv, i) && !lv->lr[i].packed);
}

/* ---------------------------------------------------------------- one segment */

/* A new segment file, open in *f (its name is lv->segs[lv->nseg], not counted yet); 0, or
 * -1 with err. */
static int seg_open(H5Live *lv, hid_t *f, char *path, size_t pn, char *err) {
    char name[64];
    snprintf(name, sizeof name, "seg-%ld-%d.h5", (long)getpid(), lv->nseg);
    snprintf(path, pn, "%s/%s", lv->dir, name);
    char parent[ABL_PATH_MAX + 16];
    fs_dir_of(lv->dir, parent, sizeof parent); /* OUT.h5.d: a sweep has it; a bench may not */
    if ((mkdir(parent, 0777) != 0 && errno != EEXIST) ||
        (mkdir(lv->dir, 0777) != 0 && errno != EEXIST)) {
        snprintf(err, ABL_ERR_MAX, "cannot create %s: %s", lv->dir, strerror(errno));
        return -1;
    }
    size_t need = (size_t)lv->nseg + 1;
    if (GROW(lv->segs, lv->cap_segs, need) != 0 ||
        GROW(lv->seg_rows, lv->cap_seg_rows, need) != 0 ||
        GROW(lv->seg_id, lv->cap_seg_id, need) != 0 || !(lv->segs[lv->nseg] = strdup(name))) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    memset(lv->seg_rows[lv->nseg], 0, sizeof lv->seg_rows[lv->nseg]);
    if ((*f = h5_create_file(path)) < 0) {
        h5_err(err, "cannot create %s", path);
        free(lv->segs[lv->nseg]);
        return -1;
    }
    return 0;
}

/* Writes what a reader checks a segment against (the generation of the OUT.h5 that maps it,
 * and the rows /view_blocks says it has: lv->seg_rows[seg]), makes the file durable and
 * counts it. ok = 0: removes it. 0, or -1 (with err unless !ok). */
static int seg_close(H5Live *lv, hid_t f, const char *path, int ok, char *err) {
    int seg = lv->nseg;
    int bad = ok && h5_attr_str(f, "view_generation", lv->gen) != 0;
    for (int t = 0; t <= RUNS_T && ok && !bad; t++) {
        char an[64];
        const char *tn = t == RUNS_T ? "runs" : h5v_table_name(t);
        if (!tn || (t == RUNS_T && !lv->seg_rows[seg][t])) continue;
        snprintf(an, sizeof an, "rows_%s", tn);
        bad = h5_attr_i64(f, an, (long long)lv->seg_rows[seg][t]) != 0;
    }
    if (bad) {
        h5_err(err, "cannot write the attributes of %s", path);
        ok = 0;
    }
    if (h5_finish_file(f, path, NULL, ok, err) != 0 || !ok) {
        free(lv->segs[seg]);
        return -1;
    }
    struct stat st;
    SegId *id = &lv->seg_id[seg];
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) /* else the next update finds it changed and writes it again */
        *id = (SegId){.dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtime = st.st_mtim};
    lv->nseg++;
    return 0;
}

/* The rows of the selected runs (selected()) that are not in a segment yet, into a new
 * segment: 0 (nothing new is fine), -1 with err. */
static int write_segment(H5Live *lv, const uint8_t *only, char *err) {
    View *v = &lv->v;
    int any = 0;
    for (uint32_t i = 0; i < v->nruns && !any; i++)
        any = v->runs[i].planned && v->runs[i].n_ev > lv->lr[i].emitted && selected(lv, only, i);
    if (!any) return 0;
    char path[ABL_PATH_MAX + 96];
    hid_t f;
    Event *ev = malloc(sizeof *ev);
    if (!ev) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    if (seg_open(lv, &f, path, sizeof path, err) != 0) {
        free(ev);
        return -1;
    }
    uint32_t seg = (uint32_t)lv->nseg;
    Metric ms[N_METRICS];
    int rc = -1;
    if (h5v_metrics_create(ms, f, NULL, err) != 0) goto done;
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        LiveRun *l = &lv->lr[i];
        if (!rs->planned || rs->n_ev <= l->emitted || !selected(lv, only, i)) continue;
        hsize_t before[N_TABLES];
        for (int t = 0; t < N_TABLES; t++)
            before[t] = (hsize_t)h5t_rows(metric_table(ms, t));
        if (h5v_run_events(v, ms, i, l->emitted, ev, err) != 0) goto done;
        l->emitted = rs->n_ev;
        for (int t = 0; t < N_TABLES; t++)
            if (add_block(&lv->blocks[t], seg, i, before[t],
                          (hsize_t)h5t_rows(metric_table(ms, t)) - before[t]) != 0) {
                snprintf(err, ABL_ERR_MAX, "out of memory");
                goto done;
            }
    }
    rc = 0;
done:
    for (int t = 0; t < N_TABLES; t++) {
        H5Table *tb = metric_table(ms, t);
        lv->seg_rows[seg][t] = (hsize_t)h5t_rows(tb);
        char e2[ABL_ERR_MAX];
        if (h5t_close(tb, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    }
    free(ev);
    if (seg_close(lv, f, path, rc == 0, err) != 0) {
        /* its blocks are not referenced: a later update writes their runs again */
        if (rewrite_segment_runs(lv, seg) != 0) snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    return 0;
}

/* The segments the blocks and the pages of /runs map (1 each), or NULL (memory). */
static uint8_t *mapped_segments(const H5Live *lv) {
    uint8_t *mapped = calloc((size_t)lv->nseg + 1, 1);
    if (!mapped) return NULL;
    for (int t = 0; t < N_TABLES; t++)
        for (int i = 0; i < lv->blocks[t].n; i++)
            mapped[lv->blocks[t].b[i].seg] = 1;
    for (uint32_t p = 0; p < lv->npages; p++)
        if (lv->pages[p].seg != NO_SEG) mapped[lv->pages[p].seg] = 1;
    return mapped;
}

/* Segments that OUT.h5 maps but that are gone, truncated or replaced since they were
 * written (a cleanup, a full disk, a user): said once each on stderr, and the rows of every
 * run that had a block there are written again into the next segment, so the next OUT.h5
 * maps only what exists. The number found, or -1 (memory). */
static long check_segments(H5Live *lv) {
    uint8_t *mapped = mapped_segments(lv);
    if (!mapped) return -1;
    long lost = 0;
    for (int k = 0; k < lv->nseg; k++) {
        SegId *id = &lv->seg_id[k];
        if (!mapped[k] || id->lost || id->removed) continue;
        char path[ABL_PATH_MAX + 96];
        snprintf(path, sizeof path, "%s/%s", lv->dir, lv->segs[k]);
        struct stat st;
        const char *what = NULL;
        if (stat(path, &st) != 0)
            what = errno == ENOENT ? "is gone" : "cannot be read";
        else if (st.st_dev != id->dev || st.st_ino != id->ino)
            what = "was replaced";
        else if (st.st_size != id->size)
            what = st.st_size < id->size ? "was truncated" : "was changed";
        else if (st.st_mtim.tv_sec != id->mtime.tv_sec || st.st_mtim.tv_nsec != id->mtime.tv_nsec)
            what = "was changed";
        if (!what) continue;
        id->lost = 1;
        lost++;
        log_warn("live view: segment %s %s since it was written; the rows it "
                 "held are written again (readers of the previous %s get fill rows: run = -1, in "
                 "/runs index = -1)",
                 path, what, lv->out);
    }
    for (uint32_t p = 0; p < lv->npages && lost; p++) /* written again by write_runs */
        if (lv->pages[p].seg != NO_SEG && lv->seg_id[lv->pages[p].seg].lost)
            lv->pages[p].seg = NO_SEG;
    free(mapped);
    if (lost && rewrite_segment_runs(lv, NO_SEG) != 0) return -1;
    return lost;
}

/* The runs that ended for good since the last update, whole, into a new packed segment,
 * with the runs of the packed segments it absorbs (see the top). 0, or -1 with err (the
 * runs concerned are written again by a later update). */
static int pack_finished(H5Live *lv, char *err) {
    View *v = &lv->v;
    uint8_t *only = calloc((size_t)v->nruns + 1, 1);
    if (!only) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    double weight = 0;
    int any = 0;
    for (uint32_t i = 0; i < v->nruns; i++)
        if (finished(lv, i) && !lv->lr[i].packed) {
            only[i] = 1;
            weight += 1.0 + v->runs[i].n_ev;
            any = 1;
        }
    if (!any) {
        free(only);
        return 0;
    }
    while (lv->npacked > 0 && lv->packed[lv->npacked - 1].weight < 2 * weight) {
        const Packed *p = &lv->packed[--lv->npacked];
        weight += p->weight;
        for (uint32_t i = 0; i < v->nruns; i++)
            if (lv->lr[i].packed && lv->lr[i].pseg == p->seg) only[i] = 1;
    }
    rewrite_runs(lv, only);
    int seg = lv->nseg;
    if (GROW(lv->packed, lv->cap_packed, (size_t)lv->npacked + 1) != 0) {
        free(only);
        return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    }
    if (write_segment(lv, only, err) != 0) {
        free(only);
        return -1;
    }
    /* a run without rows (failed before its first event) is packed in no segment */
    uint32_t at = lv->nseg > seg ? (uint32_t)seg : UINT32_MAX;
    for (uint32_t i = 0; i < v->nruns; i++)
        if (only[i]) lv->lr[i] = (LiveRun){lv->lr[i].attempt, lv->lr[i].emitted, at, 1};
    if (lv->nseg > seg) lv->packed[lv->npacked++] = (Packed){(uint32_t)seg, weight};
    free(only);
    return 0;
}

/* Segments that neither the OUT.h5 just written nor the one before it maps, for at least
 * lv->grace seconds, are removed (a segment is never mapped again once left out): without
 * this a sweep kept every segment it ever wrote until its final view, two or three a
 * update, their rows rewritten O(log runs) times (before: 220 files and 41 MB at 20,000
 * runs against a 32 MB journal). A reader that opened an older OUT.h5 and reads it after
 * that gets fill rows, which it detects (docs/hdf5-schema.md); one that opens OUT.h5 again
 * reads whole. Only files that are still the ones written are removed. The segments kept. */
static long collect_segments(H5Live *lv) {
    uint8_t *mapped = mapped_segments(lv);
    double now = clock_seconds();
    long kept = 0;
    for (int k = 0; k < lv->nseg; k++) {
        SegId *id = &lv->seg_id[k];
        if (id->removed) continue;
        kept++;
        if (!mapped || mapped[k] || id->lost) continue;
        if (!id->unmapped) {
            id->unmapped = lv->updates;
            id->unmapped_at = now;
            continue;
        }
        if (lv->updates - id->unmapped < 1 || now - id->unmapped_at < lv->grace) continue;
        char path[ABL_PATH_MAX + 96];
        snprintf(path, sizeof path, "%s/%s", lv->dir, lv->segs[k]);
        struct stat st;
        if (stat(path, &st) == 0 && (st.st_dev != id->dev || st.st_ino != id->ino)) continue;
        if (unlink(path) == 0 || errno == ENOENT) {
            id->removed = 1;
            kept--;
        }
    }
    free(mapped);
    return kept;
}

/* ---------------------------------------------------------------- OUT.h5 */

/* The order of the rows in OUT.h5: the packed segments bottom to top, each in run order,
 * then the runs in progress by run, their blocks in the order they were written. */
typedef struct {
    uint64_t k[3];
    LiveBlock b;
} SortedBlock;

static int cmp_sorted(const void *pa, const void *pb) {
    const SortedBlock *a = pa, *b = pb;
    for (int i = 0; i < 3; i++)
        if (a->k[i] != b->k[i]) return a->k[i] < b->k[i] ? -1 : 1;
    return 0;
}

static int order_blocks(H5Live *lv, char *err) {
    int *pos = malloc(sizeof *pos * ((size_t)lv->nseg + 1));
    if (!pos) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (int k = 0; k < lv->nseg; k++)
        pos[k] = -1;
    for (int p = 0; p < lv->npacked; p++)
        pos[lv->packed[p].seg] = p;
    int rc = 0;
    for (int t = 0; t < N_TABLES && rc == 0; t++) {
        BlockList *l = &lv->blocks[t];
        SortedBlock *sb = malloc(sizeof *sb * ((size_t)l->n + 1));
        if (!sb) {
            rc = -1;
            snprintf(err, ABL_ERR_MAX, "out of memory");
            break;
        }
        for (int i = 0; i < l->n; i++) {
            const LiveBlock *b = &l->b[i];
            const LiveRun *r = &lv->lr[b->run];
            int packed = r->packed && r->pseg == b->seg && pos[b->seg] >= 0;
            sb[i].b = *b;
            sb[i].k[0] = packed ? (uint64_t)pos[b->seg] : (uint64_t)lv->npacked;
            sb[i].k[1] = b->run;
            sb[i].k[2] = packed ? b->start : ((uint64_t)b->seg << 40) | b->start;
        }
        qsort(sb, (size_t)l->n, sizeof *sb, cmp_sorted);
        for (int i = 0; i < l->n; i++)
            l->b[i] = sb[i].b;
        free(sb);
    }
    free(pos);
    return rc;
}

static int virtual_table(H5Live *lv, hid_t file, const Metric *m, int t, char *err) {
    const BlockList *l = &lv->blocks[t];
    const char *name = t % 2 ? m->child : m->name;
    const H5Col *cols = t % 2 ? m->ccols : m->cols;
    int ncol = t % 2 ? m->nccol : m->ncol;
    const char *desc = t % 2 ? m->child_desc : m->desc;
    H5Table tb;
    h5t_init(&tb);
    TableBlock *tbl = malloc(sizeof *tbl * (size_t)(l->n + 1));
    char(*paths)[ABL_PATH_MAX + 96] = malloc(sizeof *paths * (size_t)(lv->nseg + 1));
    int rc = -1;
    if (!tbl || !paths) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    for (int k = 0; k < lv->nseg; k++)
        snprintf(paths[k], sizeof paths[k], "%s/%s", lv->rel, lv->segs[k]);
    /* one mapping for consecutive rows of one segment (a packed segment's runs) */
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        const LiveBlock *b = &l->b[i];
        TableBlock *last = n ? &tbl[n - 1] : NULL;
        if (last && last->file == paths[b->seg] && last->start + last->count == b->start)
            last->count += b->count;
        else
            tbl[n++] =
                (TableBlock){paths[b->seg], b->start, b->count, lv->seg_rows[b->seg][t], NULL};
    }
    lv->mappings += n;
    rc = n ? h5t_create_virtual(&tb, file, name, cols, ncol, 1, desc, tbl, n, err)
           : h5t_create(&tb, file, name, cols, ncol, 1, desc, err);
    if (rc == 0) rc = h5t_schema_add(lv->v.schema, name, cols, ncol, err);
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&tb, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    free(tbl);
    free(paths);
    return rc;
}

/* ---------------------------------------------------------------- /runs */

/* One past the last run of page p. */
static uint32_t page_end(const H5Live *lv, uint32_t p) {
    uint32_t end = (p + 1) * lv->page_runs;
    return end < lv->v.nruns ? end : lv->v.nruns;
}

/* Page p's rows as they would be written now: 0 unless every one is kept
 * (h5v_runs_rows_sig); its planned runs in *cnt, and whether all of them are settled. */
static uint64_t page_sig(const H5Live *lv, RunsRows *w, uint32_t p, uint32_t *cnt,
                         uint8_t *settled) {
    const View *v = &lv->v;
    uint64_t h = 0xcbf29ce484222325ULL;
    uint32_t end = page_end(lv, p);
    int kept = 1;
    *cnt = 0;
    *settled = 1;
    for (uint32_t i = p * lv->page_runs; i < end; i++) {
        if (!v->runs[i].planned) continue;
        uint64_t s = h5v_runs_rows_sig(w, i);
        kept &= s != 0;
        *settled &= (uint8_t)h5v_runs_rows_settled(w, i);
        ++*cnt;
        h = fnv1a(fnv1a(h, (const char *)&i, sizeof i), (const char *)&s, sizeof s);
    }
    return kept ? h | 1 : 0;
}

/* The pages of /runs whose rows are kept unchanged, or settled (put will keep them), and
 * are in no segment go into a new segment, with the range of pages just before them (one segment's,
 * consecutive) while it holds fewer than twice their rows: marks them in move[]. */
static void choose_moves(const H5Live *lv, const uint64_t *sig, const uint8_t *settled,
                         const uint32_t *cnt, uint8_t *move) {
    const RunsPage *pg = lv->pages;
    uint32_t np = lv->npages;
    for (uint32_t p = 0; p < np; p++)
        move[p] = pg[p].seg == NO_SEG && (sig[p] || settled[p]) && cnt[p];
    for (uint32_t p = 0; p < np;) {
        if (!move[p]) {
            p++;
            continue;
        }
        uint32_t a = p, b = p;
        uint64_t rows = 0;
        while (b < np && move[b])
            rows += cnt[b++];
        while (a > 0 && pg[a - 1].seg != NO_SEG) {
            uint32_t c = a - 1;
            uint64_t left = pg[c].count;
            while (c > 0 && pg[c - 1].seg == pg[c].seg &&
                   pg[c - 1].start + pg[c - 1].count == pg[c].start)
                left += pg[--c].count;
            if (left >= 2 * rows) break;
            for (uint32_t q = c; q < a; q++)
                move[q] = 1;
            rows += left;
            a = c;
        }
        p = b;
    }
}

/* The rows of the pages marked in want into table t, in page order, each page's first row
 * in start[p], counted in the stats when count (h5v_runs_rows_put); 0 or -1 with err. */
static int put_pages(H5Live *lv, RunsRows *w, H5Table *t, const uint8_t *want, hsize_t *start,
                     int count, char *err) {
    for (uint32_t p = 0; p < lv->npages; p++) {
        if (!want[p]) continue;
        start[p] = (hsize_t)h5t_rows(t);
        for (uint32_t i = p * lv->page_runs; i < page_end(lv, p); i++)
            if (h5v_runs_rows_put(w, t, i, count, err) != 0) return -1;
    }
    return 0;
}

/* What one update found of each page of /runs (write_runs), passed from step to step. */
typedef struct {
    uint32_t np;      /* pages: the plan's runs, lv->page_runs a page */
    uint64_t *sig;    /* its rows as they would be written now (page_sig; 0: not all kept) */
    uint32_t *cnt;    /* its planned runs */
    uint8_t *settled; /* every one of them settled (page_sig) */
    uint8_t *move;    /* into the new segment (choose_moves; move_pages keeps those it mapped) */
    uint8_t *hot;     /* into OUT.h5's /view_runs (write_hot) */
    hsize_t *start;   /* its first row in the table it was put into by this update */
} PageScan;

static void scan_free(PageScan *s) {
    free(s->sig);
    free(s->cnt);
    free(s->settled);
    free(s->move);
    free(s->hot);
    free(s->start);
}

/* The arrays of s for np pages, and room in lv for as many pages and /runs ranges (a page
 * new since the last update is in no segment yet); 0, or -1 with err. */
static int scan_open(H5Live *lv, PageScan *s, uint32_t np, char *err) {
    size_t n = (size_t)np + 1;
    *s = (PageScan){.np = np,
                    .sig = calloc(n, sizeof *s->sig),
                    .cnt = calloc(n, sizeof *s->cnt),
                    .settled = calloc(n, 1),
                    .move = calloc(n, 1),
                    .hot = calloc(n, 1),
                    .start = calloc(n, sizeof *s->start)};
    if (!s->sig || !s->cnt || !s->settled || !s->move || !s->hot || !s->start ||
        GROW(lv->pages, lv->cap_pages, n) != 0 ||
        GROW(lv->runs_blocks, lv->cap_runs_blocks, n) != 0 ||
        GROW(lv->runs_block_run, lv->cap_runs_block_run, n) != 0)
        return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    for (uint32_t p = lv->npages; p < np; p++)
        lv->pages[p] = (RunsPage){NO_SEG, 0, 0, 0};
    lv->npages = np;
    return 0;
}

/* Step 1, the page diff: each page as it would be written now, against the rows its segment
 * holds; a page that changed leaves its segment (its rows are written again), and the pages
 * to move into a new segment are chosen (choose_moves). */
static void diff_pages(H5Live *lv, RunsRows *w, PageScan *s) {
    for (uint32_t p = 0; p < s->np; p++) {
        s->sig[p] = page_sig(lv, w, p, &s->cnt[p], &s->settled[p]);
        RunsPage *pg = &lv->pages[p];
        if (pg->seg != NO_SEG && (s->sig[p] != pg->sig || s->cnt[p] != pg->count)) pg->seg = NO_SEG;
    }
    choose_moves(lv, s->sig, s->settled, s->cnt, s->move);
}

/* Step 2, the segment: the pages chosen to move are written into a new segment's "runs"
 * (no /schema there), their rows not counted in the stats: write_hot counts each run once,
 * wherever its row ends up. A page settled but not kept before is kept now, as a rule, and
 * maps there; one that is not (its rows could change) keeps no segment and goes into
 * /view_runs too, its rows in the segment unused. 0 (nothing to move is fine), or -1 with
 * err. */
static int move_pages(H5Live *lv, RunsRows *w, PageScan *s, char *err) {
    int any = 0;
    for (uint32_t p = 0; p < s->np; p++)
        any |= s->move[p];
    if (!any) return 0;
    char path[ABL_PATH_MAX + 96], e2[ABL_ERR_MAX];
    hid_t sf;
    if (seg_open(lv, &sf, path, sizeof path, err) != 0) return -1;
    uint32_t seg = (uint32_t)lv->nseg;
    H5Table t;
    h5t_init(&t);
    int ok = h5v_runs_rows_table(w, sf, "runs", NULL, 0, NULL, &t, err) == 0 &&
             put_pages(lv, w, &t, s->move, s->start, 0, err) == 0;
    lv->seg_rows[seg][RUNS_T] = (hsize_t)h5t_rows(&t);
    lv->v.st.runs_rows += h5t_rows(&t);
    if (h5t_close(&t, !ok, ok ? err : e2) != 0) ok = 0;
    if (seg_close(lv, sf, path, ok, err) != 0) return -1;
    for (uint32_t p = 0; p < s->np; p++) {
        if (!s->move[p]) continue;
        uint8_t settled;
        uint32_t n;
        if (!(s->sig[p] = page_sig(lv, w, p, &n, &settled))) {
            s->move[p] = 0;
            lv->pages[p].seg = NO_SEG;
            continue;
        }
        lv->pages[p] = (RunsPage){seg, s->cnt[p], s->start[p], s->sig[p]};
    }
    return 0;
}

/* Step 3, the hot rows: the pages with planned runs that are in no segment go into f's
 * /view_runs, their runs counted in the stats as they are put; the runs of the pages in a
 * segment are counted from their kept rows (h5v_runs_rows_tally). The rows of /view_runs
 * in *rows; 0, or -1 with err. */
static int write_hot(H5Live *lv, RunsRows *w, hid_t f, PageScan *s, hsize_t *rows, char *err) {
    int any = 0;
    for (uint32_t p = 0; p < s->np; p++) {
        s->hot[p] = lv->pages[p].seg == NO_SEG && s->cnt[p];
        any |= s->hot[p];
        if (lv->pages[p].seg == NO_SEG) continue;
        for (uint32_t i = p * lv->page_runs; i < page_end(lv, p); i++)
            if (lv->v.runs[i].planned) h5v_runs_rows_tally(w, i);
    }
    *rows = 0;
    if (!any) return 0;
    H5Table t;
    h5t_init(&t);
    char e2[ABL_ERR_MAX];
    if (h5v_runs_rows_table(w, f, "view_runs", NULL, 0, lv->v.schema, &t, err) != 0 ||
        put_pages(lv, w, &t, s->hot, s->start, 1, err) != 0) {
        h5t_close(&t, 1, e2);
        return -1;
    }
    *rows = (hsize_t)h5t_rows(&t);
    lv->v.st.runs_rows += (long long)*rows;
    return h5t_close(&t, 0, err);
}

/* Step 4, the mapping: where /runs takes each page's rows from (its segment's "runs", or
 * /view_runs of hot_rows rows), in plan order, consecutive rows of one source one range,
 * into lv->runs_blocks (write_blocks lists them as well). */
static void map_pages(H5Live *lv, const PageScan *s, hsize_t hot_rows) {
    int n = 0;
    for (uint32_t p = 0; p < s->np; p++) {
        if (!s->cnt[p]) continue;
        const RunsPage *pg = &lv->pages[p];
        int in_seg = pg->seg != NO_SEG;
        TableBlock b = {in_seg ? lv->segs[pg->seg] : ".", in_seg ? pg->start : s->start[p],
                        s->cnt[p], in_seg ? lv->seg_rows[pg->seg][RUNS_T] : hot_rows,
                        in_seg ? NULL : "view_runs"};
        TableBlock *last = n ? &lv->runs_blocks[n - 1] : NULL;
        if (last && last->file == b.file && last->start + last->count == b.start)
            last->count += b.count;
        else {
            lv->runs_block_run[n] = p * lv->page_runs;
            lv->runs_blocks[n++] = b;
        }
    }
    lv->nruns_blocks = n;
}

/* /runs of f, virtual over lv->runs_blocks with the segment names made relative to OUT.h5's
 * directory (a reader resolves them wherever it runs); 0, or -1 with err. */
static int runs_table(H5Live *lv, RunsRows *w, hid_t f, char *err) {
    int n = lv->nruns_blocks;
    char(*rel)[ABL_PATH_MAX + 96] = malloc(sizeof *rel * ((size_t)n + 1));
    TableBlock *tb = malloc(sizeof *tb * ((size_t)n + 1));
    H5Table t;
    h5t_init(&t);
    int rc = -1;
    if (!rel || !tb) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    for (int k = 0; k < n; k++) {
        tb[k] = lv->runs_blocks[k];
        if (strcmp(tb[k].file, ".") != 0) {
            snprintf(rel[k], sizeof rel[k], "%s/%s", lv->rel, tb[k].file);
            tb[k].file = rel[k];
        }
    }
    lv->mappings += n;
    rc = h5v_runs_rows_table(w, f, "runs", n ? tb : NULL, n, lv->v.schema, &t, err);
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&t, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    free(rel);
    free(tb);
    return rc;
}

/* /runs of OUT.h5 (see the top), in the four steps above: the pages that stay as they were
 * mapped where they are, those kept but not in a segment (and the range they absorb)
 * written into a new one, the others into f's /view_runs; lv->runs_blocks says where each
 * range comes from. The steps pass what they found in a PageScan. */
static int write_runs(H5Live *lv, hid_t f, char *err) {
    uint32_t np = (lv->v.nruns + lv->page_runs - 1) / lv->page_runs;
    PageScan s = {0};
    hsize_t hot_rows;
    int rc = -1;
    RunsRows *w = h5v_runs_rows_open(&lv->v, err);
    if (w && scan_open(lv, &s, np, err) == 0) {
        lv->v.st.runs_rows = 0;
        diff_pages(lv, w, &s);
        if (move_pages(lv, w, &s, err) == 0 && write_hot(lv, w, f, &s, &hot_rows, err) == 0) {
            map_pages(lv, &s, hot_rows);
            rc = runs_table(lv, w, f, err);
        }
    }
    scan_free(&s);
    h5v_runs_rows_close(w);
    return rc;
}

/* /view_blocks: where each block of rows of the live view's tables comes from. */
static const H5Col block_cols[] = {
    {"table", H5C_STR, 8, NULL, "the table (steps, evals, acts, attn, samples or runs)"},
    {"run", H5C_I32, 0, NULL, "plan index of the first run whose rows the block holds"},
    {"row", H5C_I64, 0, NULL, "first row of the block in the table"},
    {"count", H5C_I64, 0, "rows", "rows in the block"},
    {"file", H5C_VSTR, 0, NULL,
     "the segment file, relative to the directory of OUT.h5 (\".\": OUT.h5 itself, its "
     "/view_runs)"},
    {"file_rows", H5C_I64, 0, "rows",
     "rows of the table in that file (its attribute rows_<table>); the file's attribute "
     "view_generation is the root attribute view_generation of this OUT.h5"},
    {"last_run", H5C_I32, 0, NULL,
     "plan index of the last run whose rows the block holds (rows of runs in between may be "
     "in other blocks)"},
};
#define N_BLOCK_COLS ((int)(sizeof block_cols / sizeof *block_cols))

void h5v_live_markdown(Buf *b, const char *head) {
    buf_printf(b,
               "#### `/view_blocks`\nIn a live view only: one row per block of rows of a "
               "metric table or of `/runs`, in table order.\n\n%s",
               head);
    h5v_md_rows(b, block_cols, N_BLOCK_COLS);
}

/* One row of /view_blocks; 0 or -1 with err. */
static int put_block(H5Table *tb, const char *table, uint32_t run, uint32_t last_run, long long at,
                     hsize_t count, const char *file, hsize_t file_rows, char *err) {
    uint8_t *row = h5t_row(tb, err);
    if (!row) return -1;
    if (h5t_set_vstr(tb, row, 4, file, strlen(file)) != 0)
        return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    h5t_set_str(tb, row, 0, table, 8);
    h5t_set_i32(tb, row, 1, (int32_t)run);
    h5t_set_i64(tb, row, 2, at);
    h5t_set_i64(tb, row, 3, (int64_t)count);
    h5t_set_i64(tb, row, 5, (int64_t)file_rows);
    h5t_set_i32(tb, row, 6, (int32_t)last_run);
    return 0;
}

/* A row per mapping (consecutive rows of one segment: a packed segment's runs, pages of
 * /runs), so that it grows as the mappings do, not with the runs. */
static int write_blocks(H5Live *lv, hid_t file, char *err) {
    H5Table tb;
    h5t_init(&tb);
    int rc = h5t_create(&tb, file, "view_blocks", block_cols, N_BLOCK_COLS, 1,
                        "Live view: where each block of rows of the metric tables and of /runs "
                        "comes from (docs/hdf5-schema.md, the live view).",
                        err);
    if (rc == 0) rc = h5t_schema_add(lv->v.schema, "view_blocks", block_cols, N_BLOCK_COLS, err);
    char f[ABL_PATH_MAX + 96];
    for (int t = 0; t < N_TABLES && rc == 0; t++) {
        if (!h5v_table_name(t)) continue;
        long long at = 0;
        const BlockList *l = &lv->blocks[t];
        for (int i = 0, j; i < l->n && rc == 0; i = j) {
            const LiveBlock *k = &l->b[i];
            hsize_t count = k->count;
            uint32_t first = k->run, last = k->run;
            for (j = i + 1; j < l->n && l->b[j].seg == k->seg && l->b[j].start == k->start + count;
                 j++) {
                count += l->b[j].count;
                first = l->b[j].run < first ? l->b[j].run : first;
                last = l->b[j].run > last ? l->b[j].run : last;
            }
            snprintf(f, sizeof f, "%s/%s", lv->rel, lv->segs[k->seg]);
            rc = put_block(&tb, h5v_table_name(t), first, last, at, count, f,
                           lv->seg_rows[k->seg][t], err);
            at += (long long)count;
        }
    }
    long long at = 0;
    for (int i = 0; i < lv->nruns_blocks && rc == 0; i++) {
        const TableBlock *k = &lv->runs_blocks[i];
        if (strcmp(k->file, ".") != 0)
            snprintf(f, sizeof f, "%s/%s", lv->rel, k->file);
        else
            snprintf(f, sizeof f, ".");
        uint32_t last = i + 1 < lv->nruns_blocks ? lv->runs_block_run[i + 1] - 1 : lv->v.nruns - 1;
        rc = put_block(&tb, "runs", lv->runs_block_run[i], last, at, k->count, f, k->rows, err);
        at += (long long)k->count;
    }
    char e2[ABL_ERR_MAX];
    if (h5t_close(&tb, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    return rc;
}

static int write_top(H5Live *lv, char *err) {
    char tmp[ABL_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", lv->out, (long)getpid());
    hid_t f = h5_create_file(tmp);
    if (f < 0) {
        h5_err(err, "cannot create %s", tmp);
        return -1;
    }
    int rc = -1;
    H5Table schema;
    h5t_init(&schema);
    if (h5t_schema_create(&schema, f, err) != 0) goto done;
    lv->v.schema = &schema;
    if (h5v_write_root(&lv->v, f, err) != 0) goto done;
    if (h5_attr_str(f, "view", "live") != 0 || h5_attr_str(f, "view_generation", lv->gen) != 0) {
        h5_err(err, "cannot write the root attributes");
        goto done;
    }
    lv->mappings = 0;
    if (order_blocks(lv, err) != 0) goto done;
    for (int t = 0; t < N_TABLES; t++)
        if ((t % 2 == 0 || lv->layout[t / 2].heads >= 0) &&
            virtual_table(lv, f, &lv->layout[t / 2], t, err) != 0)
            goto done;
    /* /runs says how many rows of each table the view holds for each run */
    for (uint32_t i = 0; i < lv->v.nruns; i++)
        memset(lv->v.runs[i].rows, 0, sizeof lv->v.runs[i].rows);
    for (int t = 0; t < N_TABLES; t++)
        for (int i = 0; i < lv->blocks[t].n; i++)
            lv->v.runs[lv->blocks[t].b[i].run].rows[t] += (int64_t)lv->blocks[t].b[i].count;
    if (write_runs(lv, f, err) != 0 || write_blocks(lv, f, err) != 0 ||
        h5v_write_replicate(&lv->v, f, err) != 0 || h5v_write_calibration(&lv->v, f, err) != 0)
        goto done;
    if (h5user_carry(lv->out, f, err) != 0) goto done;
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&schema, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    lv->v.schema = NULL;
    return h5_finish_file(f, tmp, lv->out, rc == 0, err);
}

int h5live_update(H5Live *lv, uint64_t limit, H5ViewStats *stats, char err[ABL_ERR_MAX]) {
    double t0 = clock_seconds();
    View *v = &lv->v;
    H5E_auto2_t old_func;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = -1;
    if (journal_reader_seek(lv->r, lv->next) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s", journal_reader_error(lv->r));
        goto done;
    }
    if (h5v_pass1(v, lv->r, limit, err) != 0) goto done;
    lv->next = v->st.journal_bytes;
    v->writer_gone = 0; /* the sweep building it is alive */
    h5v_mark_stale(v);
    if (grow_runs(lv) != 0) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    uint8_t *renewed = calloc((size_t)v->nruns + 1, 1);
    if (!renewed) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < v->nruns; i++) {
        RunState *rs = &v->runs[i];
        LiveRun *l = &lv->lr[i];
        if (!rs->planned || rs->attempt == l->attempt) continue;
        renewed[i] = 1; /* the rows so far are the old attempt's */
        l->attempt = rs->attempt;
    }
    rewrite_runs(lv, renewed);
    free(renewed);
    long lost = check_segments(lv);
    if (lost < 0) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        goto done;
    }
    v->st.lost_segments = lost;
    v->st.mappings = -1;
    v->st.runs = v->st.runs_done = v->st.plan_reads = 0; /* counted again by /runs */
    lv->packing = unpacked_finished(lv) >= PACK_MIN_RUNS;
    if (write_segment(lv, NULL, err) != 0 || (lv->packing && pack_finished(lv, err) != 0) ||
        write_top(lv, err) != 0)
        goto done;
    long long *rows[N_TABLES] = {&v->st.steps, NULL,        &v->st.evals,   NULL,
                                 &v->st.acts,  &v->st.attn, &v->st.samples, NULL};
    for (int t = 0; t < N_TABLES; t++) {
        long long n = 0;
        for (int k = 0; k < lv->blocks[t].n; k++)
            n += (long long)lv->blocks[t].b[k].count;
        if (rows[t]) *rows[t] = n;
    }
    v->st.mappings = lv->mappings;
    lv->updates++;
    v->st.segments = collect_segments(lv);
    rc = 0;
done:
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    v->st.seconds = clock_seconds() - t0;
    if (stats) *stats = v->st;
    return rc;
}
