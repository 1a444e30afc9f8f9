/* The GPT's architecture knobs: one plain struct, defaults, presets, validation.
 * Nothing here knows about YAML, MPI or HDF5; src/worker/knobs.c maps names to fields. */
#ifndef ABLATE_MODEL_CONFIG_H
#define ABLATE_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/sizes.h"

/* In a validation function with a `char err[ABL_ERR_MAX]` parameter: write the message,
 * return -1. */
#define ABL_FAIL(...)                                                                              \
    do {                                                                                           \
        snprintf(err, ABL_ERR_MAX, __VA_ARGS__);                                                   \
        return -1;                                                                                 \
    } while (0)
#define MODEL_MAX_HEADS   64 /* attention statistics keep one entry per head */
#define MODEL_MAX_EXPERTS 64 /* routing statistics keep one entry per expert */

typedef enum {
    ACT_RELU,
    ACT_GELU,      /* exact, erf-based */
    ACT_GELU_TANH, /* tanh approximation (GPT-2) */
    ACT_RELU2,     /* relu(x)^2 */
    ACT_TANH,
    ACT_SILU,
    ACT_SWIGLU, /* silu(a) * b */
    ACT_GEGLU,  /* gelu(a) * b (erf) */
    ACT_REGLU,  /* relu(a) * b */
    ACT_COUNT
} Activation;

typedef enum { NORM_PRE, NORM_POST, NORM_PERI, NORM_NONE, NORM_COUNT } NormPlacement;
typedef enum { NORMTYPE_RMS, NORMTYPE_LAYER, NORMTYPE_COUNT } NormType;
typedef enum { POS_LEARNED, POS_ROPE, POS_NONE, POS_COUNT } Position;
/* Which blocks get the mixture-of-experts MLP: all, or every other one (1, 3, 5, ...: the
 * second of each pair, as in Switch Transformer / GShard). */
typedef enum { MOE_LAYERS_ALL, MOE_LAYERS_EVERY_OTHER, MOE_LAYERS_COUNT } MoeLayers;
/* How the weights start (gpt_init_weights; docs/spec.md, "Initialization"): GPT-2's N(0,
 * init_std) with scaled residual projections, or what PyTorch's default modules draw (the
 * book's model: nn.Linear U(+-1/sqrt(fan_in)), nn.Embedding N(0, 1)). */
typedef enum { WINIT_GPT2, WINIT_TORCH, WINIT_COUNT } WeightInit;

typedef struct {
    int vocab_size; /* set from the data's tokenizer */
    int context;
    int d_model;
    int n_layer;
    int n_head;
    int n_kv_head; /* 0 = same as n_head; 1 = multi-query */
    double mlp_ratio;
    Activation activation;
    NormPlacement norm;
    NormType norm_type;
    int norm_affine; /* learnable gain (and shift for layernorm) */
    double norm_eps;
    int input_norm; /* normalize right after the embedding */
    int final_norm; /* normalize before lm_head */
    int qk_norm;    /* normalize q and k per head over head_dim */
    Position position;
    double rope_base;
    int qkv_bias;
    int out_bias;
    int mlp_bias;
    int tie_embeddings;
    double init_std;
    WeightInit init; /* init_std applies to gpt2 only */
    /* Mixture-of-experts MLP (docs/spec.md, "Mixture of experts"); moe_experts 1 = dense. */
    int moe_experts;  /* E experts per MoE block */
    int moe_top_k;    /* k experts per token */
    double moe_ratio; /* expert hidden width / d_model (0 = mlp_ratio) */
    MoeLayers moe_layers;
    double moe_capacity; /* capacity factor (0 = dropless) */
    double moe_balance;  /* alpha of the load-balancing loss alpha E sum_i f_i P_i */
    double moe_zloss;    /* beta of the router z-loss beta mean_t logsumexp(z_t)^2 */
    /* Mixture-of-heads attention (Jin et al. 2024; docs/spec.md): moh_top_k 0 = off. */
    int moh_shared;     /* heads always active (the first ones) */
    int moh_top_k;      /* routed heads per token, of the n_head - moh_shared others */
    double moh_balance; /* beta of the balance loss beta sum_i f_i P_i over routed heads */
    /* The seed of the weights' initialisation; -1: the run's seed (so a spec that does not
     * set it keeps its run ids). Crossed with train.data_seed, a sweep tells how much of the
     * seed-to-seed spread is the initialisation and how much the data order. */
    long init_seed;
} ModelConfig;

extern const char *const activation_names[ACT_COUNT];
extern const char *const norm_names[NORM_COUNT];
extern const char *const norm_type_names[NORMTYPE_COUNT];
extern const char *const position_names[POS_COUNT];
extern const char *const moe_layers_names[MOE_LAYERS_COUNT];
extern const char *const weight_init_names[WINIT_COUNT];

/* Defaults are the micro preset with vocab_size 0 (filled in from data). */
void model_config_default(ModelConfig *c);
/* Applies a named preset ("micro", "book"); returns -1 for an unknown name. */
int model_config_preset(ModelConfig *c, const char *name);
/* 0 if the config is trainable, else -1 with a message naming the offending key. */
int model_config_validate(const ModelConfig *c, char err[ABL_ERR_MAX]);

/* Derived sizes. */
int model_kv_heads(const ModelConfig *c);
int model_head_dim(const ModelConfig *c);
int model_d_ff(const ModelConfig *c);   /* hidden width of the MLP */
int model_is_glu(const ModelConfig *c); /* swiglu/geglu/reglu: two up projections */

/* Mixture of experts. */
int model_is_moe(const ModelConfig *c);              /* moe_experts > 1 */
int model_layer_is_moe(const ModelConfig *c, int l); /* block l has the MoE MLP */
int model_moe_layer_count(const ModelConfig *c);     /* blocks with the MoE MLP */
int model_expert_ff(const ModelConfig *c);           /* hidden width of one expert */
/* Index of block l among the blocks of its kind (MoE or dense MLP): the leading index of
 * the stacked MLP tensors of that kind. */
int model_mlp_slot(const ModelConfig *c, int l);
/* Token slots per expert for a pass of n tokens: ceil(capacity k n / E), or k n (dropless). */
int model_moe_capacity(const ModelConfig *c, int n);

int model_is_moh(const ModelConfig *c); /* moh_top_k > 0 */

/* Number of trainable parameters. */
size_t model_param_count(const ModelConfig *c);
/* Parameters outside the token embedding, the learned position embedding and the untied
 * lm_head (Kaplan et al.'s N): the same for configurations that differ only in position
 * encoding, and independent of the vocabulary. The budget train.tokens_per_param counts
 * these. */
size_t model_nonembedding_param_count(const ModelConfig *c);
/* Parameters one token uses: all of them but the (E - k) experts of each MoE block it is
 * not routed to (the router counts). Equal to model_param_count for a dense model. */
size_t model_active_param_count(const ModelConfig *c);
/* Training FLOPs per token, the PaLM-appendix count: 6 * (parameters used in matmuls) +
 * 12 * n_layer * context * d_model (attention scores and mixing over the full context).
 * Forward is 2 FLOPs per multiply-add, backward twice that; embedding lookups, norms and
 * nonlinearities are not counted. With a mixture of experts the parameters are the active
 * ones (k experts and the router per MoE block). Documented in docs/metrics.md. */
double model_flops_per_token(const ModelConfig *c);
/* Bytes of KV cache per generated token (fp32 k and v for every layer and kv head). */
double model_kv_bytes_per_token(const ModelConfig *c);

#endif
