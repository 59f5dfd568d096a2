/* test_render.c -- the pure side of the workbench: the model events build
 * and what each pane's builder makes of it (no terminal involved). */
#include "tests/tui/tuitest.h"

#include "hardware/hardware.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    setlocale(LC_CTYPE, "C.UTF-8");
    const char *share = getenv("DITTO_SHARE");
    if (share == NULL || *share == '\0')
        setenv("DITTO_SHARE", tu_src_dir(), 1);
}

TestSuite(render, .init = setup);

static int has_braille(const char *s)
{
    int n = (int)strlen(s);
    for (int i = 0; i < n;) {
        unsigned cp;
        i += tui_utf8_next(s + i, n - i, &cp);
        if (cp > 0x2800 && cp <= 0x28FF)
            return 1;
    }
    return 0;
}

static int role_at(const tui_line *ln, int off)
{
    int r = ln->role;
    for (int i = 0; i < ln->nspans; i++)
        if (off >= ln->spans[i].off && off < ln->spans[i].off + ln->spans[i].len)
            r = ln->spans[i].role;
    return r;
}

#define HAS(lines, s) cr_assert_geq(tt_lines_find((lines), (s)), 0, "no line has [%s]", (s))

Test(render, the_model_should_follow_a_session)
{
    cJSON *evs = tt_session_events();
    tui_model m;
    tt_model_from(&m, evs);
    cr_assert_eq(m.nsteps, 9);
    cr_assert_eq(m.nrevs, 2);
    cr_assert_str_eq(m.revs[1].label, "v2");
    cr_assert_eq(m.nmeas, 2);
    cr_assert_eq(m.meas[0].version, 1, "a measurement belongs to the kernel before it");
    cr_assert_eq(m.meas[1].version, 2);
    cr_assert_float_eq(m.meas[0].achieved_occ, 96.4, 1e-9);
    cr_assert_float_eq(m.meas[1].dram_bytes, 1.4e6, 1);
    cr_assert_eq(m.occ_compiled, 1, "the compile's occupancy replaces the check's prediction");
    cr_assert_eq(m.have_gpu, 1);
    cr_assert_eq(m.finished, 1);
    cr_assert_eq(m.ndiags, 1);
    cr_assert_eq(m.diags[0].line, 3);
    cr_assert_eq(m.diags[0].rev, 0, "the warning is about v1");
    cr_assert_str_eq(m.steps[4].status, "approved");
    cr_assert_eq(tui_model_rev_for_step(&m, 3), 0);
    cr_assert_eq(tui_model_rev_for_step(&m, 8), 1);
    tui_model_clear(&m);
    cJSON_Delete(evs);
}

Test(render, a_failed_or_rejected_step_should_say_so)
{
    tui_model m;
    tui_model_init(&m);
    cJSON *e =
        cJSON_Parse("[{\"type\":\"step_started\",\"step\":1,\"kind\":\"compile\","
                    "\"version\":1,\"inputs\":{}},"
                    "{\"type\":\"artifact\",\"step\":1,\"name\":\"compile\",\"version\":1,"
                    "\"json\":{\"ok\":false,\"why\":\"3 errors\"}},"
                    "{\"type\":\"step_finished\",\"step\":1,\"status\":\"approved\","
                    "\"ok\":false,\"seconds\":0.5},"
                    "{\"type\":\"transition\",\"from\":\"compile\",\"to\":\"generate\","
                    "\"edge\":\"compile->generate\",\"iteration\":1,\"reason\":\"3 errors\"},"
                    "{\"type\":\"step_started\",\"step\":2,\"kind\":\"generate\","
                    "\"version\":2,\"inputs\":{\"feedback\":\"line 4: error\"}},"
                    "{\"type\":\"awaiting_review\",\"step\":2,\"policy\":\"ask\"},"
                    "{\"type\":\"decision\",\"step\":2,\"decision\":\"reject\","
                    "\"by\":\"person\",\"reason\":\"keep the bounds check\"},"
                    "{\"type\":\"step_finished\",\"step\":2,\"status\":\"rejected\","
                    "\"ok\":true,\"seconds\":0.1}]");
    const cJSON *it;
    cJSON_ArrayForEach(it, e) tui_model_apply(&m, it);
    cr_assert_str_eq(m.steps[0].status, "failed");
    cr_assert_str_eq(m.steps[1].status, "rejected");
    cr_assert_str_eq(m.steps[1].came_from, "compile (compile->generate, iteration 1): 3 errors");
    tui_lines l = {0};
    tui_reason_build(&m, 1, 60, 1, NULL, NULL, &l);
    HAS(&l, "Feedback: line 4: error");
    HAS(&l, "Decision: reject by person: keep the bounds check");
    HAS(&l, "after compile");
    tui_lines_clear(&l);
    tui_reason_build(&m, 0, 60, 1, NULL, NULL, &l);
    HAS(&l, "Failed: 3 errors");
    tui_lines_clear(&l);
    tui_steps_build(&m, 40, 1, 0, 0, &l);
    cr_assert_eq(l.n, 2);
    cr_assert(dt_startswith(l.v[0].text, "!"), "%s", l.v[0].text);
    cr_assert(dt_startswith(l.v[1].text, "✗"), "%s", l.v[1].text);
    cr_assert_eq(l.v[0].role, TUI_R_FAIL);
    tui_lines_clear(&l);
    tui_steps_build(&m, 40, 0, 0, 0, &l);
    cr_assert(dt_startswith(l.v[1].text, "x"), "ASCII glyphs: %s", l.v[1].text);
    tui_lines_clear(&l);
    tui_model_clear(&m);
    cJSON_Delete(e);
}

