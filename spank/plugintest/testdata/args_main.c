/*
 * args_main.c - test driver for args.c: passes argv[1..] to es_parse_args
 * as plugstack.conf arguments and prints the plugin's log lines, then
 * "RC n", and for a success "HELPER path" and "TIMEOUT seconds".
 */
#include <stdio.h>

#include "plugin.h"

int main(int argc, char **argv)
{
	int rc = es_parse_args(argc - 1, argv + 1);
	printf("RC %d\n", rc);
	if (rc == 0)
		printf("HELPER %s\nTIMEOUT %d\n", es_config.helper, es_config.helper_timeout_s);
	return 0;
}
