/* A run's token stream: tokenizers (char, byte, llm.c .bin, GPT-2 BPE), the train/validation split,
 * random training windows and the fixed evaluation windows. */
#ifndef ABLATE_WORKER_DATA_H
#define ABLATE_WORKER_DATA_H

#include <stdint.h>

#include "tokenizer/bpe.h"
#include "data_identity.h"
#include "run_config.h"

typedef struct {
    int32_t *tokens; /* the whole stream */
    long n_tokens;
    long n_train; /* tokens [0, n_train) train, [n_train, n_tokens - n_test) validation */
    long n_test;  /* the last n_test tokens: the held-out test split (data.test_fraction) */
    int vocab_size;
    Tokenizer tokenizer;
    /* char tokenizer: the sorted distinct bytes of the file; chars[id] is the byte. */
    unsigned char chars[256];
    int char_to_id[256]; /* -1 for bytes not in the vocabulary */
    /* GPT-2's vocabulary: always for gpt2; for tokens when it is installed and vocab_size is
     * GPT-2's (NULL otherwise: prompts are then ids and samples print "<id>") */
    Bpe *bpe;
    DataIdentity identity; /* what was loaded: the bytes' digest, vocabulary, split */
} Dataset;

/* Loads and tokenizes cfg->path. Errors name the file: missing, empty, bad magic,
 * truncated, token out of range, too short for the context. */
int dataset_load(Dataset *d, const DataConfig *cfg, int context, char err[ABL_ERR_MAX]);
void dataset_free(Dataset *d);

/* Random training window b of step `step`: inputs x[0..T) and targets y[0..T) (shifted by
 * one), drawn from the train split with the counter-based RNG keyed by seed. */
void dataset_train_batch(const Dataset *d, uint64_t seed, long step, int B, int T, int32_t *x,
                         int32_t *y);
/* The held-out splits evaluation reads: validation (every evaluation) and test (once, at the
 * end; nothing selects on it). */
typedef enum { SPLIT_VAL, SPLIT_TEST } Split;
/* The evaluation targets of split s: one fixed, contiguous range of the split's tokens, the
 * same for every model.context, so configurations that differ in context are scored on the
 * same tokens. The targets are the n_targets = min(eval_tokens, split length - 1) tokens at
 * stream positions [first, first + n_targets), first = the split's first token + 1; they are
 * covered by consecutive non-overlapping windows of the model's context T (the last one
 * shorter when T does not divide n_targets), so each target is predicted exactly once, from
 * up to T tokens before it (from 1 to T: the context a window's position gives it). */
typedef struct {
    long first;     /* stream position of the first target (0 targets: unused) */
    long n_targets; /* 0: a test split there is not */
    int T;          /* the windows' length (model.context); the last may be shorter */
    int n_windows;  /* ceil(n_targets / T) */
} EvalLayout;
/* The layout for split s: validation (the train split stands in when there is none,
 * val_fraction 0: evaluation then measures training loss) or test (none: 0 targets). */
EvalLayout dataset_eval_layout(const Dataset *d, Split s, long eval_tokens, int T);
/* Window k of the layout: inputs x[0..len) and targets y[0..len) (shifted by one); returns
 * len, T for every window but a shorter last one. Window k's targets start at stream position
 * first + k * T. */
int dataset_eval_window(const Dataset *d, const EvalLayout *l, int k, int32_t *x, int32_t *y);

/* Encodes text (prompt) into ids: char/byte by character (unknown characters are an error),
 * gpt2 by GPT-2's BPE, tokens as whitespace-separated ids (or, when GPT-2's vocabulary is
 * loaded and the text is not a list of ids, by BPE). Returns count or -1. */
int dataset_encode(const Dataset *d, const char *text, int32_t *out, int max,
                   char err[ABL_ERR_MAX]);
/* Decodes ids to text: char/byte by character; gpt2 (and tokens with GPT-2's vocabulary
 * loaded) to UTF-8, invalid sequences shown as U+FFFD as GPT-2's decoder does; tokens without
 * it as "<id>" per token. Returns bytes written, always NUL-terminated. */
int dataset_decode(const Dataset *d, const int32_t *ids, int n, char *out, int cap);

#endif
