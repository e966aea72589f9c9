/* gicerun: start the N rank processes of a gice job on this machine.
 *   Every rank runs `prog args...` with GICE_RANK, GICE_WORLD_SIZE, GICE_BOOTSTRAP (host:port of
 *   rank 0's TCP bootstrap) and GICE_DEVICES_PER_RANK in its environment; with --netns, rank r
 *   runs inside network namespace ns[r % count] and also gets GICE_FAB_IFACE (and FI_TCP_IFACE,
 *   FI_UDP_IFACE, FI_SOCKETS_IFACE, FI_NET_IFACE, when set, replaced by that interface);
 *   GICE_FI_PROVIDER defaults to net there (libfabric's TCP RDM), and shm is refused.
 *   Every line a rank writes is printed prefixed with "[r] " (stdout to stdout, stderr to stderr).
 *   The first rank to fail (non-zero exit or a signal) is named; the others get SIGTERM, then
 *   SIGKILL 2 s later; gicerun exits with the failed rank's status (128 + signal for a signal).
 *
 * Process layout: all ranks share one process group, led by a small "holder" child of gicerun
 * that ignores the forwarded signals and lives until gicerun is done. Signalling the group
 * reaches every rank and every process a rank started (a rank's `sh -c` children included), and
 * because the holder keeps the group id alive, that id can never be reused by an unrelated
 * process while gicerun may still signal it. The holder exits when its pipe from gicerun closes,
 * so it does not outlive gicerun. Only libc is used. */
#include "tools/gicerun/gicerun.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric/fabric.h"

const char *prog_name = "gicerun";

uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* "SIGSEGV", or NULL for a signal without a name (real-time signals). */
static const char *sig_name(int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "%d", sig);
	return buf;
}
int main(int argc, char **argv)
{
	char bootstrap[INET_ADDRSTRLEN + 8], list[256];
	ns_probe_t *ns_info = NULL;
	const char *host = "127.0.0.1";
	int port, rc;
	int exit_code = 0;     /* of the job, once known */
	int timed_out = 0, launch_failed = 0;
	int tearing_down = 0, killed = 0;
	uint64_t job_deadline = 0, kill_deadline = 0, drain_deadline = 0;
	long nreaped = 0;
	struct pollfd *pfd = NULL;
	stream_t **pstream = NULL;
	sigset_t block, old_mask;
	pid_t self = getpid();

	ensure_stdio();
	rc = parse_args(argc, argv);
	if (rc)
		return rc;
	if (check_fd_limit())
		return 1;
	/* processes the ranks leave behind are reparented to us, and reaped with the ranks, rather
	 * than to an init that may not reap them */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	/* ---- bootstrap address */
	port = (int)opt.port;
	if (opt.nnetns) {
		ns_info = calloc((size_t)opt.nnetns, sizeof(*ns_info));
		if (!ns_info)
			return 1;
		for (int i = 0; i < opt.nnetns; i++) {
			int dup = -1;
			for (int j = 0; j < i && dup < 0; j++)
				if (!strcmp(opt.netns[i], opt.netns[j]))
					dup = j;
			if (dup >= 0)
				ns_info[i] = ns_info[dup];
			else if (probe_netns(opt.netns[i], i == 0 && !port, &ns_info[i]))
				goto fail_ns;
		}
		host = ns_info[0].addr;
		if (!port)
			port = ns_info[0].port;
		if (netns_fabric_env(ns_info))
			goto fail_ns;
	} else if (!port) {
		char err[256];
		if (free_port(host, &port, err, sizeof(err))) {
			fprintf(stderr, "%s: %s\n", prog_name, err);
			return 1;
		}
	}
	snprintf(bootstrap, sizeof(bootstrap), "%s:%d", host, port);

	/* ---- signals: handlers write to a self-pipe that the poll loop watches */
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
		fprintf(stderr, "%s: pipe: %s\n", prog_name, strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill us and orphan the ranks */
	sigemptyset(&block);
	for (int i = 0; i < NHANDLED; i++) {
		struct sigaction sa = {.sa_handler = on_signal};
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = handled_sigs[i] == SIGCHLD ? SA_NOCLDSTOP : 0;
		sigaction(handled_sigs[i], &sa, NULL);
		sigaddset(&block, handled_sigs[i]);
	}

	ranks = calloc((size_t)opt.nranks, sizeof(*ranks));
	pfd = calloc(2 * (size_t)opt.nranks + 1, sizeof(*pfd));
	pstream = calloc(2 * (size_t)opt.nranks + 1, sizeof(*pstream));
	if (!ranks || !pfd || !pstream) {
		fprintf(stderr, "%s: out of memory for %ld ranks\n", prog_name, opt.nranks);
		return 1;
	}
	for (long r = 0; r < opt.nranks; r++) {
		ranks[r].out = (stream_t){.fd = -1, .out_fd = 1, .rank = (int)r};
		ranks[r].err = (stream_t){.fd = -1, .out_fd = 2, .rank = (int)r};
	}

	/* ---- launch */
	if (trace_prepare())
		return 1;
	sigprocmask(SIG_BLOCK, &block, &old_mask); /* no handler runs in a child before its reset */
	if (start_holder()) {
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		trace_remove();
		return 1;
	}
	for (long r = 0; r < opt.nranks; r++) {
		int po[2], pe[2];

		if (pipe2(po, O_CLOEXEC)) {
			fprintf(stderr, "%s: rank %ld: pipe: %s\n", prog_name, r, strerror(errno));
			launch_failed = 1;
			break;
		}
		if (pipe2(pe, O_CLOEXEC)) {
			fprintf(stderr, "%s: rank %ld: pipe: %s\n", prog_name, r, strerror(errno));
			close(po[0]);
			close(po[1]);
			launch_failed = 1;
			break;
		}
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "%s: rank %ld: fork: %s\n", prog_name, r, strerror(errno));
			close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
			launch_failed = 1;
			break;
		}
		if (pid == 0)
			rank_exec((int)r, po[1], pe[1], bootstrap, ns_info, &old_mask, self);
		setpgid(pid, holder_pid); /* fails harmlessly once the child has exec'd (it did it itself) */
		close(po[1]);
		close(pe[1]);
		fcntl(po[0], F_SETFL, O_NONBLOCK);
		fcntl(pe[0], F_SETFL, O_NONBLOCK);
		ranks[r].pid = pid;
		ranks[r].out.fd = po[0];
		ranks[r].err.fd = pe[0];
	}
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	if (launch_failed) {
		exit_code = 1;
		tearing_down = 1;
		signal_job(SIGTERM);
		kill_deadline = now_ms() + KILL_GRACE_MS;
		for (long r = 0; r < opt.nranks; r++)
			if (!ranks[r].pid) { /* never started: counts as reaped */
				ranks[r].reaped = 1;
				nreaped++;
			}
	}
	if (opt.timeout_s > 0)
		job_deadline = now_ms() + (uint64_t)llround(opt.timeout_s * 1000.0);

	/* ---- run: print output, reap, forward signals, enforce the timeout */
	for (;;) {
		uint64_t now = now_ms();
		int nfd = 0, timeout = -1, open_streams = 0;

		if (nreaped == opt.nranks && !drain_deadline) {
			drain_deadline = now + DRAIN_GRACE_MS;
			if (tearing_down && !killed && kill_deadline > drain_deadline)
				drain_deadline = kill_deadline; /* stragglers in the group get their SIGKILL */
		}
		pfd[nfd++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
		for (long r = 0; r < opt.nranks; r++) {
			stream_t *ss[2] = {&ranks[r].out, &ranks[r].err};
			for (int k = 0; k < 2; k++)
				if (ss[k]->fd >= 0) {
					pstream[nfd] = ss[k];
					pfd[nfd++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
					open_streams++;
				}
		}
		if (nreaped == opt.nranks && (!open_streams || now >= drain_deadline))
			break;

		uint64_t next = 0;
		if (job_deadline && !tearing_down)
			next = job_deadline;
		if (tearing_down && !killed && (!next || kill_deadline < next))
			next = kill_deadline;
		if (drain_deadline && (!next || drain_deadline < next))
			next = drain_deadline;
		if (next)
			timeout = next > now ? (int)(next - now) : 0;

		int n = poll(pfd, (nfds_t)nfd, timeout);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "%s: poll: %s\n", prog_name, strerror(errno));
			signal_job(SIGKILL);
			exit_code = 1;
			break;
		}
		if (n > 0) {
			for (int i = 1; i < nfd; i++)
				if (pfd[i].revents)
					stream_read(pstream[i]);
			for (int i = 1; i < nfd; i++)
				stream_drop_if_broken(pstream[i]);
			if (pfd[0].revents) {
				char drain[64];
				while (read(sig_pipe[0], drain, sizeof(drain)) > 0)
					;
			}
		}

		/* forwarded signals */
		for (int i = 0; i < NHANDLED; i++) {
			int sig = handled_sigs[i];
			if (sig == SIGCHLD || !sig_pending[sig])
				continue;
			sig_pending[sig] = 0;
			signal_job(sig);
		}

		/* exits; on every pass, the SIGCHLD flag only saves a wake-up */
		sig_pending[SIGCHLD] = 0;
		for (;;) {
			int status;
			pid_t pid = waitpid(-1, &status, WNOHANG);
			if (pid <= 0)
				break;
			if (pid == holder_pid) { /* killed by our SIGKILL, or by someone else */
				holder_pid = -1;
				continue;
			}
			long r = 0;
			while (r < opt.nranks && ranks[r].pid != pid)
				r++;
			if (r == opt.nranks || ranks[r].reaped)
				continue;
			ranks[r].reaped = 1;
			ranks[r].status = status;
			/* the shm regions of a rank that did not close its devices (killed, or exited
			 * early) outlive it and fill /dev/shm: removed before its pid is reused */
			fab_shm_remove((int)pid, 0);
			nreaped++;
			if (tearing_down || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
				continue;
			char sbuf[32];
			int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			stream_drain(&ranks[r].out);
			stream_drain(&ranks[r].err);
			if (WIFEXITED(status))
				fprintf(stderr, "%s: rank %ld (pid %d) exited with status %d\n", prog_name, r, (int)pid,
					code);
			else
				fprintf(stderr, "%s: rank %ld (pid %d) was killed by signal %s\n", prog_name, r,
					(int)pid, sig_name(WTERMSIG(status), sbuf, sizeof(sbuf)));
			if (!exit_code)
				exit_code = code;
			if (opt.keep_going)
				continue; /* the others run on; the first failure is the job's status */
			tearing_down = 1;
			signal_job(SIGTERM);
			kill_deadline = now_ms() + KILL_GRACE_MS;
		}

		now = now_ms();
		if (job_deadline && !tearing_down && nreaped < opt.nranks && now >= job_deadline) {
			running_ranks(list, sizeof(list));
			fprintf(stderr, "%s: timed out after %g s; killing ranks %s\n", prog_name, opt.timeout_s, list);
			timed_out = 1;
			tearing_down = 1;
			signal_job(SIGTERM);
			kill_deadline = now + KILL_GRACE_MS;
		}
		if (tearing_down && !killed && now >= kill_deadline) {
			if (nreaped < opt.nranks) {
				running_ranks(list, sizeof(list));
				fprintf(stderr, "%s: ranks %s still running %d s after SIGTERM; sending SIGKILL\n",
					prog_name, list, KILL_GRACE_MS / 1000);
			}
			signal_job(SIGKILL);
			killed = 1;
		}
	}

	/* ---- clean up: the rest of the output, the group, the holder */
	for (long r = 0; r < opt.nranks; r++) {
		stream_close(&ranks[r].out);
		stream_close(&ranks[r].err);
	}
	if (tearing_down && !killed)
		signal_job(SIGKILL); /* every rank is gone; leftovers of a job being killed go too */
	stop_holder();
	while (waitpid(-1, NULL, WNOHANG) > 0) /* orphans of the ranks that died meanwhile */
		;
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	if (trace_merge() && !exit_code) /* the job's own failure says more */
		exit_code = 1;
	free(ranks);
	free(pfd);
	free(pstream);
	free(ns_info);
	free(opt.netns);
	free(opt.netns_buf);
	output_free();
	return timed_out ? 124 : exit_code;
fail_ns: /* refused before any rank started */
	free(ns_info);
	free(opt.netns);
	free(opt.netns_buf);
	return 1;
}
