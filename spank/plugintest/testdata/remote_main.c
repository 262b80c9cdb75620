/*
 * remote_main.c - test driver for remote.c: runs es_remote_task_init with
 * argv[1..] (KEY=VALUE) as the task environment and prints every variable
 * the plugin sets ("SETENV KEY=VALUE"), its log lines, and "HELPER path"
 * where it would run the helper.
 */
#include <stdio.h>

#include "plugin.h"

extern char **stub_env;

int es_run_helper(const char *path, int timeout_s, char *const env[],
		  void (*set)(const char *key, const char *value, void *arg), void *arg)
{
	(void)env;
	printf("HELPER %s %d\n", path, timeout_s);
	set("EASYSCALE_GPU_COUNT", "0", arg);
	return 0;
}

int main(int argc, char **argv)
{
	char *args[] = { "helper=/stub/easyscale-gpuctx" };
	stub_env = argv + 1;
	(void)argc;
	if (es_parse_args(1, args) < 0)
		return 2;
	printf("RC %d\n", es_remote_task_init(NULL));
	return 0;
}
