/*
 * args.c - plugstack.conf arguments and option registration.
 *
 *   required /path/easyscale_spank.so [helper=PATH] [helper_timeout=SECONDS]
 *
 * helper=PATH            the easyscale-gpuctx binary; default: the file of
 *                        that name next to the plugin, else
 *                        /usr/libexec/easyscale/easyscale-gpuctx
 * helper_timeout=SECONDS kill the helper after this long (1..300, default 10)
 *
 * Any other argument is an error (slurm_spank_init fails, so srun/sbatch
 * refuse to run with a misconfigured plugstack.conf).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"

struct es_config es_config = { .helper = "", .helper_timeout_s = 10 };
struct es_settings es_flags;

static int parse_timeout(const char *v)
{
	char *end;
	long n;
	if (*v < '0' || *v > '9')
		return -1;
	n = strtol(v, &end, 10);
	if (*end != '\0' || n < 1 || n > 300)
		return -1;
	es_config.helper_timeout_s = (int)n;
	return 0;
}

/* The helper next to this shared object, else the system location. */
static void default_helper(void)
{
	Dl_info info;
	char self[ES_PATH_MAX];
	if (dladdr((void *)default_helper, &info) && info.dli_fname &&
	    strlen(info.dli_fname) < sizeof(self)) {
		strcpy(self, info.dli_fname);
		snprintf(es_config.helper, sizeof(es_config.helper), "%s/%s", dirname(self), ES_HELPER_NAME);
		if (access(es_config.helper, X_OK) == 0)
			return;
	}
	snprintf(es_config.helper, sizeof(es_config.helper), "%s/%s", ES_HELPER_DIR, ES_HELPER_NAME);
}

static int bad_arg(const char *arg, const char *why)
{
	ES_ERR("init", "invalid plugstack.conf argument \"%.200s\": %s (known: helper=/ABSOLUTE/PATH, "
	       "helper_timeout=1..300)", arg, why);
	return -1;
}

/* One plugstack.conf argument; -1 (logged) when it is not valid. */
static int parse_arg(const char *arg)
{
	if (strncmp(arg, "helper=", 7) == 0) {
		const char *path = arg + 7;
		if (path[0] != '/')
			return bad_arg(arg, "the helper must be an absolute path");
		if (strlen(path) >= sizeof(es_config.helper)) {
			char why[64];
			snprintf(why, sizeof(why), "the helper path is longer than %zu bytes",
				 sizeof(es_config.helper) - 1);
			return bad_arg(arg, why);
		}
		strcpy(es_config.helper, path);
		return 0;
	}
	if (strncmp(arg, "helper_timeout=", 15) == 0) {
		if (parse_timeout(arg + 15) < 0)
			return bad_arg(arg, "the timeout must be whole seconds from 1 to 300");
		return 0;
	}
	return bad_arg(arg, "unknown argument");
}

int es_parse_args(int ac, char **av)
{
	es_config.helper[0] = '\0';
	es_config.helper_timeout_s = 10;
	for (int i = 0; i < ac; i++)
		if (parse_arg(av[i]) < 0)
			return -1;
	if (es_config.helper[0] == '\0')
		default_helper();
	return 0;
}

/*
 * Option callback: in the local/allocator context check the value alone (the
 * cross-option checks run in init_post_opt); in the remote context only
 * record it (never fail there).
 */
static int option_cb(int val, const char *optarg, int remote)
{
	static const char *const names[] = { ES_OPT_ELASTIC, ES_OPT_LW, ES_OPT_DET };
	const char **slot[] = { &es_flags.elastic, &es_flags.logical_workers, &es_flags.determinism };
	char msg[512];
	if (val < 0 || val > 2)
		return -1;
	if (!optarg)
		optarg = "";
	if (!remote && es_check_option(names[val], optarg, msg, sizeof(msg)) < 0) {
		ES_ERR("option", "%s", msg);
		return -1;
	}
	*slot[val] = strdup(optarg);
	return *slot[val] ? 0 : -1;
}

static struct spank_option options[] = {
	{ ES_OPT_ELASTIC, "MIN[-MAX]",
	  "EasyScale elastic job: run on MIN to MAX nodes (env EASYSCALE_ELASTIC) [easyscale]", 1, 0, option_cb },
	{ ES_OPT_LW, "N",
	  "EasyScale logical workers (ESTs); >= MAX nodes (env EASYSCALE_LOGICAL_WORKERS) [easyscale]", 1, 1,
	  option_cb },
	{ ES_OPT_DET, "d1|d2",
	  "EasyScale determinism: d1 same GPU type, d2 across GPU types; default d1 (env EASYSCALE_DETERMINISM) "
	  "[easyscale]", 1, 2, option_cb },
};

int es_register_options(spank_t sp)
{
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		spank_err_t rc = spank_option_register(sp, &options[i]);
		if (rc != ESPANK_SUCCESS) {
			ES_ERR("init", "register --%s: %s", options[i].name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}
