/* refdump OUTDIR B T SEED [--gemm-small-limit=MNK] [--zero=TENSOR] [key=value ...]
 * refdump --knobs
 *
 * Dumps everything tests/reference/check_reference.py needs to compare the C GPT against the
 * independent PyTorch reference (tests/reference/gpt_ref.py):
 *   manifest.json  the model config (every model knob of the knob table, read back from the
 *                  struct, not from the arguments), B, T, n_params and the tensor table (id,
 *                  name, shape, offset, size, decay, init)
 *   params0.bin    the initialized parameter buffer (float32)
 *   x.bin, y.bin   a (B, T) batch of token ids (int32)
 *   logits.bin     (B, T, V) logits of gpt_forward(x, NULL)
 *   stats.json     per layer: the activation statistics of the forward with targets
 *                  (MLP hidden, attention entropy per head, residual rms) and the layer's
 *                  gradient norm after its backward
 *   loss.txt       gpt_forward(x, y)
 *   aux.txt        the auxiliary (MoE) losses of that forward
 *   grads.bin      gradients of that loss (gpt_backward after gpt_zero_grad)
 *   then 3 AdamW steps on the same batch (lr 1e-2, betas 0.9/0.95, eps 1e-8, weight decay
 *   0.1 on decay tensors only), each zero_grad + forward + backward + adamw_update per tensor:
 *   losses.txt     the loss before each step
 *   gradsS.bin     the gradients of step S = 1, 2, 3 (grads1.bin equals grads.bin)
 *   paramsS.bin    the parameters after step S
 * Keys are RunConfig knobs (model.n_head=2); model.vocab_size is required. model.context
 * defaults to T when not given. --gemm-small-limit sets gemm_set_small_limit (src/model/gemm.h)
 * so that small products run in pieces, as the studies' sizes do on AVX-512 OpenBLAS (every
 * product through OpenBLAS then, none in the own kernel); the manifest records the limits in
 * effect. --zero sets a tensor (by its table name) to zero after
 * the initialization: a zeroed MoE router ties every expert.
 * --knobs prints the model knobs of the knob table (name, type, default, enum choices) as JSON:
 * check_reference.py's coverage list is made from it. */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/adamw.h"
#include "model/config.h"
#include "model/gemm.h"
#include "model/gpt.h"
#include "test_util.h"
#include "worker/knobs.h"
#include "worker/run_config.h"

static const char *outdir;

static FILE *open_out(const char *name, const char *mode) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *f = fopen(path, mode);
    if (!f) {
        fprintf(stderr, "refdump: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return f;
}

static void write_bin(const char *name, const void *data, size_t elem, size_t n) {
    FILE *f = open_out(name, "wb");
    if (fwrite(data, elem, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "refdump: short write of %s\n", name);
        exit(1);
    }
}

static int is_model_knob(const Knob *k) {
    return strncmp(k->name, "model.", 6) == 0;
}

/* A knob's value as JSON: enums as their name, booleans as 0/1, numbers as numbers. */
static void write_value(FILE *f, const RunConfig *rc, const Knob *k) {
    char v[64];
    knob_format(rc, k, v, sizeof v);
    if (k->type == FT_ENUM || k->type == FT_STR)
        fprintf(f, "\"%s\"", v);
    else if (k->type == FT_BOOL)
        fprintf(f, "%d", strcmp(v, "true") == 0);
    else
        fprintf(f, "%s", v);
}

/* --knobs: every model knob of src/worker/knobs.c with its type, choices and default, for
 * check_reference.py's coverage list (so a new knob or value fails it until a configuration
 * covers it). */
static int write_knobs(void) {
    static const char *const types[] = {
        [FT_INT] = "int",   [FT_LONG] = "long", [FT_DOUBLE] = "double",
        [FT_BOOL] = "bool", [FT_ENUM] = "enum", [FT_STR] = "string"};
    RunConfig rc;
    run_config_default(&rc);
    printf("[\n");
    int first = 1;
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        if (!is_model_knob(k)) continue;
        printf("%s  {\"name\": \"%s\", \"type\": \"%s\", \"default\": ", first ? "" : ",\n",
               k->name + 6, types[k->type]);
        write_value(stdout, &rc, k);
        if (k->type == FT_ENUM) {
            printf(", \"choices\": [");
            for (int j = 0; j < (int)k->n; j++)
                printf("%s\"%s\"", j ? ", " : "", k->names[j]);
            printf("]");
        }
        printf("}");
        first = 0;
    }
    printf("\n]\n");
    return fflush(stdout) == 0 ? 0 : 1;
}

