#include "knobs.h"

#include "util/hash.h"
#include "util/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(field) offsetof(RunConfig, field)
/* One row per knob: its name, type, field, units (NULL: none) and help. */
#define NUM(name, type, field, units, help)                                                        \
    { name, type, OFF(field), 0, 0, NULL, units, help }
#define ENUM(name, field, names, count, help)                                                      \
    { name, FT_ENUM, OFF(field), count, 0, names, NULL, help }
#define STR(name, field, help)                                                                     \
    { name, FT_STR, OFF(field), sizeof(((RunConfig *)0)->field), 0, NULL, NULL, help }

const Knob knob_table[] = {
    NUM("model.vocab_size", FT_INT, model.vocab_size, "tokens",
        "vocabulary size (set from the data unless given)"),
    NUM("model.context", FT_INT, model.context, "tokens", "context length T"),
    NUM("model.d_model", FT_INT, model.d_model, "features", "residual width C"),
    NUM("model.n_layer", FT_INT, model.n_layer, NULL, "number of blocks"),
    NUM("model.n_head", FT_INT, model.n_head, NULL, "query heads"),
    NUM("model.n_kv_head", FT_INT, model.n_kv_head, NULL,
        "key/value heads (0 = n_head; 1 = multi-query)"),
    NUM("model.mlp_ratio", FT_DOUBLE, model.mlp_ratio, "1", "MLP hidden width / d_model"),
    ENUM("model.activation", model.activation, activation_names, ACT_COUNT, "MLP nonlinearity"),
    ENUM("model.norm", model.norm, norm_names, NORM_COUNT, "norm placement"),
    ENUM("model.norm_type", model.norm_type, norm_type_names, NORMTYPE_COUNT, "norm kind"),
    NUM("model.norm_affine", FT_BOOL, model.norm_affine, NULL,
        "learnable norm gain (and layernorm shift)"),
    NUM("model.norm_eps", FT_DOUBLE, model.norm_eps, "1", "epsilon inside every norm"),
    NUM("model.input_norm", FT_BOOL, model.input_norm, NULL, "normalize right after the embedding"),
    NUM("model.final_norm", FT_BOOL, model.final_norm, NULL, "normalize before lm_head"),
    NUM("model.qk_norm", FT_BOOL, model.qk_norm, NULL, "normalize q and k per head"),
    ENUM("model.position", model.position, position_names, POS_COUNT, "position encoding"),
    NUM("model.rope_base", FT_DOUBLE, model.rope_base, "1", "RoPE frequency base"),
    NUM("model.qkv_bias", FT_BOOL, model.qkv_bias, NULL, "bias on the q/k/v projection"),
    NUM("model.out_bias", FT_BOOL, model.out_bias, NULL, "bias on the attention output projection"),
    NUM("model.mlp_bias", FT_BOOL, model.mlp_bias, NULL, "biases on both MLP linears"),
    NUM("model.tie_embeddings", FT_BOOL, model.tie_embeddings, NULL,
        "lm_head shares the token embedding"),
    NUM("model.init_std", FT_DOUBLE, model.init_std, "1",
        "init std (residual projections / sqrt(2 n_layer))"),
    ENUM("model.init", model.init, weight_init_names, WINIT_COUNT,
         "gpt2: N(0, init_std); torch: PyTorch's module defaults (Linear U(+-1/sqrt(fan_in)), "
         "Embedding N(0, 1))"),
    NUM("model.moe_experts", FT_INT, model.moe_experts, NULL,
        "mixture of experts: experts per MoE block (1 = dense MLP)"),
    NUM("model.moe_top_k", FT_INT, model.moe_top_k, NULL,
        "experts per token (1: Switch gate p_i; 2+: softmax over the top k)"),
    NUM("model.moe_ratio", FT_DOUBLE, model.moe_ratio, "1",
        "expert hidden width / d_model (0 = mlp_ratio)"),
    ENUM("model.moe_layers", model.moe_layers, moe_layers_names, MOE_LAYERS_COUNT,
         "blocks with the MoE MLP (every_other: 1, 3, ...)"),
    NUM("model.moe_capacity", FT_DOUBLE, model.moe_capacity, "1",
        "expert capacity factor: ceil(f k B T / E) slots (0 = dropless)"),
    NUM("model.moe_balance", FT_DOUBLE, model.moe_balance, "1",
        "load-balancing loss weight alpha (alpha E sum f_i P_i per MoE block)"),
    NUM("model.moe_zloss", FT_DOUBLE, model.moe_zloss, "1",
        "router z-loss weight (mean logsumexp(router logits)^2 per MoE block)"),
    NUM("model.moh_shared", FT_INT, model.moh_shared, "heads",
        "mixture of heads: heads always active (the first ones)"),
    NUM("model.moh_top_k", FT_INT, model.moh_top_k, "heads",
        "mixture of heads: routed heads per token (0 = off: plain multi-head attention)"),
    NUM("model.moh_balance", FT_DOUBLE, model.moh_balance, "1",
        "mixture of heads: balance loss weight beta (beta sum f_i P_i per block)"),
    NUM("model.init_seed", FT_LONG, model.init_seed, NULL,
        "seed of the weights' initialisation (-1 = the run's seed)"),
    NUM("train.lr", FT_DOUBLE, train.lr, "1", "peak learning rate"),
    NUM("train.beta1", FT_DOUBLE, train.beta1, "1", "AdamW beta1"),
    NUM("train.beta2", FT_DOUBLE, train.beta2, "1", "AdamW beta2"),
    NUM("train.eps", FT_DOUBLE, train.eps, "1", "AdamW epsilon"),
    NUM("train.weight_decay", FT_DOUBLE, train.weight_decay, "1",
        "decoupled weight decay on 2-D tensors"),
    ENUM("train.schedule", train.schedule, schedule_names, SCHED_COUNT,
         "learning-rate schedule after warmup"),
    NUM("train.warmup_steps", FT_INT, train.warmup_steps, "steps", "linear warmup steps"),
    NUM("train.min_lr", FT_DOUBLE, train.min_lr, "1", "learning rate at the end of the schedule"),
    NUM("train.grad_clip", FT_DOUBLE, train.grad_clip, "1", "global gradient-norm clip (0 = off)"),
    NUM("train.batch_size", FT_INT, train.batch_size, "sequences", "sequences per optimizer step"),
    NUM("train.steps", FT_LONG, train.steps, "steps", "budget: optimizer steps"),
    NUM("train.tokens", FT_LONG, train.tokens, "tokens",
        "budget: training tokens (rounded up to whole steps)"),
    NUM("train.seconds", FT_DOUBLE, train.seconds, "s", "budget: seconds of training time"),
    NUM("train.flops", FT_DOUBLE, train.flops, "FLOPs",
        "budget: training FLOPs (the plan's FLOPs a token x tokens, active ones for a "
        "mixture), rounded up to whole steps"),
    NUM("train.tokens_per_param", FT_DOUBLE, train.tokens_per_param, "tokens/param",
        "budget: training tokens per non-embedding parameter (all but the token and position "
        "embeddings and the untied lm_head), rounded up to whole steps"),
    NUM("train.calibrate", FT_INT, train.calibrate, "trials",
        "calibrated fixed time: timing trials per configuration before the sweep; each run "
        "then trains round(median tokens/s x train.seconds / tokens per step) steps (0 = off)"),
    NUM("train.calibrate_steps", FT_INT, train.calibrate_steps, "steps",
        "timed steps of one calibration trial (after 3 untimed warm-up steps)"),
    NUM("train.eval_every", FT_INT, train.eval_every, "steps",
        "evaluate every N steps (0 = at the end only)"),
    NUM("train.eval_tokens", FT_LONG, train.eval_tokens, "tokens",
        "target tokens per evaluation: the split's first ones, the same at every context"),
    NUM("train.log_every", FT_INT, train.log_every, "steps", "step events every N steps"),
    NUM("train.data_seed", FT_LONG, train.data_seed, NULL,
        "seed of the training batches' order (-1 = the run's seed)"),
    STR("data.path", data.path, "text or .bin file"),
    ENUM("data.tokenizer", data.tokenizer, tokenizer_names, TOK_COUNT,
         "char, byte, tokens (llm.c .bin) or gpt2 (GPT-2 BPE of UTF-8 text)"),
    NUM("data.val_fraction", FT_DOUBLE, data.val_fraction, "fraction",
        "last fraction of the stream held out"),
    NUM("data.test_fraction", FT_DOUBLE, data.test_fraction, "fraction",
        "held-out test split: the stream's last fraction, after the validation split, scored "
        "once at the end (final_test_loss; 0 = none)"),
    NUM("data.vocab_size", FT_INT, data.vocab_size, "tokens",
        "vocabulary of a .bin file (0 = 50257; gpt2: 50257)"),
    NUM("stats.every", FT_INT, stats.every, "steps",
        "activation statistics every N steps (0 = at the end)"),
    NUM("stats.val", FT_BOOL, stats.val, NULL,
        "MLP activation statistics over every validation batch at each evaluation (act rows, "
        "split val)"),
    STR("sample.prompt", sample.prompt, "prompt for the samples"),
    NUM("sample.tokens", FT_INT, sample.tokens, "tokens", "tokens per sample"),
    NUM("sample.temperature", FT_DOUBLE, sample.temperature, "1",
        "temperature of the second sample"),
    NUM("save_weights", FT_BOOL, save_weights, NULL, "keep final weights in the output file"),
};
const int knob_count = (int)(sizeof knob_table / sizeof knob_table[0]);