Test(render, steps_should_show_tokens_cost_and_agent_as_room_allows)
{
    tui_model m;
    tui_model_init(&m);
    cJSON *e = cJSON_Parse("[{\"type\":\"step_started\",\"step\":1,\"kind\":\"generate\","
                           "\"version\":3,\"agent\":\"Code Generator\",\"inputs\":{}},"
                           "{\"type\":\"step_finished\",\"step\":1,\"status\":\"edited\","
                           "\"ok\":true,\"seconds\":4.5,\"tokens_in\":9000,\"tokens_out\":3345,"
                           "\"cost\":0.0123}]");
    const cJSON *it;
    cJSON_ArrayForEach(it, e) tui_model_apply(&m, it);
    cr_assert_eq(m.tokens_in + m.tokens_out, 12345);
    tui_lines l = {0};
    tui_steps_build(&m, 64, 1, 0, 0, &l);
    cr_assert_str_eq(l.v[0].text, "✎  1 generate v3    4.50s  12.3k tok $0.012  Code Generator");
    cr_assert_eq(l.v[0].role, TUI_R_EDITED);
    tui_lines_clear(&l);
    tui_steps_build(&m, 34, 1, 0, 0, &l);
    cr_assert_str_eq(l.v[0].text, "✎  1 generate v3    4.50s $0.012", "no room for tokens");
    tui_lines_clear(&l);
    tui_steps_build(&m, 22, 1, 0, 0, &l);
    cr_assert_str_eq(l.v[0].text, "✎ generate v3    4.50s", "narrow: no id");
    tui_lines_clear(&l);
    dt_buf s = DT_BUF_INIT;
    tui_status_text(&m, 0, 0, 0, 0, &s);
    cr_assert_not_null(strstr(s.data, "| step 1/1 | 12345 tok $0.0123"), "%s", s.data);
    dt_buf_free(&s);
    tui_model_clear(&m);
    cJSON_Delete(e);
}

static int is_rule(const char *id, void *ud)
{
    (void)ud;
    return strcmp(id, "rule.spmv.sell16-for-regular-rows") == 0;
}

Test(render, a_plan_should_link_each_decision_to_its_rule)
{
    cJSON *evs = tt_session_events();
    tui_model m;
    tt_model_from(&m, evs);
    tui_lines l = {0};
    tui_reason_build(&m, 1, 70, 0, is_rule, NULL, &l);
    int links = 0;
    for (int i = 0; i < l.n; i++) {
        if (l.v[i].link == NULL)
            continue;
        links++;
        cr_assert_str_eq(l.v[i].link, "rule.spmv.sell16-for-regular-rows");
        /* a wrapped rationale item links on every line; the id is marked
         * where it is written */
        const char *at = strstr(l.v[i].text, "rule.spmv");
        if (at)
            cr_assert_eq(role_at(&l.v[i], (int)(at - l.v[i].text)), TUI_R_LINK);
    }
    /* the streamed text names it, and the rationale lists it */
    cr_assert_geq(links, 2);
    HAS(&l, "Why: the rules behind this plan");
    HAS(&l, "(score +55)");
    tui_lines_clear(&l);
    /* no knowledge base: no links */
    tui_reason_build(&m, 1, 70, 0, NULL, NULL, &l);
    int plain = 0;
    for (int i = 0; i < l.n; i++)
        plain += l.v[i].link == NULL;
    cr_assert_lt(plain, l.n, "rationale items keep their rule as the link");
    tui_lines_clear(&l);
    tui_model_clear(&m);
    cJSON_Delete(evs);
}

