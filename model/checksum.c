#include "checksum.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int et_file_xxh64(const char *path, unsigned long long *out, et_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open: %s", strerror(errno));
    XXH64_state_t *st = XXH64_createState();
    char *chunk = malloc(1 << 16);
    int rc = 0;
    if (!st || !chunk) {
        rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    } else {
        XXH64_reset(st, 0);
        size_t n;
        while ((n = fread(chunk, 1, 1 << 16, f)) > 0)
            XXH64_update(st, chunk, n);
        if (ferror(f))
            rc = et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "read error");
        else
            *out = XXH64_digest(st);
    }
    free(chunk);
    XXH64_freeState(st);
    fclose(f);
    return rc ? -1 : 0;
}

void et_xxh64_hex(unsigned long long h, char out[17])
{
    snprintf(out, 17, "%016llx", h);
}
