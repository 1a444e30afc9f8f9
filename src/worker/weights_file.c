#include "weights_file.h"

int weights_file_path(const char *data_dir, const char *id, char *buf, size_t n) {
    return snprintf(buf, n, "%s/weights/%s.f32", data_dir, id) < (int)n ? 0 : -1;
}

int weights_file_write(FILE *f, const GPT *g) {
    WeightsHeader h = {RUN_WEIGHTS_MAGIC, g->cfg.vocab_size, 0, g->n_params};
    if (fwrite(&h, sizeof h, 1, f) != 1) return -1;
    return fwrite(g->params, sizeof(float), g->n_params, f) == g->n_params ? 0 : -1;
}
