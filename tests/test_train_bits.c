/* Same seed, same bits: short trainings of configs that together take every value of every
 * model knob, compared step by step, bit for bit, with values recorded from an earlier build
 * (tests/golden/train_bits.txt). Besides the hand-picked combinations below, every other
 * value of every enum and bool model knob of the knob table gets a config of its own (the
 * base with that one assignment), so a new knob or value is trained without touching this
 * file; a config the recorded build did not have is reported, not compared.
 *
 * What a refactor of src/model/ must not change is the arithmetic of training: every step's
 * loss and gradient norm, and the activation statistics, are compared as hex floats. They
 * depend on the BLAS kernels, the compiler and its flags (-march=native, -O level, FMA
 * contraction), so the file holds one section per environment, keyed by a fingerprint of
 * those; an environment without a section skips (exit 77) and says how to record one:
 *
 *   test_train_bits --record tests/golden/train_bits.txt   (appends this environment's section)
 *
 * Record with the build *before* a change, then run the test on the build after it.
 *
 * Each config trains STEPS AdamW steps (grad clip 1, weight decay 0.1, lr 3e-3) on
 * pseudo-random token batches, from weights initialized with a fixed seed, with the
 * statistics collected on the first and last step. Two configs force the small-matrix
 * product split and the transposed weight copies (src/model/gemm.h) that studies take on
 * AVX-512 OpenBLAS, whatever machine runs the test, with every product in OpenBLAS; the
 * others run small products in ablate's own kernel (gemm_small.h) where the build has it. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/adamw.h"
#include "model/gemm.h"
#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"

#ifndef TRAIN_BITS_FLAGS
#define TRAIN_BITS_FLAGS "?"
#endif

#define STEPS 12
#define B     4
#define T     12
#define SKIP  77

char *openblas_get_corename(void);

typedef struct {
    const char *name;
    double gemm_limit; /* 0: the machine's own; > 0: forced (pieces and transposed copies) */
    const char *sets[10];
} Config;

/* Hand-picked combinations. Base: vocab 37, context 16, d_model 16, 2 heads, 2 layers, init_std
 * 0.1. */
static const Config configs[] = {
    {"micro-defaults", 0, {NULL}},
    {"gelu-post-rope-tied",
     0,
     {"model.activation=gelu", "model.norm=post", "model.position=rope",
      "model.tie_embeddings=true", NULL}},
    {"swiglu-peri-ln-aff",
     0,
     {"model.activation=swiglu", "model.norm=peri", "model.norm_type=layernorm",
      "model.norm_affine=true", NULL}},
    {"qknorm-mqa-rope",
     0,
     {"model.qk_norm=true", "model.n_head=4", "model.n_kv_head=1", "model.position=rope",
      "model.norm_affine=true", NULL}},
    {"relu2-none-posnone",
     0,
     {"model.activation=relu2", "model.norm=none", "model.position=none", "model.final_norm=true",
      NULL}},
    {"geglu-biases-noinnorm",
     0,
     {"model.activation=geglu", "model.qkv_bias=true", "model.out_bias=true", "model.mlp_bias=true",
      "model.final_norm=true", "model.input_norm=false", NULL}},
    {"tanh-gqa-qknorm-ln",
     0,
     {"model.activation=tanh", "model.n_head=4", "model.n_kv_head=2", "model.qk_norm=true",
      "model.norm_type=layernorm", "model.norm_affine=true", NULL}},
    {"silu-post-ln",
     0,
     {"model.activation=silu", "model.norm=post", "model.norm_type=layernorm",
      "model.qkv_bias=true", NULL}},
    {"gelu_tanh-rope500-3layer",
     0,
     {"model.activation=gelu_tanh", "model.rope_base=500", "model.position=rope", "model.n_layer=3",
      NULL}},
    {"reglu-peri-ratio2.5",
     0,
     {"model.activation=reglu", "model.norm=peri", "model.mlp_ratio=2.5", "model.norm_eps=1e-3",
      NULL}},
    {"pieces-relu-tied", 12288, {"model.tie_embeddings=true", "model.mlp_bias=true", NULL}},
    {"pieces-swiglu-gqa-rope",
     12288,
     {"model.activation=swiglu", "model.n_head=4", "model.n_kv_head=2", "model.position=rope",
      "model.out_bias=true", NULL}},
};
#define N_CONFIGS ((int)(sizeof configs / sizeof configs[0]))

static const char *const BASE[] = {"model.vocab_size=37", "model.context=16",   "model.d_model=16",
                                   "model.n_head=2",      "model.init_std=0.1", NULL};

static int resolve(const Config *cf, RunConfig *rc) {
    char err[ABL_ERR_MAX];
    run_config_default(rc);
    for (const char *const *s = BASE; *s; s++)
        if (knob_assign(rc, *s, err) != 0) goto bad;
    for (const char *const *s = cf->sets; *s; s++)
        if (knob_assign(rc, *s, err) != 0) goto bad;
    return 0;
bad:
    CHECK_MSG(0, "%s: %s", cf->name, err);
    return -1;
}

