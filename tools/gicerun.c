/* gicerun: start the N rank processes of a gice job on this machine.
 *   Every rank runs `prog args...` with GICE_RANK, GICE_WORLD_SIZE, GICE_BOOTSTRAP (host:port of
 *   rank 0's TCP bootstrap) and GICE_DEVICES_PER_RANK in its environment; with --netns, rank r
 *   runs inside network namespace ns[r % count] and also gets GICE_FAB_IFACE (and FI_TCP_IFACE,
 *   FI_UDP_IFACE, FI_SOCKETS_IFACE, FI_NET_IFACE, when set, replaced by that interface);
 *   GICE_FI_PROVIDER defaults to tcp there, and shm is refused.
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
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric/fabric.h"

#define MAX_RANKS      65536
#define MAX_DEVICES    65536
#define MAX_TIMEOUT_S  31536000.0 /* one year */
#define KILL_GRACE_MS  2000       /* SIGTERM -> SIGKILL */
#define DRAIN_GRACE_MS 1000       /* after the last rank exits: wait this long for EOF on its pipes */
#define LINE_CAP       (1u << 20) /* a longer line is printed in pieces of this size */
#define READ_CHUNK     65536
#define EXIT_NOEXEC    127        /* the rank's program could not be exec'd */
#define EXIT_SETUP     126        /* the rank could not be set up (namespace, process group, env) */

static const char *prog_name = "gicerun";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gicerun -n N [--devices-per-rank D] [--netns NS1,NS2,...] [--port P] [--timeout SEC] "
		"[--keep-going] [--faults FILE] [--] prog [args...]\n"
		"  -n N                  number of ranks (1..%d)\n"
		"  --devices-per-rank D  GICE_DEVICES_PER_RANK of every rank (1..%d, default 1)\n"
		"  --netns LIST          run rank r in network namespace LIST[r %% count] (/run/netns/NAME)\n"
		"  --port P              bootstrap TCP port (1..65535; default: a free port)\n"
		"  --timeout SEC         kill the job after SEC seconds and exit 124\n"
		"  --keep-going          when a rank fails, let the others run on (to watch them notice,\n"
		"                        e.g. under GICE_FAULTS=kill_rank=...); exit with the first failure\n"
		"  --faults FILE         run the fault scenario FILE (GICE_FAULT_SCRIPT of every rank)\n"
		"  -h, --help            print this help\n",
		MAX_RANKS, MAX_DEVICES);
}

static int bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	return 2;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Whole-string integer in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
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

/* ---------------------------------------------------------------- options */

static struct {
	long nranks, devices, port; /* port 0: find a free one */
	double timeout_s;           /* 0: none */
	char *netns_buf;            /* the --netns argument, split in place */
	char **netns;
	int nnetns;
	int keep_going;
	char **argv; /* prog args... */
} opt = {.devices = 1};

static int parse_netns(const char *arg)
{
	size_t n = 1;

	for (const char *p = arg; *p; p++)
		n += *p == ',';
	opt.netns_buf = strdup(arg);
	opt.netns = calloc(n, sizeof(*opt.netns));
	if (!opt.netns_buf || !opt.netns)
		return bad_usage("out of memory");
	char *p = opt.netns_buf;
	for (size_t i = 0; i < n; i++) {
		char *name = p;
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0', p = comma + 1;
		if (!*name)
			return bad_usage("--netns '%s': empty namespace name at position %zu", arg, i + 1);
		if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
			return bad_usage("--netns '%s': bad namespace name '%s' (a name in /run/netns)", arg, name);
		if (strlen(name) > NAME_MAX)
			return bad_usage("--netns '%s': namespace name '%s' longer than %d bytes", arg, name,
					 NAME_MAX);
		opt.netns[opt.nnetns++] = name;
	}
	return 0;
}

