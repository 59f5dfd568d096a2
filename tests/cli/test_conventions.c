/* test_conventions.c -- what a user expects around the binary: the committed man page is
 * the one the --help texts generate, the README and the bash completion know every
 * command, the example hooks' usage lines run, and .gz and '-' read as the plain file. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

/* The command names `ditto --help` lists, one per line. Caller frees. */
static char *help_commands(void)
{
    tu_proc p = tu_run("'%s' --help | awk '/^commands:/ { on = 1; next } "
                       "on && /^  [a-z]/ { print $1 } on && /^$/ { exit }'",
                       tu_ditto_bin());
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert_gt(strlen(p.out), 40, "no commands in ditto --help: %s", p.out);
    free(p.err);
    return p.out;
}

Test(conventions, the_committed_man_page_should_be_the_one_help_generates)
{
    tu_proc p = tu_run("'%s' --help-man", tu_ditto_bin());
    cr_assert_eq(p.status, 0, "%s", p.err);
    char *path = dt_xasprintf("%s/docs/ditto.1", tu_src_dir());
    char *committed = dt_read_file(path, NULL, NULL);
    cr_assert_not_null(committed, "no %s: run make man", path);
    cr_assert_str_eq(committed, p.out,
                     "docs/ditto.1 differs from 'ditto --help-man': run make man");
    /* every command has its section, with its usage */
    char *cmds = help_commands();
    char *save = NULL;
    for (char *c = strtok_r(cmds, "\n", &save); c; c = strtok_r(NULL, "\n", &save)) {
        char *sec = dt_xasprintf("\n.SS %s\n", c);
        cr_assert(strstr(committed, sec), "no section for %s in docs/ditto.1", c);
        /* its section holds its usage ("ditto NAME ...", resume's inside run's) */
        const char *body = strstr(committed, sec) + strlen(sec);
        const char *next = strstr(body, "\n.SS ");
        char *use = dt_xasprintf("ditto %s", c);
        const char *at = strstr(body, use);
        cr_assert(at && (next == NULL || at < next), "no usage of %s in its section", c);
        free(use);
        free(sec);
    }
    cr_assert(strstr(committed, "\n.SH EXIT STATUS\n") && strstr(committed, "66 something named"),
              "no exit statuses in the man page");
    free(cmds);
    free(committed);
    free(path);
    tu_proc_free(&p);
}

/* man(1), where installed, renders it without a warning. */
Test(conventions, the_man_page_should_render_without_warnings)
{
    tu_proc p = tu_run("command -v groff");
    int have = p.status == 0;
    tu_proc_free(&p);
    if (!have)
        cr_skip_test("groff is not installed: the roff source is checked by the other test");
    p = tu_run("groff -man -Tutf8 -ww -z '%s/docs/ditto.1' 2>&1", tu_src_dir());
    cr_assert_eq(p.status, 0, "%s", p.out);
    cr_assert_str_eq(p.out, "", "groff warns: %s", p.out);
    tu_proc_free(&p);
}

Test(conventions, readme_and_the_bash_completion_should_know_every_command)
{
    char *path = dt_xasprintf("%s/README.md", tu_src_dir());
    char *readme = dt_read_file(path, NULL, NULL);
    cr_assert_not_null(readme);
    char *cmds = help_commands();
    char *save = NULL;
    for (char *c = strtok_r(cmds, "\n", &save); c; c = strtok_r(NULL, "\n", &save)) {
        char *row = dt_xasprintf("| `ditto %s", c);
        cr_assert(strstr(readme, row), "README's command table has no row for %s", c);
        free(row);
        /* the completion offers it from its first letters */
        char pre[3] = {c[0], c[1], '\0'};
        tu_proc p =
            tu_run("PATH=\"$(dirname '%s'):$PATH\" bash -c 'source \"%s/scripts/completions/"
                   "ditto.bash\"; COMP_WORDS=(ditto %s); COMP_CWORD=1; _ditto; "
                   "printf \"%%s\\n\" \"${COMPREPLY[@]}\"'",
                   tu_ditto_bin(), tu_src_dir(), pre);
        cr_assert_eq(p.status, 0, "%s", p.err);
        char *line = dt_xasprintf("%s\n", c);
        cr_assert(strncmp(p.out, line, strlen(line)) == 0 || strstr(p.out, line),
                  "completing '%s' offers: %s", pre, p.out);
        free(line);
        tu_proc_free(&p);
    }
    static const char *subs[] = {"| `ditto hw check", "`ditto hw match", "| `ditto bench"};
    for (size_t i = 0; i < DT_ARRAY_LEN(subs); i++)
        cr_assert(strstr(readme, subs[i]), "README has no %s", subs[i]);
    /* options come from the command's --help */
    tu_proc p = tu_run("PATH=\"$(dirname '%s'):$PATH\" bash -c 'source \"%s/scripts/completions/"
                       "ditto.bash\"; COMP_WORDS=(ditto hw match --a); COMP_CWORD=3; _ditto; "
                       "printf \"%%s\\n\" \"${COMPREPLY[@]}\"'",
                       tu_ditto_bin(), tu_src_dir());
    cr_assert_str_eq(p.out, "--approximate\n", "%s%s", p.out, p.err);
    tu_proc_free(&p);
    free(cmds);
    free(readme);
    free(path);
}

