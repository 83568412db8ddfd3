/*
 * agentharness.h - what the agent's tests share around the real
 * tessera-agent (agentharness.c). agent_test.c and fraction_test.c run it
 * with --desired-file in a folder of their own: checks that count failures,
 * the folder (data folder, desired-state file, agent log), the desired state
 * written, the report read, and the end of a case (the agent stopped,
 * sanitizer reports looked for, what the jobs left killed, the folder
 * removed). agent_server_test.c starts and stops the agent with it too.
 *
 * A test program runs one case: ts_ah_setup, the case, ts_ah_show_agent_log,
 * ts_ah_end_agent and ts_ah_end_jobs (its teardown), ts_ah_result.
 */
#ifndef TS_TESTS_AGENT_AGENTHARNESS_H
#define TS_TESTS_AGENT_AGENTHARNESS_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Failed checks of the case so far. */
extern int ts_ah_failures;

/* A check that counts a failure and goes on. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            ts_ah_failures++;                                                                      \
        }                                                                                          \
    } while (0)
/* A check that counts a failure and returns from the (void) case. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: required check failed: %s\n", __FILE__, __LINE__, #cond);      \
            ts_ah_failures++;                                                                      \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* The case's folder (set by ts_ah_setup): root, root/data (the agent's
 * --data-dir), root/desired.json (its --desired-file), root/agent.log (its
 * output). */
extern char ts_ah_root[200], ts_ah_data[256], ts_ah_desired[256], ts_ah_agent_log[256];
/* root/shared, mode 0777: what the case's jobs and the test both see; pass
 * it as a job's checkpoint_dir (a sandboxed job sees nothing else of the
 * case's folder). */
extern char ts_ah_shared[216];
/* The agent started in the case, or 0. */
extern pid_t ts_ah_agent_pid;

/* Seconds on the monotonic clock. */
double ts_ah_now_s(void);
void ts_ah_sleep_s(double s);

/* Make the case's folder, named <name>-XXXXXX under $TMPDIR (or /tmp), with
 * an empty desired state (generation 0). Exits the program on failure. */
void ts_ah_setup(const char *name);
/* Write the desired state: a JSON text with printf-style arguments. Exits
 * the program when the text is not JSON or cannot be written. */
void ts_ah_set_desired(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run argv (argv[0] the program's path) with stdout and stderr appended to
 * log_path; its pid. */
pid_t ts_ah_spawn(const char *const argv[], const char *log_path);
/* Wait for child pid to exit; its wait status, or -1 after timeout_s. */
int ts_ah_wait_exit(pid_t pid, double timeout_s);
/* Send sig to child pid and wait up to timeout_s for it; its wait status, or
 * -1 when it would not go (it is SIGKILLed and reaped then). */
int ts_ah_stop(pid_t pid, int sig, double timeout_s);

/* Stop the case's agent with sig (ts_ah_stop, 15 s); its wait status, or -1
 * (also when none runs). */
int ts_ah_agent_stop(int sig);

/* The agent's last report, DATA/report.json (new), or NULL. */
json_t *ts_ah_report(void);
/* The job (id, attempt) in report r (borrowed from r), or NULL. */
json_t *ts_ah_report_job(json_t *r, long id, int attempt);
/* Wait until the report shows the job in state; a copy of its entry (new),
 * or NULL after timeout_s. */
json_t *ts_ah_wait_job(long id, int attempt, const char *state, double timeout_s);

/* A sanitizer's report in the log at path (ASan builds) is a failure. */
void ts_ah_check_sanitizer(const char *path);
/* Print the agent's log when the case has failed (before ts_ah_end_jobs
 * removes it). */
void ts_ah_show_agent_log(void);
/* Stop the case's agent, if one runs, with SIGTERM (a failure unless it
 * exits 0) and look for sanitizer reports in its log. */
void ts_ah_end_agent(void);
/* Look for sanitizer reports in every job's supervisor.log (and its
 * output.log when outputs), kill every process in the session of a job or
 * of its supervisor (whatever a failed case left running), and remove the
 * case's folder (kept, and named, when TS_KEEP is set). */
void ts_ah_end_jobs(bool outputs);
/* Print the case's result; the program's exit status. */
int ts_ah_result(const char *name);

#endif /* TS_TESTS_AGENT_AGENTHARNESS_H */