Test(render, the_source_should_diff_against_the_previous_version)
{
    cJSON *evs = tt_session_events();
    tui_model m;
    tt_model_from(&m, evs);
    tui_lines l = {0};
    /* unified, whole file */
    tui_source_build(&m, 0, 1, 90, 0, 1, 1, &l);
    HAS(&l, "kernel v2 (step 8) against v1 (step 4): +3 -3");
    int del = tt_lines_find(&l, "-#define BLOCK 256");
    int add = tt_lines_find(&l, "+#define BLOCK 128");
    cr_assert_geq(del, 0);
    cr_assert_gt(add, del, "deletes come before their inserts");
    cr_assert_eq(l.v[del].role, TUI_R_DEL);
    cr_assert_eq(l.v[add].role, TUI_R_ADD);
    cr_assert_eq(l.v[add].tag, 2, "the new file's line number");
    cr_assert_eq(l.v[del].tag2, 2, "the old file's line number");
    /* only the changed word is marked */
    const char *t = l.v[add].text;
    cr_assert_eq(role_at(&l.v[add], (int)(strstr(t, "128") - t)), TUI_R_ADD_WORD);
    cr_assert_eq(role_at(&l.v[add], (int)(strstr(t, "BLOCK") - t)), TUI_R_ADD);
    int ldg = tt_lines_find(&l, "__ldg(&val[k])");
    cr_assert_eq(role_at(&l.v[ldg], (int)(strstr(l.v[ldg].text, "__ldg") - l.v[ldg].text)),
                 TUI_R_ADD_WORD);
    cr_assert_eq(l.n, 1 + 13 + 3, "a header, 13 lines and 3 replaced ones");
    tui_lines_clear(&l);
    /* changes only: hunks (these changes are close: one hunk covers all) */
    tui_source_build(&m, 0, 1, 90, 0, 0, 1, &l);
    HAS(&l, "@@ -1,13 +1,13 @@");
    cr_assert_eq(l.n, 1 + 1 + 13 + 3);
    tui_lines_clear(&l);
    /* side by side: both versions on one row, each half fitted */
    tui_source_build(&m, 0, 1, 120, 1, 1, 1, &l);
    int row = tt_lines_find(&l, "#define BLOCK 256");
    cr_assert_geq(row, 0);
    cr_assert_not_null(strstr(l.v[row].text, "#define BLOCK 128"));
    cr_assert_not_null(strstr(l.v[row].text, "│"));
    for (int i = 1; i < l.n; i++)
        cr_assert_eq(tui_str_width(l.v[i].text, l.v[i].len), 120, "row %d: %s", i, l.v[i].text);
    tui_lines_clear(&l);
    /* one version: the plain source, numbered */
    tui_source_build(&m, -1, 0, 90, 0, 1, 0, &l);
    HAS(&l, "kernel v1 (step 4)");
    HAS(&l, "    2  #define BLOCK 256");
    tui_lines_clear(&l);
    tui_model_clear(&m);
    cJSON_Delete(evs);
}

/* Two 2,000-line versions, as the source pane would show them. */
Test(render, a_2000_line_diff_should_build_every_row)
{
    tui_model m;
    tui_model_init(&m);
    dt_buf a = DT_BUF_INIT, b = DT_BUF_INIT;
    for (int i = 0; i < 2000; i++) {
        dt_buf_printf(&a, "    y[%d] = alpha * acc%d;\n", i, i);
        if (i % 50 == 0)
            dt_buf_printf(&b, "    y[%d] = alpha * acc%d + beta * y[%d];\n", i, i, i);
        else
            dt_buf_printf(&b, "    y[%d] = alpha * acc%d;\n", i, i);
    }
    for (int v = 1; v <= 2; v++) {
        cJSON *ev = cJSON_CreateObject();
        dt_json_set_str(ev, "type", "artifact");
        dt_json_set_str(ev, "name", "kernel");
        dt_json_set_int(ev, "version", v);
        dt_json_set_str(ev, "content", v == 1 ? a.data : b.data);
        tui_model_apply(&m, ev);
        cJSON_Delete(ev);
    }
    double t0 = dt_now();
    tui_lines l = {0};
    tui_source_build(&m, 0, 1, 100, 0, 1, 1, &l);
    double secs = dt_now() - t0;
    cr_assert_eq(l.n, 1 + 2000 + 40);
    HAS(&l, "+40 -40");
    int row = tt_lines_find(&l, "    y[50] = alpha * acc50 + beta");
    cr_assert_geq(row, 0);
    const char *t = l.v[row].text;
    cr_assert_eq(role_at(&l.v[row], (int)(strstr(t, "beta") - t)), TUI_R_ADD_WORD);
    cr_assert_lt(secs, 2.0, "took %.3f s", secs);
    tui_lines_clear(&l);
    tui_model_clear(&m);
    dt_buf_free(&a);
    dt_buf_free(&b);
}

