/* kbtest.h -- helpers shared by the knowledge base tests. */
#ifndef DITTO_KBTEST_H
#define DITTO_KBTEST_H

#include "knowledge/knowledge.h"
#include "tests/common/testutil.h"

/* Suite init/fini: DITTO_SHARE at the checkout (the shipped knowledge/) and
 * XDG_DATA_HOME at a fresh temporary folder, so that a developer's own
 * knowledge base never leaks into a test. */
void kbt_setup(void);
void kbt_teardown(void);
/* The temporary XDG_DATA_HOME, and the user knowledge folder under it
 * (which does not exist until something is saved). Borrowed. */
const char *kbt_data_home(void);
const char *kbt_user_dir(void);
/* A fresh temporary folder removed at teardown, and a folder in it that
 * never exists (a shipped folder with nothing in it). Borrowed. */
const char *kbt_scratch(void);
const char *kbt_no_shipped(void);

/* Parse JSON text or fail the test. Caller deletes. */
cJSON *kbt_parse(const char *text);
/* A minimal valid entry of that kind and status (rules get parameters,
 * reviewed entries a review). Caller deletes. */
cJSON *kbt_entry(const char *id, const char *kind, const char *status);
/* Write doc to DIR/FILE; returns the path (caller frees). */
char *kbt_write_doc(const char *dir, const char *file, const cJSON *doc);
/* Open with the given shipped folder and the default user folder; fails
 * the test when the handle cannot be made. problems may be NULL. */
kb *kbt_open(const char *shipped, dt_buf *problems);
/* Lines in s (newline-terminated). */
int kbt_lines(const char *s);

#endif
