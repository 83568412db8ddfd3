/*
 * options.h - tessera-agent's configuration and the option table that fills
 * it (options.c): flags, TESSERA_* variables, the config file, --help.
 */
#ifndef TS_AGENT_DAEMON_OPTIONS_H
#define TS_AGENT_DAEMON_OPTIONS_H

#include <stdint.h>

#include "api/config.h"

struct ts_agent_config {
    char *server;
    char *token_file;
    char *ca;   /* https://: PEM CAs of the server's certificate; NULL: the system's */
    char *cert; /* PEM client certificate (mTLS), with key; NULL: none */
    char *key;
    char *node;
    char *data_dir;
    char *gpus;
    char *labels;
    int64_t cpu;             /* 0: the CPUs online */
    int64_t memory;          /* bytes; 0: MemTotal */
    int64_t report_interval; /* seconds */
    int64_t gpu_reserve;     /* bytes */
    int64_t keep_finished;   /* seconds */
    int64_t poll_wait;       /* seconds */
    char *log_level;
    char *simgpu_lib_dir;
    char *desired_file;
    char *collision;         /* wait|priority|swap */
    int64_t swap_reserve;    /* bytes of host swap reserve; 0: none */
    int64_t collision_wait;  /* seconds */
    int64_t swap_idle;       /* seconds */
    int64_t swap_quantum;    /* seconds */
    int64_t priority_idle;   /* seconds; 0: never */
    int64_t collision_grace; /* seconds */
    char *shim_lib;
    char *sandbox;        /* on|off */
    char *job_user;       /* the Unix user jobs run as */
    int64_t job_pids;     /* pids.max of a job's cgroup */
    char *job_mount;      /* PATH[:ro|:rw],...: host folders every sandboxed job sees */
    char *job_network;    /* host|none */
    char *node_scheduler; /* auto|off|spread (nodesched.h) */
};

extern const struct ts_option ts_agent_options[];
extern const size_t ts_agent_options_count;

#endif /* TS_AGENT_DAEMON_OPTIONS_H */
