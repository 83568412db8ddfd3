/*
 * loadthread.c - with TESSERA_SIMGPU_LOAD_THREAD set, the simulated driver
 * starts a thread when it is loaded, as NVIDIA's driver and NVML do. A
 * process that loads it after blocking its signals in one thread only would
 * have a thread that takes them: the agent's SIGTERM then ended it without
 * its clean stop (seen on an H200: its host swap reserve was left behind).
 * tests/agent (agent_test) loads the agent's driver with it set.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *idle(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

__attribute__((constructor)) static void ts_simgpu_load_thread(void)
{
    const char *v = getenv("TESSERA_SIMGPU_LOAD_THREAD");
    pthread_t t;
    if (v != NULL && *v != '\0' && pthread_create(&t, NULL, idle, NULL) == 0)
        pthread_detach(t);
}