/* knob_find by a hash of the names, built once: it runs for every line of every journaled
 * run config, and the live view reads 10^5 of those at its first update of a 10^5-run sweep
 * (a scan of the table was a tenth of bench/live_view.sh's time, in strcmp). Open
 * addressing, slots twice the knobs at least; slot value knob index + 1, 0 empty. */
#define KNOB_SLOTS 512
_Static_assert(2 * sizeof knob_table / sizeof knob_table[0] <= KNOB_SLOTS, "raise KNOB_SLOTS");
static uint16_t knob_slot[KNOB_SLOTS];
static pthread_once_t knob_slots_once = PTHREAD_ONCE_INIT;

static void knob_slots_build(void) {
    for (int i = 0; i < knob_count; i++) {
        uint32_t h = (uint32_t)(fnv1a_str(knob_table[i].name) & (KNOB_SLOTS - 1));
        while (knob_slot[h])
            h = (h + 1) & (KNOB_SLOTS - 1);
        knob_slot[h] = (uint16_t)(i + 1);
    }
}

const Knob *knob_find(const char *name) {
    if (strncmp(name, "base.", 5) == 0) name += 5;
    pthread_once(&knob_slots_once, knob_slots_build);
    for (uint32_t h = (uint32_t)(fnv1a_str(name) & (KNOB_SLOTS - 1)); knob_slot[h];
         h = (h + 1) & (KNOB_SLOTS - 1))
        if (strcmp(knob_table[knob_slot[h] - 1].name, name) == 0)
            return &knob_table[knob_slot[h] - 1];
    return NULL;
}

