/* sparse_fixtures.h -- small hand-made matrices shared by the sparse tests. */
#ifndef DITTO_SPARSE_FIXTURES_H
#define DITTO_SPARSE_FIXTURES_H

#include "sparse/sparse.h"

/* Build a CSR from triplets (row, col, value), rows x cols. */
static inline sp_csr *fx_csr(int32_t rows, int32_t cols, int n, const int32_t *r,
                             const int32_t *c, const double *v)
{
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(rows, cols, n, &e);
    for (int i = 0; i < n; i++)
        sp_coo_push(coo, r[i], c[i], v ? v[i] : 1.0, &e);
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    return a;
}

#endif
