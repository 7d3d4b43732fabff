/* The step schedule (model/step_schedule.h) against hand-written orders and sums: 1F1B order and the bubble's
 * shares per stage, the last backward cut at every bucket (clipping first), the collectives' waits with
 * overlap on and off, ZeRO 3's gathers on the communication stream, the experts' all-to-alls alternating
 * direction, segments that partition each phase's ops, and pass times that add up to the phase times. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analytic.h"
#include "batch.h"
#include "check.h"
#include "phase_time.h"
#include "scenario_graph.h"
#include "step_schedule.h"

/* A scenario from JSON text (written to a temporary file, the way users give them). */
static int scenario_from(const char *json, et_scenario *s)
{
    char path[] = "/tmp/et-step-schedule-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return -1;
    const ssize_t n = write(fd, json, strlen(json));
    close(fd);
    et_error err;
    const int rc = n == (ssize_t)strlen(json) ? et_scenario_load(path, s, &err) : -1;
    CHECK(rc == 0, "the scenario loads: %s", rc ? err.text : "");
    unlink(path);
    return rc;
}

/* The schedule of `stage` with its graph and buckets (free with done()). */
typedef struct built {
    et_graph g;
    et_op_classes c;
    et_bucket *buckets;
    int nb;
    et_step_schedule q;
} built;

static int build(const et_scenario *s, int stage, bool overlap, built *x)
{
    et_error err;
    et_graph_options o = et_scenario_graph_options(s, stage);
    if (et_graph_build(&s->model, &o, &x->g, &err)) return -1;
    if (et_buckets_build(&x->g, s->parallel.bucket_bytes, et_precision_bytes(s->precision), &x->buckets,
                         &x->nb, &err))
        return -1;
    if (et_op_classes_build(&x->g, &x->c)) return -1;
    return et_step_schedule_build(s, &x->c, stage, x->buckets, x->nb, overlap, &x->q, &err);
}

static void done(built *x)
{
    et_step_schedule_free(&x->q);
    et_op_classes_free(&x->c);
    free(x->buckets);
    et_graph_free(&x->g);
}

/* The step's events as text: "bubble 0.33, F0, send, ..." (passes as F/B/L and their micro-batch). */
static void order_of(const et_step_schedule *q, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < q->n_events && used < size; i++) {
        const et_step_event *e = &q->events[i];
        char one[48];
        if (e->kind == ET_STEP_PASS)
            snprintf(one, sizeof one, "%c%d", "FBL"[e->pass], e -> micro);
        else if (e->kind == ET_STEP_BUBBLE)
            snprintf(one, sizeof one, "bubble %.2f", e->share);
        else
            snprintf(one, sizeof one, "%s", et_step_event_names[e->kind]);
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", one);
    }
}

static const char *pipeline_json =
    "{\"name\": \"p4\", \"model\": {\"preset\": \"gpt3-13b\"}, \"data\": {\"seq_len\": 2048},"
    " \"batch\": {\"global\": 3, \"local\": 1}, \"precision\": \"bf16\","
    " \"optimizer\": {\"name\": \"adamw\", \"clip\": \"per_bucket\"},"
    " \"parallelism\": {\"tensor\": 8, \"pipeline\": 4},"
    " \"cluster\": {\"device\": \"a100-sxm4-80gb\", \"nodes\": 4, \"gpus_per_node\": 8,"
    " \"nics_per_node\": 8, \"nic_Gbps\": 200},"
    " \"target\": {\"samples\": 3000}}";