/* Each example hook's "Use:" line names a command that takes the hook. */
Test(conventions, example_hooks_should_give_usage_lines_that_run, .timeout = 120)
{
    tu_proc ls = tu_run("ls '%s'/scripting/examples/*.lua", tu_src_dir());
    cr_assert_eq(ls.status, 0);
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json",
                          "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=300,nnz=3000\", "
                          "\"review\": \"auto\"}");
    int n = 0;
    char *save = NULL;
    for (char *f = strtok_r(ls.out, "\n", &save); f; f = strtok_r(NULL, "\n", &save)) {
        char *text = dt_read_file(f, NULL, NULL);
        cr_assert_not_null(text);
        cr_assert_null(strstr(text, "ditto --hook"), "%s still says 'ditto --hook'", f);
        cr_assert(strstr(text, "ditto run SPEC.json --hook FILE"), "%s: no usage line", f);
        free(text);
        /* as the line says: the hook loads and the run goes through */
        tu_proc p =
            tu_run("cd '%s' && XDG_DATA_HOME='%s' XDG_CONFIG_HOME='%s/c' XDG_CACHE_HOME='%s/k' "
                   "'%s' run spec.json --hook '%s' --no-session < /dev/null",
                   dir, dir, dir, dir, tu_ditto_bin(), f);
        cr_assert(p.status == 0 || p.status == 1 || p.status == 3, "%s: exit %d\n%s", f, p.status,
                  p.err);
        cr_assert_null(strstr(p.err, "hooks:"), "%s did not load: %s", f, p.err);
        tu_proc_free(&p);
        n++;
    }
    cr_assert_geq(n, 4);
    tu_proc_free(&ls);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* A matrix reads the same plain, gzip-compressed and from standard input
 * (plain or gzip), and a DLMC file too. */
Test(conventions, gz_and_stdin_should_read_as_the_plain_file)
{
    char *dir = tu_tmpdir();
    static const char *mats[] = {"west0479.mtx", "dlmc/transformer__magnitude_pruning__0.7__"
                                                 "body_encoder_layer_0_self_attention_"
                                                 "multihead_attention_q_fully_connected.smtx"};
    for (size_t i = 0; i < DT_ARRAY_LEN(mats); i++) {
        char *gz = tu_matrix(mats[i]);
        const char *ext = dt_endswith(mats[i], ".smtx") ? "smtx" : "mtx";
        tu_proc p = tu_run("gzip -dc '%s' > '%s/plain.%s'", gz, dir, ext);
        cr_assert_eq(p.status, 0, "%s", p.err);
        tu_proc_free(&p);
        char *forms[] = {
            dt_xasprintf("'%s' profile '%s/plain.%s' --json", tu_ditto_bin(), dir, ext),
            dt_xasprintf("'%s' profile '%s' --json", tu_ditto_bin(), gz),
            dt_xasprintf("'%s' profile - --json < '%s/plain.%s'", tu_ditto_bin(), dir, ext),
            dt_xasprintf("'%s' profile - --json < '%s'", tu_ditto_bin(), gz),
        };
        char *first = NULL;
        for (size_t k = 0; k < DT_ARRAY_LEN(forms); k++) {
            p = tu_run("%s", forms[k]);
            cr_assert_eq(p.status, 0, "%s: %s", forms[k], p.err);
            /* progress is for terminals: nothing on a redirected stderr */
            cr_assert_str_eq(p.err, "", "%s", forms[k]);
            cJSON *j = cJSON_Parse(p.out);
            cr_assert_not_null(j, "%s: %s", forms[k], p.out);
            const char *fp = dt_json_str(j, "fingerprint", "");
            cr_assert_eq(strlen(fp), 16);
            if (first == NULL)
                first = dt_xstrdup(fp);
            else
                cr_assert_str_eq(fp, first, "%s gives another matrix", forms[k]);
            cJSON_Delete(j);
            tu_proc_free(&p);
            free(forms[k]);
        }
        free(first);
        free(gz);
    }
    /* the commands whose worker reads the matrix take '-' too: standard
     * input goes to a file in the cache, removed afterwards */
    char *k = dt_xasprintf("%s/kernels/spmv_csr_thread.cu", tu_src_dir());
    char *m = tu_matrix("west0479.mtx");
    tu_proc c =
        tu_run("XDG_CACHE_HOME='%s/cache' '%s' check '%s' - < '%s'", dir, tu_ditto_bin(), k, m);
    cr_assert(strstr(c.out, "479 x 479, 1910 nonzeros"), "exit %d: %s%s", c.status, c.out, c.err);
    tu_proc_free(&c);
    c = tu_run("ls '%s/cache/ditto' | grep -c stdin", dir);
    cr_assert_str_eq(c.out, "0\n", "the copy of stdin was left behind");
    tu_proc_free(&c);
    c = tu_run("'%s' baseline - - < '%s'", tu_ditto_bin(), m);
    cr_assert_eq(c.status, 2, "%s", c.err);
    tu_proc_free(&c);
    free(k);
    free(m);
    /* a damaged .gz is an error naming the file, not a crash or a partial matrix */
    char *west = tu_matrix("west0479.mtx");
    tu_proc p =
        tu_run("cd '%s' && (gzip -dc '%s' | head -c 4000 | gzip -c | head -c 900) > bad.mtx.gz "
               "&& '%s' profile bad.mtx.gz",
               dir, west, tu_ditto_bin());
    free(west);
    cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "bad.mtx.gz"), "%s", p.err);
    tu_proc_free(&p);
    tu_rmtree(dir);
    free(dir);
}