static int parse_args(int argc, char **argv)
{
	static const struct option lo[] = {{"devices-per-rank", required_argument, 0, 'd'},
					   {"netns", required_argument, 0, 'N'},
					   {"port", required_argument, 0, 'p'},
					   {"timeout", required_argument, 0, 't'},
					   {"keep-going", no_argument, 0, 'k'},
					   {"faults", required_argument, 0, 'f'},
					   {"help", no_argument, 0, 'h'},
					   {0, 0, 0, 0}};
	int ch;

	/* '+': stop at the program name, its options are its own */
	while ((ch = getopt_long(argc, argv, "+n:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'n':
			if (parse_long(optarg, 1, MAX_RANKS, &opt.nranks))
				return bad_usage("bad -n '%s' (want an integer 1..%d)", optarg, MAX_RANKS);
			break;
		case 'd':
			if (parse_long(optarg, 1, MAX_DEVICES, &opt.devices))
				return bad_usage("bad --devices-per-rank '%s' (want an integer 1..%d)", optarg,
						 MAX_DEVICES);
			break;
		case 'p':
			if (parse_long(optarg, 1, 65535, &opt.port))
				return bad_usage("bad --port '%s' (want an integer 1..65535)", optarg);
			break;
		case 't': {
			char *end;
			errno = 0;
			opt.timeout_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(opt.timeout_s) || opt.timeout_s <= 0 ||
			    opt.timeout_s > MAX_TIMEOUT_S)
				return bad_usage("bad --timeout '%s' (want seconds, > 0 and <= %.0f)", optarg,
						 MAX_TIMEOUT_S);
			break;
		}
		case 'N': {
			int rc = parse_netns(optarg);
			if (rc)
				return rc;
			break;
		}
		case 'k': opt.keep_going = 1; break;
		case 'f':
			/* every rank reads it at gice_init: a path that is not readable here fails now */
			if (access(optarg, R_OK))
				return bad_usage("cannot read the fault scenario '%s': %s", optarg, strerror(errno));
			if (setenv("GICE_FAULT_SCRIPT", optarg, 1))
				return bad_usage("cannot set GICE_FAULT_SCRIPT: %s", strerror(errno));
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (!opt.nranks)
		return bad_usage("-n N is required");
	if (optind >= argc)
		return bad_usage("no program to run");
	opt.argv = argv + optind;
	return 0;
}

/* ---------------------------------------------------------------- network namespaces */

typedef struct {
	int ok;
	char iface[IF_NAMESIZE];
	char addr[INET_ADDRSTRLEN];
	int port;
	char err[512];
} ns_probe_t;

/* In the caller's network namespace: the first non-loopback interface with an IPv4 address
 * (getifaddrs order, which is interface index order) and that address. */
static int first_iface(ns_probe_t *r)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa)) {
		snprintf(r->err, sizeof(r->err), "getifaddrs: %s", strerror(errno));
		return -1;
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		snprintf(r->iface, sizeof(r->iface), "%s", i->ifa_name);
		inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, r->addr, sizeof(r->addr));
		break;
	}
	freeifaddrs(ifa);
	if (!i) {
		snprintf(r->err, sizeof(r->err), "no non-loopback interface with an IPv4 address");
		return -1;
	}
	return 0;
}

/* A free TCP port on addr: bind port 0, read it back, close. The port is free now; rank 0 binds
 * it a moment later (a small race with other programs picking ports, as with any launcher). */
