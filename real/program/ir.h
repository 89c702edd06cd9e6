/*
 * cosched-ir-run: one job's program of the simulator's IR, exported by `cosched apps export`
 * (format: docs/formats/program.md), executed for real by an MPI job.
 */
#ifndef COSCHED_IR_H
#define COSCHED_IR_H

#include <stdint.h>

enum ir_kind {
    IR_COMPUTE, IR_BURST, IR_IO, IR_SEND, IR_ISEND, IR_RECV, IR_IRECV, IR_REPLY, IR_WAIT,
    IR_LOOP, IR_LOOPUNTIL, IR_COLL, IR_COLLBEGIN, IR_COLLEND
};
enum ir_coll { IR_BARRIER, IR_ALLREDUCE, IR_ALLTOALL, IR_BCAST, IR_REDUCE };

/* compute/io: a = ns; burst: a = mean ns, b = k; send/isend: a = to, b = bytes, c = tag;
 * recv/irecv: a = from (-1: any), c = tag; reply: b = bytes, c = tag; loop: a = count, b = len;
 * loopuntil: a = stop tag, b = len; coll: a = enum ir_coll, b = root, c = bytes;
 * collbegin/collend: a = enum ir_coll. */
struct ir_op {
    int kind;
    int line;
    int64_t a, b, c;
};

struct ir_program {
    char name[128];
    int ranks;
    double memory_mb;
    double noise_cv;
    double scale;
    int p2p_collectives;
    struct ir_op *ops; /* the operations of the requested rank */
    int n_ops;
    uint64_t max_bytes; /* largest message of any rank */
    int64_t compute_ns; /* this rank's compute, loops counted with their repetitions (LoopUntil once) */
};

/* Parses `path` keeping rank `rank`'s operations. Returns 0, or -1 with a message
 * "FILE:LINE: what" in err. */
int ir_parse(const char *path, int rank, struct ir_program *prog, char *err, size_t errlen);

#endif