Test(render, the_roofline_should_plot_every_version_and_cusparse_in_braille)
{
    cJSON *evs = tt_session_events();
    tui_model m;
    tt_model_from(&m, evs);
    dt_err e = {0};
    hw_spec *g = hw_load("h200", &e);
    cr_assert_not_null(g, "%s", e.msg);
    tui_lines l = {0};
    tui_perf_build(&m, g, 80, 16, 1, &l);
    int fig = tt_lines_find(&l, "Roofline: NVIDIA H200, fp32");
    cr_assert_geq(fig, 0);
    int braille = 0, markers = 0;
    for (int i = fig + 1; i < fig + 1 + 16 && i < l.n; i++) {
        braille += has_braille(l.v[i].text);
        for (int k = 0; k < l.v[i].nspans; k++)
            markers +=
                l.v[i].spans[k].role == TUI_R_POINT || l.v[i].spans[k].role == TUI_R_BASE_POINT;
        cr_assert_eq(tui_str_width(l.v[i].text, l.v[i].len), 80, "figure rows fill the width");
    }
    cr_assert_geq(braille, 3, "the ceilings are drawn in braille");
    cr_assert_eq(markers, 3, "v1, v2 and cuSPARSE are on the plot");
    /* the legend names each point and its place against the roof */
    HAS(&l, "1 v1 ");
    HAS(&l, "2 v2 ");
    HAS(&l, "3 cuSPARSE");
    HAS(&l, "memory-bound");
    /* Every point sits at its algorithmic intensity (flops / minimum bytes),
     * cuSPARSE's too, so % of roof compares as the times do: 1.2e5 flops in
     * 12.34 us against 0.1 flop/B x 4.8 TB/s is 2.0 %, cuSPARSE's 16.91 us
     * 1.5 % (1.37x apart). The measured DRAM intensity is shown beside it. */
    HAS(&l, "1 v1          2.0% of roof, AI 0.1 (DRAM 0.0857), memory-bound");
    HAS(&l, "3 cuSPARSE    1.5% of roof, AI 0.1, memory-bound");
    /* the table: time, bandwidth, speedup, achieved occupancy, DRAM traffic */
    int v1 = tt_lines_find(&l, "  v1 ");
    cr_assert_geq(v1, 0);
    cr_assert_not_null(strstr(l.v[v1].text, "12.34"));
    cr_assert_not_null(strstr(l.v[v1].text, "1.37x"));
    cr_assert_not_null(strstr(l.v[v1].text, "96%"));
    cr_assert_not_null(strstr(l.v[v1].text, "1.17x"), "DRAM over minimum: %s", l.v[v1].text);
    HAS(&l, "  cuSPARSE ");
    HAS(&l, "best cuSPARSE algorithm, CSR_ALG1");
    /* occupancy: as compiled (40 registers), the limiter, three what-ifs */
    HAS(&l, "as compiled: 256 threads, 40 registers");
    HAS(&l, "  achieved     88%");
    HAS(&l, "  limiter     registers");
    HAS(&l, "  registers ");
    HAS(&l, "  threads ");
    HAS(&l, "  smem ");
    tui_lines_clear(&l);

    /* without UTF-8: plain ASCII everywhere */
    tui_perf_build(&m, g, 80, 16, 0, &l);
    for (int i = 0; i < l.n; i++)
        for (int k = 0; k < l.v[i].len; k++)
            cr_assert_lt((unsigned char)l.v[i].text[k], 0x80, "line %d: %s", i, l.v[i].text);
    tui_lines_clear(&l);
    hw_spec_free(g);
    tui_model_clear(&m);
    cJSON_Delete(evs);
}

