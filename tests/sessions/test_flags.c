/* test_flags.c -- the run's flags in force at the end of a log
 * (sess_log_flags, what `ditto resume` restores): the last recorded flags
 * object, with a person's later switches of the brain in the workbench over
 * it, and an endpoint whose credentials were dropped never restored as if
 * whole. */
#include "tests/common/testutil.h"

#include "sessions/sessions.h"

#include <stdlib.h>
#include <string.h>

static cJSON *flags_of(const char *events_json)
{
    cJSON *ev = cJSON_Parse(events_json);
    cr_assert_not_null(ev, "bad test JSON: %s", events_json);
    cJSON *f = sess_log_flags(ev);
    cJSON_Delete(ev);
    return f;
}

static void expect_flags(cJSON *f, const char *want_json)
{
    cr_assert_not_null(f, "no flags, expected %s", want_json);
    cJSON *want = cJSON_Parse(want_json);
    cr_assert_not_null(want);
    char *got = dt_json_print(f, 0);
    cr_assert(cJSON_Compare(f, want, 1), "flags %s, expected %s", got, want_json);
    free(got);
    cJSON_Delete(want);
    cJSON_Delete(f);
}

Test(flags, the_last_recorded_flags_should_be_in_force)
{
    cr_assert_null(flags_of("[{\"type\": \"session_started\", \"seq\": 1}]"));
    expect_flags(
        flags_of("[{\"type\": \"session_started\", \"seq\": 1,"
                 "  \"flags\": {\"review\": \"auto\", \"model\": \"a\"}},"
                 " {\"type\": \"session_resumed\", \"seq\": 2, \"flags\": {\"model\": \"b\"}},"
                 " {\"type\": \"session_resumed\", \"seq\": 3}]"),
        "{\"model\": \"b\"}");
}

Test(flags, a_persons_switch_in_the_workbench_should_be_restored_over_the_flags)
{
    expect_flags(
        flags_of("[{\"type\": \"session_started\", \"seq\": 1,"
                 "  \"flags\": {\"backend\": \"expert\", \"model\": \"a\", \"review\": \"ask\"}},"
                 " {\"type\": \"log\", \"seq\": 2, \"level\": \"info\", \"setting\": \"backend\","
                 "  \"value\": \"llm\", \"by\": \"person\"},"
                 " {\"type\": \"log\", \"seq\": 3, \"level\": \"info\", \"setting\": \"model\","
                 "  \"value\": \"b\", \"by\": \"person\"},"
                 " {\"type\": \"log\", \"seq\": 4, \"level\": \"info\", \"setting\": \"endpoint\","
                 "  \"value\": \"http://h:1/v1\", \"by\": \"person\"}]"),
        "{\"backend\": \"llm\", \"model\": \"b\", \"review\": \"ask\", "
        "\"endpoint\": \"http://h:1/v1\"}");
    /* a later resume's flags (which held the switch) start afresh; a log
     * event that is no person's switch changes nothing */
    expect_flags(flags_of("[{\"type\": \"session_started\", \"seq\": 1, \"flags\": {}},"
                          " {\"type\": \"log\", \"seq\": 2, \"setting\": \"model\","
                          "  \"value\": \"b\", \"by\": \"person\"},"
                          " {\"type\": \"session_resumed\", \"seq\": 3,"
                          "  \"flags\": {\"model\": \"c\"}},"
                          " {\"type\": \"log\", \"seq\": 4, \"setting\": \"model\","
                          "  \"value\": \"d\", \"by\": \"lua\"},"
                          " {\"type\": \"log\", \"seq\": 5, \"setting\": \"colour\","
                          "  \"value\": \"red\", \"by\": \"person\"}]"),
                 "{\"model\": \"c\"}");
}

Test(flags, a_switched_endpoint_without_its_credentials_should_not_be_restored_as_whole)
{
    expect_flags(
        flags_of("[{\"type\": \"session_started\", \"seq\": 1,"
                 "  \"flags\": {\"endpoint\": \"http://old/v1\"}},"
                 " {\"type\": \"log\", \"seq\": 2, \"setting\": \"endpoint\","
                 "  \"value\": \"https://h/v1\", \"redacted\": true, \"by\": \"person\"}]"),
        "{\"endpoint_not_recorded\": \"https://h/v1\"}");
    /* and a plain endpoint switched to after it is used again */
    expect_flags(flags_of("[{\"type\": \"session_started\", \"seq\": 1,"
                          "  \"flags\": {\"endpoint_not_recorded\": \"https://h/v1\"}},"
                          " {\"type\": \"log\", \"seq\": 2, \"setting\": \"endpoint\","
                          "  \"value\": \"http://plain/v1\", \"by\": \"person\"}]"),
                 "{\"endpoint\": \"http://plain/v1\"}");
}
