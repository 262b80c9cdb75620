/*
 * request.h - parsing and validation of --elastic, --logical-workers and
 * --determinism. This is the C twin of the Go package internal/elastic (the
 * one definition); both are tested against
 * internal/elastic/testdata/validation_cases.tsv. No Slurm dependency.
 */
#ifndef EASYSCALE_REQUEST_H
#define EASYSCALE_REQUEST_H

#define ES_MAX_COUNT 1000000
#define ES_MAX_DIGITS 7

/* One source of settings: a value of NULL means "not given". */
struct es_settings {
	const char *elastic;
	const char *logical_workers;
	const char *determinism;
};

struct es_request {
	int min_nodes;       /* 0: not elastic */
	int max_nodes;       /* 0: not elastic */
	int logical_workers; /* 0: unset */
	char determinism[3]; /* "d1" or "d2" */
};

/* Option names (without "--") and their environment twins. */
#define ES_OPT_ELASTIC "elastic"
#define ES_OPT_LW "logical-workers"
#define ES_OPT_DET "determinism"
#define ES_ENV_ELASTIC "EASYSCALE_ELASTIC"
#define ES_ENV_LW "EASYSCALE_LOGICAL_WORKERS"
#define ES_ENV_DET "EASYSCALE_DETERMINISM"

/* 1 when any of the three settings is given. */
int es_settings_any(const struct es_settings *s);

/* Per option, the flag when given, else the environment value when non-empty. */
struct es_settings es_settings_merge(const struct es_settings *flags, const struct es_settings *env);

/*
 * Parse and validate s into *r. On error return -1, set *bad_option to the
 * option at fault (ES_OPT_*) and write a message naming it into msg
 * ("invalid --elastic=4-2: minimum 4 larger than maximum 2").
 */
int es_request_parse(const struct es_settings *s, struct es_request *r,
		     const char **bad_option, char *msg, int msglen);

/* Check one option value alone (used by the option callbacks). */
int es_check_option(const char *option, const char *value, char *msg, int msglen);

#endif
