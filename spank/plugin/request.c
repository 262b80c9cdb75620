/*
 * request.c - the C twin of internal/elastic's parsing and validation.
 * Rules (see internal/elastic/doc.go): counts are 1-7 decimal digits with a
 * value in [1, ES_MAX_COUNT]; --elastic is MIN or MIN-MAX with MIN <= MAX;
 * --determinism is exactly d1 or d2; MAX <= logical workers when both given.
 */
#include <stdio.h>
#include <string.h>

#include "request.h"

int es_settings_any(const struct es_settings *s)
{
	return s->elastic || s->logical_workers || s->determinism;
}

static const char *pick(const char *flag, const char *env)
{
	if (flag)
		return flag;
	if (env && env[0])
		return env;
	return NULL;
}

struct es_settings es_settings_merge(const struct es_settings *flags, const struct es_settings *env)
{
	struct es_settings m;
	m.elastic = pick(flags->elastic, env->elastic);
	m.logical_workers = pick(flags->logical_workers, env->logical_workers);
	m.determinism = pick(flags->determinism, env->determinism);
	return m;
}

/* Parse s[0..len) as a count; on error write why into why. */
static int parse_count(const char *s, size_t len, int *out, char *why, int whylen)
{
	int n = 0;
	if (len == 0) {
		snprintf(why, whylen, "empty value");
		return -1;
	}
	if (len > ES_MAX_DIGITS) {
		snprintf(why, whylen, "not a decimal count: \"%.*s\"", (int)len, s);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			snprintf(why, whylen, "not a decimal count: \"%.*s\"", (int)len, s);
			return -1;
		}
		n = n * 10 + (s[i] - '0');
	}
	if (n < 1 || n > ES_MAX_COUNT) {
		snprintf(why, whylen, "count out of range: %d is not in [1, %d]", n, ES_MAX_COUNT);
		return -1;
	}
	*out = n;
	return 0;
}

static int parse_range(const char *s, int *lo, int *hi, char *why, int whylen)
{
	const char *dash = strchr(s, '-');
	char sub[192];
	if (s[0] == '-') { /* else "-1" reads as an empty minimum (internal/elastic says the same) */
		snprintf(why, whylen, "a node count is at least 1, not negative: write MIN[-MAX], e.g. 1-4");
		return -1;
	}
	if (parse_count(s, dash ? (size_t)(dash - s) : strlen(s), lo, sub, sizeof(sub)) < 0) {
		snprintf(why, whylen, "minimum: %s", sub);
		return -1;
	}
	if (!dash) {
		*hi = *lo;
		return 0;
	}
	if (parse_count(dash + 1, strlen(dash + 1), hi, sub, sizeof(sub)) < 0) {
		snprintf(why, whylen, "maximum: %s", sub);
		return -1;
	}
	if (*lo > *hi) {
		snprintf(why, whylen, "minimum %d larger than maximum %d", *lo, *hi);
		return -1;
	}
	return 0;
}

static int parse_determinism(const char *s, char *why, int whylen)
{
	if (strcmp(s, "d1") == 0 || strcmp(s, "d2") == 0)
		return 0;
	if (s[0] == '\0')
		snprintf(why, whylen, "empty value");
	else
		snprintf(why, whylen, "unknown determinism level \"%.32s\" (want d1 or d2)", s);
	return -1;
}

static int fail(const char *option, const char *value, const char *why,
		const char **bad_option, char *msg, int msglen)
{
	if (bad_option)
		*bad_option = option;
	snprintf(msg, msglen, "invalid --%s=%.64s: %s", option, value, why);
	return -1;
}

int es_check_option(const char *option, const char *value, char *msg, int msglen)
{
	struct es_settings s = { 0 };
	struct es_request r;
	if (strcmp(option, ES_OPT_ELASTIC) == 0)
		s.elastic = value;
	else if (strcmp(option, ES_OPT_LW) == 0)
		s.logical_workers = value;
	else
		s.determinism = value;
	return es_request_parse(&s, &r, NULL, msg, msglen);
}

int es_request_parse(const struct es_settings *s, struct es_request *r,
		     const char **bad_option, char *msg, int msglen)
{
	char why[256];
	memset(r, 0, sizeof(*r));
	strcpy(r->determinism, "d1");
	if (s->elastic && parse_range(s->elastic, &r->min_nodes, &r->max_nodes, why, sizeof(why)) < 0)
		return fail(ES_OPT_ELASTIC, s->elastic, why, bad_option, msg, msglen);
	if (s->logical_workers &&
	    parse_count(s->logical_workers, strlen(s->logical_workers), &r->logical_workers, why, sizeof(why)) < 0)
		return fail(ES_OPT_LW, s->logical_workers, why, bad_option, msg, msglen);
	if (s->determinism) {
		if (parse_determinism(s->determinism, why, sizeof(why)) < 0)
			return fail(ES_OPT_DET, s->determinism, why, bad_option, msg, msglen);
		strcpy(r->determinism, s->determinism);
	}
	if (r->min_nodes > 0 && r->logical_workers > 0 && r->max_nodes > r->logical_workers) {
		snprintf(why, sizeof(why),
			 "maximum %d nodes exceeds --logical-workers=%d (every node needs a logical worker)",
			 r->max_nodes, r->logical_workers);
		return fail(ES_OPT_ELASTIC, s->elastic, why, bad_option, msg, msglen);
	}
	return 0;
}
