/* test_util.h: helpers shared by the Check test binaries.
 * - Time bounds: test_time_scale() is the factor every upper time bound of a test is multiplied
 *   by: CK_TIMEOUT_MULTIPLIER, which make asan/tsan set to 3 (Check scales its case timeouts
 *   with it), or 1. test_scaled(x) is x times that factor, in x's unit. Lower bounds (a wait
 *   lasted at least its timeout) are never scaled.
 * - Skips: Check has no per-case skip. A case whose precondition is missing (a libfabric
 *   provider, root) is left out of the suite before srunner_run_all, with
 *   test_skip_cases(n, reason); test_exit(sr) (or test_exit_counts) then prints "skipped: N cases (reasons)" as the
 *   binary's last line and returns its exit status: 77 (skipped, for scripts/run-tests.sh) when
 *   cases were left out and none ran, else 1 when one failed, else 0.
 * - test_probe(fn, arg) runs fn in a forked child and returns its exit status, so that probing a
 *   provider leaves no libfabric state in the process that forks the cases. */
#ifndef GICE_TEST_UTIL_H
#define GICE_TEST_UTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* CK_TIMEOUT_MULTIPLIER when it is a number >= 1, else 1: bounds never tighten. */
static inline double test_time_scale(void)
{
	const char *v = getenv("CK_TIMEOUT_MULTIPLIER");
	char *end;
	double f;

	if (!v || !*v)
		return 1.0;
	f = strtod(v, &end);
	return *end || !(f >= 1.0) ? 1.0 : f;
}

/* 1 when word w is one of the space-separated words of list (a case's "needs" list). */
static inline int test_has_word(const char *list, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = list; (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

/* An upper time bound (any unit) scaled by test_time_scale(). */
static inline uint64_t test_scaled(uint64_t bound) { return (uint64_t)((double)bound * test_time_scale()); }

struct test_skips {
	int n;
	char why[1024];
};

/* The binary's record of the cases left out. */
static inline struct test_skips *test_skips(void)
{
	static struct test_skips s;
	return &s;
}

/* Record n cases left out of the suite for a reason (printed now, and again by test_exit). */
static inline __attribute__((format(printf, 2, 3))) void test_skip_cases(int n, const char *fmt, ...)
{
	struct test_skips *s = test_skips();
	size_t len = strlen(s->why);
	char reason[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	printf("skip: %d case(s) left out: %s\n", n, reason);
	fflush(stdout);
	s->n += n;
	snprintf(s->why + len, sizeof(s->why) - len, "%s%s", len ? "; " : "", reason);
}

/* The exit status of a binary that ran ran cases, failed of them failed; prints the skipped
 * line (see above). */
static inline int test_exit_counts(int failed, int ran)
{
	struct test_skips *s = test_skips();

	if (s->n) {
		printf("skipped: %d cases (%s)\n", s->n, s->why);
		fflush(stdout);
	}
	if (failed)
		return 1;
	return s->n && !ran ? 77 : 0;
}

/* test_exit_counts for a binary whose suite sr has run. */
static inline int test_exit(SRunner *sr) { return test_exit_counts(srunner_ntests_failed(sr), srunner_ntests_run(sr)); }

/* main of a binary that is one suite: run it (CK_NORMAL), then test_exit. */
static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}

/* Run fn(arg) in a forked child; its exit status (fn's return value), or -1 when it died. */
static inline int test_probe(int (*fn)(void *), void *arg)
{
	int w;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(fn(arg));
	if (waitpid(pid, &w, 0) != pid)
		return -1;
	return WIFEXITED(w) ? WEXITSTATUS(w) : -1;
}

/* What gice logs (stderr) between test_log_begin and test_log_end goes to a file; test_log_end
 * returns it (at most len - 1 bytes, in out), after showing it on stderr still. For code that is
 * not a function of its own (a call whose status is checked too); test_logged runs a function. */
struct test_log {
	char path[32];
	int fd, saved;
};

static inline void test_log_begin(struct test_log *l)
{
	snprintf(l->path, sizeof(l->path), "%s", "/tmp/gice-test-log-XXXXXX");
	l->fd = mkstemp(l->path);
	l->saved = dup(2);
	ck_assert_int_ge(l->fd, 0);
	ck_assert_int_ge(l->saved, 0);
	fflush(stderr);
	ck_assert_int_ge(dup2(l->fd, 2), 0);
}

static inline char *test_log_end(struct test_log *l, char *out, size_t len)
{
	ssize_t got;

	fflush(stderr);
	dup2(l->saved, 2);
	close(l->saved);
	got = pread(l->fd, out, len - 1, 0);
	out[got > 0 ? got : 0] = '\0';
	close(l->fd);
	unlink(l->path);
	fputs(out, stderr);
	return out;
}

/* Run fn with this process's stderr (where gice logs) going to a file; return what was logged
 * (at most len - 1 bytes, in out), after showing it on stderr still. */
static inline char *test_logged(void (*fn)(void), char *out, size_t len)
{
	struct test_log l;

	test_log_begin(&l);
	fn();
	return test_log_end(&l, out, len);
}

#endif
