/* Description: gicerun, the job launcher — rank environment and "[r] " output prefixes on both
 * streams, whole lines under load, the first failing rank named with its status (exit code or
 * signal) and the other ranks and their children killed, SIGTERM forwarded, --timeout, an
 * unrunnable program, usage errors, and --netns (ranks really inside their namespaces; net
 * chosen, shm refused, FI_TCP_IFACE replaced by each namespace's interface; left out, with the
 * reason on the binary's last line, "skipped: 2 cases (...)", unless root with `ip netns` able
 * to create a namespace).
 * Runs build/bin/gicerun from the repository root (make test does); a test binary at
 * B/tests/test_gicerun uses B/bin/gicerun when it exists, and GICERUN=path overrides. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/test_util.h"

static char gicerun[PATH_MAX] = "build/bin/gicerun";
static char tmpdir[64]; /* per TCase, made and removed by the unchecked fixture */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- running gicerun */

typedef struct {
	pid_t pid;
	int out_fd, err_fd;
	char *out, *err; /* NUL-terminated */
	size_t out_len, err_len;
	int status;
	double t0, secs;
} run_t;

static void run_startv(run_t *r, const char *const *args, int nargs)
{
	int po[2], pe[2];
	const char *argv[64];

	ck_assert_int_lt(nargs, 62);
	argv[0] = gicerun;
	for (int i = 0; i < nargs; i++)
		argv[i + 1] = args[i];
	argv[nargs + 1] = NULL;
	memset(r, 0, sizeof(*r));
	ck_assert_int_eq(pipe2(po, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(pe, O_CLOEXEC), 0);
	r->t0 = now_s();
	r->pid = fork();
	ck_assert_int_ge(r->pid, 0);
	if (r->pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(gicerun, (char **)argv);
		fprintf(stderr, "cannot exec %s: %s\n", gicerun, strerror(errno));
		_exit(99);
	}
	close(po[1]);
	close(pe[1]);
	r->out_fd = po[0];
	r->err_fd = pe[0];
}

static void grow_append(char **buf, size_t *len, const char *p, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	ck_assert_ptr_nonnull(*buf);
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Collect both outputs to EOF and the exit status; SIGKILL gicerun if it takes over 25 s
 * (scaled). */
static void run_finish(run_t *r)
{
	static char chunk[65536];
	double deadline = r->t0 + 25.0 * test_time_scale();

	grow_append(&r->out, &r->out_len, "", 0);
	grow_append(&r->err, &r->err_len, "", 0);
	while (r->out_fd >= 0 || r->err_fd >= 0) {
		struct pollfd pf[2] = {{.fd = r->out_fd, .events = POLLIN}, {.fd = r->err_fd, .events = POLLIN}};
		int ms = (int)((deadline - now_s()) * 1000.0);
		if (ms <= 0) {
			kill(r->pid, SIGKILL);
			ck_abort_msg("gicerun did not finish in %.0f s; stderr so far:\n%s", 25.0 * test_time_scale(),
				     r->err);
		}
		if (poll(pf, 2, ms) < 0 && errno != EINTR)
			ck_abort_msg("poll: %s", strerror(errno));
		for (int i = 0; i < 2; i++) {
			if (!pf[i].revents)
				continue;
			ssize_t n = read(pf[i].fd, chunk, sizeof(chunk));
			if (n > 0) {
				if (i == 0)
					grow_append(&r->out, &r->out_len, chunk, (size_t)n);
				else
					grow_append(&r->err, &r->err_len, chunk, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(pf[i].fd);
				if (i == 0)
					r->out_fd = -1;
				else
					r->err_fd = -1;
			}
		}
	}
	ck_assert_int_eq(waitpid(r->pid, &r->status, 0), r->pid);
	r->secs = now_s() - r->t0;
}

static void run_free(run_t *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* gicerun's exit code, or -1 if it died by a signal */
static int run_code(const run_t *r)
{
	return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

#define RUN(r, ...)                                                                \
	do {                                                                       \
		const char *args_[] = {__VA_ARGS__};                               \
		run_startv((r), args_, (int)(sizeof(args_) / sizeof(args_[0]))); \
		run_finish(r);                                                     \
	} while (0)

static int count_lines(const char *buf)
{
	int n = 0;
	for (const char *p = buf; *p; p++)
		n += *p == '\n';
	return n;
}

static int count_str(const char *buf, const char *s)
{
	int n = 0;
	for (const char *p = buf; (p = strstr(p, s)); p += strlen(s))
		n++;
	return n;
}

static int has_line(const char *buf, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = buf; (p = strstr(p, line)); p++)
		if ((p == buf || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static char *read_file(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static int wait_for_file(const char *path, double secs)
{
	double end = now_s() + secs;
	struct stat st;

	while (now_s() < end) {
		if (!stat(path, &st) && st.st_size > 0)
			return 1;
		usleep(20000);
	}
	return 0;
}

/* Gone, or a zombie nobody has reaped yet (it runs nothing any more). Waits up to 2 s. */
static int pid_gone(pid_t pid)
{
	double end = now_s() + 2.0;

	do {
		char path[64], st[512];
		if (kill(pid, 0) && errno == ESRCH)
			return 1;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "r");
		if (f) {
			size_t n = fread(st, 1, sizeof(st) - 1, f);
			fclose(f);
			st[n] = '\0';
			char *close_paren = strrchr(st, ')');
			if (close_paren && (close_paren[2] == 'Z' || close_paren[2] == 'X'))
				return 1;
		}
		usleep(20000);
	} while (now_s() < end);
	return 0;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static void tmpdir_make(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gice-test-gicerun.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", tmpdir, strerror(errno));
		tmpdir[0] = '\0';
	}
}

static void tmpdir_remove(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = '\0';
}

/* ---------------------------------------------------------------- environment and output */

START_TEST(every_rank_gets_its_env_and_a_prefix)
{
	run_t r;
	char want[64];

	RUN(&r, "-n", "3", "sh", "-c", "echo hello $GICE_RANK of $GICE_WORLD_SIZE");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_int_eq(count_lines(r.out), 3);
	for (int i = 0; i < 3; i++) {
		snprintf(want, sizeof(want), "[%d] hello %d of 3", i, i);
		ck_assert_msg(has_line(r.out, want), "no line '%s' in:\n%s", want, r.out);
	}
	ck_assert_str_eq(r.err, "");
	run_free(&r);

	/* bootstrap address: 127.0.0.1 and one free port for all; devices default to 1; the rest of
	 * the environment is kept */
	setenv("GICERUN_TEST_KEPT", "kept", 1);
	RUN(&r, "-n", "2", "--", "sh", "-c", "echo $GICE_BOOTSTRAP $GICE_DEVICES_PER_RANK $GICERUN_TEST_KEPT");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	int port[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		char tail[32];
		snprintf(want, sizeof(want), "[%d] 127.0.0.1:", i);
		const char *p = strstr(r.out, want);
		ck_assert_msg(p, "no '%s' in:\n%s", want, r.out);
		ck_assert_int_eq(sscanf(p + strlen(want), "%d %31[^\n]", &port[i], tail), 2);
		ck_assert_str_eq(tail, "1 kept");
		ck_assert_int_gt(port[i], 0);
		ck_assert_int_lt(port[i], 65536);
	}
	ck_assert_int_eq(port[0], port[1]);
	run_free(&r);

	RUN(&r, "-n", "1", "--port", "45678", "--devices-per-rank", "4", "sh", "-c",
	    "echo $GICE_BOOTSTRAP $GICE_DEVICES_PER_RANK");
	ck_assert_int_eq(run_code(&r), 0);
	ck_assert_str_eq(r.out, "[0] 127.0.0.1:45678 4\n");
	run_free(&r);
}
END_TEST

START_TEST(stderr_is_prefixed_and_partial_lines_are_flushed)
{
	run_t r;

	RUN(&r, "-n", "2", "sh", "-c", "echo out$GICE_RANK; echo err$GICE_RANK >&2; printf tail$GICE_RANK");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_int_eq(count_lines(r.out), 4);
	ck_assert_int_eq(count_lines(r.err), 2);
	ck_assert(has_line(r.out, "[0] out0") && has_line(r.out, "[1] out1"));
	ck_assert(has_line(r.out, "[0] tail0") && has_line(r.out, "[1] tail1"));
	ck_assert(has_line(r.err, "[0] err0") && has_line(r.err, "[1] err1"));
	run_free(&r);

	/* options after the program are the program's */
	RUN(&r, "-n", "1", "echo", "-n", "no newline");
	ck_assert_int_eq(run_code(&r), 0);
	ck_assert_str_eq(r.out, "[0] no newline\n");
	run_free(&r);
}
END_TEST

START_TEST(lines_are_never_interleaved)
{
	enum { NR = 4, LINES = 20000 };
	const char *fill = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
	char cmd[256], want[NR][160];
	int seen[NR] = {0};
	run_t r;

	snprintf(cmd, sizeof(cmd), "yes \"line-$GICE_RANK-%s\" | head -n %d", fill, LINES);
	for (int i = 0; i < NR; i++)
		snprintf(want[i], sizeof(want[i]), "[%d] line-%d-%s", i, i, fill);
	RUN(&r, "-n", "4", "sh", "-c", cmd);
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	for (char *save, *l = strtok_r(r.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int rank = l[0] == '[' ? l[1] - '0' : -1;
		ck_assert_msg(rank >= 0 && rank < NR && !strcmp(l, want[rank]), "mangled line '%.200s'", l);
		seen[rank]++;
	}
	for (int i = 0; i < NR; i++)
		ck_assert_int_eq(seen[i], LINES);
	run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- failures */

START_TEST(failing_rank_is_named_and_the_others_are_killed)
{
	char cmd[1024];
	run_t r;

	/* rank 1 fails once ranks 0 and 2 have written their pids (the shell's and its sleep's);
	 * they note the SIGTERM that comes first */
	snprintf(cmd, sizeof(cmd),
		 "d=%s; if [ $GICE_RANK = 1 ]; then "
		 "while [ ! -s $d/pid.0 ] || [ ! -s $d/pid.2 ]; do sleep 0.05; done; exit 3; fi; "
		 "trap 'echo term > $d/term.$GICE_RANK; exit 0' TERM; "
		 "sleep 30 & echo $! > $d/child.$GICE_RANK; echo $$ > $d/pid.$GICE_RANK; wait",
		 tmpdir);
	RUN(&r, "-n", "3", "sh", "-c", cmd);
	ck_assert_msg(run_code(&r) == 3, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(r.secs < 5.0 * test_time_scale(), "took %.1f s", r.secs);
	ck_assert_msg(strstr(r.err, "gicerun: rank 1 (pid ") && strstr(r.err, ") exited with status 3\n"),
		      "stderr: %s", r.err);
	ck_assert_msg(count_str(r.err, "gicerun: rank ") == 1, "only the first failure is named: %s", r.err);
	for (int i = 0; i < 3; i += 2) {
		char path[128];
		snprintf(path, sizeof(path), "%s/term.%d", tmpdir, i);
		ck_assert_msg(read_file(path), "rank %d got no SIGTERM before being killed", i);
	}
	const char *names[] = {"pid.0", "pid.2", "child.0", "child.2"};
	for (int i = 0; i < 4; i++) {
		char path[128], *s;
		tmp_path(path, sizeof(path), names[i]);
		s = read_file(path);
		ck_assert_msg(s, "%s was not written", path);
		pid_t pid = (pid_t)atoi(s);
		ck_assert_int_gt(pid, 1);
		ck_assert_msg(pid_gone(pid), "%s: pid %d still alive after gicerun exited", names[i], (int)pid);
	}
	run_free(&r);
}
END_TEST

START_TEST(keep_going_lets_the_others_finish)
{
	char cmd[512];
	run_t r;

	/* rank 1 fails at once; the others finish their work later and say so */
	snprintf(cmd, sizeof(cmd),
		 "d=%s; if [ $GICE_RANK = 1 ]; then exit 3; fi; sleep 0.5; echo done > $d/done.$GICE_RANK", tmpdir);
	RUN(&r, "--keep-going", "-n", "3", "sh", "-c", cmd);
	ck_assert_msg(run_code(&r) == 3, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(r.secs >= 0.5, "took only %.2f s: the others were killed", r.secs);
	ck_assert_msg(strstr(r.err, "gicerun: rank 1 (pid ") && strstr(r.err, ") exited with status 3\n"),
		      "stderr: %s", r.err);
	for (int i = 0; i < 3; i += 2) {
		char path[128];
		snprintf(path, sizeof(path), "%s/done.%d", tmpdir, i);
		ck_assert_msg(read_file(path), "rank %d did not finish", i);
	}
	run_free(&r);
}
END_TEST

START_TEST(rank_killed_by_a_signal_gives_128_plus_signal)
{
	run_t r;

	RUN(&r, "-n", "2", "sh", "-c", "ulimit -c 0; if [ $GICE_RANK = 0 ]; then kill -SEGV $$; fi; exec sleep 30");
	ck_assert_msg(run_code(&r) == 139, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(r.secs < 5.0 * test_time_scale(), "took %.1f s", r.secs);
	ck_assert_msg(strstr(r.err, "gicerun: rank 0 (pid ") && strstr(r.err, ") was killed by signal SIGSEGV\n"),
		      "stderr: %s", r.err);
	run_free(&r);
}
END_TEST

START_TEST(unrunnable_program_is_named)
{
	run_t r;

	RUN(&r, "-n", "2", "/nonexistent/gice-no-such-prog", "arg");
	ck_assert_msg(run_code(&r) == 127, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(strstr(r.err, "cannot run '/nonexistent/gice-no-such-prog': No such file or directory"),
		      "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, "exited with status 127"), "stderr: %s", r.err);
	run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- signals and time limits */

START_TEST(sigterm_is_forwarded_to_the_ranks)
{
	char cmd[512], path[128];
	run_t r;

	snprintf(cmd, sizeof(cmd),
		 "d=%s; trap 'echo term > $d/term.$GICE_RANK; exit 0' TERM; echo up > $d/ready.$GICE_RANK; "
		 "sleep 30 & wait",
		 tmpdir);
	const char *args[] = {"-n", "2", "sh", "-c", cmd};
	run_startv(&r, args, 5);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/ready.%d", tmpdir, i);
		if (!wait_for_file(path, 10.0 * test_time_scale())) {
			kill(r.pid, SIGKILL);
			ck_abort_msg("rank %d never started (%s)", i, path);
		}
	}
	usleep(100000); /* let the shells reach `wait` */
	ck_assert_int_eq(kill(r.pid, SIGTERM), 0);
	run_finish(&r);
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(r.secs < 10.0 * test_time_scale(), "took %.1f s", r.secs);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/term.%d", tmpdir, i);
		const char *s = read_file(path);
		ck_assert_msg(s && !strcmp(s, "term\n"), "rank %d did not see SIGTERM (%s)", i, path);
	}
	run_free(&r);
}
END_TEST

START_TEST(timeout_kills_the_job_with_124)
{
	run_t r;

	RUN(&r, "--timeout", "1", "-n", "2", "sleep", "30");
	ck_assert_msg(run_code(&r) == 124, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(r.secs >= 0.9 && r.secs < 4.0 * test_time_scale(), "took %.1f s", r.secs);
	ck_assert_msg(strstr(r.err, "gicerun: timed out after 1 s; killing ranks 0-1\n"), "stderr: %s", r.err);
	ck_assert_int_eq(count_str(r.err, "gicerun: rank "), 0);
	run_free(&r);
}
END_TEST

START_TEST(ranks_ignoring_sigterm_get_sigkill_after_2s)
{
	run_t r;

	RUN(&r, "--timeout", "0.5", "-n", "2", "sh", "-c", "trap '' TERM; exec sleep 30");
	ck_assert_msg(run_code(&r) == 124, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(r.secs >= 2.4 && r.secs < 5.0 * test_time_scale(), "took %.1f s", r.secs);
	ck_assert_msg(strstr(r.err, "sending SIGKILL"), "stderr: %s", r.err);
	run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- usage */

START_TEST(bad_usage_exits_2_naming_the_value)
{
	static const struct {
		const char *args[8];
		const char *says;
	} cases[] = {
		{{NULL}, "-n N is required"},
		{{"-n", "0", "true"}, "bad -n '0'"},
		{{"-n", "two", "true"}, "bad -n 'two'"},
		{{"-n", "2"}, "no program to run"},
		{{"--bogus", "-n", "1", "true"}, "unrecognized option '--bogus'"},
		{{"--timeout", "-1", "-n", "1", "true"}, "bad --timeout '-1'"},
		{{"--timeout", "soon", "-n", "1", "true"}, "bad --timeout 'soon'"},
		{{"--port", "70000", "-n", "1", "true"}, "bad --port '70000'"},
		{{"--devices-per-rank", "0", "-n", "1", "true"}, "bad --devices-per-rank '0'"},
		{{"--netns", "a,,b", "-n", "1", "true"}, "empty namespace name at position 2"},
		{{"--netns", "../x", "-n", "1", "true"}, "bad namespace name '../x'"},
	};
	run_t r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = 0;
		while (cases[i].args[n])
			n++;
		run_startv(&r, cases[i].args, n);
		run_finish(&r);
		ck_assert_msg(run_code(&r) == 2, "case %zu: exit %d, stderr: %s", i, run_code(&r), r.err);
		ck_assert_msg(strstr(r.err, cases[i].says), "case %zu: no '%s' in: %s", i, cases[i].says, r.err);
		ck_assert_msg(strstr(r.err, "usage: gicerun"), "case %zu: no usage in: %s", i, r.err);
		ck_assert_str_eq(r.out, "");
		run_free(&r);
	}
	RUN(&r, "--help");
	ck_assert_int_eq(run_code(&r), 0);
	ck_assert_ptr_nonnull(strstr(r.out, "usage: gicerun"));
	run_free(&r);
}
END_TEST

START_TEST(unknown_namespace_is_named)
{
	run_t r;

	RUN(&r, "--netns", "gice-t-none", "-n", "1", "true");
	ck_assert_msg(run_code(&r) == 1, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(strstr(r.err, "network namespace 'gice-t-none': cannot open /run/netns/gice-t-none: "),
		      "stderr: %s", r.err);
	run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- network namespaces */

static int netns_lock = -1;
static int netns_ready;
static char netns_error[256];
static void sh_quiet(const char *cmd)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s >/dev/null 2>&1", cmd);
	if (system(buf)) {
	}
}

static void netns_delete(void)
{
	sh_quiet("ip netns del gice-t-a");
	sh_quiet("ip netns del gice-t-b");
}

/* Two namespaces joined by a veth pair: gice-t-a (gice-t-va, 10.201.0.1/24) and gice-t-b
 * (gice-t-vb, 10.201.0.2/24). Serialised with a lock file, since the names are fixed. */
static void netns_setup(void)
{
	static const char *cmds[] = {
		"ip netns add gice-t-a",
		"ip netns add gice-t-b",
		"ip link add gice-t-va netns gice-t-a type veth peer name gice-t-vb netns gice-t-b",
		"ip -n gice-t-a addr add 10.201.0.1/24 dev gice-t-va",
		"ip -n gice-t-b addr add 10.201.0.2/24 dev gice-t-vb",
		"ip -n gice-t-a link set lo up",
		"ip -n gice-t-b link set lo up",
		"ip -n gice-t-a link set gice-t-va up",
		"ip -n gice-t-b link set gice-t-vb up",
	};

	tmpdir_make();
	netns_ready = 0;
	netns_lock = open("/tmp/gice-test-netns.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (netns_lock >= 0)
		flock(netns_lock, LOCK_EX);
	netns_delete(); /* left over by a run that crashed */
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char buf[256];
		snprintf(buf, sizeof(buf), "%s 2>&1", cmds[i]);
		if (system(buf)) {
			snprintf(netns_error, sizeof(netns_error), "cannot create the test namespaces: `%s` failed",
				 cmds[i]);
			return;
		}
	}
	netns_ready = 1;
}

static void netns_teardown(void)
{
	netns_delete();
	if (netns_lock >= 0)
		close(netns_lock); /* releases the lock */
	netns_lock = -1;
	tmpdir_remove();
}

/* Why --netns cannot be tested here (reason in why), or 0 when it can: root, `ip netns` and a
 * namespace that can really be made (a container may refuse it). */
static int netns_unusable(char *why, size_t len)
{
	char cmd[160];

	if (geteuid() != 0) {
		snprintf(why, len, "not root (euid %d)", (int)geteuid());
		return 1;
	}
	if (system("ip netns list >/dev/null 2>&1")) {
		snprintf(why, len, "`ip netns list` fails (no iproute2 or no namespaces)");
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "ip netns add gice-t-probe%d >/dev/null 2>&1", (int)getpid());
	int rc = system(cmd);
	snprintf(cmd, sizeof(cmd), "ip netns del gice-t-probe%d >/dev/null 2>&1", (int)getpid());
	sh_quiet(cmd);
	if (rc) {
		snprintf(why, len, "`ip netns add` fails (no permission to create network namespaces)");
		return 1;
	}
	return 0;
}

static unsigned long ino_of(const char *path)
{
	struct stat st;
	ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
	return (unsigned long)st.st_ino;
}

START_TEST(netns_ranks_run_in_their_namespaces)
{
	run_t r;

	ck_assert_msg(netns_ready, "%s", netns_error); /* main() found namespaces usable */
	unsigned long ns_ino[2] = {ino_of("/run/netns/gice-t-a"), ino_of("/run/netns/gice-t-b")};
	unsigned long own = ino_of("/proc/self/ns/net");
	const char *iface[2] = {"gice-t-va", "gice-t-vb"};

	/* 3 ranks over 2 namespaces: rank 2 goes to the first again */
	RUN(&r, "-n", "3", "--netns", "gice-t-a,gice-t-b", "sh", "-c",
	    "echo $GICE_BOOTSTRAP $GICE_FAB_IFACE $(readlink /proc/self/ns/net)");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_int_eq(count_lines(r.out), 3);
	int port0 = -1;
	for (int i = 0; i < 3; i++) {
		char want[32], ifname[32];
		int port;
		unsigned long ino;
		snprintf(want, sizeof(want), "[%d] 10.201.0.1:", i);
		const char *p = strstr(r.out, want);
		ck_assert_msg(p, "no '%s' in:\n%s", want, r.out);
		ck_assert_msg(sscanf(p + strlen(want), "%d %31s net:[%lu]", &port, ifname, &ino) == 3, "line: %s", p);
		if (port0 < 0)
			port0 = port;
		ck_assert_int_eq(port, port0);
		ck_assert_int_gt(port, 0);
		ck_assert_str_eq(ifname, iface[i % 2]);
		ck_assert_msg(ino == ns_ino[i % 2], "rank %d in net:[%lu], not in %s (net:[%lu])", i, ino,
			      i % 2 ? "gice-t-b" : "gice-t-a", ns_ino[i % 2]);
		ck_assert_uint_ne(ino, own);
	}
	run_free(&r);
}
END_TEST

/* --netns: no provider set gives net (libfabric 1.17's native RDM over TCP), shm is refused, and an inherited FI_TCP_IFACE=lo is replaced
 * by each namespace's interface (else ranks advertise 127.0.0.1 to the other namespaces), each
 * said on stderr; a provider that crosses namespaces is kept. */
START_TEST(netns_picks_net_and_each_namespace_interface)
{
	run_t r;

	ck_assert_msg(netns_ready, "%s", netns_error); /* main() found namespaces usable */
	unsetenv("GICE_FI_PROVIDER");
	unsetenv("FI_UDP_IFACE");
	unsetenv("FI_SOCKETS_IFACE");
	unsetenv("FI_NET_IFACE");
	setenv("FI_TCP_IFACE", "lo", 1);
	RUN(&r, "-n", "2", "--netns", "gice-t-a,gice-t-b", "sh", "-c",
	    "echo $GICE_FI_PROVIDER $FI_TCP_IFACE ${FI_UDP_IFACE:-unset}");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(has_line(r.out, "[0] net gice-t-va unset") && has_line(r.out, "[1] net gice-t-vb unset"),
		      "stdout:\n%s", r.out);
	ck_assert_msg(strstr(r.err, "gicerun: --netns: GICE_FI_PROVIDER=net for every rank"), "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, "gicerun: --netns: FI_TCP_IFACE=lo replaced in every rank by its namespace's "
				    "interface (gice-t-va, gice-t-vb)"),
		      "stderr: %s", r.err);
	run_free(&r);

	/* a provider that crosses namespaces is the user's choice: kept, nothing said about it */
	setenv("GICE_FI_PROVIDER", "tcp", 1);
	unsetenv("FI_TCP_IFACE");
	RUN(&r, "-n", "2", "--netns", "gice-t-a,gice-t-b", "sh", "-c", "echo $GICE_FI_PROVIDER");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(has_line(r.out, "[0] tcp") && has_line(r.out, "[1] tcp"), "stdout:\n%s", r.out);
	ck_assert_msg(!strstr(r.err, "--netns:"), "stderr: %s", r.err);
	run_free(&r);
	setenv("GICE_FI_PROVIDER", "udp", 1);
	unsetenv("FI_TCP_IFACE");
	RUN(&r, "-n", "2", "--netns", "gice-t-a,gice-t-b", "sh", "-c", "echo $GICE_FI_PROVIDER ${FI_TCP_IFACE:-unset}");
	ck_assert_msg(run_code(&r) == 0, "exit %d, stderr: %s", run_code(&r), r.err);
	ck_assert_msg(has_line(r.out, "[0] udp unset") && has_line(r.out, "[1] udp unset"), "stdout:\n%s", r.out);
	ck_assert_msg(!strstr(r.err, "--netns:"), "stderr: %s", r.err);
	run_free(&r);

	/* shared memory never crosses namespaces: refused before any rank starts */
	setenv("GICE_FI_PROVIDER", "shm", 1);
	RUN(&r, "-n", "2", "--netns", "gice-t-a,gice-t-b", "sh", "-c", "echo ran");
	ck_assert_int_eq(run_code(&r), 1);
	ck_assert_msg(!strstr(r.out, "ran"), "a rank ran: %s", r.out);
	ck_assert_msg(strstr(r.err, "gicerun: --netns: GICE_FI_PROVIDER=shm cannot cross network namespaces"),
		      "stderr: %s", r.err);
	run_free(&r);
	unsetenv("GICE_FI_PROVIDER");
}
END_TEST

/* ---------------------------------------------------------------- main */

static void pick_gicerun(const char *argv0)
{
	const char *env = getenv("GICERUN");
	const char *tail = "/tests/test_gicerun";
	size_t n = strlen(argv0), t = strlen(tail);

	if (env && *env) {
		snprintf(gicerun, sizeof(gicerun), "%s", env);
	} else if (n > t && !strcmp(argv0 + n - t, tail)) {
		char guess[PATH_MAX];
		snprintf(guess, sizeof(guess), "%.*s/bin/gicerun", (int)(n - t), argv0);
		if (!access(guess, X_OK))
			snprintf(gicerun, sizeof(gicerun), "%s", guess);
	}
	printf("testing %s\n", gicerun);
	fflush(stdout);
}

static void add_case(Suite *s, const char *name, const TTest *test, void (*setup)(void), void (*teardown)(void))
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 30);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
}

int main(int argc, char **argv)
{
	(void)argc;
	pick_gicerun(argv[0]);
	if (access(gicerun, X_OK)) {
		fprintf(stderr, "test_gicerun: %s: %s (build it first: make build/bin/gicerun)\n", gicerun,
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);

	Suite *s = suite_create("gicerun");
	add_case(s, "env_and_prefixes", every_rank_gets_its_env_and_a_prefix, tmpdir_make, tmpdir_remove);
	add_case(s, "stderr_and_partial_lines", stderr_is_prefixed_and_partial_lines_are_flushed, tmpdir_make,
		 tmpdir_remove);
	add_case(s, "whole_lines", lines_are_never_interleaved, tmpdir_make, tmpdir_remove);
	add_case(s, "failing_rank", failing_rank_is_named_and_the_others_are_killed, tmpdir_make, tmpdir_remove);
	add_case(s, "keep_going", keep_going_lets_the_others_finish, tmpdir_make, tmpdir_remove);
	add_case(s, "killed_rank", rank_killed_by_a_signal_gives_128_plus_signal, tmpdir_make, tmpdir_remove);
	add_case(s, "unrunnable_program", unrunnable_program_is_named, tmpdir_make, tmpdir_remove);
	add_case(s, "sigterm_forwarded", sigterm_is_forwarded_to_the_ranks, tmpdir_make, tmpdir_remove);
	add_case(s, "timeout", timeout_kills_the_job_with_124, tmpdir_make, tmpdir_remove);
	add_case(s, "sigkill_escalation", ranks_ignoring_sigterm_get_sigkill_after_2s, tmpdir_make, tmpdir_remove);
	add_case(s, "bad_usage", bad_usage_exits_2_naming_the_value, tmpdir_make, tmpdir_remove);
	add_case(s, "unknown_namespace", unknown_namespace_is_named, tmpdir_make, tmpdir_remove);
	char why[160];
	if (netns_unusable(why, sizeof(why)))
		test_skip_cases(2, "netns: %s", why);
	else {
		add_case(s, "netns", netns_ranks_run_in_their_namespaces, netns_setup, netns_teardown);
		add_case(s, "netns_fabric_env", netns_picks_net_and_each_namespace_interface, netns_setup,
			 netns_teardown);
	}
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
