/* Threads inside a run (src/model/par.h): par_for covers every index once in whole grains,
 * and training gives the same bits with 1, 2, 3 and 5 threads (the model's loops outside
 * the GEMMs; OpenBLAS stays on one thread, its own determinism is OpenBLAS's). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/adamw.h"
#include "model/attention.h"
#include "model/gpt.h"
#include "model/par.h"
#include "model/xent.h"
#include "test_util.h"

void openblas_set_num_threads(int);

typedef struct {
    int *hits, bad;
    size_t grain, n;
} Cover;

static void mark(void *ctx, size_t b, size_t e, int chunk) {
    Cover *c = ctx;
    if (b % c->grain != 0 || (e != c->n && (e - b) % c->grain != 0) || chunk < 0 ||
        chunk >= par_threads())
        __atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
    for (size_t i = b; i < e; i++)
        __atomic_add_fetch(&c->hits[i], 1, __ATOMIC_RELAXED);
}

TEST(cover) {
    const int ks[] = {1, 2, 3, 5};
    const size_t ns[] = {0, 1, 7, 16, 33, 1000, 4097};
    const size_t grains[] = {1, 4, 16};
    for (size_t a = 0; a < 4; a++) {
        par_set_threads(ks[a]);
        CHECK(par_threads() == ks[a]);
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t g = 0; g < 3; g++) {
                Cover c = {calloc(ns[b] + 1, sizeof(int)), 0, grains[g], ns[b]};
                par_for(ns[b], grains[g], mark, &c);
                int once = 1;
                for (size_t i = 0; i < ns[b]; i++)
                    once &= c.hits[i] == 1;
                CHECK_MSG(once && c.bad == 0, "K=%d n=%zu grain=%zu: %s", ks[a], ns[b], grains[g],
                          once ? "a piece not in whole grains" : "an index not covered once");
                free(c.hits);
            }
    }
    par_set_threads(1);
}

/* A par_for inside a piece runs inline and still covers its range once. */
static void nested(void *ctx, size_t b, size_t e, int chunk) {
    int *hits = ctx;
    (void)chunk;
    for (size_t i = b; i < e; i++) {
        Cover c = {calloc(40, sizeof(int)), 0, 1, 40};
        par_for(40, 1, mark, &c);
        int once = 1;
        for (int k = 0; k < 40; k++)
            once &= c.hits[k] == 1;
        __atomic_add_fetch(&hits[i], once && c.bad == 0, __ATOMIC_RELAXED);
        free(c.hits);
    }
}

TEST(nested) {
    par_set_threads(3);
    int hits[12] = {0};
    par_for(12, 1, nested, hits);
    for (int i = 0; i < 12; i++)
        CHECK_MSG(hits[i] == 1, "outer index %d: inner par_for not covered once", i);
    par_set_threads(1);
}

/* Three AdamW steps of a small GPT: variant 0 GELU (tanh), 1 SwiGLU, 2 grouped-query
 * attention (2 key-value heads for 4 query heads: the pairs of a shared head add into one
 * gradient). Returns its parameters (malloc'd). */
static float *train(int variant, int threads, size_t *np) {
    par_set_threads(threads);
    ModelConfig mc;
    model_config_default(&mc);
    model_config_preset(&mc, "micro");
    mc.vocab_size = 203;
    mc.mlp_ratio = 3.0; /* d_ff 96: rows not a multiple of the vector width's 16 floats */
    mc.activation = variant == 1 ? ACT_SWIGLU : ACT_GELU_TANH;
    if (variant == 2) mc.n_kv_head = 2;
    char err[ABL_ERR_MAX];
    GPT m;
    int B = 9, T = 16; /* 36 (batch, head) pairs: 3 attention lane groups */
    if (gpt_alloc(&m, &mc, B, T, err) != 0) {
        CHECK_MSG(0, "%s", err);
        return NULL;
    }
    gpt_init_weights(&m, 5);
    size_t n = m.n_params;
    float *am = calloc(n, sizeof(float)), *av = calloc(n, sizeof(float));
    int32_t x[9 * 16], y[9 * 16];
    uint64_t s = 17;
    xent_set_tile_floats(32L * B * T); /* 7 vocabulary tiles */
    par_set_min_work(1);               /* every loop threaded, in its smallest grains */
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < B * T; i++) {
            x[i] = (int32_t)(test_splitmix64(&s) % 203);
            y[i] = (int32_t)(test_splitmix64(&s) % 203);
        }
        gpt_zero_grad(&m);
        gpt_forward(&m, x, y, B, T);
        gpt_backward(&m);
        AdamW opt = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
        adamw_step(&m, am, av, step == 2 ? 0.5f : 1.0f, &opt, step);
    }
    xent_set_tile_floats(0);
    par_set_min_work(0);
    float *p = malloc(n * sizeof(float));
    memcpy(p, m.params, n * sizeof(float));
    *np = n;
    free(am);
    free(av);
    gpt_free(&m);
    par_set_threads(1);
    return p;
}

TEST(bits) {
    openblas_set_num_threads(1);
    const char *names[] = {"gelu_tanh", "swiglu", "gelu_tanh, 2 kv heads"};
    for (int variant = 0; variant < 3; variant++) {
        size_t n1, nk;
        float *p1 = train(variant, 1, &n1);
        const int ks[] = {2, 3, 5};
        for (int i = 0; i < 3 && p1; i++) {
            float *pk = train(variant, ks[i], &nk);
            CHECK_MSG(pk && nk == n1 && memcmp(p1, pk, n1 * sizeof(float)) == 0,
                      "%s: parameters after 3 steps differ between 1 and %d threads",
                      names[variant], ks[i]);
            free(pk);
        }
        free(p1);
    }
}

