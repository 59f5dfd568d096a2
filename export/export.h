/* export.h -- `ditto export`: a session's best kernel as a standalone project (kernel.cu
 * with ditto.cuh inlined, a harness.cu that checks it against an fp64 reference with
 * ditto's tolerance and times it next to cuSPARSE the way the session did, a Makefile for
 * nvcc, a README with the session's numbers, the matrix and the format's arrays).
 *
 * Prefix: export_. Depends on core, sparse, gpu (contracts), hardware and sessions; needs
 * no device and no CUDA header. The harness is shipped data (export/harness.cu, found
 * through dt_share_path like kernels/), and its tolerance is sparse/tolerance.h, inlined. */
#ifndef DITTO_EXPORT_H
#define DITTO_EXPORT_H

#include "core/core.h"

typedef struct export_opts {
    const char *out;         /* the folder to write: empty or new unless force */
    const char *session_dir; /* the session store; NULL: the default one */
    int version;             /* the version to export; 0: the session's best */
    int force;               /* overwrite the exported files in a non-empty out */
    int no_matrix;           /* do not write matrix.mtx */
} export_opts;

/* Export session id as opts says. Progress and warnings go to stderr ("ditto export: ..."),
 * the summary of what was written to stdout. Returns 0, or -1 with e set; when the session
 * does not exist e is the session store's error (SESS_ENOTFOUND). */
int export_session(const char *id, const export_opts *opts, dt_err *e);

/* The fixed text of every exported harness.cu: *head goes before the generated launch
 * contract, *tail after it, with sparse/tolerance.h inlined into *head (both new strings).
 * -1 with e naming the missing shipped file or marker line. */
int export_harness_parts(char **head, char **tail, dt_err *e);

#endif /* DITTO_EXPORT_H */
