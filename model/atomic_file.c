#define _POSIX_C_SOURCE 200809L
#include "atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int et_atomic_write(const char *path, et_file_writer writer, void *ctx, et_error *err)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp) return et_error_set(err, path, 0, 0, NULL, "out of memory");
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        et_error_set(err, path, 0, 0, NULL, "cannot create a temporary file beside it: %s", strerror(errno));
        free(tmp);
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* mkstemp creates 0600; outputs are ordinary files */
    FILE *f = fdopen(fd, "w");
    if (!f) {
        et_error_set(err, path, 0, 0, NULL, "cannot open the temporary file: %s", strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    int rc = writer(f, ctx);
    if (rc == 0 && fflush(f) != 0) rc = -1;
    int saved = errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        et_error_set(err, path, 0, 0, NULL, "cannot write: %s", strerror(saved));
    }
    free(tmp);
    return rc ? -1 : 0;
}

static int write_json(FILE *out, void *ctx)
{
    if (json_dumpf((const json_t *)ctx, out, ET_JSON_FILE_FLAGS)) return -1;
    return fputc('\n', out) == EOF ? -1 : 0;
}

int et_atomic_write_json(const char *path, const json_t *value, et_error *err)
{
    return et_atomic_write(path, write_json, (void *)value, err);
}
