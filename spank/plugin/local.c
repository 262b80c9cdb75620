/*
 * local.c - srun (local) and sbatch/salloc (allocator) contexts: merge the
 * flags captured by the option callbacks with the EASYSCALE_* environment
 * twins (the flag wins), validate, and reject a bad request with a message
 * naming the option. Only callback-captured values count as flags here:
 * spank_option_getopt() is never used in these contexts, since old Slurm
 * releases reported options the user never passed there.
 *
 * A valid request is also recorded in the job control environment
 * (spank_job_control_setenv), so the job sees SLURM_SPANK_EASYSCALE_* even
 * with --export=NONE; the remote side falls back to those.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static const char *phase(void)
{
	return spank_context() == S_CTX_LOCAL ? "srun" : "allocator";
}

static const char *env_of(const char *option)
{
	if (strcmp(option, ES_OPT_ELASTIC) == 0)
		return ES_ENV_ELASTIC;
	if (strcmp(option, ES_OPT_LW) == 0)
		return ES_ENV_LW;
	return ES_ENV_DET;
}

static int flag_given(const char *option)
{
	if (strcmp(option, ES_OPT_ELASTIC) == 0)
		return es_flags.elastic != NULL;
	if (strcmp(option, ES_OPT_LW) == 0)
		return es_flags.logical_workers != NULL;
	return es_flags.determinism != NULL;
}

static void record(spank_t sp, const char *name, const char *value)
{
	spank_err_t rc = spank_job_control_setenv(sp, name, value, 1);
	if (rc != ESPANK_SUCCESS)
		ES_DEBUG(phase(), "job control env %s: %s", name, spank_strerror(rc));
}

int es_local_post_opt(spank_t sp)
{
	struct es_settings env = { getenv(ES_ENV_ELASTIC), getenv(ES_ENV_LW), getenv(ES_ENV_DET) };
	struct es_settings s = es_settings_merge(&es_flags, &env);
	struct es_request r;
	const char *bad = NULL;
	char msg[512], num[16];

	if (!es_settings_any(&s))
		return 0;
	if (es_request_parse(&s, &r, &bad, msg, sizeof(msg)) < 0) {
		if (flag_given(bad))
			ES_ERR(phase(), "%s", msg);
		else
			ES_ERR(phase(), "%s (from %s)", msg, env_of(bad));
		return -1;
	}
	if (s.elastic)
		record(sp, ES_ENV_ELASTIC, s.elastic);
	if (r.logical_workers) {
		snprintf(num, sizeof(num), "%d", r.logical_workers);
		record(sp, ES_ENV_LW, num);
	}
	record(sp, ES_ENV_DET, r.determinism);
	ES_VERBOSE(phase(), "request min_nodes=%d max_nodes=%d logical_workers=%d determinism=%s",
		   r.min_nodes, r.max_nodes, r.logical_workers, r.determinism);
	return 0;
}