static void write_manifest(const RunConfig *rc, const GPT *m, int B, int T, uint64_t seed, int argc,
                           char **argv) {
    const ModelConfig *c = &rc->model;
    FILE *f = open_out("manifest.json", "w");
    fprintf(f, "{\n  \"B\": %d, \"T\": %d, \"seed\": %llu, \"n_params\": %zu,\n", B, T,
            (unsigned long long)seed, m->n_params);
    /* the own kernel's limit is infinite where it runs every product: null (JSON has no
     * infinity) */
    char own[32] = "null";
    if (isfinite(gemm_own_limit())) snprintf(own, sizeof own, "%.17g", gemm_own_limit());
    fprintf(f,
            "  \"model_param_count\": %zu, \"gemm_small_limit\": %.17g, \"gemm_own_limit\": %s,\n",
            model_param_count(c), gemm_small_limit(), own);
    fprintf(f, "  \"active_param_count\": %zu,\n", model_active_param_count(c));
    fprintf(f, "  \"assignments\": [");
    for (int i = 0; i < argc; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", argv[i]);
    fprintf(f, "],\n");
    fprintf(f, "  \"model\": {\n");
    for (int i = 0; i < knob_count; i++)
        if (is_model_knob(&knob_table[i])) {
            fprintf(f, "    \"%s\": ", knob_table[i].name + 6);
            write_value(f, rc, &knob_table[i]);
            fprintf(f, ",\n");
        }
    fprintf(f, "    \"head_dim\": %d, \"kv_heads\": %d, \"d_ff\": %d, \"is_glu\": %d\n",
            model_head_dim(c), model_kv_heads(c), model_d_ff(c), model_is_glu(c));
    fprintf(f, "  },\n  \"tensors\": [\n");
    int first = 1;
    for (int i = 0; i < T_COUNT; i++) {
        const TensorInfo *t = &m->tensors[i];
        if (t->size == 0) continue;
        fprintf(f, "%s    {\"id\": %d, \"name\": \"%s\", \"shape\": [", first ? "" : ",\n", i,
                t->name ? t->name : "?");
        for (int d = 0; d < t->ndim; d++)
            fprintf(f, "%s%d", d ? ", " : "", t->shape[d]);
        fprintf(f,
                "], \"offset\": %zu, \"size\": %zu, \"decay\": %d, \"init\": \"%s\", "
                "\"per_layer\": %d}",
                t->offset, t->size, t->decay, init_kind_names[t->init], t->per_layer);
        first = 0;
    }
    fprintf(f, "\n  ]\n}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "refdump: cannot write manifest.json\n");
        exit(1);
    }
}

/* stats.json: the statistics of the forward with targets, and each layer's gradient norm
 * after its backward, one object per layer. */
static void write_stats(const GPT *m) {
    FILE *f = open_out("stats.json", "w");
    fputs("[\n", f);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const LayerStats *s = &m->stats[l];
        fprintf(f,
                "  {\"zero_frac\": %.17g, \"max\": %.17g, \"min\": %.17g, \"mean\": %.17g, "
                "\"rms\": %.17g, \"resid_rms\": %.17g, \"grad_norm\": %.17g, "
                "\"near_zero_frac\": %.17g, \"pre_max\": %.17g, \"pre_min\": %.17g, "
                "\"attn_entropy\": [",
                s->zero_frac, s->max, s->min, s->mean, s->rms, s->resid_rms,
                gpt_layer_grad_norm(m, l), s->near_zero_frac, s->pre_max, s->pre_min);
        for (int h = 0; h < m->cfg.n_head; h++)
            fprintf(f, "%s%.17g", h ? ", " : "", s->attn_entropy[h]);
        fprintf(f,
                "], \"router_entropy\": %.17g, \"moe_balance\": %.17g, \"moe_zloss\": %.17g, "
                "\"moe_dropped\": %.17g, \"expert_frac\": [",
                s->router_entropy, s->moe_balance, s->moe_zloss, s->moe_dropped);
        for (int e = 0; e < m->cfg.moe_experts; e++)
            fprintf(f, "%s%.17g", e ? ", " : "", s->expert_frac[e]);
        fprintf(f, "], \"moh_entropy\": %.17g, \"moh_balance\": %.17g, \"head_frac\": [",
                s->moh_entropy, s->moh_balance);
        for (int h = 0; h < m->cfg.n_head; h++)
            fprintf(f, "%s%.17g", h ? ", " : "", s->head_frac[h]);
        fprintf(f, "]}%s\n", l + 1 < m->cfg.n_layer ? "," : "");
    }
    fputs("]\n", f);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--knobs") == 0) return write_knobs();
    if (argc < 5) {
        fprintf(stderr, "usage: refdump OUTDIR B T SEED [key=value ...]\n");
        return 2;
    }
    outdir = argv[1];
    int B = atoi(argv[2]), T = atoi(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 10);
    if (B < 1 || T < 1) {
        fprintf(stderr, "refdump: bad B or T\n");
        return 2;
    }
    mkdir(outdir, 0755);

    char err[ABL_ERR_MAX];
    RunConfig rc;
    run_config_default(&rc);
    rc.model.context = T;
    const char *zero = NULL;
    for (int i = 5; i < argc; i++) {
        if (strncmp(argv[i], "--zero=", 7) == 0) {
            zero = argv[i] + 7;
            continue;
        }
        const char *limit_opt = "--gemm-small-limit=";
        if (strncmp(argv[i], limit_opt, strlen(limit_opt)) == 0) {
            gemm_set_small_limit(strtod(argv[i] + strlen(limit_opt), NULL));
            gemm_set_own_limit(0.0); /* the pieces are OpenBLAS's: every product through it */
            continue;
        }
        if (knob_assign(&rc, argv[i], err) != 0) {
            fprintf(stderr, "refdump: %s: %s\n", argv[i], err);
            return 2;
        }
    }
    ModelConfig c = rc.model;
    if (model_config_validate(&c, err) != 0) {
        fprintf(stderr, "refdump: invalid config: %s\n", err);
        return 2;
    }
    if (T > c.context) {
        fprintf(stderr, "refdump: T %d > model.context %d\n", T, c.context);
        return 2;
    }
    GPT m;
    memset(&m, 0, sizeof m);
    if (gpt_alloc(&m, &c, B, T, err) != 0) {
        fprintf(stderr, "refdump: gpt_alloc: %s\n", err);
        return 1;
    }
    gpt_init_weights(&m, seed);
    if (zero) {
        int found = 0;
        for (int i = 0; i < T_COUNT; i++)
            if (m.tensors[i].size && strcmp(m.tensors[i].name, zero) == 0) {
                memset(m.params + m.tensors[i].offset, 0, m.tensors[i].size * sizeof(float));
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "refdump: --zero=%s: no such tensor in this model\n", zero);
            return 2;
        }
    }
    write_manifest(&rc, &m, B, T, seed, argc - 5, argv + 5);
    write_bin("params0.bin", m.params, sizeof(float), m.n_params);

    size_t n = (size_t)B * T;
    int32_t *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint64_t s = seed * 7919u + 17u;
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)(test_splitmix64(&s) % (uint64_t)c.vocab_size);
    for (size_t i = 0; i < n; i++)
        y[i] = (int32_t)(test_splitmix64(&s) % (uint64_t)c.vocab_size);
    write_bin("x.bin", x, sizeof *x, n);
    write_bin("y.bin", y, sizeof *y, n);

    /* logits of a forward without targets */
    gpt_forward(&m, x, NULL, B, T);
    write_bin("logits.bin", gpt_logits(&m), sizeof(float), n * (size_t)c.vocab_size);

    gpt_zero_grad(&m);
    m.collect_stats = 1;
    float loss = gpt_forward(&m, x, y, B, T);
    gpt_backward(&m);
    m.collect_stats = 0;
    FILE *f = open_out("loss.txt", "w");
    fprintf(f, "%.9g\n", loss);
    fclose(f);
    f = open_out("aux.txt", "w");
    fprintf(f, "%.9g\n", m.aux_loss);
    fclose(f);
    write_bin("grads.bin", m.grads, sizeof(float), m.n_params);
    write_stats(&m);

    AdamW opt = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    float *am = calloc(m.n_params, sizeof(float)), *av = calloc(m.n_params, sizeof(float));
    f = open_out("losses.txt", "w");
    for (long step = 1; step <= 3; step++) {
        char name[32];
        gpt_zero_grad(&m);
        fprintf(f, "%.9g\n", gpt_forward(&m, x, y, B, T));
        gpt_backward(&m);
        snprintf(name, sizeof name, "grads%ld.bin", step);
        write_bin(name, m.grads, sizeof(float), m.n_params);
        for (int i = 0; i < T_COUNT; i++) {
            const TensorInfo *t = &m.tensors[i];
            if (t->size == 0) continue;
            adamw_update(m.params + t->offset, m.grads + t->offset, am + t->offset, av + t->offset,
                         t->size, t->decay, &opt, step);
        }
        snprintf(name, sizeof name, "params%ld.bin", step);
        write_bin(name, m.params, sizeof(float), m.n_params);
    }
    fclose(f);

    free(am);
    free(av);
    free(x);
    free(y);
    gpt_free(&m);
    return 0;
}
