/* error_band: how far to trust a prediction, from the published runs ET was checked against.
 *
 * bench/validation.sh writes scenarios/data/validation/errors.csv: for every published run ET expresses
 * (scenarios/validation/), its family, ET's signed error against the published step and its model's shape
 * (et_error_band_model). A prediction's family is its device generation (the profile name's first word: A100,
 * H100, B200, GB200, ...), its software stack (software.h), its parallel shape (data: tensor and pipeline 1;
 * tensor: tensor > 1, pipeline 1; pipeline: pipeline > 1), whether ZeRO 2 or 3 shards it over the data ranks
 * ("sharded") and whether the model is a mixture of experts ("experts": its routing and all-to-alls are
 * another step). A scenario that names no stack (the preset "fused") takes its generation and shape's rows
 * under every stack, and its family says "any stack".
 * The band is the p10 and p90 (nearest rank, quantile.h) of measured / ET over the family's rows: the step
 * a run of this kind took, for each second ET predicts. It needs ET_BAND_ROWS rows of ET_BAND_MODELS models
 * (rows of fewer models cannot speak for a model they do not include: bench/validation.sh counts it, held
 * out), or ET_BAND_ROWS of the scenario's own model among them. A family short of them takes the first of its
 * generation's rows under every stack, then in every shape of its stack, then all of its generation's, that
 * has them (rows_family says which, and what the family had); none: no band, said so. No band crosses the
 * device generation. Held out (et_error_band_hold_out, etsim --band-held-out): the rows of the scenario's own
 * model are left out, so the band is what a model ET was never checked on gets; bench/validation.sh counts
 * how often a run falls inside the band held out from it.
 *
 * Contract: et_error_band_of() never fails: a missing or unreadable errors.csv, or a family without
 * rows, gives rows 0 (or no band) and the text says which; nothing is left allocated. */
#ifndef ET_ERROR_BAND_H
#define ET_ERROR_BAND_H

#include <stdbool.h>
#include <stddef.h>

#include "scenario.h"

#define ET_BAND_NEAREST 3
#define ET_BAND_ROWS 3   /* rows a band needs */
#define ET_BAND_MODELS 3 /* and the models they come from */

typedef struct et_error_band {
    char family[64];       /* "H100 megatron-core pipeline", "H100 pipeline, any stack" */
    char model[64];        /* the model's shape, et_error_band_model: "96x12288x49152x0" */
    bool held_out;         /* the rows of `model` were left out (et_error_band_hold_out) */
    char rows_family[192]; /* the rows that make the band: `family`, or a wider level of its generation and
                              what the family had ("H100 data sharded, any stack (H100 pytorch-fsdp data
                              sharded: 0 runs of 0 models)") */
    int rows;              /* validated rows of rows_family */
    int models;            /* the models they come from */
    bool band;             /* rows and models enough for low and high */
    double low, high;      /* p10 and p90 of measured / ET (the band is step x low .. step x high), widened
                              when the rows hold fewer than ET_BAND_ROWS runs of the scenario's own model */
    double widening;       /* that widening of each edge's log distance from the rows' median: a prediction
                              interval's t(models - 1) / z x sqrt(1 + 1 / models) for a model outside the
                              rows; 1 when they hold ET_BAND_ROWS of its own runs */
    double mean_error;     /* mean signed error of ET against the rows, (ET - published) / published */
    int n_nearest;
    char nearest[ET_BAND_NEAREST][96]; /* the family's rows on GPU counts nearest this plan's */
} et_error_band;

void et_error_band_of(const et_scenario *s, et_error_band *out);

/* The model's shape as errors.csv's `model` column names it: layers x hidden x ffn x experts
 * ("32x4096x16384x0"); runs of one model on any device, batch or stack share it. */
void et_error_band_model(const et_scenario *s, char *out, size_t size);

/* Process-wide: every band from now on leaves out the rows of its scenario's own model. Set once by main,
 * before any band is read (a search's threads only read it). */
void et_error_band_hold_out(bool on);

/* Which of its device's ET_BAND_SHAPES families a scenario belongs to (data, tensor, pipeline; each
 * unsharded or sharded), and the slow edge (`high`) of every one's band on s's device, 1 where a family has
 * no band: what a plan search checks a deadline against, read once for all its plans. */
#define ET_BAND_SHAPES 6
int et_error_band_shape(const et_scenario *s);
void et_error_band_edges(const et_scenario *s, double edge[ET_BAND_SHAPES]);

#endif
