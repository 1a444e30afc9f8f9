/* The GPT's layers as *_forward / *_backward pairs over plain float arrays. Shapes are in
 * the comments: N = B*T rows, C channels. Backward functions ACCUMULATE (+=) into parameter
 * gradients; into input gradients they accumulate unless the comment says otherwise. */
#ifndef ABLATE_MODEL_LAYERS_H
#define ABLATE_MODEL_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* out (N,OC) = inp (N,C) W^T + bias; W (OC,C), bias (OC) or NULL. Wt (C,OC) is W transposed
 * when the caller keeps that copy, else NULL: the product then runs in the form OpenBLAS's
 * small-matrix kernels take (gemm.h). */
void matmul_forward(float *out, const float *inp, const float *W, const float *Wt,
                    const float *bias, int N, int C, int OC);
/* dinp (N,C) = dinp*beta + alpha dout W; dW += alpha dout^T inp; dbias += alpha column sums
 * of dout. dinp may be NULL (input needs no gradient), dbias NULL when there is no bias. */
void matmul_backward(float *dinp, float beta, float *dW, float *dbias, const float *dout,
                     float alpha, const float *inp, const float *W, int N, int C, int OC);
/* The same with ReLU fused (relu_forward_inplace's and relu_backward_inplace's bits): out =
 * max(0, .) of matmul_forward's; dinp zeroed where inp <= 0, inp being the ReLU's output (the
 * MLP's down projection), so that dinp is the gradient of its pre-activation. */
void matmul_forward_relu(float *out, const float *inp, const float *W, const float *Wt,
                         const float *bias, int N, int C, int OC);
void matmul_backward_relu(float *dinp, float beta, float *dW, float *dbias, const float *dout,
                          float alpha, const float *inp, const float *W, int N, int C, int OC);

/* rmsnorm: out = x / sqrt(mean(x^2) + eps) * w; layernorm: (x - mean) / sqrt(var + eps) * w + b.
 * w, b may be NULL (no affine). mean (N) is only written for layernorm; rstd (N). */
void norm_forward(NormType type, float *out, float *mean, float *rstd, const float *inp,
                  const float *w, const float *b, int N, int C, float eps);
/* dinp += d/dinp; dw, db += (when non-NULL). */
void norm_backward(NormType type, float *dinp, float *dw, float *db, const float *dout,
                   const float *inp, const float *mean, const float *rstd, const float *w, int N,
                   int C);

/* h (N,F) = act(pre): pre is (N,F), or (N,2F) [gate | value] for GLU activations. */
void activation_forward(Activation act, float *h, const float *pre, int N, int F);
/* dpre (N,F or 2F) = d/dpre (overwrites). */
void activation_backward(Activation act, float *dpre, const float *dh, const float *pre, int N,
                         int F);

/* Whether act' is a function of act's output, so the MLP can keep the output alone: the
 * forward overwrites the pre-activation with it and the backward reads it. ReLU only:
 * relu'(x) = [relu(x) > 0]. The MLP's largest buffers, (B,T,4C) each, are then two fewer. */
int activation_in_place(Activation act);
/* x (n) = max(x, 0) in place;  d (n) *= [h > 0] in place, h the ReLU's output. */
void relu_forward_inplace(float *x, size_t n);
void relu_backward_inplace(float *d, const float *h, size_t n);

/* RoPE angles of position pos: cos_row[i], sin_row[i] = cos, sin(pos * base^(-2i/hd)), i < hd/2.
 * gpt_acts_alloc tabulates every position of the context once, for training and generation. */
void rope_angles(float *cos_row, float *sin_row, int pos, int hd, double base);
/* RoPE on one head vector x (hd) with its position's angles, half-split pairs (i, i + hd/2);
 * inverse = 1 rotates by -angle (the backward of a rotation is its transpose). */
void rope_rotate(float *x, int hd, const float *cos_row, const float *sin_row, int inverse);

/* The largest of x (n), and the sum of exp(x - m) over x (m >= every x): in LANES partial
 * sums combined in a fixed order, so softmax_row and the cross-entropy (xent.c) add alike. */
float row_max_lanes(const float *x, int n);
float exp_sum_lanes(const float *x, int n, float m);
/* e[j] = exp(x[j] - m) for j < n (e may be x); returns their sum, added as exp_sum_lanes
 * adds it. */
float exp_store_lanes(float *e, const float *x, int n, float m);
/* exp_store_lanes and row_max_lanes in one pass, for an m that need not bound x: returns the
 * sum and sets *max = row_max_lanes(x, n). When *max <= m, e and the sum are exp_store_lanes's
 * to the bit; else they are not usable (each x above m counts as m). */
float exp_store_max_lanes(float *restrict e, const float *restrict x, int n, float m, float *max);

/* x (n) -> exp(x - max) / sum, in place. */
void softmax_row(float *x, int n);

#endif
