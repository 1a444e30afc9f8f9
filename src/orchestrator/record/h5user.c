#include "util/log.h"
#include "h5user.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/json.h"
#include "h5table.h"

#define USER_GROUP "user"

typedef struct {
    hid_t now;
    Buf lost;
    int n;
} Scan;

static void note(Scan *s, const char *what, const char *name) {
    char shown[256];
    if (s->n < 8)
        buf_printf(&s->lost, "%s%s%s", s->n ? ", " : "", what,
                   text_escape(name, shown, sizeof shown));
    s->n++;
}

/* What ablate writes at the root only in some views (docs/hdf5-schema.md): a rebuild that
 * lacks one of these (the live view has no /weights yet) drops nothing of the user's. */
static int ablate_owns(const char *name, int attr) {
    static const char *const links[] = {"spec",        "spec_expanded", "base_config", "data_files",
                                        "vocab",       "steps",         "evals",       "acts",
                                        "attn",        "samples",       "runs",        "weights",
                                        "view_blocks", "view_runs",     USER_GROUP};
    static const char *const attrs[] = {"view", "end_time", "joined_processes", "view_generation"};
    const char *const *list = attr ? attrs : links;
    size_t n = attr ? sizeof attrs / sizeof *attrs : sizeof links / sizeof *links;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, list[i])) return 1;
    return 0;
}

static herr_t root_link(hid_t g, const char *name, const H5L_info_t *info, void *ctx) {
    (void)g, (void)info;
    Scan *s = ctx;
    if (!ablate_owns(name, 0) && H5Lexists(s->now, name, H5P_DEFAULT) <= 0) note(s, "/", name);
    return 0;
}

static herr_t root_attr(hid_t loc, const char *name, const H5A_info_t *info, void *ctx) {
    (void)loc, (void)info;
    Scan *s = ctx;
    if (!ablate_owns(name, 1) && H5Aexists(s->now, name) <= 0) note(s, "attribute ", name);
    return 0;
}

int h5user_carry(const char *old_path, hid_t new_file, char err[ABL_ERR_MAX]) {
    if (access(old_path, F_OK) != 0 || H5Fis_hdf5(old_path) <= 0) return 0;
    hid_t old = H5Fopen(old_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (old < 0) return 0; /* unreadable (a torn file): nothing of it can be kept anyway */
    int rc = 0;
    if (H5Lexists(old, USER_GROUP, H5P_DEFAULT) > 0 &&
        H5Ocopy(old, USER_GROUP, new_file, USER_GROUP, H5P_DEFAULT, H5P_DEFAULT) < 0) {
        h5_err(err, "cannot copy /%s of %s into its rebuild", USER_GROUP, old_path);
        rc = -1;
    }
    Scan s = {new_file, {0}, 0};
    H5Literate(old, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, root_link, &s);
    H5Aiterate2(old, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, root_attr, &s);
    if (s.n)
        log_warn("%s: %s%s not written by ablate and not kept by its rebuild; "
                 "keep your own data under /%s (docs/hdf5-schema.md)",
                 old_path, s.lost.p ? s.lost.p : "", s.n > 8 ? ", ..." : "", USER_GROUP);
    buf_free(&s.lost);
    H5Fclose(old);
    return rc;
}
