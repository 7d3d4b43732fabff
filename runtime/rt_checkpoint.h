/* rt_checkpoint: etrun's training state on disk: step, optimizer step count, parameters and Adam moments.
 * Written atomically (temporary file, then rename) as DIR/checkpoint.bin, DIR created with its parents;
 * loading checks the magic, the size and that the parameter count matches the plan's model. Errors fill *err.
 */
#ifndef ET_RT_CHECKPOINT_H
#define ET_RT_CHECKPOINT_H

#include "et_error.h"
#include "rt_model.h"

/* Creates the checkpoint folder now and checks that a checkpoint can be written in it (before training). */
int rt_checkpoint_prepare(const char *dir, et_error *err);

int rt_checkpoint_save(const char *dir, const rt_model *m, long long next_step, et_error *err);
int rt_checkpoint_load(const char *dir, rt_model *m, long long *next_step, et_error *err);

#endif
