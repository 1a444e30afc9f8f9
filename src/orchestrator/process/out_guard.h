/* The outputs of `ablate run` never cover its inputs: OUT.h5, OUT.h5.d/ and the journal in
 * it are removed by --force and rewritten by every view, so an -o that names the spec, a
 * data file, or a directory that holds one is refused before anything is touched. */
#ifndef ABLATE_ORCHESTRATOR_OUT_GUARD_H
#define ABLATE_ORCHESTRATOR_OUT_GUARD_H

#include "orchestrator/plan/plan.h"
#include "worker/run_config.h"

/* 0, or -1 with a one-line message naming the input and the output it collides with. */
int out_guard_check(const char *out_path, const char *spec_path, const Plan *p,
                    char err[ABL_ERR_MAX]);

#endif
