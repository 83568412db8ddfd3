/*
 * main.c - the `tessera` command line (everything is in the ts_cli library:
 * commands.c is the entry).
 */
#include "api/cli/cli.h"

int main(int argc, char **argv)
{
    return ts_cli_main(argc, argv);
}
