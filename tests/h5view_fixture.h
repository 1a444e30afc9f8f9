/* The fixture of the HDF5 view tests: a journal of a few fake runs (two attempts of one run,
 * an unfinished run, a pending run, a failed run) written from deterministic values, its
 * view (make_fixture) or live view (make_live_fixture), a long synthetic sweep
 * (long_sweep), and small readers of the result. */
#ifndef ABLATE_TESTS_H5VIEW_FIXTURE_H
#define ABLATE_TESTS_H5VIEW_FIXTURE_H

#include <hdf5.h>
#include <stdint.h>

#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/h5view.h"
#include "orchestrator/record/journal.h"

/* ---------------- deterministic values (mirrored in test_h5view.py) ---------------- */

static inline double f_loss(int run, long step, int attempt) {
    return 5.0 - step / 1000.0 + run / 8.0 + (attempt - 1) * 100.0;
}
static inline double f_lr(long step) {
    return 0.001 * step / (step + 10.0);
}
static inline double f_grad(int run, long step) {
    return 1.0 + run + 0.5 / step;
}
static inline double f_time(long step) {
    return step * 0.25;
}
static inline double f_entropy(int layer, int head, long step) {
    return layer + head / 4.0 + step / 1000.0;
}

#define N_RUNS     5
#define FULL_STEPS 50
extern const char *const run_names[N_RUNS];
#define FIXTURE_SPEC_TEXT "sweep:\n  name: fixture\nbase:\n  model.n_head: 4\n"

/* A run's event stream for one attempt, batched into EVENTS records of `batch` events. */
typedef struct {
    Journal *j;
    uint32_t run, attempt;
    uint8_t buf[64 * EVENT_PACK_MAX];
    size_t len;
    int n, batch;
} Stream;

/* The rows of the view read back. */
typedef struct {
    int32_t run;
    int64_t step, tokens;
    double loss, lr, grad_norm, time;
} StepRow;

typedef struct {
    int32_t index;
    char id[17];
    char *name; /* schema 2: text columns are variable-length UTF-8 */
    uint64_t seed;
    char status[12];
    int32_t n_head;
    char activation[16];
    int8_t qk_norm;
    double lr;
    int64_t params;
    int64_t steps;
    double final_val_loss;
    int32_t rank;
    char *host;
    int32_t attempts;
    int64_t resumed_from_step, last_checkpoint_step;
    char *message;
    char *blas_core;
} RunRow;

/* Appends the stream's batch as one EVENTS record (stream_emit does when it is full). */
void stream_flush(Stream *s);
void stream_emit(Stream *s, const Event *ev);
/* A run's START event. */
void emit_start(Stream *s, int run);
/* The events of one step of the fake training loop. */
void emit_step(Stream *s, int run, long step, int attempt, int with_acts);
/* A run's generated samples. */
void emit_samples(Stream *s, int run);
/* A RUN_END's event with the deterministic values. */
EndEvent make_end(int run, RunStatus status, long steps, int attempt);
/* The journal's session header (format version, spec text). */
void write_header(Journal *j);
/* The fixture journal. complete: 1 with SWEEP_END; 2 with SWEEP_END status "stopped" (a
 * session that ended with runs unfinished). */
int write_fixture(const char *journal_path, int complete);
/* ---------------- reading back ---------------- */

/* A fixed-size string type; a bool (enum) type as h5view writes it. */
hid_t strt(size_t n);
hid_t bool_type(void);
/* The rows of dataset name; a string attribute into out. */
long long dset_rows(hid_t file, const char *name);
void str_attr(hid_t loc, const char *name, char *out, size_t n);
/* ---------------- files ---------------- */

/* 1 if the two files hold the same bytes. */
int same_file(const char *a, const char *b);
/* make_fixture of an unfinished sweep holds its journal's lock as a live rank 0 does,
 * until this lets it go. */
void release_writer_lock(void);
/* DIR/out.h5 built from the fixture journal (DIR/out.h5.d/...; complete as write_fixture):
 * 0, or -1 with a message. */
int make_fixture(const char *dir, int complete, char *journal, char *out, size_t n);
/* The process's peak resident set size. */
long max_rss_kb(void);
/* RUNS runs of STEPS steps, 4 running at a time (events interleaved in 64-event batches),
 * evals every 100 steps, acts (4 layers x 4 heads) every 500; fdatasync after each RUN_END; built
 * into DIR/long.h5 with the build's figures in *st. verbose: prints the rates; noisy: pseudo-random
 * low bits in the metrics (--bench), so compression is realistic. */
int long_sweep(const char *dir, int runs, long steps, H5ViewStats *st, int verbose, int noisy);
/* The fixture as a live view built in n updates (each over a larger prefix of the
 * journal): OUT.h5 maps up to n segment files. */
int make_live_fixture(const char *dir, int n, H5ViewStats *last);
/* The mappings of the virtual datasets of a view file (0 for a full build), or -1. */
long long vds_mappings(const char *path);
/* Runs per page of /runs in the live views of make_live_fixture and live_many_runs (0: the
 * default). */
extern int live_runs_page;
/* The seconds live_many_runs's view keeps a segment no OUT.h5 maps (negative: the default). */
extern double live_segment_grace;
/* A live view (DIR/many.h5) of `runs` tiny runs (a START, two steps, samples), of which
 * `per_update` end between two updates while the next `in_flight` are begun and part-way;
 * fn (NULL: none) is called after each update with the runs ended, its stats, its time
 * and the path of OUT.h5 (the last update has nothing new). 0, or -1 with a message on
 * stderr. */
typedef void (*LiveProgress)(void *ctx, long ended, const H5ViewStats *st, double seconds,
                             const char *out);
int live_many_runs(const char *dir, int runs, int per_update, int in_flight, LiveProgress fn,
                   void *ctx);

#endif
