/* Shared by the libFuzzer targets: the parsers read files, so each input is written to one scratch file
 * (in the folder the runner gives in $ET_FUZZ_DIR, else /tmp) and the parser reads it from there. */
#ifndef ET_FUZZ_COMMON_H
#define ET_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The scratch file's path, holding exactly data[0, size). */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *name)
{
    static char path[4096];
    const char *dir = getenv("ET_FUZZ_DIR");
    snprintf(path, sizeof path, "%s/%s.%d", dir && *dir ? dir : "/tmp", name, (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

#endif
