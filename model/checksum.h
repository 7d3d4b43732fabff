/* checksum: xxh64 (seed 0, libxxhash) of a file's bytes, which ties an output to the exact input it came
 * from (measured.json names its plan's checksum, so a run is never joined with another plan of the same op
 * ids).
 *
 * Contract: et_file_xxh64() fills *out and returns 0, or fills *err (ET_ERROR_INPUT when the file cannot be
 * opened, ET_ERROR_IO on a read error, ET_ERROR_MEMORY) and returns -1. et_xxh64_stream() hashes the next
 * `bytes` bytes of an open file (ET_XXH64_TO_END: up to its end) and returns -1 when fewer are there or on
 * a read error, -2 out of memory (checkpoints hash all but their stored sum with it). et_xxh64_hex()
 * formats 16 hex digits. */
#ifndef ET_CHECKSUM_H
#define ET_CHECKSUM_H

#include <stdio.h>

#include "et_error.h"

#define ET_XXH64_TO_END (~0ULL)

int et_file_xxh64(const char *path, unsigned long long *out, et_error *err);
int et_xxh64_stream(FILE *f, unsigned long long bytes, unsigned long long *out);
void et_xxh64_hex(unsigned long long h, char out[17]);

#endif
