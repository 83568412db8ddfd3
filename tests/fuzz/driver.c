/*
 * driver.c - runs a fuzz target once over every file in the folders (or
 * files) named on the command line, so the targets build and run as plain
 * tests with gcc, without libFuzzer. Each input is copied into a buffer of
 * exactly its size so that AddressSanitizer sees any read past its end.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX (16u << 20)

/* 0 when the file ran, -1 when it could not be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "could not open %s\n", path);
        return -1;
    }
    uint8_t *buf = malloc(INPUT_MAX);
    size_t n = buf != NULL ? fread(buf, 1, INPUT_MAX, f) : 0;
    int bad = buf == NULL || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "could not read %s\n", path);
        free(buf);
        return -1;
    }
    uint8_t *exact = malloc(n > 0 ? n : 1);
    if (exact == NULL) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int run_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "could not open folder %s\n", dir);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (run_file(path) != 0)
            rc = -1;
        else
            (*count)++;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "no such file or folder: %s\n", argv[i]);
            rc = 1;
        } else if (S_ISDIR(st.st_mode)) {
            rc |= run_dir(argv[i], &count) != 0;
        } else if (run_file(argv[i]) != 0) {
            rc = 1;
        } else {
            count++;
        }
    }
    if (count == 0) {
        fprintf(stderr, "usage: %s FOLDER|FILE...: no inputs were run\n", argv[0]);
        return 1;
    }
    printf("%s: ran %zu inputs\n", argv[0], count);
    return rc;
}
