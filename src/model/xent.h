/* The lm_head and the cross-entropy over its logits, tiled over the vocabulary.
 *
 * The (N, V) logits of a training step (1024 x 50,257 floats, 206 MB, on book) used to be
 * written by one GEMM (which first zero-fills its output for beta = 0), then read and
 * written by a max pass, an exp pass and a normalization pass, and read again by the two
 * backward GEMMs. Here the forward computes them in tiles of all N rows x w vocabulary
 * columns (about XENT_TILE_FLOATS floats) into a scratch tile that stays in cache, folds
 * each tile into every row's running maximum and sum of exponentials (online log-sum-exp,
 * Milakov & Gimelshein 2018), and stores exp(logit - the running maximum) in the (N, V)
 * buffer, with one factor per row and tile that turns them into probabilities once the
 * row's maximum and sum are known. The backward runs the two gradient GEMMs on those
 * stored exponentials directly, the factors applied to the N x C sides (a row scale of the
 * product, a row scale of X), and the one-hot target as a rank-one correction: no pass over
 * the logits between the products, and no exponential in the backward. (Cut Cross-Entropy,
 * Wijmans et al. 2024, recomputes the logit tiles in the backward instead; at book's shapes
 * the lm_head is 89% of the step's GEMM FLOPs, and a recompute would add a third of them:
 * measured, the lm_head and loss took 37-53% longer with it.)
 *
 * Tiles span all rows, never a few rows of the whole vocabulary: a GEMM of ~8 rows would
 * re-read the 25.7 MB weight per chunk. The weight is read once per pass.
 *
 * Results depend on N and V only (the tiling), never on threads or ranks. */
#ifndef ABLATE_MODEL_XENT_H
#define ABLATE_MODEL_XENT_H

#include <stddef.h>
#include <stdint.h>

/* 8 MiB tiles: 2,048 columns of book's 1,024 rows. Measured on the lm_head and loss of a
 * book step alone (forward and backward, CPU time, one Zen 4 core under load, OpenBLAS
 * products): 256 columns 1-8% faster than untiled, 512 -2..12%, 1,024 10-15%, 2,048 10-20%,
 * 4,096 12%; 64 columns 50% slower (each tile's GEMMs pack the rows' inputs again, and
 * narrow products run below the kernels' rate). */
#define XENT_TILE_FLOATS (1 << 21)

/* On AVX-512 builds a tile is narrowed until its products are ones the own kernel takes on
 * every OpenBLAS core (N w C <= GEMM_WIDE_MAX_MNK, gemm_small.h), unless that leaves fewer
 * than this many columns: book's tiles are then 512 columns. On one Zen 5 core with
 * OpenBLAS's SkylakeX core, book's lm_head and loss took a median of 212.0 ms a step that
 * way against 235.0 ms with 2,048 columns in OpenBLAS, and 117.5 ms against 131.8 ms on two
 * threads (xent_forward and xent_backward timed alone, 6 rounds, processes interleaved);
 * with the own kernel at both widths (OpenBLAS's Haswell core), about the same on one thread.
 * With a d_model of 256 (256-column tiles against 2,048): 377-442 against 433-508 ms with
 * the Haswell core, 396-400 against 378-394 ms with SkylakeX; on two threads 201-219 against
 * 238-261 and about the same. And the tiles' products are then the own kernel's whichever
 * core OpenBLAS runs: with book's layers (<= 2^26 too), a training run gets the same bits on
 * an AVX2 and an AVX-512 core. */
#define XENT_OWN_MIN_COLS 256

/* Vocabulary columns of a tile for N rows of C inputs: a multiple of 16 (at least 16), or V
 * itself. */
int xent_tile_cols(int N, int C, int V);
/* Floats of the scratch xent_forward and xent_backward need for any pass of up to N rows of
 * C inputs: the tile, and what the forward leaves for the backward. */
size_t xent_scratch_floats(int N, int C, int V);
/* Tests: the tile size in floats (<= 0 restores XENT_TILE_FLOATS). */
void xent_set_tile_floats(long n);

/* logits (N,V) = X (N,C) W^T, W (V,C) or its transpose Wt (C,V) when the caller keeps it
 * (NULL otherwise), tile by tile; returns the mean cross-entropy against targets; *correct
 * receives the rows whose argmax (ties toward the lower id) is the target. row_max, row_sum
 * (N) receive each row's maximum and sum of exp(logit - max). What stays for xent_backward:
 * `exps` (N,V) holds exp(logit - a running maximum), not the logits, and the scratch the
 * factors that make them probabilities; pass both to xent_backward unchanged. */
float xent_forward(float *exps, float *row_max, float *row_sum, const float *X, const float *W,
                   const float *Wt, int N, int C, int V, const int32_t *targets, long *correct,
                   float *scratch);

/* dX (N,C) = alpha (softmax - onehot) W (overwritten) and dW (V,C) += alpha (softmax -
 * onehot)^T X, from the forward's exps and scratch; alpha is the loss's 1/N. */
void xent_backward(float *dX, float *dW, const float *exps, const int32_t *targets, const float *X,
                   const float *W, int N, int C, int V, float alpha, float *scratch);

#endif
