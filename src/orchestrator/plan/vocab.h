/* Resolving model.vocab_size for planning: the data decides it (char vocabularies need the
 * file read), so planned runs are sized exactly as they will train. Cached per data source. */
#ifndef ABLATE_ORCHESTRATOR_VOCAB_H
#define ABLATE_ORCHESTRATOR_VOCAB_H

#include "worker/data.h"

typedef struct VocabCache VocabCache;

VocabCache *vocab_cache_new(void);
void vocab_cache_free(VocabCache *vc);
/* The loaded dataset behind a config's data section (loaded once, owned by the cache). */
const Dataset *vocab_dataset(VocabCache *vc, const RunConfig *cfg, char err[ABL_ERR_MAX]);

#endif
