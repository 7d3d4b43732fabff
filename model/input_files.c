#include "input_files.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char **noted;
static int n_noted, cap_noted;

void et_input_note(const char *path)
{
    if (!path || !*path) return;
    for (int i = 0; i < n_noted; i++)
        if (strcmp(noted[i], path) == 0) return;
    if (n_noted == cap_noted) {
        int cap = cap_noted ? 2 * cap_noted : 16;
        char **grown = realloc(noted, (size_t)cap * sizeof *grown);
        if (!grown) return;
        noted = grown;
        cap_noted = cap;
    }
    char *copy = strdup(path);
    if (copy) noted[n_noted++] = copy;
}

const char *et_input_match(const char *path)
{
    struct stat out, in;
    if (!path || stat(path, &out) != 0) return NULL;
    for (int i = 0; i < n_noted; i++)
        if (stat(noted[i], &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino) return noted[i];
    return NULL;
}
