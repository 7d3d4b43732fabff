/* batch_shape: the shape of one micro-batch in the letters of graph.h: B sequences, T tokens, Q the sum of
 * squared lengths, P scored positions. Every op's cost is linear in it (et_linear_eval). */
#ifndef ET_BATCH_SHAPE_H
#define ET_BATCH_SHAPE_H

typedef struct et_batch_shape {
    double sequences;   /* B */
    double tokens;      /* T */
    double tokens_sq;   /* Q */
    double predictions; /* P */
} et_batch_shape;

/* Every field NaN: what shape-returning functions give when they run out of memory, so that a failure
 * shows up as NaN in every figure derived from it, never as a plausible (empty) batch. */
et_batch_shape et_batch_shape_unknown(void);

#endif
