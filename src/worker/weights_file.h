/* A run's final parameters on disk: OUT.h5.d/weights/<id>.f32, written durably by the run
 * before it is reported finished (process/run_exec.c) and copied into OUT.h5's /weights by
 * the view (record/h5view.c). A WeightsHeader, then n_params float32 in tensor-table order
 * (model/gpt.h). */
#ifndef ABLATE_WORKER_WEIGHTS_FILE_H
#define ABLATE_WORKER_WEIGHTS_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/gpt.h"

#define RUN_WEIGHTS_MAGIC 0x31574c42u /* "BLW1" */
typedef struct {
    uint32_t magic;
    int32_t vocab_size; /* resolved: the tensor table needs it */
    int32_t reserved;
    uint64_t n_params;
} WeightsHeader;

/* DATA_DIR/weights/<id>.f32 (DATA_DIR: OUT.h5.d); 0, or -1 if it does not fit in n. */
int weights_file_path(const char *data_dir, const char *id, char *buf, size_t n);
/* The header and parameters of g into f; 0, or -1 when a write fails. */
int weights_file_write(FILE *f, const GPT *g);

#endif