Test(render, without_a_gpu_the_pane_should_say_what_is_missing)
{
    tui_model m;
    tui_model_init(&m);
    cJSON *ev = cJSON_Parse("{\"type\":\"session_started\",\"spec\":{\"op\":\"spmv\","
                            "\"dtype\":\"fp32\",\"matrix\":\"gen:banded:rows=9\"},"
                            "\"fingerprint\":{\"gpu\":\"none\"},\"backend\":\"expert\"}");
    tui_model_apply(&m, ev);
    cJSON_Delete(ev);
    tui_lines l = {0};
    tui_perf_build(&m, NULL, 70, 10, 1, &l);
    HAS(&l, "no GPU: verification and measurement need one");
    HAS(&l, "predicted once the plan is checked");
    HAS(&l, "no GPU spec known yet");
    tui_lines_clear(&l);
    dt_buf s = DT_BUF_INIT;
    tui_status_text(&m, -1, 0, 0, 0, &s);
    cr_assert_not_null(strstr(s.data, "no GPU: compile-only"), "%s", s.data);
    cr_assert_not_null(strstr(s.data, "spmv fp32 gen:banded:rows=9"), "%s", s.data);
    dt_buf_free(&s);
    tui_model_clear(&m);
}

Test(render, the_sparkline_should_mark_the_current_value)
{
    dt_err e = {0};
    hw_spec *g = hw_load("h200", &e);
    cr_assert_not_null(g, "%s", e.msg);
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, 256, 64, 0, 0, HW_CARVEOUT_DEFAULT, 1, &o, &e), 0);
    hw_occ_curve c;
    cr_assert_eq(hw_occ_curve_make(g, &o, HW_AXIS_REGS, &c, &e), 0, "%s", e.msg);
    dt_buf b = DT_BUF_INIT;
    int mark;
    tui_sparkline(&c, 32, 1, &b, &mark);
    cr_assert_eq(tui_str_width(b.data, (int)b.len), 32);
    /* 64 of 0..255 registers: a quarter of the way */
    cr_assert_eq(mark, 64 * 32 / 256);
    /* few registers fill the SM, many empty it: full blocks first */
    cr_assert(dt_startswith(b.data, "█"), "%s", b.data);
    dt_buf_reset(&b);
    tui_sparkline(&c, 16, 0, &b, &mark);
    cr_assert_eq(b.len, 16);
    cr_assert_eq(b.data[0], '@');
    dt_buf_free(&b);
    hw_occ_curve_free(&c);
    hw_spec_free(g);
}

Test(render, lines_should_expand_tabs_and_find_text)
{
    tui_lines l = {0};
    tui_line *ln = tui_lines_add(&l, "\tx\x01y", -1, TUI_R_NORMAL);
    cr_assert_str_eq(ln->text, "    x?y");
    tui_lines_add(&l, "Hello World", -1, TUI_R_NORMAL);
    tui_lines_add(&l, "another world", -1, TUI_R_NORMAL);
    cr_assert_eq(tui_lines_find(&l, "world", 0, 1), 1);
    cr_assert_eq(tui_lines_find(&l, "world", 2, 1), 2);
    cr_assert_eq(tui_lines_find(&l, "WORLD", 0, -1), 2, "backwards wraps around");
    cr_assert_eq(tui_lines_find(&l, "absent", 0, 1), -1);
    tui_lines_clear(&l);
    cr_assert_eq(l.n, 0);
}

static void apply_all(tui_model *m, const char *json)
{
    cJSON *e = cJSON_Parse(json);
    cr_assert_not_null(e);
    const cJSON *it;
    cJSON_ArrayForEach(it, e) tui_model_apply(m, it);
    cJSON_Delete(e);
}

Test(render, a_narrow_status_row_should_drop_the_matrix_first_and_keep_the_state)
{
    tui_model m;
    tui_model_init(&m);
    apply_all(&m, "[{\"type\":\"session_started\",\"spec\":{\"op\":\"spmv\",\"dtype\":\"fp32\","
                  "\"matrix\":\"/data/matrices/a-rather-long-folder/webbase-1M.mtx\"},"
                  "\"fingerprint\":{\"gpu\":\"none\"},\"backend\":\"llm\",\"model\":\"m-1\"},"
                  "{\"type\":\"step_started\",\"step\":1,\"kind\":\"plan\",\"version\":2},"
                  "{\"type\":\"awaiting_review\",\"step\":1}]");
    dt_buf s = DT_BUF_INIT;
    tui_status_fit(&m, 0, 0, 0, 0, 80, &s);
    cr_assert_leq(tui_str_width(s.data, (int)s.len), 80, "%s", s.data);
    cr_assert_null(strstr(s.data, "webbase"), "the matrix goes first: %s", s.data);
    cr_assert_not_null(strstr(s.data, "review plan v2"), "%s", s.data);
    cr_assert_not_null(strstr(s.data, "0 tok $0.0000"), "%s", s.data);
    cr_assert_not_null(strstr(s.data, "llm m-1"), "%s", s.data);
    dt_buf_reset(&s);
    tui_status_fit(&m, 0, 0, 0, 0, 30, &s);
    cr_assert_str_eq(s.data, " review plan v2", "only the state is left at 30 columns");
    dt_buf_reset(&s);
    tui_status_fit(&m, 0, 0, 0, 0, 1000, &s);
    cr_assert_not_null(strstr(s.data, "spmv fp32 /data/matrices"), "%s", s.data);
    dt_buf_free(&s);
    tui_model_clear(&m);
}