int knob_edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

const char *knob_suggest(const char *name) {
    if (strncmp(name, "base.", 5) == 0) name += 5;
    const char *best = NULL;
    int best_d = 4;
    for (int i = 0; i < knob_count; i++) {
        const char *full = knob_table[i].name, *dot = strrchr(full, '.');
        int d = knob_edit_distance(name, full);
        /* also match against the short name, so "n_haed" suggests model.n_head */
        if (dot && !strchr(name, '.')) {
            int ds = knob_edit_distance(name, dot + 1);
            if (ds < d) d = ds;
        }
        if (d < best_d) best_d = d, best = full;
    }
    return best;
}

static void *field(RunConfig *c, const Knob *k) {
    return (char *)c + k->offset;
}

/* The one number grammar of every numeric key (docs/spec.md, "Numbers"): decimal only,
 * [+-]digits[.digits][e[+-]digits] (or .digits): strtod alone would also take hex (0x10),
 * hex floats, inf/nan and leading blanks, and strtol a different set again. */
static int decimal_syntax(const char *s) {
    const char *p = s + (*s == '+' || *s == '-');
    size_t whole = strspn(p, "0123456789");
    p += whole;
    size_t frac = 0;
    if (*p == '.') {
        frac = strspn(p + 1, "0123456789");
        p += 1 + frac;
    }
    if (whole + frac == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        size_t exp = strspn(p, "0123456789");
        if (!exp) return 0;
        p += exp;
    }
    return *p == '\0';
}

