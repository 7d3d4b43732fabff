#define _POSIX_C_SOURCE 200809L
#include "atomic_file.h"

#include "input_files.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file `path` names, links followed (a new string), or a copy of `path` when it does not exist yet. */
static char *resolve(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (real) return real;
        /* a link to a file not written yet: its target, relative to the link's folder */
        char link[4096];
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = 0;
            const char *slash = strrchr(path, '/');
            size_t dir = link[0] == '/' || !slash ? 0 : (size_t)(slash - path + 1);
            char *out = malloc(dir + (size_t)n + 1);
            if (out) {
                memcpy(out, path, dir);
                memcpy(out + dir, link, (size_t)n + 1);
            }
            return out;
        }
    }
    return strdup(path);
}

static int write_to(const char *path, const char *shown, et_file_writer writer, void *ctx, et_error *err);

static int atomic_write(const char *path, et_file_writer writer, void *ctx, int guard, et_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return et_error_set(err, path, 0, 0, NULL, "not a regular file (a folder or a device): not replaced");
    const char *input = guard ? et_input_match(path) : NULL; /* read after the outputs were checked */
    if (input)
        return et_error_set(err, path, 0, 0, NULL, "the input %s itself: refusing to overwrite it", input);
    char *target = resolve(path);
    if (!target) return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    int rc = write_to(target, path, writer, ctx, err);
    free(target);
    return rc;
}

int et_atomic_write(const char *path, et_file_writer writer, void *ctx, et_error *err)
{
    return atomic_write(path, writer, ctx, 1, err);
}

int et_atomic_replace_input(const char *path, et_file_writer writer, void *ctx, et_error *err)
{
    return atomic_write(path, writer, ctx, 0, err);
}

/* The temporary file being written, removed if the process is interrupted (SIGINT, SIGTERM, SIGHUP)
 * before it is renamed into place: an interrupted write leaves nothing behind (SIGKILL cannot be caught). */
static char pending[4096];
static volatile sig_atomic_t have_pending;

static void remove_pending(int sig)
{
    if (have_pending) unlink(pending);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watch(const char *tmp)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    snprintf(pending, sizeof pending, "%s", tmp);
    have_pending = 1;
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(sigs[i], remove_pending);
    }
}

static void unwatch(void)
{
    have_pending = 0;
}

static int write_to(const char *path, const char *shown, et_file_writer writer, void *ctx, et_error *err)
{
    (void)shown;
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp) return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "cannot create a temporary file beside it: %s",
                          strerror(errno));
        free(tmp);
        return -1;
    }
    watch(tmp);
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* mkstemp creates 0600; outputs are ordinary files */
    FILE *f = fdopen(fd, "w");
    if (!f) {
        et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "cannot open the temporary file: %s",
                          strerror(errno));
        close(fd);
        unlink(tmp);
        unwatch();
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
        et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "cannot write: %s", strerror(saved));
    }
    unwatch();
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

int et_output_check(const char *path, const char *what, const char *const *inputs, int n, et_error *err)
{
    struct stat out;
    if (stat(path, &out) == 0) {
        if (!S_ISREG(out.st_mode))
            return et_error_set(err, path, 0, 0, NULL, "%s names a folder or a device, not a file to write",
                                what);
        for (int i = 0; i < n; i++)
            et_input_note(inputs[i]);
        const char *input = et_input_match(path);
        if (input)
            return et_error_set(err, path, 0, 0, NULL, "%s is the input %s itself: refusing to overwrite it",
                                what, input);
    }
    /* can a file be created beside it? (the same test the atomic write will make, made now) */
    char *target = resolve(path);
    if (!target) return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    size_t len = strlen(target) + 16;
    char *tmp = malloc(len);
    int rc = 0;
    if (!tmp) {
        rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    } else {
        snprintf(tmp, len, "%s.tmp.XXXXXX", target);
        int fd = mkstemp(tmp);
        if (fd < 0) {
            rc = et_error_set(err, path, 0, 0, NULL, "%s: cannot write here: %s", what, strerror(errno));
        } else {
            close(fd);
            unlink(tmp);
        }
    }
    free(tmp);
    free(target);
    return rc;
}