/* The generated configs: the base plus one knob = value, for every value of every enum and
 * bool model knob other than the base's own. */
#define MAX_GENERATED 256
static char gen_text[MAX_GENERATED][96];
static Config generated[MAX_GENERATED];

static int generate_configs(void) {
    RunConfig base;
    Config none = {"base", 0, {NULL}};
    if (resolve(&none, &base) != 0) return 0;
    int n = 0;
    for (int k = 0; k < knob_count; k++) {
        const Knob *kn = &knob_table[k];
        if (strncmp(kn->name, "model.", 6) != 0) continue;
        int values = kn->type == FT_ENUM ? (int)kn->n : kn->type == FT_BOOL ? 2 : 0;
        for (int v = 0; v < values && n < MAX_GENERATED; v++) {
            if (*(const int *)((const char *)&base + kn->offset) == v) continue;
            snprintf(gen_text[n], sizeof gen_text[n], "%s=%s", kn->name,
                     kn->type == FT_ENUM ? kn->names[v] : (v ? "true" : "false"));
            generated[n] = (Config){gen_text[n] + 6, 0, {gen_text[n], NULL}};
            n++;
        }
    }
    CHECK_MSG(n < MAX_GENERATED, "more than %d generated configs", MAX_GENERATED);
    return n;
}

/* The environment the bits depend on: OpenBLAS's core, the compiler and flags of this build,
 * and the CPU's feature flags (the build uses -march=native). */
static void fingerprint(char *buf, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the cpuinfo flags line */
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            for (const char *p = line; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
            break;
        }
    if (f) fclose(f);
    const char *core = openblas_get_corename();
    snprintf(buf, n, "core=%s cc=%s flags=%s cpu=%016llx", core ? core : "?", __VERSION__,
             TRAIN_BITS_FLAGS, (unsigned long long)h);
}

typedef struct {
    char *text;
    size_t len, cap;
} TextBuf;

static void put(TextBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(TextBuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)n + 256;
        b->text = realloc(b->text, b->cap);
        if (!b->text) abort();
    }
}

/* Trains one config and appends its lines (one per step, one per layer of statistics). */
static void train(const Config *cf, TextBuf *out) {
    RunConfig rc;
    if (resolve(cf, &rc) != 0) return;
    char err[ABL_ERR_MAX];
    gemm_set_small_limit(cf->gemm_limit > 0 ? cf->gemm_limit : -1.0);
    gemm_set_own_limit(cf->gemm_limit > 0 ? 0.0 : -1.0); /* forced pieces: through OpenBLAS */
    GPT m;
    if (gpt_alloc(&m, &rc.model, B, T, err) != 0) {
        CHECK_MSG(0, "%s: gpt_alloc: %s", cf->name, err);
        return;
    }
    gpt_init_weights(&m, 1234);
    float *am = calloc(m.n_params, sizeof(float)), *av = calloc(m.n_params, sizeof(float));
    int32_t x[B * T], y[B * T];
    uint64_t s = 42;
    AdamW opt = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < B * T; i++) {
            x[i] = (int32_t)(test_splitmix64(&s) % 37);
            y[i] = (int32_t)(test_splitmix64(&s) % 37);
        }
        m.collect_stats = step == 0 || step == STEPS - 1;
        gpt_zero_grad(&m);
        float loss = gpt_forward(&m, x, y, B, T);
        gpt_backward(&m);
        double norm = gpt_grad_norm(&m);
        put(out, "%s %d loss=%a gnorm=%a correct=%ld\n", cf->name, step, (double)loss, norm,
            m.correct);
        if (m.collect_stats)
            for (int l = 0; l < m.cfg.n_layer; l++) {
                const LayerStats *st = &m.stats[l];
                put(out, "%s %d layer%d %a %a %a %a %a %a %a", cf->name, step, l, st->zero_frac,
                    st->max, st->min, st->mean, st->rms, st->resid_rms, gpt_layer_grad_norm(&m, l));
                for (int h = 0; h < m.cfg.n_head; h++)
                    put(out, " %a", st->attn_entropy[h]);
                put(out, "\n");
            }
        m.collect_stats = 0;
        if (norm > 1.0) { /* clip as the trainer does */
            float sc = (float)(1.0 / norm);
            for (size_t i = 0; i < m.n_params; i++)
                m.grads[i] *= sc;
        }
        for (int i = 0; i < T_COUNT; i++) {
            const TensorInfo *ti = &m.tensors[i];
            if (ti->size == 0) continue;
            adamw_update(m.params + ti->offset, m.grads + ti->offset, am + ti->offset,
                         av + ti->offset, ti->size, ti->decay, &opt, step + 1);
        }
    }
    free(am);
    free(av);
    gpt_free(&m);
    gemm_set_small_limit(-1.0);
    gemm_set_own_limit(-1.0);
}

