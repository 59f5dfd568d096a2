/* test_secrets.c -- nothing secret reaches a session: an endpoint given with
 * credentials in its URL runs, but neither the password nor a query token is
 * written anywhere under the session folder; resume says to give it again. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

Test(secrets, an_endpoint_with_credentials_should_never_be_recorded, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json",
                          "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=2000,nnz=20000,seed=3\","
                          " \"dtype\": \"fp32\", \"review\": \"auto\"}");
    /* port 9 on loopback: nothing answers, the step falls back to the expert */
    tu_proc p = tu_run("cd '%s' && XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' "
                       "XDG_CONFIG_HOME='%s/config' '%s' run spec.json --backend llm --api openai "
                       "--model m --endpoint 'http://alice:PASSWORDX@127.0.0.1:9/v1?key=TOKENX' "
                       "< /dev/null",
                       dir, dir, dir, dir, tu_ditto_bin());
    cr_assert(p.status == 3 || p.status == 0 || p.status == 1, "exit %d: %s", p.status, p.err);
    tu_proc_free(&p);
    tu_proc g = tu_run("grep -rl -e PASSWORDX -e TOKENX '%s/ditto' || true", dir);
    cr_assert_str_eq(g.out, "", "a secret was written to: %s", g.out);
    tu_proc_free(&g);
    tu_proc s = tu_run("grep -rho '\"endpoint_not_recorded\":\"[^\"]*\"' '%s/ditto/sessions'", dir);
    cr_assert(strstr(s.out, "http://127.0.0.1:9/v1") != NULL, "%s", s.out);
    tu_proc_free(&s);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}
