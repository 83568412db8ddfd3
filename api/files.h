/*
 * files.h - small file helpers shared by the server, the agent and the CLI:
 * atomic writes (a reader sees the old file or the new one, never a part),
 * whole-file reads, JSON files, folder trees.
 */
#ifndef TS_API_FILES_H
#define TS_API_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Write data to path through path.tmpTID, fsync, rename. The file gets mode
 * exactly, whatever the process's umask. Returns 0 or -errno. */
int ts_files_write_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* Same without the fsync: for what may be lost in a crash (never torn). */
int ts_files_write_quick(const char *path, const void *data, size_t len, mode_t mode);
/* Same with a JSON value (borrowed), serialized compactly. */
int ts_files_write_json(const char *path, const json_t *v, mode_t mode);
/* The file's bytes, NUL-terminated (new: free); NULL with errno set when it
 * cannot be read or is longer than max. *len (may be NULL) gets its length. */
char *ts_files_read(const char *path, size_t max, size_t *len);
/* The file parsed as JSON (new reference), or NULL when absent or invalid. */
json_t *ts_files_read_json(const char *path);
/* mkdir -p with mode for the folders it creates, exactly, whatever the
 * process's umask (folders that exist keep theirs). Returns 0 or -errno, with
 * errno set too. */
int ts_files_mkdirs(const char *path, mode_t mode);
/* Same with the missing parents made with parents' mode and path itself with
 * mode; -ENOTDIR when path exists and is no folder. */
int ts_files_mkdirs_parents(const char *path, mode_t parents, mode_t mode);
/* rm -r; a missing path is not an error. Returns 0 or -errno. */
int ts_files_remove_tree(const char *path);
bool ts_files_exists(const char *path);

#endif /* TS_API_FILES_H */
