/* rt_checkpoint: etrun's training state on disk: step, optimizer step count, parameters and Adam moments,
 * with a fingerprint of what they belong to and a checksum of the whole file.
 *
 * Format (little-endian, docs/runtime.md): the magic "ETCKPT02"; the next step, the parameter count and
 * the optimizer's step count (u64 each); the fingerprint, a u32 length and that many bytes of text, one
 * `key=value` line per field (the model's shape, method, optimizer, precision and an xxh64 of the
 * parameter layout: every parameter's id and size in order); the parameters, first and second moments (fp32,
 * n each); and an xxh64 (seed 0) of every byte before it (libxxhash).
 *
 * Contract: rt_checkpoint_save() writes DIR/checkpoint.bin atomically (a temporary file renamed into place:
 * a file that exists is complete), DIR created with its parents. rt_checkpoint_load() loads
 * DIR/checkpoint.bin or, when DIR holds none, the newest DIR/step-N/checkpoint.bin (a run killed mid-way
 * leaves those; empty step folders are skipped); it refuses, with *err naming the file and what differs:
 * another format, a checksum mismatch (corruption), a fingerprint field that differs from the plan's (named:
 * "model.heads is 8 in the checkpoint, 4 in the plan"), an optimizer step count that is not the step's,
 * non-finite values or a negative second moment. rt_checkpoint_prepare() creates DIR, removes the temporaries
 * and empty step folders a killed run left there, and checks a checkpoint can be written. Errors:
 * ET_ERROR_INPUT for what was read, ET_ERROR_IO for a folder or file that cannot be written, ET_ERROR_MEMORY.
 */
#ifndef ET_RT_CHECKPOINT_H
#define ET_RT_CHECKPOINT_H

#include <stddef.h>

#include "et_error.h"
#include "rt_model.h"

/* Creates the checkpoint folder now, cleans what a killed run left, and checks that a checkpoint can be
 * written in it (before training). */
int rt_checkpoint_prepare(const char *dir, et_error *err);

int rt_checkpoint_save(const char *dir, const rt_model *m, long long next_step, et_error *err);
int rt_checkpoint_load(const char *dir, rt_model *m, long long *next_step, et_error *err);

/* The checkpoint file --resume DIR reads (DIR/checkpoint.bin, else the newest complete DIR/step-N's) into
 * `path`; -1 with *err when there is none. */
int rt_checkpoint_find(const char *dir, char *path, size_t size, et_error *err);

/* The model's fingerprint text (`key=value` lines) into buf; its length, or -1 when it does not fit. */
int rt_checkpoint_fingerprint(const rt_model *m, char *buf, size_t size);

#endif
