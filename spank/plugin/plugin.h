/*
 * plugin.h - shared declarations of the easyscale SPANK plugin.
 *
 * Layout (pyxis style): easyscale_spank.c holds the only exported symbols and
 * dispatches each slurm_spank_* callback to the file of its context:
 *   local.c   - srun (S_CTX_LOCAL) and sbatch/salloc (S_CTX_ALLOCATOR):
 *               validate the options, reject bad values with a message
 *   remote.c  - slurmstepd (S_CTX_REMOTE): export the task's EasyScale and
 *               GPU context; never fails the task
 *   helper.c  - fork+exec of easyscale-gpuctx, KEY=VALUE capture
 *   args.c    - plugstack.conf arguments
 *   request.c - option parsing/validation (C twin of internal/elastic)
 * Everything but the slurm_spank_* callbacks and the SPANK_PLUGIN data is
 * built with hidden visibility (-fvisibility=hidden) and kept local by the
 * linker version script easyscale_spank.map; spank/spank.mk adds the
 * hardening flags (stack protector, FORTIFY_SOURCE, RELRO, BIND_NOW).
 */
#ifndef EASYSCALE_PLUGIN_H
#define EASYSCALE_PLUGIN_H

#include <slurm/spank.h>

#include "request.h"

/* Every log line starts with "easyscale: <phase>: ". */
#define ES_ERR(phase, fmt, ...) slurm_error("easyscale: %s: " fmt, phase, ##__VA_ARGS__)
#define ES_INFO(phase, fmt, ...) slurm_info("easyscale: %s: " fmt, phase, ##__VA_ARGS__)
#define ES_VERBOSE(phase, fmt, ...) slurm_verbose("easyscale: %s: " fmt, phase, ##__VA_ARGS__)
#define ES_DEBUG(phase, fmt, ...) slurm_debug("easyscale: %s: " fmt, phase, ##__VA_ARGS__)

#define ES_HELPER_NAME "easyscale-gpuctx"
#define ES_HELPER_DIR "/usr/libexec/easyscale"
#define ES_PATH_MAX 4096

/* Plugstack arguments (args.c). */
struct es_config {
	char helper[ES_PATH_MAX]; /* helper=PATH; default: next to the .so, else ES_HELPER_DIR */
	int helper_timeout_s;     /* helper_timeout=SECONDS, 1..300, default 10 */
};

extern struct es_config es_config;

/* Raw option values captured by the option callbacks (NULL: flag not given). */
extern struct es_settings es_flags;

int es_parse_args(int ac, char **av);
int es_register_options(spank_t sp);

int es_local_post_opt(spank_t sp);
int es_remote_task_init(spank_t sp);

/*
 * Run the helper with the task environment env; for every "EASYSCALE_*=VALUE"
 * line it prints call set(key, value, arg). Returns 0 when the helper ran
 * and exited 0, -1 otherwise (already logged).
 */
int es_run_helper(const char *path, int timeout_s, char *const env[],
		  void (*set)(const char *key, const char *value, void *arg), void *arg);

#endif
