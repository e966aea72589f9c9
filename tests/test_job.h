/* test_job.h: ranks of a gice job as forked children of a Check test (each with its own
 * GICE_RANK, GICE_WORLD_SIZE and a bootstrap on a free loopback port); the test process only
 * starts and reaps them. For test_multiproc and test_reliability. */
#ifndef GICE_TEST_JOB_H
#define GICE_TEST_JOB_H

#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric/fabric.h"
#include "tests/test_util.h"

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

typedef int (*rank_fn)(int rank, int size);

/* Start ranks [0, started) of a job of size ranks running fn (each exits with fn's value, or is
 * killed by SIGALRM after 60 s, scaled by test_time_scale()); return each exit status in st (128 + signal when killed).
 * provider: GICE_FI_PROVIDER or NULL; env: NULL or a NULL-terminated list of "NAME=value" set in
 * every rank; stderr_file: rank 0's stderr goes there when not NULL. */
static void run_job(int size, int started, rank_fn fn, const char *provider, const char *const *env, int *st,
		    const char *stderr_file)
{
	char spec[64];
	pid_t pid[16];

	ck_assert_int_le(started, 16);
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", free_port());
	for (int r = 0; r < started; r++) {
		pid[r] = fork();
		ck_assert_int_ge(pid[r], 0);
		if (pid[r] == 0) {
			char v[16];
			snprintf(v, sizeof(v), "%d", r);
			setenv("GICE_RANK", v, 1);
			snprintf(v, sizeof(v), "%d", size);
			setenv("GICE_WORLD_SIZE", v, 1);
			setenv("GICE_BOOTSTRAP", spec, 1);
			if (provider)
				setenv("GICE_FI_PROVIDER", provider, 1);
			for (int i = 0; env && env[i]; i++)
				putenv((char *)env[i]);
			if (stderr_file && r == 0) {
				int fd = open(stderr_file, O_WRONLY | O_TRUNC);
				if (fd < 0 || dup2(fd, 2) < 0)
					_exit(99);
				close(fd);
			}
			alarm((unsigned)test_scaled(60));
			_exit(fn(r, size));
		}
	}
	for (int r = 0; r < started; r++) {
		int w;
		ck_assert_int_eq(waitpid(pid[r], &w, 0), pid[r]);
		st[r] = WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
		if (WIFSIGNALED(w)) /* its libfabric shm regions outlive it */
			fab_shm_remove((int)pid[r], 0);
	}
}

/* What rank 0 wrote to stderr_file (run_job), at most size - 1 bytes, NUL-terminated, in text;
 * the file is removed. */
static inline void job_log_take(const char *stderr_file, char *text, size_t size)
{
	FILE *f = fopen(stderr_file, "r");

	ck_assert_ptr_nonnull(f);
	size_t n = fread(text, 1, size - 1, f);
	fclose(f);
	unlink(stderr_file);
	text[n] = 0;
}

/* In a rank: on cond, print the rank, the message and the line, and return 1 (its exit status). */
#define FAILIF(cond, ...)                                                    \
	do {                                                                 \
		if (cond) {                                                  \
			fprintf(stderr, "rank %d: ", rank);                  \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, " (line %d)\n", __LINE__);           \
			return 1;                                            \
		}                                                            \
	} while (0)

/* main() of a test binary whose cross-process job a launcher starts as `BINARY job` (gicerun sets
 * GICE_RANK and GICE_WORLD_SIZE; test_netns.sh runs it across namespaces): that rank runs job,
 * else the Check suite runs (exit 1 when a case failed). */
static inline int test_main_or_job(int argc, char **argv, rank_fn job, Suite *(*suite)(void))
{
	if (argc > 1 && !strcmp(argv[1], "job")) {
		const char *r = getenv("GICE_RANK"), *n = getenv("GICE_WORLD_SIZE");
		return job(r ? atoi(r) : 0, n ? atoi(n) : 1);
	}
	return test_run_suite(suite());
}

#endif
