/* job.c: the ranks' process group (led by a holder child that ignores the forwarded signals
 * and lives as long as gicerun), the signal self-pipe, and one rank's set-up and exec. */
#include "tools/gicerun/gicerun.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int sig_pipe[2] = {-1, -1};
volatile sig_atomic_t sig_pending[NSIG];
const int handled_sigs[NHANDLED] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

void on_signal(int sig)
{
	int saved = errno;
	char c = 0;

	sig_pending[sig] = 1;
	if (write(sig_pipe[1], &c, 1) < 0) { /* full: a wake-up is pending already */
	}
	errno = saved;
}
rank_t *ranks;
pid_t holder_pid = -1; /* leader of the ranks' process group */
static int holder_fd = -1;    /* its pipe: closing it lets the holder exit */

/* "0-2,5": the ranks not reaped yet */
void running_ranks(char *buf, size_t len)
{
	size_t off = 0;
	long r = 0;

	buf[0] = '\0';
	while (r < opt.nranks && off + 32 < len) {
		if (ranks[r].reaped || !ranks[r].pid) {
			r++;
			continue;
		}
		long first = r;
		while (r + 1 < opt.nranks && !ranks[r + 1].reaped && ranks[r + 1].pid)
			r++;
		off += (size_t)snprintf(buf + off, len - off, off ? ",%ld" : "%ld", first);
		if (r > first)
			off += (size_t)snprintf(buf + off, len - off, "-%ld", r);
		r++;
	}
	if (r < opt.nranks && off + 32 >= len)
		snprintf(buf + off, len - off, ",...");
}

/* Signal the ranks' process group; should the holder be gone, each rank not reaped yet (its pid
 * cannot have been reused before we reap it). */
void signal_job(int sig)
{
	if (holder_pid > 0) {
		kill(-holder_pid, sig);
		return;
	}
	for (long r = 0; r < opt.nranks; r++)
		if (ranks[r].pid > 0 && !ranks[r].reaped)
			kill(ranks[r].pid, sig);
}

/* The holder: leads the process group, ignores what is forwarded to the group, and exits when
 * gicerun closes its pipe (or dies). */
int start_holder(void)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "%s: pipe: %s\n", prog_name, strerror(errno));
		return -1;
	}
	holder_pid = fork();
	if (holder_pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog_name, strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (holder_pid == 0) {
		char c;
		setpgid(0, 0);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		close(p[1]);
		close(sig_pipe[0]);
		close(sig_pipe[1]);
		for (int fd = 0; fd < 3; fd++)
			close(fd);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	setpgid(holder_pid, holder_pid); /* also done by the child; whichever runs first */
	close(p[0]);
	holder_fd = p[1];
	return 0;
}

void stop_holder(void)
{
	int status;

	if (holder_fd >= 0)
		close(holder_fd);
	holder_fd = -1;
	if (holder_pid > 0)
		while (waitpid(holder_pid, &status, 0) < 0 && errno == EINTR)
			;
	holder_pid = -1;
}

static void child_fail(int rank, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n = snprintf(msg, sizeof(msg), "%s: rank %d: ", prog_name, rank);

	va_start(ap, fmt);
	n += vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	write_all(2, msg, (size_t)n);
	_exit(code);
}

/* In the forked rank: set up and exec. Never returns. */
void rank_exec(int r, int out_w, int err_w, const char *bootstrap, const ns_probe_t *ns_info,
		      const sigset_t *old_mask, pid_t gicerun_pid)
{
	char num[32];
	int fd;

	/* stdout/stderr to gicerun first, so every message below is prefixed like the rank's own */
	if (dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
		_exit(EXIT_SETUP);
	fd = open("/dev/null", O_RDONLY);
	if (fd < 0 || dup2(fd, 0) < 0)
		child_fail(r, EXIT_SETUP, "cannot open /dev/null for stdin: %s", strerror(errno));
	if (fd > 2)
		close(fd);
	for (int i = 0; i < NHANDLED; i++)
		signal(handled_sigs[i], SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, old_mask, NULL);
	if (setpgid(0, holder_pid))
		child_fail(r, EXIT_SETUP, "cannot join process group %d: %s", (int)holder_pid, strerror(errno));
	/* if gicerun dies without cleaning up (SIGKILL), the ranks hear about it */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != gicerun_pid)
		_exit(EXIT_SETUP);

	if (opt.nnetns) {
		const char *ns = opt.netns[r % opt.nnetns];
		char err[512];
		if (enter_netns(ns, err, sizeof(err)))
			child_fail(r, EXIT_SETUP, "network namespace '%s': %s", ns, err);
		if (netns_rank_env(r, ns_info))
			child_fail(r, EXIT_SETUP, "setenv: %s", strerror(errno));
	}
	snprintf(num, sizeof(num), "%d", r);
	int ok = !setenv("GICE_RANK", num, 1);
	snprintf(num, sizeof(num), "%ld", opt.nranks);
	ok = ok && !setenv("GICE_WORLD_SIZE", num, 1);
	ok = ok && !setenv("GICE_BOOTSTRAP", bootstrap, 1);
	snprintf(num, sizeof(num), "%ld", opt.devices);
	ok = ok && !setenv("GICE_DEVICES_PER_RANK", num, 1);
	if (!ok)
		child_fail(r, EXIT_SETUP, "setenv: %s", strerror(errno));
	execvp(opt.argv[0], opt.argv);
	child_fail(r, EXIT_NOEXEC, "cannot run '%s': %s", opt.argv[0], strerror(errno));
}

/* Make sure 0, 1 and 2 are open, so no pipe of ours lands there. */
void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int nfd = open("/dev/null", fd ? O_WRONLY : O_RDONLY);
			if (nfd >= 0 && nfd != fd) {
				dup2(nfd, fd);
				close(nfd);
			}
		}
}

int check_fd_limit(void)
{
	struct rlimit rl;
	unsigned long long need = 2ull * (unsigned long long)opt.nranks + 16;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		fprintf(stderr, "%s: -n %ld needs %llu file descriptors but RLIMIT_NOFILE is %llu (raise it with "
				"ulimit -n)\n",
			prog_name, opt.nranks, need, (unsigned long long)rl.rlim_cur);
		return -1;
	}
	return 0;
}
