#include "config.h"

#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const activation_names[ACT_COUNT] = {"relu", "gelu",   "gelu_tanh", "relu2", "tanh",
                                                 "silu", "swiglu", "geglu",     "reglu"};
const char *const norm_names[NORM_COUNT] = {"pre", "post", "peri", "none"};
const char *const norm_type_names[NORMTYPE_COUNT] = {"rmsnorm", "layernorm"};
const char *const position_names[POS_COUNT] = {"learned", "rope", "none"};

/* The micro family of the one-knob study (seeds-digest.md, study B). */
static void preset_micro(ModelConfig *c) {
    c->context = 16;
    c->d_model = 32;
    c->n_layer = 2;
    c->n_head = 4;
    c->n_kv_head = 0;
    c->mlp_ratio = 4.0;
    c->activation = ACT_RELU;
    c->norm = NORM_PRE;
    c->norm_type = NORMTYPE_RMS;
    c->norm_affine = 0;
    c->input_norm = 1;
    c->final_norm = 0;
    c->qk_norm = 0;
    c->position = POS_LEARNED;
    c->qkv_bias = 0;
    c->out_bias = 0;
    c->mlp_bias = 0;
    c->tie_embeddings = 0;
}

/* The GPT-2 style "book" family of the heads/activations study (study A). */
static void preset_book(ModelConfig *c) {
    c->vocab_size = 50257;
    c->context = 128;
    c->d_model = 128;
    c->n_layer = 4;
    c->n_head = 4;
    c->n_kv_head = 0;
    c->mlp_ratio = 4.0;
    c->activation = ACT_GELU_TANH;
    c->norm = NORM_PRE;
    c->norm_type = NORMTYPE_LAYER;
    c->norm_affine = 1;
    c->input_norm = 0;
    c->final_norm = 1;
    c->qk_norm = 0;
    c->position = POS_LEARNED;
    c->qkv_bias = 0;
    c->out_bias = 1;
    c->mlp_bias = 1;
    c->tie_embeddings = 0;
}

void model_config_default(ModelConfig *c) {
    memset(c, 0, sizeof *c);
    preset_micro(c);
    c->vocab_size = 0;
    c->norm_eps = 1e-5;
    c->rope_base = 10000.0;
    c->init_std = 0.02;
}

int model_config_preset(ModelConfig *c, const char *name) {
    if (strcmp(name, "micro") == 0) {
        int v = c->vocab_size;
        preset_micro(c);
        c->vocab_size = v;
    } else if (strcmp(name, "book") == 0) {
        preset_book(c);
    } else {
        return -1;
    }
    return 0;
}

int model_kv_heads(const ModelConfig *c) {
    return c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
}
int model_head_dim(const ModelConfig *c) {
    return c->n_head > 0 ? c->d_model / c->n_head : 0;
}
int model_d_ff(const ModelConfig *c) {
    return (int)lround(c->mlp_ratio * c->d_model);
}
int model_is_glu(const ModelConfig *c) {
    return c->activation == ACT_SWIGLU || c->activation == ACT_GEGLU || c->activation == ACT_REGLU;
}

int model_config_validate(const ModelConfig *c, char err[ABL_ERR_MAX]) {
    /* enums from outside the knob parser (a checkpoint, a test) must name a real choice: the
     * forward's switches have no default, so that a forgotten new choice fails to compile */
    if ((unsigned)c->norm >= NORM_COUNT) ABL_FAIL("model.norm %d is not a placement", (int)c->norm);
    if ((unsigned)c->activation >= ACT_COUNT)
        ABL_FAIL("model.activation %d is not an activation", (int)c->activation);
    if (c->vocab_size < 2) ABL_FAIL("model.vocab_size must be at least 2 (got %d)", c->vocab_size);
    if (c->context < 1) ABL_FAIL("model.context must be positive (got %d)", c->context);
    if (c->d_model < 1) ABL_FAIL("model.d_model must be positive (got %d)", c->d_model);
    if (c->n_layer < 1) ABL_FAIL("model.n_layer must be positive (got %d)", c->n_layer);
    if (c->n_head < 1) ABL_FAIL("model.n_head must be positive (got %d)", c->n_head);
    if (c->d_model % c->n_head != 0)
        ABL_FAIL("model.n_head (%d) must divide model.d_model (%d)", c->n_head, c->d_model);
    if (c->n_head > MODEL_MAX_HEADS)
        ABL_FAIL("model.n_head %d exceeds the supported %d", c->n_head, MODEL_MAX_HEADS);
    if (c->n_kv_head < 0) ABL_FAIL("model.n_kv_head must be positive (got %d)", c->n_kv_head);
    if (c->n_head % model_kv_heads(c) != 0)
        ABL_FAIL("model.n_kv_head (%d) must divide model.n_head (%d)", model_kv_heads(c),
                 c->n_head);
    if (!(c->mlp_ratio > 0) || model_d_ff(c) < 1)
        ABL_FAIL("model.mlp_ratio must give a positive MLP width (got %g)", c->mlp_ratio);
    if (c->position == POS_ROPE && model_head_dim(c) % 2 != 0)
        ABL_FAIL("model.position rope needs an even head dimension (d_model/n_head = %d)",
                 model_head_dim(c));
    if (c->position == POS_ROPE && !(c->rope_base > 1.0))
        ABL_FAIL("model.rope_base must be greater than 1 (got %g)", c->rope_base);
    if (!(c->norm_eps > 0)) ABL_FAIL("model.norm_eps must be positive (got %g)", c->norm_eps);
    if (!(c->init_std > 0)) ABL_FAIL("model.init_std must be positive (got %g)", c->init_std);
    return 0;
}

/* Sizes of the per-layer matrices, shared by the count and the FLOP formula. */
static size_t layer_matmul_params(const ModelConfig *c) {
    size_t C = (size_t)c->d_model, hd = (size_t)model_head_dim(c);
    size_t qkv = C * (size_t)(c->n_head + 2 * model_kv_heads(c)) * hd;
    size_t ff = (size_t)model_d_ff(c), up = model_is_glu(c) ? 2 * ff : ff;
    return qkv + C * C + C * up + ff * C;
}

size_t model_param_count(const ModelConfig *c) {
    TensorInfo t[T_COUNT]; /* the tensor table is the one description of the parameters */
    return gpt_tensor_table(c, t);
}

double model_flops_per_token(const ModelConfig *c) {
    double matmul = (double)c->n_layer * (double)layer_matmul_params(c) +
                    (double)c->vocab_size * (double)c->d_model; /* lm_head */
    return 6.0 * matmul + 12.0 * c->n_layer * (double)c->context * c->d_model;
}

double model_kv_bytes_per_token(const ModelConfig *c) {
    return 2.0 * c->n_layer * model_kv_heads(c) * model_head_dim(c) * sizeof(float);
}