static int parse_long(const char *s, long *out) {
    if (!decimal_syntax(s)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s) return -1;
    /* accept 1e6-style integers as written in YAML by hand */
    if (*end == 'e' || *end == 'E' || *end == '.') {
        double d = strtod(s, &end);
        if (*end || d != floor(d) || fabs(d) > 9e18) return -1;
        v = (long)d;
    } else if (*end) {
        return -1;
    }
    *out = v;
    return 0;
}

int knob_set(RunConfig *c, const Knob *k, const char *text, char err[ABL_ERR_MAX]) {
    void *f = field(c, k);
    switch (k->type) {
    case FT_INT:
    case FT_LONG: {
        long v;
        if (parse_long(text, &v) != 0 || (k->type == FT_INT && (v < INT_MIN || v > INT_MAX))) {
            snprintf(err, ABL_ERR_MAX, "expected an integer for %s, got '%s'", k->name, text);
            return -1;
        }
        if (k->type == FT_INT)
            *(int *)f = (int)v;
        else
            *(long *)f = v;
        return 0;
    }
    case FT_DOUBLE: {
        char *end;
        errno = 0;
        double v = decimal_syntax(text) ? strtod(text, &end) : NAN;
        if (!isfinite(v) || errno || end == text || *end) {
            snprintf(err, ABL_ERR_MAX, "expected a number for %s, got '%s'", k->name, text);
            return -1;
        }
        *(double *)f = v;
        return 0;
    }
    case FT_BOOL: {
        static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
        for (int i = 0; i < 4; i++) {
            if (strcmp(text, yes[i]) == 0) return *(int *)f = 1, 0;
            if (strcmp(text, no[i]) == 0) return *(int *)f = 0, 0;
        }
        snprintf(err, ABL_ERR_MAX, "expected true or false for %s, got '%s'", k->name, text);
        return -1;
    }
    case FT_ENUM: {
        for (int i = 0; i < (int)k->n; i++)
            if (strcmp(text, k->names[i]) == 0) return *(int *)f = i, 0;
        int n = snprintf(err, ABL_ERR_MAX, "invalid value '%s' for %s (expected one of:", text,
                         k->name);
        for (int i = 0; i < (int)k->n && n < ABL_ERR_MAX; i++)
            n += snprintf(err + n, ABL_ERR_MAX - n, "%s %s", i ? "," : "", k->names[i]);
        if (n < ABL_ERR_MAX) snprintf(err + n, ABL_ERR_MAX - n, ")");
        return -1;
    }
    case FT_STR:
        if (strlen(text) >= k->n) {
            snprintf(err, ABL_ERR_MAX, "value of %s is too long (max %zu bytes)", k->name,
                     k->n - 1);
            return -1;
        }
        memcpy(f, text, strlen(text) + 1);
        return 0;
    case FT_TEXT:
    case FT_HEADS: /* event fields only */
        break;
    }
    snprintf(err, ABL_ERR_MAX, "%s cannot be set", k->name);
    return -1;
}

