/*
 * stub.c - what Slurm provides to the plugin at dlopen time, for the test
 * drivers: the slurm_* loggers print "LEVEL: message" lines on stdout, and
 * the spank_* calls act on a task environment (stub_env, KEY=VALUE strings)
 * the way Slurm 22.05's src/common/plugstack.c does: spank_getenv copies at
 * most len - 1 bytes and returns ESPANK_NOSPACE when the value is longer.
 * spank_setenv and spank_job_control_setenv print "SETENV KEY=VALUE".
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

char **stub_env;

static void logf_(const char *level, const char *fmt, va_list ap)
{
	printf("%s: ", level);
	vprintf(fmt, ap);
	printf("\n");
}

#define LOGGER(name, level)                       \
	void name(const char *fmt, ...)           \
	{                                         \
		va_list ap;                       \
		va_start(ap, fmt);                \
		logf_(level, fmt, ap);            \
		va_end(ap);                       \
	}

LOGGER(slurm_error, "error")
LOGGER(slurm_info, "info")
LOGGER(slurm_verbose, "verbose")
LOGGER(slurm_debug, "debug")

const char *spank_strerror(spank_err_t err)
{
	static char buf[32];
	snprintf(buf, sizeof(buf), "spank error %d", (int)err);
	return buf;
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	(void)sp;
	printf("REGISTER --%s\n", opt->name);
	return ESPANK_SUCCESS;
}

spank_context_t spank_context(void)
{
	return S_CTX_REMOTE;
}

int spank_remote(spank_t sp)
{
	(void)sp;
	return 1;
}

static const char *lookup(const char *var)
{
	size_t n = strlen(var);
	for (char **e = stub_env; e && *e; e++)
		if (strncmp(*e, var, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	(void)sp;
	const char *v = lookup(var);
	if (len < 0)
		return ESPANK_BAD_ARG;
	if (!v)
		return ESPANK_ENV_NOEXIST;
	if (len > 0)
		snprintf(buf, (size_t)len, "%s", v);
	return strlen(v) >= (size_t)len ? ESPANK_NOSPACE : ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
	(void)sp;
	if (!overwrite && lookup(var))
		return ESPANK_ENV_EXISTS;
	printf("SETENV %s=%s\n", var, val);
	return ESPANK_SUCCESS;
}

spank_err_t spank_job_control_setenv(spank_t sp, const char *name, const char *value, int overwrite)
{
	return spank_setenv(sp, name, value, overwrite);
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	spank_err_t rc = ESPANK_SUCCESS;
	(void)sp;
	va_start(ap, item);
	switch (item) {
	case S_JOB_ID:
		*va_arg(ap, uint32_t *) = 42;
		break;
	case S_JOB_STEPID:
		*va_arg(ap, uint32_t *) = 0;
		break;
	case S_TASK_GLOBAL_ID:
		*va_arg(ap, uint32_t *) = 1;
		break;
	case S_JOB_ENV:
		*va_arg(ap, char ***) = stub_env;
		break;
	default:
		rc = ESPANK_BAD_ARG;
	}
	va_end(ap);
	return rc;
}