static void test_one_f_one_b(void)
{
    et_scenario s;
    if (scenario_from(pipeline_json, &s)) return;
    CHECK(s.batch.grad_accum == 3 && s.parallel.pipeline == 4, "3 micro-batches over 4 stages");
    /* stage 1 of 4 runs 2 forwards first; the fill share 1/3 before them, the drain after the last forward */
    const char *want[4] = {/* stage 0: 3 deep, every forward first */
                           "bubble 0.00, F0, send, F1, send, F2, send, bubble 1.00, B0, send, B1, send, L2, "
                           "send, backward done, "
                           "gradients reduced, optimizer",
                           "bubble 0.33, F0, send, F1, send, F2, send, bubble 0.67, B0, send, B1, send, L2, "
                           "send, backward done, "
                           "gradients reduced, optimizer",
                           "bubble 0.67, F0, send, F1, send, B0, send, F2, send, bubble 0.33, B1, send, L2, "
                           "send, backward done, "
                           "gradients reduced, optimizer",
                           /* the last stage: one forward, one backward at a time */
                           "bubble 1.00, F0, send, B0, send, F1, send, B1, send, F2, send, bubble 0.00, L2, "
                           "send, backward done, "
                           "gradients reduced, optimizer"};
    for (int stage = 0; stage < 4; stage++) {
        built x;
        if (build(&s, stage, true, &x)) {
            CHECK(0, "stage %d's schedule builds", stage);
            continue;
        }
        char got[1024];
        order_of(&x.q, got, sizeof got);
        CHECK(!strcmp(got, want[stage]), "stage %d's order:\n  got  %s\n  want %s", stage, got, want[stage]);
        done(&x);
    }
}

/* The last backward: its segments end where buckets become ready, each bucket clipped first; the three
 * passes' segments partition their phases' ops. */
static void test_bucket_cuts(void)
{
    et_scenario s;
    if (scenario_from(pipeline_json, &s)) return;
    built x;
    if (build(&s, 0, true, &x)) return;
    const et_step_schedule *q = &x.q;
    CHECK(x.nb > 2, "stage 0 has several buckets (%d)", x.nb);
    int ready = 0, clip = 0, order = 1;
    for (int j = 0; j < q->pass_items[ET_PASS_LAST_BACKWARD]; j++) {
        const et_step_event *e = &q->items[q->pass_first[ET_PASS_LAST_BACKWARD] + j];
        if (e->kind == ET_STEP_CLIP) {
            order &= e->bucket == ready && j + 1 < q->pass_items[ET_PASS_LAST_BACKWARD] &&
                     e[1].kind == ET_STEP_BUCKET_READY && e[1].bucket == e->bucket;
            clip++;
        }
        if (e->kind == ET_STEP_BUCKET_READY) order &= e->bucket == ready++;
        /* a bucket is ready after the op that finalises its last gradient */
        if (e->kind == ET_STEP_BUCKET_READY && e->bucket < x.nb && j >= 2 && e[-2].kind == ET_STEP_COMPUTE)
            order &= q->segments[e[-2].segment].end_op == x.buckets[e->bucket].ready_op + 1;
    }
    CHECK(ready == x.nb && clip == x.nb && order,
          "every bucket clipped then ready, in order (%d ready, %d clipped)", ready, clip);
    CHECK(q->pass_items[ET_PASS_FORWARD] == 1 && q->pass_items[ET_PASS_BACKWARD] == 1,
          "a dense model's forward and backward are one segment each");
    for (int p = 0; p < ET_PASSES; p++) {
        const et_phase phase = p == ET_PASS_FORWARD ? ET_PHASE_FORWARD : ET_PHASE_BACKWARD;
        int in_phase = 0, covered = 0, ordered = 1, previous_end = 0;
        for (int i = 0; i < x.g.n_ops; i++)
            in_phase += x.g.ops[i].phase == phase;
        for (int j = 0; j < q->pass_segments[p]; j++) {
            const et_step_segment *seg = &q->segments[q->segment_first[p] + j];
            ordered &= seg->first_op == previous_end && seg->end_op >= seg->first_op;
            previous_end = seg->end_op;
            for (int i = seg->first_op; i < seg->end_op; i++)
                covered += x.g.ops[i].phase == phase;
        }
        CHECK(covered == in_phase && ordered && previous_end == x.g.n_ops,
              "pass %d's segments partition its phase's %d ops (covered %d)", p, in_phase, covered);
    }
    /* timed, the passes add up to the phase times */
    et_op_classes c;
    CHECK(et_op_classes_build(&x.g, &c) == 0, "classes");
    const et_batch_shape b = et_batch_expected(&s);
    et_op_classes_times(&c, &b, &s.cluster.device, s.precision, NULL);
    et_segment_time *t = calloc((size_t)q->n_segments, sizeof *t);
    for (int p = 0; p < ET_PASSES && t; p++) {
        et_step_time_pass(q, &s, &c, p, &b, t + q->segment_first[p]);
        double sum = 0, comm = 0, tp = 0;
        for (int j = 0; j < q->pass_segments[p]; j++)
            sum += t[q->segment_first[p] + j].compute, comm += t[q->segment_first[p] + j].comm;
        const double phase_time =
            et_phase_time_of(&s, &c, p == ET_PASS_FORWARD ? ET_PHASE_FORWARD : ET_PHASE_BACKWARD, &b, &tp);
        CHECK_REL(sum, phase_time, 1e-12, "a pass's compute is its phase's");
        CHECK_REL(comm, tp, 1e-12, "a pass's blocking communication is its phase's");
    }
    free(t);
    et_op_classes_free(&c);
    done(&x);
}

