/*
 * cosched SPANK plugin: node-level coscheduling of Slurm job steps by the node's cosched agent.
 *
 * Options (srun, sbatch, salloc):
 *   --cosched=SPEC      host the step's ranks under the node policy SPEC (e.g. hybrid, sb[spin_us=300]).
 *   --cosched-optional  if the agent is unreachable or refuses SPEC, run uncoscheduled instead of failing.
 *   --cosched-gang      gang-schedule the job across its nodes: the nodes' agents report it to their gang
 *                       coordinator, which gives it a row of its Ousterhout matrix and switches its slots
 *                       (docs/real-slurm.md). Implies --cosched=nls unless --cosched is given.
 *   --cosched-forward   tell the node policy of a rank on another node of a message sent to it: each node's
 *                       agent forwards such MESSAGE events, in batches, through its gang coordinator to the
 *                       destination's agent (needs agents started with --coord; docs/real-slurm.md).
 *
 * plugstack.conf arguments (all optional):
 *   agent=PATH   the agent's socket; "%n" is replaced by the node name (slurmstepd's SLURMD_NODENAME, the
 *                name of the slurmd that runs the step), for several slurmd on one host.
 *                Default /run/cosched/agent.sock.
 *   shim=PATH    the MPI shim to preload (libcosched built for the MPI the jobs use).
 *                Default /usr/local/lib/cosched/libcosched-mpich.so.
 *
 * What it does, per step and node (remote context, in slurmstepd):
 *   slurm_spank_user_init  declares the job to the node's agent (COSCHED_MSG_JOB with SPEC, and with
 *                          --cosched-gang the flag COSCHED_JOB_GANG and the step's node count; protocol in
 *                          real/include/cosched_proto.h) and waits for its ACK (2 s at most). On failure
 *                          every task of the step exits with code 1 before running anything, with a message
 *                          naming the socket and the reason, unless --cosched-optional was given: then the
 *                          step runs uncoscheduled (nothing is preloaded).
 *   slurm_spank_task_init  in each task, before exec: preloads the shim (LD_PRELOAD, prepended) and sets
 *                          COSCHED_AGENT, COSCHED_RUN ("s<job>-<step>"), COSCHED_JOB (the Slurm job id) and
 *                          COSCHED_REQUIRED. The shim registers the rank (job, rank, pid) at MPI_Init and
 *                          unregisters at MPI_Finalize; a rank that dies is unregistered by its closed socket.
 *   slurm_spank_exit       ends the job's declaration (COSCHED_MSG_JOB_END): the agent restores every weight,
 *                          freeze and cgroup it set for the step's ranks.
 * Submission side (local context, in srun):
 *   slurm_spank_init_post_opt  refuses --cosched-gang on a cluster whose slurmctld runs PreemptMode=GANG (read
 *                          with slurm_load_ctl_conf): Slurm's time slicing suspends whole jobs for 5 s slices
 *                          and cosched's coordinator would keep giving slots to the suspended job (two gang
 *                          schedulers over the same jobs). srun then exits 1 with the reason.
 * A step without --cosched is left alone: no environment change, no agent contact. Slurm's own suspend and
 * resume (scontrol suspend, PreemptMode=GANG) act on the processes as usual; the agent does not fight them.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "../include/cosched_proto.h"

SPANK_PLUGIN(cosched, 1);

#define DEFAULT_AGENT "/run/cosched/agent.sock"
#define DEFAULT_SHIM "/usr/local/lib/cosched/libcosched-mpich.so"

static char opt_spec[COSCHED_SPEC_MAX];
static int opt_optional;
static int opt_gang;
static int opt_forward;
static char arg_agent[256] = DEFAULT_AGENT;
static char arg_shim[256] = DEFAULT_SHIM;
/* Set in slurmstepd once the agent accepted the job: only then are the tasks given the shim. */
static int declared;
/* Set in slurmstepd when the job could not be declared and --cosched-optional was not given: each task
 * then ends with exit code 1 and the reason, before it runs anything (a failing user_init alone makes
 * Slurm 22.05 report "task launch failed" while srun still exits 0). */
static char failure[512];
static char agent_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static int opt_cosched_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)remote;
    if (optarg == NULL || optarg[0] == '\0' || strlen(optarg) >= sizeof(opt_spec)) {
        slurm_error("cosched: --cosched needs a policy spec of 1 to %d characters", COSCHED_SPEC_MAX - 1);
        return -1;
    }
    strcpy(opt_spec, optarg);
    return 0;
}

static int opt_optional_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)optarg;
    (void)remote;
    opt_optional = 1;
    return 0;
}

