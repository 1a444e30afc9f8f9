#define _XOPEN_SOURCE 700 /* nftw */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sizes.h"

void fs_dir_of(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == path)
        snprintf(dir, n, "/");
    else
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

int fs_fsync(const char *path, int is_dir) {
    int fd = open(path, O_RDONLY | (is_dir ? O_DIRECTORY : 0));
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int fs_fsync_dir_of(const char *path) {
    char dir[ABL_PATH_MAX];
    fs_dir_of(path, dir, sizeof dir);
    return fs_fsync(dir, 1);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

int fs_remove_tree(const char *path) {
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int fs_resolve(const char *path, char *out, size_t n) {
    char abs[PATH_MAX];
    if (path[0] == '/') {
        if (snprintf(abs, sizeof abs, "%s", path) >= (int)sizeof abs) return -1;
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) ||
            snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= (int)sizeof abs)
            return -1;
    }
    /* the longest prefix realpath resolves, then the unresolved rest */
    size_t cut = strlen(abs);
    for (;;) {
        char head[PATH_MAX], real[PATH_MAX];
        snprintf(head, sizeof head, "%.*s", (int)cut, abs);
        if (realpath(cut ? head : "/", real)) {
            const char *rest = abs + cut;
            while (*rest == '/')
                rest++;
            int w =
                snprintf(out, n, "%s%s%s", real, *rest && strcmp(real, "/") != 0 ? "/" : "", rest);
            return w < 0 || (size_t)w >= n ? -1 : 0;
        }
        while (cut > 0 && abs[cut - 1] != '/')
            cut--;
        while (cut > 1 && abs[cut - 1] == '/')
            cut--;
        if (cut <= 1) cut = 0;
    }
}

int fs_within(const char *input, const char *target) {
    struct stat a, b;
    if (stat(input, &a) == 0 && stat(target, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return 1;
    char ri[PATH_MAX], rt[PATH_MAX];
    if (fs_resolve(input, ri, sizeof ri) != 0 || fs_resolve(target, rt, sizeof rt) != 0) return 0;
    size_t lt = strlen(rt);
    return strncmp(ri, rt, lt) == 0 && (ri[lt] == '\0' || ri[lt] == '/' || !strcmp(rt, "/"));
}
