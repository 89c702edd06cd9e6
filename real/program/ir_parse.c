/* Reader of the program export (docs/formats/program.md); every error names file, line and field. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static int fail(char *err, size_t n, const char *path, int line, const char *fmt, ...) {
    int k = snprintf(err, n, "%s:%d: ", path, line);
    va_list ap;
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < n) vsnprintf(err + k, n - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* Parses a decimal integer field in [lo, hi]. */
static int int_field(const char *tok, int64_t lo, int64_t hi, int64_t *out) {
    if (!tok) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(tok, &end, 10);
    if (errno || end == tok || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int coll_of(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "barrier")) return IR_BARRIER;
    if (!strcmp(s, "allreduce")) return IR_ALLREDUCE;
    if (!strcmp(s, "alltoall")) return IR_ALLTOALL;
    if (!strcmp(s, "bcast")) return IR_BCAST;
    if (!strcmp(s, "reduce")) return IR_REDUCE;
    return -1;
}

/* a * b for amounts >= 0, saturated at INT64_MAX (loop counts nested past 64 bits). */
static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Checks loop bodies lie inside their parent; adds up compute (saturated at INT64_MAX). */
static int check_loops(const struct ir_op *ops, int n, int64_t mult, int64_t *compute, const char *path,
                       char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        const struct ir_op *o = &ops[i];
        if (o->kind == IR_LOOP || o->kind == IR_LOOPUNTIL) {
            if (o->b > n - i - 1)
                return fail(err, errlen, path, o->line, "loop length %lld runs past the end of its body (%d lines left)",
                            (long long)o->b, n - i - 1);
            int64_t m = o->kind == IR_LOOP ? sat_mul(mult, o->a) : mult;
            if (check_loops(o + 1, (int)o->b, m, compute, path, err, errlen)) return -1;
            i += (int)o->b;
        } else if (o->kind == IR_COMPUTE || o->kind == IR_BURST) {
            int64_t add = sat_mul(mult, o->a);
            *compute = add > INT64_MAX - *compute ? INT64_MAX : *compute + add;
        }
    }
    return 0;
}

