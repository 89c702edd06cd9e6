/* Test driver of the program-file reader (real/program/ir_parse.c) without MPI: parses FILE keeping
 * rank RANK and prints "ok RANKS N_OPS COMPUTE_NS", or the reader's error on stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include "ir.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ir_parse_driver FILE RANK\n");
        return 2;
    }
    struct ir_program p;
    char err[512];
    if (ir_parse(argv[1], atoi(argv[2]), &p, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("ok %d %d %lld\n", p.ranks, p.n_ops, (long long)p.compute_ns);
    free(p.ops);
    return 0;
}