int knob_assign(RunConfig *c, const char *assignment, char err[ABL_ERR_MAX]) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment) {
        snprintf(err, ABL_ERR_MAX, "expected key=value, got '%s'", assignment);
        return -1;
    }
    char name[128];
    size_t len = (size_t)(eq - assignment);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, assignment, len);
    name[len] = '\0';
    const Knob *k = knob_find(name);
    if (!k) {
        const char *s = knob_suggest(name);
        if (s)
            snprintf(err, ABL_ERR_MAX, "unknown key '%s' (did you mean '%s'?)", name, s);
        else
            snprintf(err, ABL_ERR_MAX, "unknown key '%s'", name);
        return -1;
    }
    return knob_set(c, k, eq + 1, err);
}

int knob_format(const RunConfig *c, const Knob *k, char *buf, size_t n) {
    return field_format(c, k, buf, n);
}

int knob_default_text(const Knob *k, char *buf, size_t n) {
    RunConfig def;
    run_config_default(&def);
    int len = knob_format(&def, k, buf, n);
    /* text knobs: an empty or newline default would show as nothing at all */
    if (k->type == FT_STR && len == 0) return snprintf(buf, n, "\"\"");
    if (k->type == FT_STR && buf[0] == '\n') return snprintf(buf, n, "\"\\n\"");
    return len;
}

int knob_kind_text(const Knob *k, const char *sep, char *buf, size_t n) {
    switch (k->type) {
    case FT_INT:
    case FT_LONG:
        return snprintf(buf, n, "integer");
    case FT_DOUBLE:
        return snprintf(buf, n, "number");
    case FT_BOOL:
        return snprintf(buf, n, "true/false");
    case FT_ENUM: {
        int len = 0;
        buf[0] = '\0';
        for (int j = 0; j < (int)k->n && len < (int)n; j++)
            len += snprintf(buf + len, n - (size_t)len, "%s%s", j ? sep : "", k->names[j]);
        return len;
    }
    case FT_STR:
    case FT_TEXT:
    case FT_HEADS:
        break;
    }
    return snprintf(buf, n, "text");
}

/* Values that are the same are the same text: knob_equal skips formatting them (run ids
 * compare every knob of a config with its default, and the live view computes one per run
 * it writes: two snprintf, for a double up to 17 of them with a strtod each, per knob). */
static int same_value(const RunConfig *a, const RunConfig *b, const Knob *k) {
    switch (k->type) {
    case FT_LONG:
    case FT_INT:
    case FT_BOOL:
    case FT_ENUM:
        return field_integer(a, k) == field_integer(b, k);
    case FT_DOUBLE: {
        double x = field_number(a, k), y = field_number(b, k);
        return memcmp(&x, &y, sizeof x) == 0;
    }
    case FT_STR:
    case FT_TEXT: {
        size_t na, nb;
        const char *sa = field_text(a, k, &na), *sb = field_text(b, k, &nb);
        return na == nb && memcmp(sa, sb, na) == 0;
    }
    case FT_HEADS:
        break;
    }
    return 0;
}

int knob_equal(const RunConfig *a, const RunConfig *b, const Knob *k) {
    if (same_value(a, b, k)) return 1;
    char x[ABL_PATH_MAX + 8], y[ABL_PATH_MAX + 8];
    knob_format(a, k, x, sizeof x);
    knob_format(b, k, y, sizeof y);
    return strcmp(x, y) == 0;
}

void knob_config_json_buf(const RunConfig *c, Buf *b) {
    buf_addc(b, '{');
    field_json_members(b, c, knob_table, knob_count, 1, FIELD_JSON_CANONICAL);
    buf_addc(b, '}');
}

int knob_config_json(const RunConfig *c, char *buf, size_t n) {
    Buf b = {0};
    knob_config_json_buf(c, &b);
    int len = snprintf(buf, n, "%s", b.p ? b.p : "");
    buf_free(&b);
    return len;
}
