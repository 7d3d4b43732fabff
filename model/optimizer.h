/* optimizer: the optimizers a scenario can name (the cost model's optimizer ops and etrun's updates). */
#ifndef ET_OPTIMIZER_H
#define ET_OPTIMIZER_H

typedef enum { ET_OPT_ADAM, ET_OPT_ADAMW, ET_OPT_LAMB } et_optimizer;
extern const char *const et_optimizer_names[]; /* "adam", "adamw", "lamb", NULL */

/* GaLore (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank Projection"): the
 * gradient of each attention and MLP weight matrix (m x n, m <= n) is projected on its top `rank` left
 * singular vectors, P^T G (r x n), Adam's states are kept at that size, and the update is projected back;
 * P is recomputed from an SVD of the gradient every `update_interval` steps. rank 0: off. */
typedef struct et_galore {
    int rank;
    int update_interval;
} et_galore;

#endif
