#include "checksum.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int et_xxh64_stream(FILE *f, unsigned long long bytes, unsigned long long *out)
{
    XXH64_state_t *st = XXH64_createState();
    char *chunk = malloc(1 << 20);
    int rc = st && chunk ? -1 : -2;
    if (st && chunk) {
        XXH64_reset(st, 0);
        unsigned long long left = bytes;
        while (left > 0) {
            const size_t want = left < (1u << 20) ? (size_t)left : (size_t)1 << 20;
            const size_t got = fread(chunk, 1, want, f);
            XXH64_update(st, chunk, got);
            if (got < want) break; /* end of file or an error */
            left -= got;
        }
        if (!ferror(f) && (left == 0 || bytes == ET_XXH64_TO_END)) {
            *out = XXH64_digest(st);
            rc = 0;
        }
    }
    free(chunk);
    XXH64_freeState(st);
    return rc;
}

int et_file_xxh64(const char *path, unsigned long long *out, et_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open: %s", strerror(errno));
    const int rc = et_xxh64_stream(f, ET_XXH64_TO_END, out);
    fclose(f);
    if (rc == -2) return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    return rc ? et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "read error") : 0;
}

void et_xxh64_hex(unsigned long long h, char out[17])
{
    snprintf(out, 17, "%016llx", h);
}
