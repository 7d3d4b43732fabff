#define _DEFAULT_SOURCE
/* make_tokens: writes a small pre-tokenized file (format in docs/runtime.md) of progressions for tests:
 *   make_tokens OUT VOCAB SEQUENCES [corrupt]   ("corrupt" cuts the file short after writing it) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rt_data.h"

int main(int argc, char **argv)
{
    if (argc < 4) return 2;
    uint32_t vocab = (uint32_t)atoi(argv[2]);
    uint64_t n = (uint64_t)atoll(argv[3]), *offsets = malloc((n + 1) * sizeof *offsets);
    uint32_t *tokens = malloc(n * 64 * sizeof *tokens);
    offsets[0] = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = 8 + i % 40;
        for (uint64_t k = 0; k < len; k++)
            tokens[offsets[i] + k] =
                RT_FIRST_TOKEN + (uint32_t)((i * 7 + k * (1 + i % 3)) % (vocab - RT_FIRST_TOKEN));
        offsets[i + 1] = offsets[i] + len;
    }
    et_error err;
    if (rt_token_file_write(argv[1], vocab, offsets, n, tokens, &err)) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    if (argc > 4) { /* drop the last 10 bytes */
        FILE *f = fopen(argv[1], "r+b");
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fclose(f);
        if (truncate(argv[1], size - 10)) return 1;
    }
    free(offsets);
    free(tokens);
    return 0;
}
