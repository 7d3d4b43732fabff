/* checksum: xxh64 (seed 0, libxxhash) of a file's bytes, which ties an output to the exact input it came
 * from (measured.json names its plan's checksum, so a run is never joined with another plan of the same op
 * ids).
 *
 * Contract: fills *out and returns 0, or fills *err (ET_ERROR_INPUT when the file cannot be opened,
 * ET_ERROR_IO on a read error, ET_ERROR_MEMORY) and returns -1. et_xxh64_hex() formats 16 hex digits. */
#ifndef ET_CHECKSUM_H
#define ET_CHECKSUM_H

#include "et_error.h"

int et_file_xxh64(const char *path, unsigned long long *out, et_error *err);
void et_xxh64_hex(unsigned long long h, char out[17]);

#endif