/* Jobs back to back, as a step runs them: workers that spin between jobs, par_idle sending
 * them to sleep, and the thread count changing between jobs. Every job covers its range
 * once (a lost wake-up hangs the test; a stale job runs an index twice). */
TEST(back_to_back) {
    const int ks[] = {2, 5, 3, 1, 2};
    int *hits = calloc(4097, sizeof(int));
    long jobs = 0, bad = 0;
    for (size_t a = 0; a < sizeof ks / sizeof *ks; a++) {
        par_set_threads(ks[a]);
        for (int j = 0; j < 4000; j++) {
            size_t n = 1 + (size_t)(j * 37) % 4096;
            Cover c = {hits, 0, 1 + (size_t)(j % 3), n};
            memset(hits, 0, (n + 1) * sizeof(int));
            if (j % 7 == 0) par_idle();
            par_for(n, c.grain, mark, &c);
            int once = hits[n] == 0;
            for (size_t i = 0; i < n; i++)
                once &= hits[i] == 1;
            bad += !once || c.bad;
            jobs++;
        }
    }
    CHECK_MSG(bad == 0, "%ld of %ld jobs did not cover their range once", bad, jobs);
    free(hits);
    par_set_threads(1);
}

/* The lane transposes cut into pieces (groups into lanes; out of lanes, blocks of 8 rep
 * pairs with a shared key-value head's pairs added in order): the same bytes as on one
 * thread, with 2 pairs a shared head and with 3 (H 12: a head's pairs cross 8-pair blocks). */
static void lanes_on_threads(int H, int rep) {
    const int B = 37, T = 5, hd = 16, KV = H / rep;
    size_t stride = (size_t)KV * hd, rows = (size_t)B * T * stride;
    size_t lanes = (size_t)attn_groups(B * H) * T * hd * ATTN_LANES;
    float *src = malloc(rows * sizeof(float)), *lane = malloc(lanes * sizeof(float));
    float *l1 = malloc(lanes * sizeof(float)), *r1 = malloc(rows * sizeof(float));
    float *rk = malloc(rows * sizeof(float));
    uint64_t s = 9;
    for (size_t i = 0; i < rows; i++)
        src[i] = (float)((int64_t)(test_splitmix64(&s) % 2001) - 1000) * 1e-3f;
    for (size_t i = 0; i < lanes; i++)
        lane[i] = (float)((int64_t)(test_splitmix64(&s) % 2001) - 1000) * 1e-3f;
    attn_to_lanes(l1, src, B, T, H, hd, stride, rep);
    attn_from_lanes(r1, lane, B, T, H, hd, stride, rep);
    par_set_min_work(1);
    for (int k = 2; k <= 5; k += 3) {
        par_set_threads(k);
        float *lk = malloc(lanes * sizeof(float));
        attn_to_lanes(lk, src, B, T, H, hd, stride, rep);
        attn_from_lanes(rk, lane, B, T, H, hd, stride, rep);
        CHECK_MSG(memcmp(l1, lk, lanes * sizeof(float)) == 0, "into lanes differs on %d threads",
                  k);
        CHECK_MSG(memcmp(r1, rk, rows * sizeof(float)) == 0,
                  "out of lanes differs on %d threads (H %d, rep %d)", k, H, rep);
        free(lk);
    }
    par_set_min_work(0);
    par_set_threads(1);
    free(src);
    free(lane);
    free(l1);
    free(r1);
    free(rk);
}

TEST(lanes) {
    lanes_on_threads(4, 2);
    lanes_on_threads(12, 3);
}

/* gpt_grad_norm over blocks of GPT_NORM_BLOCK gradients: the same bits on 1, 2 and 3
 * threads, and the norm of the gradients (a model of ~40 blocks). */
TEST(grad_norm_blocks) {
    ModelConfig mc;
    model_config_default(&mc);
    model_config_preset(&mc, "micro");
    mc.vocab_size = 20000; /* ~2.6 M parameters */
    char err[ABL_ERR_MAX];
    GPT m;
    if (gpt_alloc(&m, &mc, 1, 8, err) != 0) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    CHECK(GPT_NORM_BLOCKS(m.n_params) > 8);
    uint64_t s = 3;
    long double ref = 0.0L;
    for (size_t i = 0; i < m.n_params; i++) {
        m.grads[i] = (float)((int64_t)(test_splitmix64(&s) % 20001) - 10000) * 1e-5f;
        ref += (long double)m.grads[i] * m.grads[i];
    }
    par_set_min_work(1); /* a piece per block */
    double norm[3];
    for (int k = 1; k <= 3; k++) {
        par_set_threads(k);
        norm[k - 1] = gpt_grad_norm(&m);
    }
    par_set_min_work(0);
    par_set_threads(1);
    CHECK_MSG(norm[0] == norm[1] && norm[0] == norm[2], "norms %a %a %a on 1, 2, 3 threads",
              norm[0], norm[1], norm[2]);
    double want = sqrt((double)ref);
    CHECK_MSG(fabs(norm[0] - want) <= 1e-12 * want, "norm %.17g, want %.17g", norm[0], want);
    gpt_free(&m);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_par");
}
