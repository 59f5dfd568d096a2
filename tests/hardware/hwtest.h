/* hwtest.h -- helpers shared by the hardware tests. */
#ifndef DITTO_HWTEST_H
#define DITTO_HWTEST_H

#include "hardware/hardware.h"
#include "tests/common/testutil.h"

/* Suite init/fini: point DITTO_SHARE at the checkout (the test binary's own
 * folder holds no hardware/) and XDG_DATA_HOME at a fresh temporary folder,
 * so that a developer's calibrated copies never leak into a test. */
void hwt_setup(void);
void hwt_teardown(void);
/* The temporary XDG_DATA_HOME of the running test. Borrowed. */
const char *hwt_data_home(void);
/* Load a shipped spec or fail the test. Caller frees with hw_spec_free. */
hw_spec *hwt_load(const char *name);
/* The shipped file NAME.json as a cJSON tree to edit. Caller deletes. */
cJSON *hwt_doc(const char *name);
/* Write doc to DIR/FILE; returns the path (caller frees). */
char *hwt_write_doc(const char *dir, const char *file, const cJSON *doc);

#endif