static int opt_gang_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)optarg;
    (void)remote;
    opt_gang = 1;
    return 0;
}

static int opt_forward_cb(int val, const char *optarg, int remote) {
    (void)val;
    (void)optarg;
    (void)remote;
    opt_forward = 1;
    return 0;
}

struct spank_option spank_options[] = {
    {"cosched", "SPEC", "Coschedule the step's ranks under the node policy SPEC (cosched agent)", 1, 0,
     opt_cosched_cb},
    {"cosched-optional", NULL, "With --cosched: run uncoscheduled if the cosched agent cannot host the step", 0,
     0, opt_optional_cb},
    {"cosched-gang", NULL, "Gang-schedule the job across its nodes (cosched gang coordinator; implies --cosched=nls)", 0,
     0, opt_gang_cb},
    {"cosched-forward", NULL, "With --cosched: forward message events between nodes (needs a gang coordinator)",
     0, 0, opt_forward_cb},
    SPANK_OPTIONS_TABLE_END};

static int parse_args(int ac, char **av) {
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "agent=", 6) == 0 && strlen(av[i] + 6) < sizeof(arg_agent)) {
            strcpy(arg_agent, av[i] + 6);
        } else if (strncmp(av[i], "shim=", 5) == 0 && strlen(av[i] + 5) < sizeof(arg_shim)) {
            strcpy(arg_shim, av[i] + 5);
        } else {
            slurm_error("cosched: unknown or too long plugstack.conf argument \"%s\" (agent=PATH, shim=PATH)",
                        av[i]);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
    (void)sp;
    return parse_args(ac, av);
}

/* srun: --cosched-gang is refused where Slurm's own gang scheduling (PreemptMode=GANG) runs. When the
 * controller's configuration cannot be read, the step goes on (its agents still decide). */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
    (void)sp;
    (void)ac;
    (void)av;
    if (!opt_gang || spank_context() != S_CTX_LOCAL) return 0;
    slurm_conf_t *conf = NULL;
    if (slurm_load_ctl_conf((time_t)0, &conf) != 0 || conf == NULL) return 0;
    int slurm_gang = (conf->preempt_mode & PREEMPT_MODE_GANG) != 0;
    slurm_free_ctl_conf(conf);
    if (!slurm_gang) return 0;
    slurm_error("cosched: --cosched-gang is refused on this cluster: it runs Slurm's own gang scheduling "
                "(PreemptMode=GANG), which suspends whole jobs for its time slices while cosched's coordinator "
                "would keep switching their slots; use one of the two (docs/real-slurm.md)");
    return -1;
}

/* Expands "%n" in the agent path with the node name: slurmstepd's own SLURMD_NODENAME (set by the slurmd that
 * started it), not the job's environment. The job's environment is the submitting process's: srun started
 * inside a batch job carries the batch node's SLURMD_NODENAME to every node of its step, which sent the ranks of
 * every node to the batch node's agent (and, with --cosched-gang, made the job look declared on one node only,
 * so the coordinator never placed it). The job's value is only a fallback for a slurmstepd without one. */
static int resolve_agent(spank_t sp) {
    char node[128] = "";
    const char *n = getenv("SLURMD_NODENAME");
    if (n != NULL && n[0] != '\0' && strlen(n) < sizeof(node))
        strcpy(node, n);
    else if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof(node)) != ESPANK_SUCCESS)
        node[0] = '\0';
    size_t o = 0;
    for (const char *p = arg_agent; *p != '\0'; p++) {
        const char *piece = NULL;
        char one[2] = {*p, '\0'};
        if (p[0] == '%' && p[1] == 'n') {
            piece = node;
            p++;
        } else {
            piece = one;
        }
        size_t n = strlen(piece);
        if (o + n + 1 > sizeof(agent_path)) return -1;
        memcpy(agent_path + o, piece, n);
        o += n;
    }
    agent_path[o] = '\0';
    return 0;
}

/* Sends one packet to the agent and, when `reply` is set, waits up to 2 s for its ACK.
 * Returns 0, an errno for a refusal, or -1 with `why` set when the agent could not be reached. */
static int agent_call(const void *pkt, size_t len, int reply, const char **why) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, agent_path, sizeof(addr.sun_path)); /* agent_path is NUL-terminated, same size */
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || send(fd, pkt, len, MSG_NOSIGNAL) != (ssize_t)len) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    int rc = 0;
    if (reply) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        struct cosched_msg ack;
        if (poll(&pfd, 1, 2000) != 1) {
            *why = "no answer within 2 s";
            rc = -1;
        } else if (recv(fd, &ack, sizeof(ack), 0) != (ssize_t)sizeof(ack) || ack.type != COSCHED_MSG_ACK) {
            *why = "malformed answer";
            rc = -1;
        } else {
            rc = ack.arg;
        }
    }
    close(fd);
    return rc;
}