Test(render, an_agent_name_that_does_not_fit_should_end_in_an_ellipsis)
{
    tui_model m;
    tui_model_init(&m);
    apply_all(&m, "[{\"type\":\"step_started\",\"step\":1,\"kind\":\"generate\",\"version\":3,"
                  "\"agent\":\"Code Generator\"},"
                  "{\"type\":\"step_finished\",\"step\":1,\"status\":\"approved\",\"ok\":true,"
                  "\"seconds\":4.5}]");
    tui_lines l = {0};
    tui_steps_build(&m, 36, 1, 0, 0, &l);
    cr_assert_str_eq(l.v[0].text, "✓  1 generate v3    4.50s  Code Gen…");
    cr_assert_eq(tui_str_width(l.v[0].text, l.v[0].len), 36);
    tui_lines_clear(&l);
    tui_steps_build(&m, 36, 0, 0, 0, &l);
    cr_assert_str_eq(l.v[0].text, "+  1 generate v3    4.50s  Code G...", "%s", l.v[0].text);
    tui_lines_clear(&l);
    tui_model_clear(&m);
}

Test(render, feedback_that_is_the_transitions_reason_should_appear_once)
{
    tui_model m;
    tui_model_init(&m);
    apply_all(&m, "[{\"type\":\"step_started\",\"step\":1,\"kind\":\"plan\",\"version\":1},"
                  "{\"type\":\"step_finished\",\"step\":1,\"status\":\"rejected\",\"ok\":true},"
                  "{\"type\":\"transition\",\"from\":\"plan\",\"to\":\"plan\",\"edge\":"
                  "\"plan->plan\",\"iteration\":1,\"reason\":\"rejected: use SELL for these "
                  "rows\"},"
                  "{\"type\":\"step_started\",\"step\":2,\"kind\":\"plan\",\"version\":2,"
                  "\"inputs\":{\"feedback\":\"use SELL for these rows\"}}]");
    tui_lines l = {0};
    tui_reason_build(&m, 1, 70, 1, NULL, NULL, &l);
    int n = 0;
    for (int i = 0; i < l.n; i++)
        n += strstr(l.v[i].text, "use SELL for these rows") != NULL;
    cr_assert_eq(n, 1, "the feedback once, not in the transition's line too");
    HAS(&l, "Feedback: use SELL for these rows");
    HAS(&l, "after plan (plan->plan, iteration 1): rejected");
    tui_lines_clear(&l);
    tui_model_clear(&m);
}

