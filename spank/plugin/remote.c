/*
 * remote.c - slurmstepd context, slurm_spank_task_init (runs in the forked
 * task child as the user, just before execve). For an EasyScale task (any of
 * the three options given, by flag or environment twin) it exports:
 *
 *   EASYSCALE_JOB_ID, EASYSCALE_STEP_ID, EASYSCALE_TASK_ID (global rank)
 *   EASYSCALE_ELASTIC, EASYSCALE_ELASTIC_MIN, EASYSCALE_ELASTIC_MAX,
 *   EASYSCALE_LOGICAL_WORKERS, EASYSCALE_DETERMINISM   (the resolved request)
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID    (always: CUDA ordinals then follow the
 *                                    PCI order that Slurm and NVML use)
 *   CUBLAS_WORKSPACE_CONFIG=:4096:8 (deterministic cuBLAS with streams)
 *   TF_DETERMINISTIC_OPS=1, TF_CUDNN_DETERMINISTIC=1 (framework kernels)
 *   NVIDIA_TF32_OVERRIDE=0          (d2 only: no TF32, which exists on some
 *                                    GPU types and not on others)
 *   every EASYSCALE_*=VALUE line the helper easyscale-gpuctx prints
 *
 * The determinism settings are not overwritten when the user set them.
 * The EASYSCALE_* values are read into fixed buffers (64 bytes for
 * EASYSCALE_ELASTIC, 32 for EASYSCALE_LOGICAL_WORKERS, 16 for
 * EASYSCALE_DETERMINISM, the same for their SLURM_SPANK_ twins); a longer
 * value is logged and not used.
 * Nothing here fails the task: a bad value or a helper failure is logged and
 * the task runs (CPU workers need no GPU context). No Go code runs in this
 * process (a Go runtime does not survive slurmstepd's fork); the helper is a
 * separate program.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "plugin.h"

#define PHASE "task_init"

struct env_buf {
	char elastic[64], lw[32], det[16];
};

/*
 * The task's value of name in buf[0..len), or NULL when unset or empty. A
 * value that does not fit (spank_getenv: ESPANK_NOSPACE) cannot be a valid
 * request (the longest, "1000000-1000000", has 15 bytes): it is logged with
 * the variable's name and limit and not used.
 */
static const char *get(spank_t sp, const char *name, char *buf, int len)
{
	spank_err_t rc = spank_getenv(sp, name, buf, len);
	if (rc == ESPANK_NOSPACE) {
		ES_ERR(PHASE, "%s in the task environment is longer than its limit of %d bytes; ignored", name,
		       len - 1);
		return NULL;
	}
	if (rc != ESPANK_SUCCESS || buf[0] == '\0')
		return NULL;
	return buf;
}

/* The request: flag, else EASYSCALE_* in the task env, else SLURM_SPANK_EASYSCALE_*. */
static struct es_settings task_settings(spank_t sp, struct env_buf *e, struct env_buf *jc)
{
	struct es_settings env = {
		get(sp, ES_ENV_ELASTIC, e->elastic, sizeof(e->elastic)),
		get(sp, ES_ENV_LW, e->lw, sizeof(e->lw)),
		get(sp, ES_ENV_DET, e->det, sizeof(e->det)),
	};
	struct es_settings job = {
		get(sp, "SLURM_SPANK_" ES_ENV_ELASTIC, jc->elastic, sizeof(jc->elastic)),
		get(sp, "SLURM_SPANK_" ES_ENV_LW, jc->lw, sizeof(jc->lw)),
		get(sp, "SLURM_SPANK_" ES_ENV_DET, jc->det, sizeof(jc->det)),
	};
	struct es_settings first = es_settings_merge(&es_flags, &env);
	return es_settings_merge(&first, &job);
}

static void set(spank_t sp, const char *key, const char *value, int overwrite)
{
	spank_err_t rc = spank_setenv(sp, key, value, overwrite);
	if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS)
		ES_ERR(PHASE, "setenv %s: %s", key, spank_strerror(rc));
}

static void set_int(spank_t sp, const char *key, long long value)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", value);
	set(sp, key, buf, 1);
}

static void set_from_helper(const char *key, const char *value, void *arg)
{
	set((spank_t)arg, key, value, 1);
}

static void export_ids(spank_t sp)
{
	uint32_t job = 0, step = 0, task = 0;
	if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS)
		set_int(sp, "EASYSCALE_JOB_ID", job);
	if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS)
		set_int(sp, "EASYSCALE_STEP_ID", step);
	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &task) == ESPANK_SUCCESS)
		set_int(sp, "EASYSCALE_TASK_ID", task);
}

static void export_request(spank_t sp, const struct es_settings *s, const struct es_request *r)
{
	if (r->min_nodes > 0) {
		set(sp, ES_ENV_ELASTIC, s->elastic, 1);
		set_int(sp, "EASYSCALE_ELASTIC_MIN", r->min_nodes);
		set_int(sp, "EASYSCALE_ELASTIC_MAX", r->max_nodes);
	}
	if (r->logical_workers > 0)
		set_int(sp, ES_ENV_LW, r->logical_workers);
	set(sp, ES_ENV_DET, r->determinism, 1);
}

static void export_cuda(spank_t sp, const struct es_request *r)
{
	set(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
	set(sp, "CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
	set(sp, "TF_DETERMINISTIC_OPS", "1", 0);
	set(sp, "TF_CUDNN_DETERMINISTIC", "1", 0);
	if (strcmp(r->determinism, "d2") == 0)
		set(sp, "NVIDIA_TF32_OVERRIDE", "0", 0);
}

int es_remote_task_init(spank_t sp)
{
	struct env_buf e, jc;
	struct es_settings s = task_settings(sp, &e, &jc);
	struct es_request r;
	char msg[512];
	char **env = NULL;

	if (!es_settings_any(&s))
		return 0;
	if (es_request_parse(&s, &r, NULL, msg, sizeof(msg)) < 0) {
		ES_ERR(PHASE, "%s; task runs without the EasyScale context", msg);
		return 0;
	}
	export_ids(sp);
	export_request(sp, &s, &r);
	export_cuda(sp, &r);
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
		env = NULL;
	if (es_run_helper(es_config.helper, es_config.helper_timeout_s, env, set_from_helper, sp) < 0)
		ES_ERR(PHASE, "no GPU context from %s; the task continues (CPU workers need none)", es_config.helper);
	return 0;
}