static int job_msg(spank_t sp, uint32_t type, struct cosched_job_msg *m) {
    uint32_t job = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return -1;
    memset(m, 0, sizeof(*m));
    m->type = type;
    m->version = COSCHED_PROTO_VERSION;
    m->job = (int32_t)job;
    m->flags = (opt_optional ? COSCHED_JOB_OPTIONAL : 0) | (opt_gang ? COSCHED_JOB_GANG : 0) |
               (opt_forward ? COSCHED_JOB_FORWARD : 0);
    if (type == COSCHED_MSG_JOB) strcpy(m->spec, opt_spec);
    if (opt_gang && type == COSCHED_MSG_JOB) {
        /* The step's node count (the coordinator places the job once every node's agent declared it); the
         * job's when the step's is not in the environment. */
        char n[16] = "";
        uint32_t nn = 0;
        if (spank_getenv(sp, "SLURM_STEP_NUM_NODES", n, sizeof(n)) == ESPANK_SUCCESS && atoi(n) > 0)
            nn = (uint32_t)atoi(n);
        else if (spank_get_item(sp, S_JOB_NNODES, &nn) != ESPANK_SUCCESS)
            nn = 0;
        if (nn == 0) return -1;
        m->nnodes = nn;
    }
    return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    if (opt_gang && opt_spec[0] == '\0') strcpy(opt_spec, "nls");
    if (!spank_remote(sp) || opt_spec[0] == '\0') return 0;
    struct cosched_job_msg m;
    const char *why = "";
    int rc;
    if (resolve_agent(sp) != 0) {
        why = "agent path too long";
        rc = -1;
    } else if (job_msg(sp, COSCHED_MSG_JOB, &m) != 0) {
        why = "no job id or node count";
        rc = -1;
    } else {
        rc = agent_call(&m, sizeof(m), 1, &why);
    }
    if (rc == 0) {
        declared = 1;
        return 0;
    }
    char reason[400];
    if (rc > 0)
        snprintf(reason, sizeof(reason), "the agent refused policy \"%s\"%s: %s", opt_spec,
                 opt_gang ? " with gang scheduling" : "",
                 rc == EINVAL     ? "unknown or invalid policy spec"
                 : rc == ENOTCONN ? "this node's agent has no gang coordinator (cosched-agent serve --coord), "
                                    "needed by --cosched-gang and --cosched-forward"
                                  : strerror(rc));
    else
        snprintf(reason, sizeof(reason), "no cosched agent at %s: %s", agent_path, why);
    if (opt_optional) {
        slurm_info("cosched: %s; running uncoscheduled (--cosched-optional)", reason);
        return 0;
    }
    snprintf(failure, sizeof(failure), "cosched: %s (add --cosched-optional to run uncoscheduled)", reason);
    slurm_error("%s", failure);
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    if (failure[0] != '\0') {
        fprintf(stderr, "%s\n", failure);
        fflush(stderr);
        _exit(1);
    }
    if (!declared) return 0;
    uint32_t job = 0, step = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    char buf[4096], run[64], jobs[16];
    const char *preload = arg_shim;
    if (spank_getenv(sp, "LD_PRELOAD", buf + strlen(arg_shim) + 1, sizeof(buf) - strlen(arg_shim) - 1) ==
            ESPANK_SUCCESS &&
        buf[strlen(arg_shim) + 1] != '\0') {
        memcpy(buf, arg_shim, strlen(arg_shim));
        buf[strlen(arg_shim)] = ':';
        preload = buf;
    }
    snprintf(run, sizeof(run), "s%u-%u", job, step);
    snprintf(jobs, sizeof(jobs), "%d", (int32_t)job);
    if (spank_setenv(sp, "LD_PRELOAD", preload, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "COSCHED_AGENT", agent_path, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "COSCHED_RUN", run, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "COSCHED_JOB", jobs, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "COSCHED_REQUIRED", opt_optional ? "0" : "1", 1) != ESPANK_SUCCESS) {
        slurm_error("cosched: cannot set the task environment");
        return -1;
    }
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    if (!declared || !spank_remote(sp)) return 0;
    struct cosched_job_msg m;
    const char *why = "";
    if (job_msg(sp, COSCHED_MSG_JOB_END, &m) == 0 && agent_call(&m, sizeof(m), 0, &why) != 0)
        slurm_info("cosched: could not end the job at the agent %s: %s", agent_path, why);
    declared = 0;
    return 0;
}
