/*
 * replay.c - `tessera-sim replay`: placeholder filled below.
 */
#include <stdio.h>

#include "server/sched/sim/sim.h"

int sim_replay_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera-sim replay: not built yet\n");
    return 2;
}
