/* The cost of a mixture-of-experts step against the dense step: the book preset
 * (batch 8 x context 128, vocab 50257, random tokens), dense and with the MoE MLP in every
 * block at E experts of the dense width, top-k. Per configuration: the median time of a
 * forward + backward, and of a whole step (zero_grad, forward, backward, AdamW over every
 * tensor as the trainer does), over REPS timed steps after 2 untimed ones. The MoE's
 * forward + backward minus the dense one is the router, the gather/scatter and the smaller
 * per-expert products; the step adds AdamW over the E-times larger MLP parameters. Also the
 * median thread CPU time of the whole step (wall time is only meaningful on a quiet machine).
 *
 * The micro preset (batch 32 x context 16, vocab 65) is there too: its MLP is a larger share
 * of the step, so the routing overhead weighs more.
 *
 *   moe_step [book|micro] [REPS] [E K ...]      default: book, 10 steps, E=8 K=1 and E=8 K=2 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/adamw.h"
#include "model/config.h"
#include "model/gpt.h"
#include "util/clock.h"
#include "worker/blas_env.h"

/* CPU seconds of this thread: on a loaded machine closer to the work than wall time (it still
 * counts cache and memory contention). */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of a forward + backward (fb) and of a whole step (step). */
static int measure(const ModelConfig *c, int B, int reps, double *fb, double *step, double *cpu,
                   size_t *params) {
    int T = c->context;
    char err[ABL_ERR_MAX];
    GPT m;
    if (gpt_alloc(&m, c, B, T, err) != 0) {
        fprintf(stderr, "moe_step: %s\n", err);
        return -1;
    }
    gpt_init_weights(&m, 1);
    *params = m.n_params;
    size_t n = (size_t)B * T;
    int32_t *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    float *am = calloc(m.n_params, sizeof(float)), *av = calloc(m.n_params, sizeof(float));
    double *tf = malloc((size_t)reps * sizeof *tf), *ts = malloc((size_t)reps * sizeof *ts);
    double *tc = malloc((size_t)reps * sizeof *tc);
    uint64_t s = 12345;
    AdamW opt = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    for (int r = -2; r < reps; r++) {
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = (int32_t)((s >> 33) % (uint64_t)c->vocab_size);
            y[i] = (int32_t)((s >> 13) % (uint64_t)c->vocab_size);
        }
        double t0 = clock_seconds(), c0 = cpu_seconds();
        gpt_zero_grad(&m);
        gpt_forward(&m, x, y, B, T);
        gpt_backward(&m);
        double t1 = clock_seconds();
        for (int i = 0; i < T_COUNT; i++) {
            const TensorInfo *t = &m.tensors[i];
            if (t->size)
                adamw_update(m.params + t->offset, m.grads + t->offset, am + t->offset,
                             av + t->offset, t->size, t->decay, &opt, r + 3);
        }
        double t2 = clock_seconds(), c2 = cpu_seconds();
        if (r >= 0) {
            tf[r] = t1 - t0;
            ts[r] = t2 - t0;
            tc[r] = c2 - c0;
        }
    }
    qsort(tf, (size_t)reps, sizeof *tf, cmp);
    qsort(ts, (size_t)reps, sizeof *ts, cmp);
    qsort(tc, (size_t)reps, sizeof *tc, cmp);
    *fb = tf[reps / 2];
    *step = ts[reps / 2];
    *cpu = tc[reps / 2];
    free(x), free(y), free(am), free(av), free(tf), free(ts), free(tc);
    gpt_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    const char *preset = "book";
    if (argc > 1 && (strcmp(argv[1], "book") == 0 || strcmp(argv[1], "micro") == 0)) {
        preset = argv[1];
        argc--, argv++;
    }
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    if (reps < 1) reps = 1;
    int pairs[16][2] = {{8, 1}, {8, 2}}, np = 2;
    if (argc > 3) {
        np = 0;
        for (int i = 2; i + 1 < argc && np < 16; i += 2, np++) {
            pairs[np][0] = atoi(argv[i]);
            pairs[np][1] = atoi(argv[i + 1]);
        }
    }
    blas_set_threads();
    ModelConfig c;
    model_config_default(&c);
    model_config_preset(&c, preset);
    int B = 8;
    if (strcmp(preset, "micro") == 0) c.vocab_size = 65, B = 32;
    double fb0, st0, cpu0;
    size_t p0;
    if (measure(&c, B, reps, &fb0, &st0, &cpu0, &p0) != 0) return 1;
    printf("moe_step: %s preset, batch %d x %d, %d timed steps, BLAS core %s, %d thread(s)\n",
           preset, B, c.context, reps, blas_core(), blas_threads());
    printf("%-14s %10s %10s %12s %8s %10s %8s %10s %8s\n", "config", "params", "active",
           "fwd+bwd ms", "x dense", "step ms", "x dense", "CPU ms", "x dense");
    printf("%-14s %10zu %10zu %12.1f %8.2f %10.1f %8.2f %10.1f %8.2f\n", "dense", p0,
           model_active_param_count(&c), 1e3 * fb0, 1.0, 1e3 * st0, 1.0, 1e3 * cpu0, 1.0);
    for (int i = 0; i < np; i++) {
        ModelConfig mc = c;
        mc.moe_experts = pairs[i][0];
        mc.moe_top_k = pairs[i][1];
        double fb, st, cpu;
        size_t p;
        if (measure(&mc, B, reps, &fb, &st, &cpu, &p) != 0) return 1;
        char name[32];
        snprintf(name, sizeof name, "E=%d k=%d", mc.moe_experts, mc.moe_top_k);
        printf("%-14s %10zu %10zu %12.1f %8.2f %10.1f %8.2f %10.1f %8.2f%s\n", name, p,
               model_active_param_count(&mc), 1e3 * fb, fb / fb0, 1e3 * st, st / st0, 1e3 * cpu,
               cpu / cpu0,
               mc.moe_top_k == 1 ? (st / st0 <= 1.3 ? "  PASS (<= 1.3)" : "  FAIL (> 1.3)") : "");
    }
    return 0;
}
