/* The sizes every layer shares, the model's included: the base of the include order
 * (util/, then model/, tokenizer/, worker/, orchestrator/ plan, record, schedule, process,
 * then cli/; tests/check_layers.py keeps includes from going up it). Nothing but macros. */
#ifndef ABLATE_UTIL_SIZES_H
#define ABLATE_UTIL_SIZES_H

/* An error message: one line (`char err[ABL_ERR_MAX]` parameters). */
#define ABL_ERR_MAX 512
/* A file path ablate keeps (data files, outputs, checkpoints). */
#define ABL_PATH_MAX 1024
/* A run id as text: 16 hex digits of its hash and the NUL (plan/run_id.h). */
#define RUN_ID_CHARS 17
/* A host name as ablate keeps it (gethostname, MPI's host exchange, the journal's begin). */
#define HOST_MAX 64

#endif
