/*
 * cosched-proto-layout: prints the sizes and field offsets of the protocol structs of
 * cosched_proto.h as JSON, so the Rust mirror can be checked against the C compiler's layout.
 */
#include <stddef.h>
#include <stdio.h>

#include "cosched_proto.h"

#define FIELD(S, f) printf("%s\"%s\": %zu", first ? "" : ", ", #f, offsetof(struct S, f)), first = 0

int main(void) {
    int first = 1;
    printf("{\"version\": %u, \"shm_magic\": %u,\n", COSCHED_PROTO_VERSION, COSCHED_SHM_MAGIC);
    printf(" \"cosched_msg\": {\"size\": %zu, \"offsets\": {", sizeof(struct cosched_msg));
    FIELD(cosched_msg, type); FIELD(cosched_msg, version); FIELD(cosched_msg, job); FIELD(cosched_msg, rank);
    FIELD(cosched_msg, pid); FIELD(cosched_msg, arg); FIELD(cosched_msg, t_ns); FIELD(cosched_msg, a);
    FIELD(cosched_msg, b);
    printf("}},\n \"cosched_job_msg\": {\"size\": %zu, \"offsets\": {", sizeof(struct cosched_job_msg));
    first = 1;
    FIELD(cosched_job_msg, type); FIELD(cosched_job_msg, version); FIELD(cosched_job_msg, job);
    FIELD(cosched_job_msg, flags); FIELD(cosched_job_msg, spec); FIELD(cosched_job_msg, nnodes);
    printf("}},\n \"cosched_rank_shm\": {\"size\": %zu, \"offsets\": {", sizeof(struct cosched_rank_shm));
    first = 1;
    FIELD(cosched_rank_shm, magic); FIELD(cosched_rank_shm, version); FIELD(cosched_rank_shm, job);
    FIELD(cosched_rank_shm, rank); FIELD(cosched_rank_shm, size); FIELD(cosched_rank_shm, pid);
    FIELD(cosched_rank_shm, wait_mode); FIELD(cosched_rank_shm, spin_ns); FIELD(cosched_rank_shm, spin_until);
    FIELD(cosched_rank_shm, event_mask); FIELD(cosched_rank_shm, agent_gen); FIELD(cosched_rank_shm, wake_seq);
    FIELD(cosched_rank_shm, state); FIELD(cosched_rank_shm, wait_kind); FIELD(cosched_rank_shm, coll_depth);
    FIELD(cosched_rank_shm, wait_start_ns); FIELD(cosched_rank_shm, arrivals); FIELD(cosched_rank_shm, consumed);
    FIELD(cosched_rank_shm, msgs_sent); FIELD(cosched_rank_shm, bytes_sent); FIELD(cosched_rank_shm, msgs_recv);
    FIELD(cosched_rank_shm, bytes_recv); FIELD(cosched_rank_shm, waits); FIELD(cosched_rank_shm, wait_ns);
    FIELD(cosched_rank_shm, spin_ns_total); FIELD(cosched_rank_shm, block_ns); FIELD(cosched_rank_shm, blocks);
    FIELD(cosched_rank_shm, collectives); FIELD(cosched_rank_shm, wait_id);
    FIELD(cosched_rank_shm, spin_changes); FIELD(cosched_rank_shm, changed_spin_ns); FIELD(cosched_rank_shm, spin_seen_ns); FIELD(cosched_rank_shm, coll_posted);
    printf("}}}\n");
    return 0;
}
