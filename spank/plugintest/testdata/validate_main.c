/*
 * validate_main.c - test driver: reads internal/elastic's validation case
 * table on stdin and prints, per case, "NAME<TAB>ok MIN MAX LW DET" or
 * "NAME<TAB>err OPTION<TAB>MESSAGE" using the plugin's request.c.
 */
#include <stdio.h>
#include <string.h>

#include "request.h"

static const char *value(char *col)
{
	if (strcmp(col, "-") == 0)
		return NULL;
	if (strcmp(col, "''") == 0)
		return "";
	return col;
}

int main(void)
{
	char line[1024];
	while (fgets(line, sizeof(line), stdin)) {
		char *col[5], *save = NULL;
		int n = 0;
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		for (char *c = strtok_r(line, "\t", &save); c && n < 5; c = strtok_r(NULL, "\t", &save))
			col[n++] = c;
		if (n != 5) {
			printf("BAD LINE\n");
			continue;
		}
		struct es_settings s = { value(col[1]), value(col[2]), value(col[3]) };
		struct es_request r;
		const char *bad = NULL;
		char msg[512];
		if (es_request_parse(&s, &r, &bad, msg, sizeof(msg)) < 0)
			printf("%s\terr %s\t%s\n", col[0], bad, msg);
		else
			printf("%s\tok %d %d %d %s\n", col[0], r.min_nodes, r.max_nodes, r.logical_workers, r.determinism);
	}
	return 0;
}
