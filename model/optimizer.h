/* optimizer: the optimizers a scenario can name (the cost model's optimizer ops and etrun's updates). */
#ifndef ET_OPTIMIZER_H
#define ET_OPTIMIZER_H

typedef enum { ET_OPT_ADAM, ET_OPT_ADAMW, ET_OPT_LAMB } et_optimizer;
extern const char *const et_optimizer_names[]; /* "adam", "adamw", "lamb", NULL */

#endif