static int free_port(const char *addr, int *port, char *err, size_t errlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	inet_pton(AF_INET, addr, &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		snprintf(err, errlen, "cannot bind a TCP port on %s: %s", addr, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	*port = ntohs(sa.sin_port);
	return 0;
}

static int enter_netns(const char *name, char *err, size_t errlen)
{
	char path[sizeof("/run/netns/") + NAME_MAX]; /* parse_netns bounds the name */
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (setns(fd, CLONE_NEWNET)) {
		snprintf(err, errlen, "cannot enter it: setns(%s, CLONE_NEWNET): %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Look inside namespace `name` from a forked child (so gicerun itself never changes namespace);
 * with want_port, also find a free port on the interface address there. */
static int probe_netns(const char *name, int want_port, ns_probe_t *out)
{
	ns_probe_t r = {0};
	int p[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "%s: pipe: %s\n", prog_name, strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog_name, strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		if (!enter_netns(name, r.err, sizeof(r.err)) && !first_iface(&r) &&
		    (!want_port || !free_port(r.addr, &r.port, r.err, sizeof(r.err))))
			r.ok = 1;
		/* one write, smaller than PIPE_BUF: atomic */
		n = write(p[1], &r, sizeof(r));
		_exit(n == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	do
		n = read(p[0], &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(r)) {
		fprintf(stderr, "%s: network namespace '%s': probe process failed\n", prog_name, name);
		return -1;
	}
	r.err[sizeof(r.err) - 1] = '\0';
	if (!r.ok) {
		fprintf(stderr, "%s: network namespace '%s': %s\n", prog_name, name, r.err);
		return -1;
	}
	*out = r;
	return 0;
}

/* The socket providers' interface variables: with --netns each rank's must name its
 * namespace's interface, or it advertises an address the other namespaces cannot reach. */
static const char *const iface_vars[] = {"FI_TCP_IFACE", "FI_UDP_IFACE", "FI_SOCKETS_IFACE", "FI_NET_IFACE"};
#define NIFACE_VARS ((int)(sizeof(iface_vars) / sizeof(iface_vars[0])))
static int iface_override[NIFACE_VARS]; /* set in our environment: replaced in every rank */

/* --netns: ranks talk across namespaces, so the provider must be one that crosses them, and the
 * socket providers must bind each namespace's interface. Pick tcp when no provider is set,
 * refuse shared-memory ones, and note the interface variables to replace; say so on stderr. */
static int netns_fabric_env(const ns_probe_t *ns_info)
{
	const char *prov = getenv("GICE_FI_PROVIDER");

	if (!prov || !*prov) {
		if (setenv("GICE_FI_PROVIDER", "tcp", 1)) {
			fprintf(stderr, "%s: setenv: %s\n", prog_name, strerror(errno));
			return -1;
		}
		fprintf(stderr, "%s: --netns: GICE_FI_PROVIDER=tcp for every rank (the default, shm, would pass "
				"the bytes through shared memory instead of across the namespaces)\n",
			prog_name);
	} else {
		size_t n = strcspn(prov, ";");
		if ((n == 3 && !strncmp(prov, "shm", 3)) || (n == 3 && !strncmp(prov, "sm2", 3))) {
			fprintf(stderr, "%s: --netns: GICE_FI_PROVIDER=%s cannot cross network namespaces (it goes "
					"through shared memory); unset it (gicerun then picks tcp) or choose tcp, udp "
					"or sockets\n",
				prog_name, prov);
			return -1;
		}
	}
	for (int v = 0; v < NIFACE_VARS; v++) {
		const char *val = getenv(iface_vars[v]);
		char list[256] = "";
		size_t off = 0;
		int differs = 0;
		if (!val || !*val)
			continue; /* unset: the library copies GICE_FAB_IFACE, which we set */
		iface_override[v] = 1;
		for (int i = 0; i < opt.nnetns; i++) {
			int seen = 0;
			for (int j = 0; j < i && !seen; j++)
				seen = !strcmp(ns_info[i].iface, ns_info[j].iface);
			differs |= strcmp(val, ns_info[i].iface) != 0;
			if (!seen && off + IF_NAMESIZE + 8 < sizeof(list))
				off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", off ? ", " : "",
							ns_info[i].iface);
		}
		if (differs)
			fprintf(stderr, "%s: --netns: %s=%s replaced in every rank by its namespace's interface (%s)\n",
				prog_name, iface_vars[v], val, list);
	}
	return 0;
}

/* ---------------------------------------------------------------- output of the ranks */

typedef struct {
	int fd;     /* read end, -1 once closed */
	int out_fd; /* 1 or 2 */
	int rank;
	char *buf; /* the partial line so far */
	size_t len, cap;
} stream_t;

typedef struct {
	pid_t pid;
	int reaped;
	int status;
	stream_t out, err;
} rank_t;

static int out_broken[3]; /* our stdout/stderr gave EPIPE: drop what would go there */
static char *obuf;        /* assembled prefixed lines */
static size_t olen, ocap;

static void obuf_add(const void *p, size_t n)
{
	if (!n) /* p may be NULL then (an empty stream buffer) */
		return;
	if (olen + n > ocap) {
		size_t cap = ocap ? ocap : 4096;
		while (cap < olen + n)
			cap *= 2;
		char *nb = realloc(obuf, cap);
		if (!nb) {
			fprintf(stderr, "%s: out of memory buffering output (%zu bytes)\n", prog_name, cap);
			exit(1);
		}
		obuf = nb;
		ocap = cap;
	}
	memcpy(obuf + olen, p, n);
	olen += n;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n && !out_broken[fd]) {
		ssize_t w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && errno == EAGAIN) { /* an inherited non-blocking descriptor */
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			poll(&pf, 1, 100);
		} else {
			out_broken[fd] = 1; /* EPIPE and the like: keep draining the ranks, print nothing */
		}
	}
}

static void obuf_flush(int fd)
{
	write_all(fd, obuf, olen);
	olen = 0;
}

static void add_line(const stream_t *s, const char *a, size_t alen, const char *b, size_t blen)
{
	char prefix[24];
	int plen = snprintf(prefix, sizeof(prefix), "[%d] ", s->rank);

	obuf_add(prefix, (size_t)plen);
	obuf_add(a, alen);
	obuf_add(b, blen);
	obuf_add("\n", 1);
}

static void stream_keep(stream_t *s, const char *p, size_t n)
{
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->len + n)
			cap *= 2;
		char *nb = realloc(s->buf, cap);
		if (!nb) {
			fprintf(stderr, "%s: out of memory buffering a line of rank %d (%zu bytes)\n", prog_name,
				s->rank, cap);
			exit(1);
		}
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

/* Print every complete line of data (with the partial line kept from before), keep the rest. */
static void stream_feed(stream_t *s, const char *data, size_t n)
{
	const char *p = data, *end = data + n, *nl;

	while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
		add_line(s, s->buf, s->len, p, (size_t)(nl - p));
		s->len = 0;
		p = nl + 1;
	}
	while (p < end) {
		size_t take = (size_t)(end - p);
		if (take > LINE_CAP - s->len)
			take = LINE_CAP - s->len;
		stream_keep(s, p, take);
		p += take;
		if (s->len == LINE_CAP) { /* an endless line: print it in pieces */
			add_line(s, s->buf, s->len, "", 0);
			s->len = 0;
		}
	}
	obuf_flush(s->out_fd);
}

static void stream_close(stream_t *s)
{
	if (s->len) { /* the partial last line, completed with a newline */
		add_line(s, s->buf, s->len, "", 0);
		s->len = 0;
		obuf_flush(s->out_fd);
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

/* Read what one stream has: 1 when data came, 0 when none is there now, -1 once closed. */
static int stream_read(stream_t *s)
{
	static char chunk[READ_CHUNK];
	ssize_t n;

	if (s->fd < 0)
		return -1;
	n = read(s->fd, chunk, sizeof(chunk));
	if (n > 0) {
		stream_feed(s, chunk, (size_t)n);
		return 1;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	stream_close(s); /* EOF (or an error, which ends the stream the same way) */
	return -1;
}

/* Our stdout (or stderr) is gone (EPIPE): close the ranks' pipes to it, so that, as in a shell
 * pipeline, their next write there fails (SIGPIPE) instead of going on forever. */
static void stream_drop_if_broken(stream_t *s)
{
	if (s->fd >= 0 && out_broken[s->out_fd]) {
		s->len = 0;
		stream_close(s);
	}
}

/* What a rank that just exited left in its pipes, so its last words come before our line about
 * its exit. Bounded: a process it left behind may still be writing. */
static void stream_drain(stream_t *s)
{
	for (int i = 0; i < 16 && stream_read(s) == 1; i++)
		;
}

/* ---------------------------------------------------------------- signals */

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_pending[NSIG];
static const int handled_sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
#define NHANDLED ((int)(sizeof(handled_sigs) / sizeof(handled_sigs[0])))

static void on_signal(int sig)
{
	int saved = errno;
	char c = 0;

	sig_pending[sig] = 1;
	if (write(sig_pipe[1], &c, 1) < 0) { /* full: a wake-up is pending already */
	}
	errno = saved;
}

/* ---------------------------------------------------------------- the job */

static rank_t *ranks;
static pid_t holder_pid = -1; /* leader of the ranks' process group */
static int holder_fd = -1;    /* its pipe: closing it lets the holder exit */

/* "0-2,5": the ranks not reaped yet */
static void running_ranks(char *buf, size_t len)
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
static void signal_job(int sig)
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
static int start_holder(void)
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

static void stop_holder(void)
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
static void rank_exec(int r, int out_w, int err_w, const char *bootstrap, const ns_probe_t *ns_info,
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
		const char *iface = ns_info[r % opt.nnetns].iface;
		if (setenv("GICE_FAB_IFACE", iface, 1))
			child_fail(r, EXIT_SETUP, "setenv: %s", strerror(errno));
		for (int v = 0; v < NIFACE_VARS; v++)
			if (iface_override[v] && setenv(iface_vars[v], iface, 1))
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
static void ensure_stdio(void)
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

static int check_fd_limit(void)
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
	sigprocmask(SIG_BLOCK, &block, &old_mask); /* no handler runs in a child before its reset */
	if (start_holder()) {
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
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
			if (WIFSIGNALED(status)) /* its shm regions outlive it: before its pid is reused */
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
	free(ranks);
	free(pfd);
	free(pstream);
	free(ns_info);
	free(opt.netns);
	free(opt.netns_buf);
	free(obuf);
	return timed_out ? 124 : exit_code;
fail_ns: /* refused before any rank started */
	free(ns_info);
	free(opt.netns);
	free(opt.netns_buf);
	return 1;
}
