/* Group commit of the journal: a writer thread makes the journal durable
 * (fdatasync) while rank 0 goes on serving workers. Rank 0 writes a finished run's RUN_END
 * (journal_flush), asks for it to be synced and announces the run (progress line, view,
 * scheduler) only once the sync that covers it has returned; every RUN_END written while
 * a sync is in progress is covered by the next one, so one fdatasync serves a group of runs
 * and rank 0 never waits for the disk between two assignments. */
#ifndef ABLATE_ORCHESTRATOR_GROUP_SYNC_H
#define ABLATE_ORCHESTRATOR_GROUP_SYNC_H

#include <stdint.h>

#include "model/config.h"

typedef struct GroupSync GroupSync;

/* A writer thread syncing file descriptor fd (of the file at path, for messages). NULL with
 * err if the thread cannot start. */
GroupSync *group_sync_start(int fd, const char *path, char err[ABL_ERR_MAX]);
/* The file's first upto bytes are written: make them durable. */
void group_sync_request(GroupSync *g, uint64_t upto);
/* Bytes known durable, or -1 once a sync failed (err: the reason; every later call too). */
int64_t group_sync_durable(GroupSync *g, char err[ABL_ERR_MAX]);
/* Waits until upto bytes are durable: 0, or -1 with err when a sync failed. */
int group_sync_wait(GroupSync *g, uint64_t upto, char err[ABL_ERR_MAX]);
/* Waits for the sync in progress, stops the thread, frees g (NULL is fine). */
void group_sync_stop(GroupSync *g);

#endif