int ir_parse(const char *path, int rank, struct ir_program *prog, char *err, size_t errlen) {
    memset(prog, 0, sizeof *prog);
    prog->ranks = -1;
    prog->scale = 1.0;
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, errlen, path, 0, "cannot open: %s", strerror(errno));
    char buf[512];
    int line = 0, cur = -1, expect = 0, got = 0, seen_header = 0, cap = 0, rc = -1, sections = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            fail(err, errlen, path, line, "line longer than %zu characters", sizeof buf - 2);
            goto out;
        }
        char *save, *tok[6] = {0};
        int nt = 0;
        for (char *t = strtok_r(buf, " \t\r\n", &save); t && nt < 6; t = strtok_r(NULL, " \t\r\n", &save))
            tok[nt++] = t;
        if (nt == 0 || tok[0][0] == '#') continue;
        const char *k = tok[0];
        int64_t v1 = 0, v2 = 0, v3 = 0;
        if (!seen_header) {
            if (strcmp(k, "cosched-program") || int_field(tok[1], 1, 1, &v1)) {
                fail(err, errlen, path, line, "expected the header \"cosched-program 1\"");
                goto out;
            }
            seen_header = 1;
            continue;
        }
        if (cur == -1) { /* header fields and section starts */
            if (!strcmp(k, "program") && nt == 2) {
                snprintf(prog->name, sizeof prog->name, "%s", tok[1]);
            } else if (!strcmp(k, "ranks") && nt == 2) {
                if (int_field(tok[1], 1, 1 << 20, &v1)) {
                    fail(err, errlen, path, line, "ranks: expected an integer >= 1, got %s", tok[1]);
                    goto out;
                }
                prog->ranks = (int)v1;
            } else if ((!strcmp(k, "memory_mb") || !strcmp(k, "noise_cv") || !strcmp(k, "scale")) && nt == 2) {
                char *end;
                double d = strtod(tok[1], &end);
                if (*end || !(d >= 0) || d > 1e12) {
                    fail(err, errlen, path, line, "%s: expected a number >= 0, got %s", k, tok[1]);
                    goto out;
                }
                if (!strcmp(k, "memory_mb")) prog->memory_mb = d;
                else if (!strcmp(k, "noise_cv")) prog->noise_cv = d;
                else prog->scale = d;
            } else if (!strcmp(k, "collectives") && nt == 2) {
                if (strcmp(tok[1], "library") && strcmp(tok[1], "p2p")) {
                    fail(err, errlen, path, line, "collectives: expected library or p2p, got %s", tok[1]);
                    goto out;
                }
                prog->p2p_collectives = !strcmp(tok[1], "p2p");
            } else if (!strcmp(k, "rank") && nt == 3) {
                if (prog->ranks < 1) {
                    fail(err, errlen, path, line, "rank section before the \"ranks N\" line");
                    goto out;
                }
                if (int_field(tok[1], 0, prog->ranks - 1, &v1) || v1 != sections ||
                    int_field(tok[2], 0, INT32_MAX, &v2)) {
                    fail(err, errlen, path, line, "expected \"rank %d LINES\", got \"rank %s %s\"", sections, tok[1],
                         tok[2]);
                    goto out;
                }
                sections++;
                cur = (int)v1;
                expect = (int)v2;
                got = 0;
                if (cur == rank) {
                    cap = expect > 0 ? expect : 1;
                    prog->ops = calloc((size_t)cap, sizeof *prog->ops);
                    if (!prog->ops) {
                        fail(err, errlen, path, line, "out of memory for %d operations", expect);
                        goto out;
                    }
                }
            } else {
                fail(err, errlen, path, line, "unknown header line \"%s\" (or wrong number of fields)", k);
                goto out;
            }
            continue;
        }
        /* Inside rank `cur`'s section. */
        if (!strcmp(k, "end")) {
            if (got != expect) {
                fail(err, errlen, path, line, "rank %d: %d operation lines, its header says %d", cur, got, expect);
                goto out;
            }
            cur = -1;
            continue;
        }
        struct ir_op o = {.line = line};
        int ok = 0;
        const int64_t I64 = INT64_MAX, U32 = UINT32_MAX;
        if (!strcmp(k, "compute") && nt == 2) {
            o.kind = IR_COMPUTE;
            ok = !int_field(tok[1], 0, I64, &o.a);
        } else if (!strcmp(k, "io") && nt == 2) {
            o.kind = IR_IO;
            ok = !int_field(tok[1], 0, I64, &o.a);
        } else if (!strcmp(k, "burst") && nt == 3) {
            o.kind = IR_BURST;
            ok = !int_field(tok[1], 0, I64, &o.a) && !int_field(tok[2], 1, 1000, &o.b);
        } else if ((!strcmp(k, "send") || !strcmp(k, "isend")) && nt == 4) {
            o.kind = k[0] == 's' ? IR_SEND : IR_ISEND;
            ok = !int_field(tok[1], 0, prog->ranks - 1, &o.a) && !int_field(tok[2], 0, INT32_MAX, &o.b) &&
                 !int_field(tok[3], 0, U32, &o.c);
        } else if ((!strcmp(k, "recv") || !strcmp(k, "irecv")) && nt == 3) {
            o.kind = k[0] == 'r' ? IR_RECV : IR_IRECV;
            if (!strcmp(tok[1], "*")) o.a = -1;
            else ok = int_field(tok[1], 0, prog->ranks - 1, &o.a) ? -1 : 0;
            ok = ok == 0 && !int_field(tok[2], 0, U32, &o.c);
        } else if (!strcmp(k, "reply") && nt == 3) {
            o.kind = IR_REPLY;
            ok = !int_field(tok[1], 0, INT32_MAX, &o.b) && !int_field(tok[2], 0, U32, &o.c);
        } else if (!strcmp(k, "wait") && nt == 1) {
            o.kind = IR_WAIT;
            ok = 1;
        } else if ((!strcmp(k, "loop") || !strcmp(k, "loopuntil")) && nt == 3) {
            o.kind = k[4] == 'u' ? IR_LOOPUNTIL : IR_LOOP;
            ok = !int_field(tok[1], 0, U32, &o.a) && !int_field(tok[2], 0, INT32_MAX, &o.b);
        } else if ((!strcmp(k, "collbegin") || !strcmp(k, "collend")) && nt == 2) {
            o.kind = k[4] == 'b' ? IR_COLLBEGIN : IR_COLLEND;
            o.a = coll_of(tok[1]);
            ok = o.a >= 0;
        } else if (!strcmp(k, "coll") && nt >= 2) {
            o.kind = IR_COLL;
            o.a = coll_of(tok[1]);
            if (o.a == IR_BARRIER) ok = nt == 2;
            else if (o.a == IR_ALLREDUCE || o.a == IR_ALLTOALL) ok = nt == 3 && !int_field(tok[2], 0, INT32_MAX, &o.c);
            else if (o.a == IR_BCAST || o.a == IR_REDUCE)
                ok = nt == 4 && !int_field(tok[2], 0, prog->ranks - 1, &o.b) && !int_field(tok[3], 0, INT32_MAX, &o.c);
        } else {
            fail(err, errlen, path, line, "unknown operation \"%s\" (or wrong number of fields)", k);
            goto out;
        }
        if (!ok) {
            fail(err, errlen, path, line, "%s: a field is missing or out of range (ranks 0..%d, amounts >= 0)", k,
                 prog->ranks - 1);
            goto out;
        }
        (void)v3;
        if ((o.kind == IR_SEND || o.kind == IR_ISEND || o.kind == IR_REPLY) && (uint64_t)o.b > prog->max_bytes)
            prog->max_bytes = (uint64_t)o.b;
        if (o.kind == IR_COLL && (uint64_t)o.c > prog->max_bytes) prog->max_bytes = (uint64_t)o.c;
        if (got >= expect) {
            fail(err, errlen, path, line, "rank %d: more operation lines than its header's %d", cur, expect);
            goto out;
        }
        if (cur == rank) prog->ops[prog->n_ops++] = o;
        got++;
    }
    if (!seen_header) {
        fail(err, errlen, path, line, "empty file (expected the header \"cosched-program 1\")");
        goto out;
    }
    if (cur >= 0) {
        fail(err, errlen, path, line, "rank %d: section not closed by \"end\"", cur);
        goto out;
    }
    if (sections != prog->ranks) {
        fail(err, errlen, path, line, "%d rank sections, the header says ranks %d", sections, prog->ranks);
        goto out;
    }
    if (rank >= prog->ranks) {
        fail(err, errlen, path, line, "the program has %d ranks, this is rank %d", prog->ranks, rank);
        goto out;
    }
    rc = check_loops(prog->ops, prog->n_ops, 1, &prog->compute_ns, path, err, errlen);
out:
    fclose(f);
    if (rc) {
        free(prog->ops);
        prog->ops = NULL;
    }
    return rc;
}