Test(render, diagnostics_should_count_the_current_version_and_the_outcome_name_errors)
{
    tui_model m;
    tui_model_init(&m);
    apply_all(&m, "[{\"type\":\"step_started\",\"step\":1,\"kind\":\"generate\",\"version\":1},"
                  "{\"type\":\"artifact\",\"step\":1,\"name\":\"kernel\",\"version\":1,"
                  "\"content\":\"bad\"},"
                  "{\"type\":\"step_started\",\"step\":2,\"kind\":\"compile\",\"version\":1},"
                  "{\"type\":\"diagnostic\",\"step\":2,\"severity\":\"error\",\"source\":"
                  "\"nvrtc\",\"line\":1,\"message\":\"identifier \\\"bad\\\" is undefined\\n"
                  "  bad\\n  ^\"},"
                  "{\"type\":\"diagnostic\",\"step\":2,\"severity\":\"error\",\"source\":"
                  "\"nvrtc\",\"line\":1,\"message\":\"expected a declaration\"},"
                  "{\"type\":\"step_finished\",\"step\":2,\"status\":\"approved\",\"ok\":false}]");
    int err, warn, older;
    tui_diag_counts(&m, &err, &warn, &older);
    cr_assert_eq(err, 2);
    tui_lines l = {0};
    tui_reason_build(&m, 1, 70, 1, NULL, NULL, &l);
    HAS(&l, "Error (nvrtc, line 1): identifier \"bad\" is undefined");
    HAS(&l, "Error (nvrtc, line 1): expected a declaration");
    cr_assert_lt(tt_lines_find(&l, "  ^"), 0, "the caret excerpt stays in Diagnostics");
    tui_lines_clear(&l);
    /* the fix compiles: v2's compile has no errors, v1's are history */
    apply_all(&m, "[{\"type\":\"step_started\",\"step\":3,\"kind\":\"generate\",\"version\":2},"
                  "{\"type\":\"artifact\",\"step\":3,\"name\":\"kernel\",\"version\":2,"
                  "\"content\":\"good\"},"
                  "{\"type\":\"step_started\",\"step\":4,\"kind\":\"compile\",\"version\":2},"
                  "{\"type\":\"step_finished\",\"step\":4,\"status\":\"approved\",\"ok\":true}]");
    tui_diag_counts(&m, &err, &warn, &older);
    cr_assert_eq(err, 0, "not \"2 errors\" after the fix compiled");
    cr_assert_eq(older, 2);
    tui_diag_build(&m, 70, &l);
    cr_assert_geq(tt_lines_find(&l, "error nvrtc step 2 v1 line 1"), 0);
    cr_assert_eq(l.v[0].role, TUI_R_DIM, "v1's errors are dimmed");
    tui_lines_clear(&l);
    tui_model_clear(&m);
}

Test(render, the_status_row_should_show_the_brain_in_use_and_streaming_tokens)
{
    tui_model m;
    tui_model_init(&m);
    m.price_out = 10; /* USD per million output tokens */
    apply_all(&m, "[{\"type\":\"session_started\",\"spec\":{\"op\":\"spmv\",\"dtype\":\"fp32\","
                  "\"matrix\":\"m.mtx\"},\"fingerprint\":{\"gpu\":\"none\"},\"backend\":\"llm\","
                  "\"model\":\"big-1\"},"
                  "{\"type\":\"step_started\",\"step\":1,\"kind\":\"plan\",\"version\":1},"
                  "{\"type\":\"text\",\"step\":1,\"text\":\"0123456789012345678901234567890123456789"
                  "0123456789012345678901234567890123456789\"}]");
    dt_buf s = DT_BUF_INIT;
    tui_status_text(&m, 0, 0, 0, 0, &s);
    cr_assert_not_null(strstr(s.data, "| llm big-1 |"), "%s", s.data);
    cr_assert_not_null(strstr(s.data, "0 tok $0.0000, streaming ~20 tok ~$0.0002"), "%s", s.data);
    /* the endpoint fails: the expert takes over, and the row says why */
    apply_all(&m, "[{\"type\":\"log\",\"step\":1,\"level\":\"warning\",\"message\":\"LLM "
                  "unavailable (server): falling back to the expert backend\",\"backend\":"
                  "\"expert\",\"why\":\"HTTP 500 from the endpoint\"}]");
    dt_buf_reset(&s);
    tui_status_text(&m, 0, 0, 0, 0, &s);
    cr_assert_not_null(strstr(s.data, "| fell back to expert: HTTP 500 from the endpoint |"), "%s",
                       s.data);
    cr_assert_null(strstr(s.data, "big-1"), "the LLM is not in use: %s", s.data);
    cr_assert_null(strstr(s.data, "streaming"), "no LLM stream to estimate: %s", s.data);
    /* a person switches back to the LLM with another model */
    apply_all(&m, "[{\"type\":\"log\",\"level\":\"info\",\"message\":\"backend switched\","
                  "\"setting\":\"backend\",\"value\":\"llm\",\"by\":\"person\"},"
                  "{\"type\":\"log\",\"level\":\"info\",\"message\":\"model switched\","
                  "\"setting\":\"model\",\"value\":\"small-2\",\"by\":\"person\"}]");
    dt_buf_reset(&s);
    tui_status_text(&m, 0, 0, 0, 0, &s);
    cr_assert_not_null(strstr(s.data, "| llm small-2 |"), "%s", s.data);
    dt_buf_free(&s);
    tui_model_clear(&m);
}

