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
const char *const moe_layers_names[MOE_LAYERS_COUNT] = {"all", "every_other"};
const char *const weight_init_names[WINIT_COUNT] = {"gpt2", "torch"};

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
    c->init = WINIT_GPT2;
    c->moe_experts = 1;
    c->moe_top_k = 1;
    c->moe_ratio = 0.0;
    c->moe_layers = MOE_LAYERS_ALL;
    c->moe_capacity = 0.0;
    c->moe_balance = 0.01; /* Switch Transformer's alpha */
    c->moe_zloss = 0.0;
    c->moh_shared = 0;
    c->moh_top_k = 0;
    c->moh_balance = 0.01; /* the paper's beta */
    c->init_seed = -1;
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

int model_is_moe(const ModelConfig *c) {
    return c->moe_experts > 1;
}
int model_layer_is_moe(const ModelConfig *c, int l) {
    return model_is_moe(c) && (c->moe_layers == MOE_LAYERS_ALL || l % 2 == 1);
}
int model_moe_layer_count(const ModelConfig *c) {
    int n = 0;
    for (int l = 0; l < c->n_layer; l++)
        n += model_layer_is_moe(c, l);
    return n;
}
int model_expert_ff(const ModelConfig *c) {
    return c->moe_ratio > 0 ? (int)lround(c->moe_ratio * c->d_model) : model_d_ff(c);
}
int model_is_moh(const ModelConfig *c) {
    return c->moh_top_k > 0;
}
int model_mlp_slot(const ModelConfig *c, int l) {
    int moe = model_layer_is_moe(c, l), n = 0;
    for (int i = 0; i < l; i++)
        n += model_layer_is_moe(c, i) == moe;
    return n;
}
int model_moe_capacity(const ModelConfig *c, int n) {
    double all = (double)c->moe_top_k * n;
    if (!(c->moe_capacity > 0)) return (int)all;
    double cap = ceil(c->moe_capacity * all / c->moe_experts);
    return cap < all ? (int)cap : (int)all;
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
    if ((unsigned)c->moe_layers >= MOE_LAYERS_COUNT)
        ABL_FAIL("model.moe_layers %d is not a choice", (int)c->moe_layers);
    if (c->moe_experts < 1 || c->moe_experts > MODEL_MAX_EXPERTS)
        ABL_FAIL("model.moe_experts must be in 1..%d (got %d)", MODEL_MAX_EXPERTS, c->moe_experts);
    if (c->moe_top_k < 1 || c->moe_top_k > c->moe_experts)
        ABL_FAIL("model.moe_top_k must be in 1..model.moe_experts (%d) (got %d)", c->moe_experts,
                 c->moe_top_k);
    if (!(c->moe_ratio >= 0) || (c->moe_ratio > 0 && model_expert_ff(c) < 1))
        ABL_FAIL("model.moe_ratio must be 0 or give a positive expert width (got %g)",
                 c->moe_ratio);
    if (!(c->moe_capacity >= 0))
        ABL_FAIL("model.moe_capacity must be 0 (dropless) or positive (got %g)", c->moe_capacity);
    if (!(c->moe_balance >= 0))
        ABL_FAIL("model.moe_balance must not be negative (got %g)", c->moe_balance);
    if (!(c->moe_zloss >= 0))
        ABL_FAIL("model.moe_zloss must not be negative (got %g)", c->moe_zloss);
    if (c->moh_top_k < 0 || c->moh_shared < 0)
        ABL_FAIL("model.moh_top_k and model.moh_shared must not be negative (got %d, %d)",
                 c->moh_top_k, c->moh_shared);
    if (model_is_moh(c) && (c->moh_shared < 1 || c->moh_shared + c->moh_top_k > c->n_head))
        ABL_FAIL("model.moh_top_k %d needs model.moh_shared >= 1 shared heads and "
                 "moh_shared + moh_top_k <= model.n_head (got %d shared of %d heads)",
                 c->moh_top_k, c->moh_shared, c->n_head);
    if (!(c->moh_balance >= 0))
        ABL_FAIL("model.moh_balance must not be negative (got %g)", c->moh_balance);
    if (c->init_seed < -1)
        ABL_FAIL("model.init_seed must be >= 0, or -1 for the run's seed (got %ld)", c->init_seed);
    return 0;
}

/* Matrix entries of an MLP of hidden width ff (both linears). */
static size_t mlp_matmul_params(const ModelConfig *c, size_t ff) {
    size_t C = (size_t)c->d_model, up = model_is_glu(c) ? 2 * ff : ff;
    return C * up + ff * C;
}

/* Query heads a token uses: shared + routed top-k with a mixture of heads, else all. */
static int active_heads(const ModelConfig *c) {
    return model_is_moh(c) ? c->moh_shared + c->moh_top_k : c->n_head;
}

/* Matrix entries one token multiplies by in block l, shared by the FLOP formula: attention
 * (k and v of every kv head; q and the output projection of its active heads; the
 * mixture-of-heads router), then the dense MLP, or the router and k experts. */
static size_t layer_matmul_params(const ModelConfig *c, int l) {
    size_t C = (size_t)c->d_model, hd = (size_t)model_head_dim(c), a = (size_t)active_heads(c);
    size_t attn = C * (2 * (size_t)model_kv_heads(c) + a) * hd + a * hd * C;
    if (model_is_moh(c)) attn += C * (size_t)(c->n_head + 2);
    if (!model_layer_is_moe(c, l)) return attn + mlp_matmul_params(c, (size_t)model_d_ff(c));
    return attn + C * (size_t)c->moe_experts +
           (size_t)c->moe_top_k * mlp_matmul_params(c, (size_t)model_expert_ff(c));
}

size_t model_param_count(const ModelConfig *c) {
    TensorInfo t[T_COUNT]; /* the tensor table is the one description of the parameters */
    return gpt_tensor_table(c, t);
}

size_t model_nonembedding_param_count(const ModelConfig *c) {
    TensorInfo t[T_COUNT];
    size_t all = gpt_tensor_table(c, t);
    return all - t[T_WTE].size - t[T_WPE].size - t[T_LM_HEAD].size;
}

size_t model_active_param_count(const ModelConfig *c) {
    size_t ff = (size_t)model_expert_ff(c), C = (size_t)c->d_model;
    size_t expert =
        mlp_matmul_params(c, ff) + (c->mlp_bias ? (model_is_glu(c) ? 2 * ff : ff) + C : 0);
    /* a mixture of heads leaves out the q rows (and q bias) and output-projection columns of
     * the heads a token is not routed to */
    size_t idle = (size_t)(c->n_head - active_heads(c)) * (size_t)model_head_dim(c);
    size_t heads = (size_t)c->n_layer * idle * (2 * C + (c->qkv_bias ? 1 : 0));
    return model_param_count(c) -
           (size_t)model_moe_layer_count(c) * (size_t)(c->moe_experts - c->moe_top_k) * expert -
           heads;
}

double model_flops_per_token(const ModelConfig *c) {
    double matmul = (double)c->vocab_size * (double)c->d_model; /* lm_head */
    for (int l = 0; l < c->n_layer; l++)
        matmul += (double)layer_matmul_params(c, l);
    /* scores and mixing of the active heads (all of them without a mixture of heads) */
    double attn_width = (double)active_heads(c) * model_head_dim(c);
    return 6.0 * matmul + 12.0 * c->n_layer * (double)c->context * attn_width;
}

double model_kv_bytes_per_token(const ModelConfig *c) {
    return 2.0 * c->n_layer * model_kv_heads(c) * model_head_dim(c) * sizeof(float);
}
