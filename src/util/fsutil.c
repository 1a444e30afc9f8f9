#define _XOPEN_SOURCE 700 /* nftw */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "worker/run_config.h"

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
