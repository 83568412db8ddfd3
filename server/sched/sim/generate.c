/*
 * generate.c - placeholder.
 */
#include <stdio.h>

#include "server/sched/sim/sim.h"

int sim_generate_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera-sim generate: not built yet\n");
    return 2;
}