/* The section of the golden file recorded in this environment, or NULL. */
static char *find_section(const char *path, const char *env) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    TextBuf sec = {0};
    char line[4096];
    int in = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "[env ", 5) == 0) {
            if (found) break;
            size_t n = strlen(line);
            while (n && (line[n - 1] == '\n' || line[n - 1] == ']'))
                line[--n] = 0;
            in = found = strcmp(line + 5, env) == 0;
            continue;
        }
        if (in && line[0] != '#') put(&sec, "%s", line);
    }
    fclose(f);
    if (!found) return free(sec.text), NULL;
    if (!sec.text) put(&sec, "%s", "");
    return sec.text;
}

/* The lines of one config in a block of lines: [*begin, *end), by the leading "name ". */
static void config_lines(const char *text, const char *name, const char **begin, const char **end) {
    size_t n = strlen(name);
    *begin = *end = NULL;
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        e = e ? e + 1 : l + strlen(l);
        if (strncmp(l, name, n) == 0 && l[n] == ' ') {
            if (!*begin) *begin = l;
            *end = e;
        } else if (*begin) {
            break;
        }
        l = e;
    }
}

/* Compares one config's lines with the recorded ones; reports the first difference. */
static void compare(const char *want, const char *got, const char *name, int *compared,
                    int *unrecorded) {
    const char *wb, *we, *gb, *ge;
    config_lines(want, name, &wb, &we);
    config_lines(got, name, &gb, &ge);
    if (!wb) {
        fprintf(stderr, "  %s: not in the recorded build's values (a new config), not compared\n",
                name);
        (*unrecorded)++;
        return;
    }
    (*compared)++;
    while (wb < we || gb < ge) {
        const char *wn = wb < we ? strchr(wb, '\n') : we, *gn = gb < ge ? strchr(gb, '\n') : ge;
        size_t wl = (size_t)(wn - wb), gl = (size_t)(gn - gb);
        if (wl != gl || memcmp(wb, gb, wl) != 0) {
            CHECK_MSG(0, "bits differ from the recorded build:\n  recorded %.*s\n  now      %.*s",
                      (int)wl, wb, (int)gl, gb);
            return;
        }
        wb = wn < we ? wn + 1 : we;
        gb = gn < ge ? gn + 1 : ge;
    }
}

/* Trains every config; with record, appends this environment's section to path, else
 * compares with the section recorded there. 0, 1 (a failure to record), or SKIP. */
static int train_bits(const char *path, int record) {
    int n_gen = generate_configs();
    char env[1024];
    fingerprint(env, sizeof env);
    TextBuf got = {0};
    put(&got, "%s", "");
    for (int i = 0; i < N_CONFIGS; i++)
        train(&configs[i], &got);
    for (int i = 0; i < n_gen; i++)
        train(&generated[i], &got);
    if (record) {
        if (find_section(path, env)) {
            fprintf(stderr, "%s already holds a section for [env %s]; remove it first\n", path,
                    env);
            return 1;
        }
        FILE *f = fopen(path, "a");
        if (!f || fprintf(f, "[env %s]\n%s", env, got.text) < 0 || fclose(f) != 0) {
            fprintf(stderr, "cannot append to %s\n", path);
            return 1;
        }
        fprintf(stderr, "recorded [env %s] in %s\n", env, path);
        free(got.text);
        return 0;
    }
    char *want = find_section(path, env);
    if (!want) {
        fprintf(stderr,
                "test_train_bits: %s holds no values for this environment\n  [env %s]\n"
                "record them with a build from before your change: test_train_bits --record %s\n",
                path, env, path);
        free(got.text);
        return SKIP;
    }
    int compared = 0, unrecorded = 0;
    for (int i = 0; i < N_CONFIGS; i++)
        compare(want, got.text, configs[i].name, &compared, &unrecorded);
    for (int i = 0; i < n_gen; i++)
        compare(want, got.text, generated[i].name, &compared, &unrecorded);
    fprintf(stderr, "  %d configs compared bit for bit, %d new\n", compared, unrecorded);
    CHECK_MSG(compared > 0, "no config of the recorded build was compared");
    free(want);
    free(got.text);
    return 0;
}

static int skipped;

/* One case: the configs share nothing that a split would save, and a section is all or none. */
TEST(bits) {
    skipped = train_bits(TRAIN_BITS_FILE, 0) == SKIP;
}

/* `test_train_bits [bits]` or `--list`: the case; `test_train_bits --record [FILE]` records
 * (FILE: the golden file by default) and `test_train_bits FILE` compares with FILE. */
int main(int argc, char **argv) {
    if (argc == 1 || !strcmp(argv[1], "--list") || !strcmp(argv[1], "bits")) {
        int rc = test_main(argc, argv, "test_train_bits");
        return rc == 0 && skipped ? SKIP : rc;
    }
    const char *path = TRAIN_BITS_FILE;
    int record = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--record") == 0)
            record = 1;
        else
            path = argv[i];
    }
    int rc = train_bits(path, record);
    if (rc == SKIP) return SKIP;
    return rc != 0 ? rc : test_finish("test_train_bits");
}
