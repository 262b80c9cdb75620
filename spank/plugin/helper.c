/*
 * helper.c - run easyscale-gpuctx as a separate process (fork + execve with
 * the task's environment, so it sees CUDA_VISIBLE_DEVICES exactly as Slurm
 * set it for this task), capture its stdout and stderr through pipes with a
 * deadline, and hand every "EASYSCALE_[A-Z0-9_]+=VALUE" stdout line to a
 * setter. Other stdout lines are ignored (logged), so the helper cannot set
 * variables such as LD_PRELOAD. Stderr lines are logged with the
 * "easyscale: helper:" prefix. Output beyond 64 KiB per stream is dropped,
 * and the drop is logged.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"

#define PHASE "helper"
#define ES_OUT_MAX 65536

struct stream {
	int fd;
	const char *name; /* "stdout" or "stderr", for the log */
	char buf[ES_OUT_MAX + 1];
	size_t len;
	int dropped; /* bytes read past ES_OUT_MAX were thrown away */
};

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void child(const char *path, int out, int err, char *const env[])
{
	sigset_t none;
	char *argv[] = { (char *)ES_HELPER_NAME, NULL };
	static char *empty[] = { NULL };
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0)
		dup2(devnull, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	dup2(err, STDERR_FILENO);
	closefrom(3);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(path, argv, env ? env : empty);
	dprintf(STDERR_FILENO, "exec %s: %s\n", path, strerror(errno));
	_exit(127);
}

/* Read what is available; returns 0 at EOF, 1 while open. */
static int drain(struct stream *s)
{
	char tmp[4096];
	ssize_t n = read(s->fd, tmp, sizeof(tmp));
	if (n < 0)
		return (errno == EINTR || errno == EAGAIN) ? 1 : 0;
	if (n == 0)
		return 0;
	size_t keep = (size_t)n;
	if (keep > ES_OUT_MAX - s->len) {
		keep = ES_OUT_MAX - s->len;
		s->dropped = 1;
	}
	memcpy(s->buf + s->len, tmp, keep);
	s->len += keep;
	return 1;
}

/* Poll both pipes until EOF on both or the deadline; returns -1 on timeout. */
static int collect(struct stream *out, struct stream *err, int timeout_s)
{
	long long deadline = now_ms() + 1000LL * timeout_s;
	int open_out = 1, open_err = 1;
	while (open_out || open_err) {
		struct pollfd p[2] = { { open_out ? out->fd : -1, POLLIN, 0 }, { open_err ? err->fd : -1, POLLIN, 0 } };
		long long left = deadline - now_ms();
		if (left <= 0)
			return -1;
		int n = poll(p, 2, (int)left);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n <= 0)
			continue;
		if (open_out && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			open_out = drain(out);
		if (open_err && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
			open_err = drain(err);
	}
	return 0;
}

static int valid_key(const char *k, size_t len)
{
	if (len <= 10 || strncmp(k, "EASYSCALE_", 10) != 0)
		return 0;
	for (size_t i = 10; i < len; i++)
		if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
			return 0;
	return 1;
}

static void each_line(struct stream *s, void (*fn)(char *line, void *arg), void *arg)
{
	s->buf[s->len] = '\0';
	if (s->dropped)
		ES_ERR(PHASE, "%s beyond %d bytes dropped", s->name, ES_OUT_MAX);
	for (char *save = NULL, *line = strtok_r(s->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		fn(line, arg);
}

struct setter {
	void (*set)(const char *key, const char *value, void *arg);
	void *arg;
};

static void stdout_line(char *line, void *arg)
{
	struct setter *st = arg;
	char *eq = strchr(line, '=');
	if (!eq || !valid_key(line, (size_t)(eq - line))) {
		ES_ERR(PHASE, "ignoring output line \"%.80s\" (want EASYSCALE_*=VALUE)", line);
		return;
	}
	*eq = '\0';
	st->set(line, eq + 1, st->arg);
}

static void stderr_line(char *line, void *arg)
{
	(void)arg;
	ES_INFO(PHASE, "%s", line);
}

static int finish(pid_t pid, int timed_out, const char *path, int timeout_s)
{
	int status = 0;
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) /* ECHILD when SIGCHLD is ignored: the status is unknown */
			return timed_out ? -1 : 0;
	}
	if (timed_out) {
		ES_ERR(PHASE, "%s did not finish within %d s; killed", path, timeout_s);
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		ES_ERR(PHASE, "%s exited with status %d", path, WEXITSTATUS(status));
	else
		ES_ERR(PHASE, "%s killed by signal %d", path, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return -1;
}

int es_run_helper(const char *path, int timeout_s, char *const env[],
		  void (*set)(const char *key, const char *value, void *arg), void *arg)
{
	int po[2], pe[2];
	struct stream *out, *err;
	struct setter st = { set, arg };
	int rc;

	if (access(path, X_OK) != 0) {
		ES_ERR(PHASE, "%s: %s", path, strerror(errno));
		return -1;
	}
	out = calloc(1, sizeof(*out));
	err = calloc(1, sizeof(*err));
	if (!out || !err || pipe2(po, O_CLOEXEC) < 0) {
		free(out);
		free(err);
		ES_ERR(PHASE, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(pe, O_CLOEXEC) < 0) {
		ES_ERR(PHASE, "pipe: %s", strerror(errno));
		close(po[0]);
		close(po[1]);
		free(out);
		free(err);
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0)
		child(path, po[1], pe[1], env);
	close(po[1]);
	close(pe[1]);
	out->fd = po[0];
	err->fd = pe[0];
	out->name = "stdout";
	err->name = "stderr";
	if (pid < 0) {
		ES_ERR(PHASE, "fork: %s", strerror(errno));
		rc = -1;
	} else {
		int timed_out = collect(out, err, timeout_s) < 0;
		rc = finish(pid, timed_out, path, timeout_s);
		each_line(err, stderr_line, NULL);
		if (rc == 0)
			each_line(out, stdout_line, &st);
	}
	close(po[0]);
	close(pe[0]);
	free(out);
	free(err);
	return rc;
}
