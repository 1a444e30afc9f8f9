/* Threads inside a run (--blas-threads K): the model's loops outside the GEMMs
 * and the products in ablate's own kernel (src/model/gemm_small.h) cut into K contiguous
 * chunks; products in OpenBLAS run on its own K threads. Without them a run on K cores
 * spent the cross-entropy, AdamW, the activations and attention on one.
 *
 * Determinism: a chunk's work never depends on where the cuts fall. Callers give each index
 * independent work (rows, attention lanes, parameters, blocks of a sum) and never reduce
 * across chunks, and cut only at multiples of a grain that keeps every vector loop's body
 * and tail on the same elements, so results are the same bits for every K (test_par checks
 * it). */
#ifndef ABLATE_MODEL_PAR_H
#define ABLATE_MODEL_PAR_H

#include <stddef.h>

#define PAR_MAX_THREADS 64
/* How long a worker spins for the next job, and the caller for the last piece, before
 * sleeping (ns): in a book step on a 2-core VM, 30 us left wake-ups of ~13 us, 100 us ~4 us
 * (a wake-up from sleep ~30 us), 300 us no fewer. */
#define PAR_SPIN_NS 100000

/* Floats of work (elements, or multiply-adds) below which a piece is not worth waking a
 * thread for: callers size their grain from it, so small models run inline. A wake-up and
 * the wait for it cost ~10 us on a VM: at 2^16, micro's attention and cross-entropy were cut
 * in pieces and its step took 0.70 ms on 2 threads against 0.49 ms on one (its products, in
 * ablate's own kernel, run on one thread); at 2^18 both 0.49 ms, book's step on 2 threads
 * unchanged (242-245 against 244-247 ms; 2^20 was 257 ms). */
#define PAR_MIN_WORK (1 << 18)

/* Work (par_grain's unit) of a float a memory-bound loop moves (a copy, a transpose, a
 * scaling of rows): about 4 multiply-adds of a product. */
#define PAR_COPY_WORK 4

/* The grain, in units of `unit_work` each, that gives pieces of at least PAR_MIN_WORK,
 * rounded up to a multiple of `multiple` (the alignment a caller's bits need). */
size_t par_grain(size_t unit_work, size_t multiple);
/* Tests: the minimum work of a piece (<= 0 restores PAR_MIN_WORK), so that small models
 * take the threaded paths. */
void par_set_min_work(long work);

/* fn(ctx, begin, end, chunk) for consecutive pieces of [0, n), each a multiple of grain
 * long except the last; chunk < par_threads() numbers the piece (per-chunk scratch).
 * Runs inline when there is one thread, n < 2 grain, or another par_for is running (from
 * inside a piece, or from another thread); returns when every piece is done. */
void par_for(size_t n, size_t grain, void (*fn)(void *ctx, size_t begin, size_t end, int chunk),
             void *ctx);
/* Workers waiting for a job sleep now instead of spinning: for a caller about to hand the
 * cores to another pool of threads (OpenBLAS's), which a spinning worker would slow. */
void par_idle(void);
/* Threads par_for uses (1..PAR_MAX_THREADS; starts at 1). Not while a par_for runs. */
void par_set_threads(int k);
int par_threads(void);

#endif
