/* error_band: how far to trust a prediction, from the published runs ET was checked against.
 *
 * bench/validation.sh writes scenarios/data/validation/errors.csv: for every published run ET expresses
 * (scenarios/validation/), its family and ET's signed error against the published step. A prediction's
 * family is its device generation (the profile name's first word: A100, H100, B200, GB200, ...), its
 * software stack (software.h), its parallel shape (data: tensor and pipeline 1; tensor: tensor > 1,
 * pipeline 1; pipeline: pipeline > 1), whether ZeRO 2 or 3 shards it over the data ranks ("sharded") and
 * whether the model is a mixture of experts ("experts": its routing and all-to-alls are another step). A
 * scenario that names no stack (the preset "fused") takes the rows of its generation and shape under every
 * stack, and its family says "any stack"; so does one whose stack has fewer than three rows of its own
 * when the other stacks' make a band (rows_family says so, family stays the scenario's).
 * The band is the p10 and p90 (nearest rank, quantile.h) of measured / ET over that family's rows: the
 * step a run of this kind took, for each second ET predicts. Fewer than three rows: no band, said so.
 *
 * Contract: et_error_band_of() never fails: a missing or unreadable errors.csv, or a family without
 * rows, gives rows 0 (or fewer than 3) and the text says which; nothing is allocated. */
#ifndef ET_ERROR_BAND_H
#define ET_ERROR_BAND_H

#include "scenario.h"

#define ET_BAND_NEAREST 3

typedef struct et_error_band {
    char family[64];      /* "H100 megatron-core pipeline", "H100 pipeline, any stack" */
    char rows_family[96]; /* the family whose rows make the band: `family`, or its generation and shape under
                             every stack ("H100 data sharded, any stack: 0 of pytorch-fsdp") */
    int rows;             /* validated rows of the family */
    double low, high;     /* p10 and p90 of measured / ET (the band is step x low .. step x high) */
    double mean_error;    /* mean signed error of ET against the rows, (ET - published) / published */
    int n_nearest;
    char nearest[ET_BAND_NEAREST][96]; /* the family's rows on GPU counts nearest this plan's */
} et_error_band;

void et_error_band_of(const et_scenario *s, et_error_band *out);

/* Which of its device's ET_BAND_SHAPES families a scenario belongs to (data, tensor, pipeline; each
 * unsharded or sharded), and the slow edge (`high`) of every one's band on s's device, 1 where a family has
 * no band: what a plan search checks a deadline against, read once for all its plans. */
#define ET_BAND_SHAPES 6
int et_error_band_shape(const et_scenario *s);
void et_error_band_edges(const et_scenario *s, double edge[ET_BAND_SHAPES]);

#endif