/* Overlap on: each collective waits for its bucket; off: for the end of backward. ZeRO 3: the gathers open
 * the communication stream; ZeRO 1: the updated parameters are gathered after the optimizer. */
static void test_streams(void)
{
    et_scenario s;
    et_error err;
    if (et_scenario_load(ET_SOURCE_DIR "/scenarios/gpt3-13b-dense-a100.json", &s, &err)) {
        CHECK(0, "loads: %s", err.text);
        return;
    }
    for (int overlap = 0; overlap <= 1; overlap++) {
        built x;
        if (build(&s, 0, overlap, &x)) return;
        int collectives = 0, waits = 1, gather_after = 0, optimizer_at = -1;
        for (int i = 0; i < x.q.n_events; i++) {
            const et_step_event *e = &x.q.events[i];
            if (e->kind == ET_STEP_COLLECTIVE) {
                collectives++;
                waits &= e->stream == ET_STREAM_COMM && e->wait == (overlap ? -1 : x.q.backward_done);
            }
            if (e->kind == ET_STEP_OPTIMIZER) optimizer_at = i;
            if (e->kind == ET_STEP_ZERO_GATHER) gather_after = optimizer_at >= 0 && i > optimizer_at;
        }
        CHECK(collectives == x.nb && waits, "overlap %d: one collective a bucket, waiting for %s", overlap,
              overlap ? "its bucket" : "the end of backward");
        CHECK(gather_after, "ZeRO 1: the parameter all-gather follows the optimizer");
        CHECK(x.q.events[0].kind == ET_STEP_BUBBLE, "no parameter gathers before the step under ZeRO 1");
        done(&x);
    }
    s.parallel.zero_stage = 3;
    built x;
    if (build(&s, 0, true, &x)) return;
    CHECK(x.q.events[0].kind == ET_STEP_PARAM_GATHERS && x.q.events[0].stream == ET_STREAM_COMM,
          "ZeRO 3's gathers open the communication stream");
    done(&x);
    /* overlap off in the analytic model: every collective exposed (no ZeRO 3 gathers to hide) */
    s.parallel.zero_stage = 1;
    s.parallel.overlap = false;
    et_estimate e;
    if (et_analytic_estimate(&s, &e, &err) == 0)
        CHECK_REL(e.dp_comm_exposed, e.dp_comm, 1e-12, "overlap off: the collectives all exposed");
}

/* A mixture of experts with expert parallelism: every MoE layer's dispatch and combine cut the forward, the
 * first of each pair toward the experts; backward the same in reverse. */
