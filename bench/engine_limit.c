/* The engine against its shape limit: for each preset, a training step of ablate's
 * model against the time of the step's unfused matrix products run alone, with the same
 * OpenBLAS, core and thread count, in the same process.
 *
 *   bench/engine_limit.sh [options]        (builds this program, runs it; see docs/benchmarks.md)
 *   engine_limit --shapes-dir bench/shapes [--preset micro,book] [--threads 1,2]
 *                [--micro-steps S] [--book-steps S] [--warmup W] [--reps R] [--json]
 *
 * Per preset and thread count K it prints:
 *  - step: the median (and best) wall time of a training step (and its CPU time) as
 * src/worker/train.c's train_step runs it on a batch already in memory: zero the gradients, forward
 * with the loss, backward, gradient norm, adamw_step with the clip scale (the batch fetch is left
 * out);
 *  - the shape limit: the reference products of one step (bench/shapes/PRESET.txt: today's
 *    shapes and FLOP count, fixed even when the engine changes its own) timed alone through
 *    src/model/gemm.c with every product in OpenBLAS (with the same OpenBLAS and
 *    core). At the first K the two alternate in R rounds (S steps, then the list of
 *    products once), so that a load that comes and goes hits both alike, and both are the
 *    median over the rounds (the best of each beside it); the step's fraction of the limit
 *    (target >= 90%) and, beside it, the fraction of the square-sgemm rate (the reference
 *    FLOPs at the best square GFLOP/s);
 *  - beside the limit, the same list as plain OpenBLAS calls (each product one cblas_sgemm
 *    with its listed transposes: no pieces for the small-matrix kernels, no transposed weight
 *    copies; timed in the same rounds) and the step's fraction of it, no target: the limit is
 *    the model's products as it ran them when the issue was filed, through gemm.c, which on
 *    AVX-512 cores already cut them into pieces OpenBLAS's small-matrix kernels take;
 *  - the same products as the step runs them (small ones in ablate's own kernel,
 *    src/model/gemm_small.h), timed in the same rounds, and the step's fraction of that (no
 *    target: what the step spends outside its products);
 *  - a per-operation budget: each product line as the step runs it, and the step's operations
 *    timed alone at the step's sizes: the lm_head with the cross-entropy as the engine runs
 *    them (tiled, src/model/xent.h: its own products included, so beside the three
 *    reference lm_head lines it shows what the cross-entropy adds), AdamW, the gradient norm,
 *    zeroing the gradients, the norms, the MLP activation, attention; as ms and % of the
 *    step. "rest" is the step minus the per-layer products and all of those
 *    (embedding, residual adds, biases, transposed weight copies, and the difference between
 *    alone and in a step). The time outside GEMM allowed at the target is limit / 0.9 - limit;
 *    beside it, for scale, one memcpy of the activations a lean trainer keeps: the passes
 *    outside the products read and write those, which the limit's products (on buffers that
 *    stay in cache) never fetch;
 *  - with several K, the step's speed-up over the first K (K OpenBLAS threads and K threads
 *    for the model's own loops, src/model/par.h, as --blas-threads K sets them), and the
 *    budget again at each other K with each line's speed-up: "rest" there is what the step
 *    spends outside operations timed alone (the serial part, the joins, a slow phase);
 *  - at the first K: peak RSS (VmHWM) of the steps against the theoretical need (parameters,
 *    gradients, AdamW m and v, and the activations a lean trainer keeps per token) and
 *    against what gpt_alloc takes.
 * It picks the OpenBLAS core as ablate does (blas_ensure_env: never overriding an
 * OPENBLAS_CORETYPE the environment sets) and prints the core it ran on. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_timing.h"
#include "model/adamw.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/gpt.h"
#include "model/layers.h"
#include "model/par.h"
#include "model/xent.h"
#include "worker/blas_env.h"
#include "worker/provenance.h"

void openblas_set_num_threads(int);

#define MAX_K 8

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Zeroed and 64-byte aligned, as the model's buffers (attention's lanes need it). */
static void *xmalloc(size_t n) {
    n = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, n ? n : 64);
    if (p) memset(p, 0, n ? n : 64);
    if (!p) {
        fprintf(stderr, "engine_limit: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    GPT g;
    float *m, *v;
    int32_t *x, *y;
    int B, T;
    long t;
} Bench;

/* train.c's train_step on the batch in b->x, b->y (grad clip 1, the trainer's defaults) */
static void step(Bench *b) {
    GPT *g = &b->g;
    gpt_zero_grad(g);
    gpt_forward(g, b->x, b->y, b->B, b->T);
    gpt_backward(g);
    double norm = gpt_grad_norm(g);
    float scale = norm > 1.0 ? (float)(1.0 / norm) : 1.0f;
    AdamW opt = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    adamw_step(g, b->m, b->v, scale, &opt, ++b->t);
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double median_of(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Median and best wall time, and median CPU time of the process (all its threads), of
 * `steps` timed steps after `warmup`. On a loaded machine the CPU time of a one-thread step
 * is the steadier figure; the speed-up with threads needs the wall time. */
static void time_steps(Bench *b, int warmup, int steps, double *median, double *best, double *cpu) {
    double *dt = xmalloc((size_t)steps * sizeof(double));
    double *dc = xmalloc((size_t)steps * sizeof(double));
    for (int i = 0; i < warmup; i++)
        step(b);
    for (int i = 0; i < steps; i++) {
        double t0 = gemm_timing_now(), c0 = cpu_now();
        step(b);
        dt[i] = gemm_timing_now() - t0;
        dc[i] = cpu_now() - c0;
    }
    *median = median_of(dt, steps);
    *best = dt[0];
    *cpu = median_of(dc, steps);
    free(dt);
    free(dc);
}

/* Bytes a lean trainer needs (bench/bench_report.py's theoretical_memory, the same count):
 * parameters, gradients, m and v, and per token the activations it keeps, llm.c style. */
static double theoretical_bytes(const ModelConfig *c, int B, int T, double *state) {
    double V = c->vocab_size, C = c->d_model, L = c->n_layer, H = c->n_head;
    double KV = model_kv_heads(c), hd = model_head_dim(c), QKV = (H + 2 * KV) * hd;
    double FF = model_d_ff(c), UP = model_is_glu(c) ? 2 * FF : FF;
    double top = C + (c->input_norm ? C + 2 : 0) + (c->final_norm ? C + 2 : 0) + V;
    double layer = (C + 2) + QKV + H * T + C + C + C + (C + 2) + UP + FF + C + C;
    double bwd = C + C + UP + QKV;
    *state = 16.0 * (double)model_param_count(c);
    return *state + 4.0 * B * T * (top + L * layer + bwd);
}

/* The best time of one memcpy of `bytes` (every byte read and written once), for scale
 * beside what the step spends outside its products: those passes read and write the
 * activations, which the shape limit's products (timed on buffers that stay in cache) never
 * fetch. */
static double copy_seconds(double bytes, int reps) {
    size_t n = (size_t)bytes;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 1e30;
    for (int r = 0; r < 20 * reps; r++) {
        double t0 = gemm_timing_now();
        memcpy(b, a, n);
        double dt = gemm_timing_now() - t0;
        a[(size_t)r % n] = b[(size_t)(r * 7) % n]; /* the copies are not dead */
        best = dt < best ? dt : best;
    }
    free(a);
    free(b);
    return best;
}

/* ---------------------------------------------------------------- the budget */

typedef struct {
    const char *name;
    double seconds; /* per step */
} Op;

/* Best time of fn over reps calls (after one warm-up). */
#define TIME_BEST(reps, out, call)                                                                 \
    do {                                                                                           \
        double best_ = 1e30;                                                                       \
        for (int r_ = 0; r_ <= (reps); r_++) {                                                     \
            double t0_ = gemm_timing_now();                                                        \
            call;                                                                                  \
            double d_ = gemm_timing_now() - t0_;                                                   \
            if (r_ > 0 && d_ < best_) best_ = d_;                                                  \
        }                                                                                          \
        (out) = best_;                                                                             \
    } while (0)

static float *randoms(size_t n, uint64_t seed, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * ((float)(splitmix(&seed) >> 40) / 16777216.0f - 0.5f);
    return p;
}

/* The step's operations outside the matrix products, each alone at the step's sizes. */
static int non_gemm_ops(Bench *b, int reps, Op *ops) {
    const ModelConfig *c = &b->g.cfg;
    int N = b->B * b->T, C = c->d_model, V = c->vocab_size, L = c->n_layer, FF = model_d_ff(c);
    int UP = model_is_glu(c) ? 2 * FF : FF, H = c->n_head, hd = model_head_dim(c);
    int n = 0;
    double t;

    /* the lm_head with the loss, as the engine runs them (xent.h): its products and the
     * cross-entropy around them; beside the reference lm_head products, the difference is
     * what the cross-entropy costs */
    const ModelView *M = &b->g.view;
    float *logits = xmalloc((size_t)N * V * 4), *X = randoms((size_t)N * C, 1, 2.0f);
    float *mx = xmalloc((size_t)N * 4), *sm = xmalloc((size_t)N * 4);
    float *dX = xmalloc((size_t)N * C * 4), *scratch = xmalloc(xent_scratch_floats(N, C, V) * 4);
    long hits;
    TIME_BEST(reps, t, {
        xent_forward(logits, mx, sm, X, M->w.lm_head, M->wt.lm_head, N, C, V, b->y, &hits, scratch);
        xent_backward(dX, M->g.lm_head, logits, b->y, X, M->w.lm_head, N, C, V, 1.0f / N, scratch);
    });
    ops[n++] = (Op){"lm_head + cross-entropy, tiled (incl. its GEMMs)", t};
    free(logits);
    free(X);
    free(mx);
    free(sm);
    free(dX);
    free(scratch);

    AdamW opt = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    TIME_BEST(reps, t, adamw_step(&b->g, b->m, b->v, 0.999f, &opt, 1));
    ops[n++] = (Op){"AdamW with the clip scale (adamw_step)", t};
    volatile double sink;
    TIME_BEST(reps, t, sink = gpt_grad_norm(&b->g));
    (void)sink;
    ops[n++] = (Op){"gradient norm", t};
    TIME_BEST(reps, t, gpt_zero_grad(&b->g));
    ops[n++] = (Op){"zeroing the gradients", t};

    /* norms: two per layer (pre/post: two sites; peri: four) plus input and final */
    int sites = L * (c->norm == NORM_PERI   ? 4
                     : c->norm == NORM_NONE ? 0
                                            : 2) +
                c->input_norm + c->final_norm;
    float *x = randoms((size_t)N * UP, 2, 2.0f), *y = randoms((size_t)N * UP, 3, 2.0f);
    float *dx = xmalloc((size_t)N * UP * 4), *mean = xmalloc((size_t)N * 4),
          *rstd = xmalloc((size_t)N * 4);
    float *w = randoms((size_t)C, 4, 1.0f), *bb = randoms((size_t)C, 5, 1.0f);
    float *dw = xmalloc((size_t)C * 4), *db = xmalloc((size_t)C * 4);
    const float *aw = c->norm_affine ? w : NULL, *ab = c->norm_affine ? bb : NULL;
    TIME_BEST(reps, t, {
        norm_forward(c->norm_type, dx, mean, rstd, x, aw, ab, N, C, 1e-5f);
        norm_backward(c->norm_type, y, c->norm_affine ? dw : NULL, c->norm_affine ? db : NULL, dx,
                      x, mean, rstd, aw, N, C);
    });
    ops[n++] = (Op){"norms, forward and backward", t * sites};
    TIME_BEST(reps, t, {
        activation_forward(c->activation, y, x, N, FF);
        activation_backward(c->activation, dx, y, x, N, FF);
    });
    ops[n++] = (Op){"MLP activation, forward and backward", t * L};

    int pairs = b->B * H;
    size_t tile = attn_tile_floats(pairs, b->T, hd), att = attn_tile_floats(pairs, b->T, b->T);
    float *q = randoms(tile, 6, 1.0f), *k = randoms(tile, 7, 1.0f), *v = randoms(tile, 8, 1.0f);
    float *ay = xmalloc(tile * 4), *P = xmalloc(att * 4), *dq = xmalloc(tile * 4),
          *dk = xmalloc(tile * 4), *dv = xmalloc(tile * 4),
          *scr = xmalloc((size_t)PAR_MAX_THREADS * b->T * ATTN_LANES * 4); /* a piece's each */
    TIME_BEST(reps, t, {
        attention_forward(ay, P, q, k, v, pairs, b->T, hd);
        attention_backward(dq, dk, dv, ay, P, q, k, v, pairs, b->T, hd, scr);
    });
    ops[n++] = (Op){"attention (scores, softmax, values), fwd + bwd", t * L};
    void *bufs[] = {x, y, dx, mean, rstd, w, bb, dw, db, q, k, v, ay, P, dq, dk, dv, scr};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
    return n;
}

/* ---------------------------------------------------------------- one preset */

typedef struct {
    int steps, warmup, reps, nk, k[MAX_K], json;
    const char *shapes_dir;
} Options;

static int run_preset(const char *preset, int steps, const Options *o) {
    ModelConfig c;
    model_config_default(&c);
    if (model_config_preset(&c, preset) != 0) {
        fprintf(stderr, "engine_limit: unknown preset '%s' (micro, book)\n", preset);
        return 1;
    }
    int B = 8;
    if (!strcmp(preset, "micro")) { /* bench/specs/micro.yaml: Tiny Shakespeare, char */
        c.vocab_size = 65;
        B = 32;
    }
    int T = c.context, N = B * T;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.txt", o->shapes_dir, preset);
    GemmShape sh[GEMM_TIMING_MAX_SHAPES];
    int ns = gemm_timing_read_shapes(path, sh, GEMM_TIMING_MAX_SHAPES);
    if (ns <= 0) {
        fprintf(stderr, "engine_limit: %s: no reference shapes\n", path);
        return 1;
    }
    double flops = gemm_timing_flops(sh, ns);

    provenance_attempt_begin(path, sizeof path); /* resets VmHWM: the peak of this preset */
    long rss0 = provenance_peak_rss();
    Bench b = {.B = B, .T = T};
    char err[ABL_ERR_MAX];
    if (gpt_alloc(&b.g, &c, B, T, err) != 0) {
        fprintf(stderr, "engine_limit: %s\n", err);
        return 1;
    }
    gpt_init_weights(&b.g, 1);
    b.m = xmalloc(b.g.n_params * sizeof(float));
    b.v = xmalloc(b.g.n_params * sizeof(float));
    b.x = xmalloc((size_t)N * sizeof(int32_t));
    b.y = xmalloc((size_t)N * sizeof(int32_t));
    uint64_t s = 42;
    for (int i = 0; i < N; i++) {
        b.x[i] = (int32_t)(splitmix(&s) % (uint64_t)c.vocab_size);
        b.y[i] = (int32_t)(splitmix(&s) % (uint64_t)c.vocab_size);
    }

    /* R rounds, each: the step at the first K (`steps` steps), the reference products once,
     * the products as the step runs them, then the step at every other K. A load that comes
     * and goes on a shared machine hits the step, the limit and the other thread counts
     * alike, and all are compared by the same statistic, the median of the rounds (the best
     * of each is printed beside it). */
    double med[MAX_K], best[MAX_K], cpu[MAX_K], rss = 0;
    int rounds = o->reps;
    double *round_step = xmalloc((size_t)rounds * MAX_K * sizeof(double));
    double *round_cpu = xmalloc((size_t)rounds * MAX_K * sizeof(double));
    double *round_limit = xmalloc((size_t)rounds * sizeof(double));
    double *round_own = xmalloc((size_t)rounds * sizeof(double));
    double *round_plain = xmalloc((size_t)rounds * sizeof(double));
    double *per = xmalloc((size_t)ns * sizeof(double)),
           *per_round = xmalloc((size_t)ns * sizeof(double));
    for (int i = 0; i < ns; i++)
        per[i] = 1e30;
    for (int i = 0; i < o->nk; i++)
        best[i] = 1e30;
    double best_limit = 1e30, best_own = 1e30;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < o->nk; i++) {
            openblas_set_num_threads(o->k[i]); /* as blas_set_threads: both pools */
            par_set_threads(o->k[i]);
            double b_r;
            time_steps(&b, r == 0 ? o->warmup : 0, steps, &round_step[i * rounds + r], &b_r,
                       &round_cpu[i * rounds + r]);
            best[i] = fmin(best[i], b_r);
            if (i > 0) continue;
            if (r == 0) rss = (double)provenance_peak_rss(); /* before the products' buffers */
            round_limit[r] = gemm_timing_shapes(sh, ns, 1, 1, NULL);
            best_limit = fmin(best_limit, round_limit[r]);
            round_plain[r] = gemm_timing_shapes_plain(sh, ns, 1);
            round_own[r] = gemm_timing_shapes(sh, ns, 1, 0, per_round);
            best_own = fmin(best_own, round_own[r]);
            for (int k = 0; k < ns; k++)
                per[k] = fmin(per[k], per_round[k]);
        }
    }
    for (int i = 0; i < o->nk; i++) {
        med[i] = median_of(round_step + i * rounds, rounds);
        cpu[i] = median_of(round_cpu + i * rounds, rounds);
    }
    double limit = median_of(round_limit, rounds), own = median_of(round_own, rounds);
    double plain = median_of(round_plain, rounds);
    openblas_set_num_threads(o->k[0]);
    par_set_threads(o->k[0]);
    double state, need = theoretical_bytes(&c, B, T, &state);
    double alloc = gpt_alloc_bytes(&c, B, T) + 2.0 * sizeof(float) * (double)b.g.n_params;

    /* the square rate and the budget, at the first K */
    double square = 0;
    int sizes[] = {1024, 2048};
    for (int i = 0; i < 2; i++)
        square = fmax(square, gemm_timing_square(sizes[i], o->reps));
    Op ops[16];
    int nops = non_gemm_ops(&b, o->reps, ops);

    double st = med[0], non_gemm = 0;
    printf("== %s: batch %d x %d, %zu parameters, %.3f GFLOP of reference products a step\n",
           preset, B, T, b.g.n_params, flops / 1e9);
    printf("   OpenBLAS core %s, %d thread(s), OPENBLAS_THREAD_TIMEOUT=%s; %d timed steps after %d "
           "warm-up\n",
           blas_core(), o->k[0],
           getenv("OPENBLAS_THREAD_TIMEOUT") ? getenv("OPENBLAS_THREAD_TIMEOUT") : "(unset)", steps,
           o->warmup);
    printf("   step            %9.3f ms median of %d rounds (best %.3f ms; CPU %.3f ms), %.0f "
           "tokens/s\n",
           1e3 * st, rounds, 1e3 * best[0], 1e3 * cpu[0], N / st);
    printf("   shape limit     %9.3f ms median of the rounds (best %.3f ms; reference products "
           "alone, %.1f GFLOP/s)\n",
           1e3 * limit, 1e3 * best_limit, flops / limit / 1e9);
    printf("   step / limit    %9.1f %%   (target >= 90%%: %s); best / best %.1f %%\n",
           100 * limit / st, limit / st >= 0.9 ? "PASS" : "FAIL", 100 * best_limit / best[0]);
    printf("   plain OpenBLAS  %9.3f ms median (each listed product one cblas_sgemm as listed: no "
           "pieces, no transposed copies; %.1f GFLOP/s); the step at %.1f %% of it (no target)\n",
           1e3 * plain, flops / plain / 1e9, 100 * plain / st);
    printf("   own products    %9.3f ms median (best %.3f ms; the same products as the step runs "
           "them, %.1f GFLOP/s, %.2fx OpenBLAS)\n",
           1e3 * own, 1e3 * best_own, flops / own / 1e9, limit / own);
    printf("   step / own      %9.1f %%   (no target: the step's time in its own products)\n",
           100 * own / st);
    printf("   square sgemm    %9.1f GFLOP/s; the step at %.1f %% of it (%.1f GFLOP/s)\n", square,
           100 * flops / st / 1e9 / square, flops / st / 1e9);
    printf("   budget of the step (ms, %% of the step median):\n");
    for (int i = 0; i < ns; i++)
        printf("     gemm %c %c %6d %6d %6d x%d %9.3f  %5.1f %%\n", sh[i].ta ? 'T' : 'N',
               sh[i].tb ? 'T' : 'N', sh[i].M, sh[i].N, sh[i].K, sh[i].count, 1e3 * per[i],
               100 * per[i] / st);
    double layer_gemm = 0; /* the reference products but the lm_head's (the last three) */
    for (int i = 0; i + 3 < ns; i++)
        layer_gemm += per[i];
    for (int i = 0; i < nops; i++) {
        printf("     %-47s %9.3f  %5.1f %%\n", ops[i].name, 1e3 * ops[i].seconds,
               100 * ops[i].seconds / st);
        non_gemm += ops[i].seconds;
    }
    double rest_1 = st - layer_gemm - non_gemm;
    printf("     %-47s %9.3f  %5.1f %%\n", "rest (step - layer products - the above)", 1e3 * rest_1,
           100 * rest_1 / st);
    printf("     non-GEMM allowed at 90%% of the limit: %.3f ms; measured outside GEMM: %.3f ms\n",
           1e3 * (limit / 0.9 - limit), 1e3 * (st - own));
    printf("     for scale: one copy of the activations (memcpy of %.1f MiB, read and written "
           "once): %.3f ms\n",
           (need - state) / 1048576, 1e3 * copy_seconds(need - state, o->reps));
    for (int i = 1; i < o->nk; i++)
        printf("   threads %d       %9.3f ms median (CPU %.3f ms), x%.2f of %d thread(s)%s\n",
               o->k[i], 1e3 * med[i], 1e3 * cpu[i], med[0] / med[i], o->k[0],
               /* the x1.8 target is the book step's: micro's step (~1 ms, products of
                * 512 x 32 x 96) is below what a second thread can split */
               o->k[i] == 2 && o->k[0] == 1
                   ? (strcmp(preset, "book")   ? "  (no target: the x1.8 is book's)"
                      : med[0] / med[i] >= 1.8 ? "  (target x1.8: PASS)"
                                               : "  (target x1.8: FAIL)")
                   : "");
    /* the budget again at every other K, beside the first K's: which operations scale and
     * what the step spends outside them (the serial part and the joins) */
    for (int i = 1; i < o->nk; i++) {
        openblas_set_num_threads(o->k[i]);
        par_set_threads(o->k[i]);
        Op opk[16];
        int nk = non_gemm_ops(&b, o->reps, opk);
        double layer_k = 0, outside = 0;
        gemm_timing_shapes(sh, ns, o->reps, 0, per_round);
        for (int j = 0; j + 3 < ns; j++)
            layer_k += per_round[j];
        printf("   budget at %d threads (ms, and the speed-up over %d):\n", o->k[i], o->k[0]);
        printf("     %-47s %9.3f  x%.2f\n", "layer products, as the step runs them", 1e3 * layer_k,
               layer_gemm / layer_k);
        for (int j = 0; j < nk; j++) {
            printf("     %-47s %9.3f  x%.2f\n", opk[j].name, 1e3 * opk[j].seconds,
                   ops[j].seconds / opk[j].seconds);
            outside += opk[j].seconds;
        }
        double rest_k = med[i] - layer_k - outside;
        /* a speed-up only where both rests are more than noise (1% of the step) */
        if (rest_1 > 0.01 * st && rest_k > 0.01 * med[i])
            printf("     %-47s %9.3f  x%.2f\n", "rest (step median - the above)", 1e3 * rest_k,
                   rest_1 / rest_k);
        else
            printf("     %-47s %9.3f\n", "rest (step median - the above)", 1e3 * rest_k);
    }
    openblas_set_num_threads(o->k[0]);
    par_set_threads(o->k[0]);
    printf("   peak RSS        %9.1f MiB (process before the model %.1f MiB); theoretical need "
           "%.1f MiB (state %.1f + activations %.1f): x%.2f; gpt_alloc + AdamW %.1f MiB\n",
           rss / 1048576, rss0 / 1048576.0, need / 1048576, state / 1048576,
           (need - state) / 1048576, rss / need, alloc / 1048576);
    if (o->json) {
        printf("{\"preset\": \"%s\", \"core\": \"%s\", \"batch\": %d, \"context\": %d, "
               "\"ref_flops\": %.0f, \"step_s\": %.6f, \"limit_s\": %.6f, \"plain_s\": %.6f, "
               "\"own_s\": %.6f, "
               "\"fraction\": %.4f, "
               "\"square_gflops\": %.2f, \"square_fraction\": %.4f, \"peak_rss\": %.0f, "
               "\"theoretical_bytes\": %.0f, \"threads\": [",
               preset, blas_core(), B, T, flops, st, limit, plain, own, limit / st, square,
               flops / st / 1e9 / square, rss, need);
        for (int i = 0; i < o->nk; i++)
            printf("%s{\"k\": %d, \"step_s\": %.6f, \"cpu_s\": %.6f}", i ? ", " : "", o->k[i],
                   med[i], cpu[i]);
        printf("], \"ops\": {");
        for (int i = 0; i < nops; i++)
            printf("%s\"%s\": %.6f", i ? ", " : "", ops[i].name, ops[i].seconds);
        printf("}}\n");
    }
    free(per);
    free(per_round);
    free(round_step);
    free(round_cpu);
    free(round_limit);
    free(round_own);
    free(round_plain);
    free(b.m);
    free(b.v);
    free(b.x);
    free(b.y);
    gpt_free(&b.g);
    return 0;
}

int main(int argc, char **argv) {
    Options o = {.warmup = 2, .reps = 5, .nk = 1, .k = {1}, .shapes_dir = "bench/shapes"};
    const char *presets = "micro,book";
    int micro_steps = 200, book_steps = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            o.json = 1;
            continue;
        }
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "--preset"))
            presets = v;
        else if (!strcmp(a, "--shapes-dir"))
            o.shapes_dir = v;
        else if (!strcmp(a, "--micro-steps"))
            micro_steps = atoi(v);
        else if (!strcmp(a, "--book-steps"))
            book_steps = atoi(v);
        else if (!strcmp(a, "--warmup"))
            o.warmup = atoi(v);
        else if (!strcmp(a, "--reps"))
            o.reps = atoi(v);
        else if (!strcmp(a, "--threads")) {
            char *list = strdup(v);
            o.nk = 0;
            for (char *t = strtok(list, ","); t && o.nk < MAX_K; t = strtok(NULL, ","))
                o.k[o.nk++] = atoi(t);
            free(list);
        } else
            goto usage;
    }
    if (micro_steps < 1 || book_steps < 1 || o.warmup < 0 || o.reps < 1 || o.nk < 1) goto usage;
    int most = 1;
    for (int i = 0; i < o.nk; i++) {
        if (o.k[i] < 1 || o.k[i] > 1024) goto usage;
        most = o.k[i] > most ? o.k[i] : most;
    }
    /* as ablate with --blas-threads: may re-execute with the better core, and with
     * OpenBLAS's short spin when a K > 1 is timed (worker/blas_env.h) */
    blas_ensure_env(argv, most);
    char *list = strdup(presets);
    int rc = 0;
    for (char *p = strtok(list, ","); p && !rc; p = strtok(NULL, ","))
        rc = run_preset(p, strcmp(p, "micro") ? book_steps : micro_steps, &o);
    free(list);
    return rc;
usage:
    fprintf(stderr, "usage: engine_limit [--preset micro,book] [--shapes-dir DIR] [--threads 1,2]\n"
                    "                    [--micro-steps S] [--book-steps S] [--warmup W] [--reps "
                    "R] [--json]\n");
    return 2;
}
