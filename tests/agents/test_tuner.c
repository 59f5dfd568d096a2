/* test_tuner.c -- what the tuner says about a variant that failed the
 * verification battery: the first failed check, by name and detail. */
#include "tests/common/testutil.h"

#include "agents/internal.h"

#include <stdlib.h>
#include <string.h>

Test(tuner, battery_failure_should_name_the_first_failed_check)
{
    cJSON *r = cJSON_Parse(
        "{\"ok\": true, \"passed\": false, \"checks\": ["
        "{\"name\": \"set 0: every output written\", \"passed\": true},"
        "{\"name\": \"set 0: matches the fp64 reference\", \"passed\": false,"
        " \"detail\": \"17 of 4096 outputs beyond the tolerance\"},"
        "{\"name\": \"set 1: agrees with cuSPARSE\", \"passed\": false, \"detail\": \"x\"}]}");
    cr_assert_not_null(r);
    char *why = ag_battery_failure(r);
    cr_assert_str_eq(why, "failed the verification battery: set 0: matches the fp64 reference: "
                          "17 of 4096 outputs beyond the tolerance");
    free(why);
    cJSON_Delete(r);

    /* A failed check without a detail, and a reply without checks. */
    r = cJSON_Parse("{\"ok\": true, \"passed\": false, \"checks\": ["
                    "{\"name\": \"no cached answers\", \"passed\": false}]}");
    why = ag_battery_failure(r);
    cr_assert_str_eq(why, "failed the verification battery: no cached answers");
    free(why);
    cJSON_Delete(r);
    r = cJSON_Parse("{\"ok\": true, \"passed\": false}");
    why = ag_battery_failure(r);
    cr_assert_str_eq(why, "failed the verification battery");
    free(why);
    cJSON_Delete(r);
}
