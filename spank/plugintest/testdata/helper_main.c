/*
 * helper_main.c - test driver for helper.c: runs argv[1] as the helper with
 * timeout argv[2] and a fixed task environment, prints "SET KEY=VALUE" for
 * every accepted variable, the plugin's log lines (stub.c), and "RC n".
 */
#include <stdio.h>
#include <stdlib.h>

#include "plugin.h"

static void set(const char *key, const char *value, void *arg)
{
	(void)arg;
	printf("SET %s=%s\n", key, value);
}

int main(int argc, char **argv)
{
	char *env[] = { "CUDA_VISIBLE_DEVICES=2", "PATH=/usr/bin:/bin", NULL };
	if (argc != 3)
		return 2;
	int rc = es_run_helper(argv[1], atoi(argv[2]), env, set, NULL);
	printf("RC %d\n", rc);
	return 0;
}