Test(render, a_failed_gate_should_show_the_error_its_line_and_the_choices_never_approve)
{
    tui_model m;
    tui_model_init(&m);
    apply_all(&m, "[{\"type\":\"step_started\",\"step\":1,\"kind\":\"generate\",\"version\":1},"
                  "{\"type\":\"artifact\",\"step\":1,\"name\":\"kernel\",\"version\":1,"
                  "\"content\":\"__global__ void k() {}\\nint broken = not_a_symbol;\\n\"},"
                  "{\"type\":\"step_finished\",\"step\":1,\"status\":\"approved\",\"ok\":true},"
                  "{\"type\":\"step_started\",\"step\":2,\"kind\":\"compile\",\"version\":1},"
                  "{\"type\":\"text\",\"step\":2,\"text\":\"Static rules: 0 finding(s).\\n\"},"
                  "{\"type\":\"diagnostic\",\"step\":2,\"severity\":\"error\",\"source\":"
                  "\"nvrtc\",\"line\":2,\"message\":\"identifier \\\"not_a_symbol\\\" is "
                  "undefined\"},"
                  "{\"type\":\"artifact\",\"step\":2,\"name\":\"compile\",\"version\":1,"
                  "\"json\":{\"ok\":false,\"why\":\"does not compile\"}},"
                  "{\"type\":\"awaiting_review\",\"step\":2,\"policy\":\"ask\",\"failed\":true,"
                  "\"why\":\"does not compile\",\"options\":[\"reject\",\"edit\",\"stop\"]}]");
    cr_assert_eq(m.steps[1].gate_failed, 1);
    cr_assert_eq(m.steps[1].gate_edit, 1);
    tui_lines l = {0};
    tui_reason_build(&m, 1, 54, 1, NULL, NULL, &l);
    HAS(&l, "FAILED: compile v1, 1 error; it cannot be approved");
    HAS(&l, "line 2: identifier \"not_a_symbol\" is undefined");
    HAS(&l, "2 | int broken = not_a_symbol;");
    HAS(&l, "r  send it back to the coder with your reason");
    HAS(&l, "e  edit the kernel yourself");
    cr_assert_lt(tt_lines_find(&l, "a approve"), 0, "a failed step offers no approval");
    /* the choices close the pane, which follows its end: always in view */
    cr_assert_str_eq(l.v[l.n - 1].text, "s  stop the run");
    int fl = tt_lines_find(&l, "FAILED: compile v1");
    cr_assert_eq(l.v[fl].role, TUI_R_FAIL);
    cr_assert_gt(l.n - fl, 0);
    cr_assert_leq(l.n - fl, 14, "the block fits the 80x24 reasoning pane (%d lines)", l.n - fl);
    tui_lines_clear(&l);
    tui_steps_build(&m, 40, 1, 0, 0, &l);
    cr_assert(dt_startswith(l.v[1].text, "!"), "%s", l.v[1].text);
    cr_assert(strstr(l.v[1].text, "FAILED"), "%s", l.v[1].text);
    cr_assert_eq(l.v[1].role, TUI_R_FAIL);
    tui_lines_clear(&l);
    dt_buf b = DT_BUF_INIT;
    tui_status_text(&m, -1, 0, 0, 0, &b);
    cr_assert(strstr(b.data, "compile v1 FAILED: send back, edit or stop"), "%s", b.data);
    dt_buf_free(&b);
    /* sent back: no longer a gate */
    apply_all(&m, "[{\"type\":\"decision\",\"step\":2,\"decision\":\"reject\",\"by\":\"person\","
                  "\"reason\":\"fix it\"}]");
    cr_assert_eq(m.steps[1].gate_failed, 0);
    /* a replay of a session from before the field: the artifact said not ok */
    tui_model_clear(&m);
    tui_model_init(&m);
    apply_all(&m, "[{\"type\":\"step_started\",\"step\":1,\"kind\":\"verify\",\"version\":1},"
                  "{\"type\":\"artifact\",\"step\":1,\"name\":\"verify\",\"version\":1,"
                  "\"json\":{\"ok\":false,\"why\":\"2 verification check(s) failed\"}},"
                  "{\"type\":\"awaiting_review\",\"step\":1,\"policy\":\"ask\"}]");
    cr_assert_eq(m.steps[0].gate_failed, 1);
    tui_reason_build(&m, 0, 54, 0, NULL, NULL, &l);
    HAS(&l, "FAILED: verify v1: 2 verification check(s) failed");
    HAS(&l, "never approved");
    tui_lines_clear(&l);
    tui_model_clear(&m);
}