static void test_alltoalls(void)
{
    et_scenario s;
    et_error err;
    if (et_scenario_load(ET_SOURCE_DIR "/scenarios/mixtral-8x7b-h100.json", &s, &err)) {
        CHECK(0, "loads: %s", err.text);
        return;
    }
    built x;
    if (build(&s, 0, true, &x)) return;
    for (int p = ET_PASS_FORWARD; p <= ET_PASS_BACKWARD; p++) {
        int ops = 0, n = 0, alternate = 1;
        for (int i = 0; i < x.g.n_ops; i++) /* backward's: recomputation's and the gradients' */
            ops += x.g.ops[i].kind == ET_OP_EP_ALLTOALL &&
                   x.g.ops[i].phase == (p == ET_PASS_FORWARD ? ET_PHASE_FORWARD : ET_PHASE_BACKWARD);
        for (int j = 0; j < x.q.pass_items[p]; j++) {
            const et_step_event *e = &x.q.items[x.q.pass_first[p] + j];
            if (e->kind != ET_STEP_ALLTOALL) continue;
            alternate &= e->to_experts == (n % 2 == 0);
            n++;
        }
        CHECK(ops > 0 && n == ops && alternate, "pass %d: %d all-to-alls of %d, alternating direction", p, n,
              ops);
    }
    CHECK(x.q.has_alltoall, "the schedule knows it meets the expert group");
    done(&x);
}

/* The data-parallel collectives' share of the SMs (et_step_dp_contention) by hand: k / S of the seconds they
 * ran beside the passes, k = software.overlap_sms, S the device's multiprocessors; and on MPT-7B over 512
 * H100s (ZeRO 3: the gathers from the step's start, the buckets under the last backward), where the
 * communication stream, once backward is done, runs without a gap to its end (every bucket is ready): of
 * its dp_comm seconds the tail T ran after backward and dp_comm - T beside it, so the step's data-parallel
 * cost is max(T, k / S (dp_comm - T)), T what it is with no SMs taken. */
static void test_dp_contention(void)
{
    CHECK_REL(et_step_overlap_before(1, 3, 2), 1, 1e-15, "[1, 3) before 2: 1 s");
    CHECK(et_step_overlap_before(3, 5, 2) == 0, "[3, 5) before 2: none");
    CHECK_REL(et_step_overlap_before(-1, 1, 5), 1, 1e-15, "clipped at the step's start");
    CHECK_REL(et_step_overlap_before(0, 2, 5), 2, 1e-15, "[0, 2) before 5: 2 s");
    et_scenario s;
    et_error err;
    if (et_scenario_load(ET_SOURCE_DIR
                         "/scenarios/validation/mpt-7b-h100-80gb-512gpu-seq2048-mbs6-ampbf16.json",
                         &s, &err)) {
        CHECK(0, "the MPT row loads: %s", err.text);
        return;
    }
    const double k = s.software.overlap_sms, S = s.cluster.device.multiprocessors;
    CHECK(k == 16 && S == 132, "16 of the H100's 132 SMs");
    CHECK_REL(et_step_dp_contention(&s, 1.32), 0.16, 1e-12, "1.32 s beside the passes cost them 0.16 s");
    et_estimate with, without;
    if (et_analytic_estimate(&s, &with, &err)) return;
    s.software.overlap_sms = 0;
    CHECK(et_step_dp_contention(&s, 1.32) == 0, "no SMs taken: nothing");
    if (et_analytic_estimate(&s, &without, &err)) return;
    const double tail = without.dp_comm_exposed, beside = with.dp_comm - tail,
                 want = fmax(tail, beside * k / S);
    CHECK(tail > 0 && beside * k / S > tail, "the row's SM share (%g s) outweighs its tail (%g s)",
          beside * k / S, tail);
    CHECK_REL(with.dp_comm_exposed, want, 1e-9, "the data-parallel cost, max(T, k/S (dp - T))");
    CHECK_REL(with.step_time - without.step_time, want - tail, 1e-6, "the step longer by that less the tail");
    s.cluster.device.multiprocessors = 0;
    CHECK(et_step_dp_contention(&s, 1.32) == 0, "a device without an SM count: nothing");
}

int main(void)
{
    test_one_f_one_b();
    test_bucket_cuts();
    test_streams();
    test_alltoalls();
    test_dp_contention();
    return check_summary("test_step_schedule");
}
