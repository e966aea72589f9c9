/* gicerun.h: what the parts of gicerun share. gicerun starts the N rank processes of a gice job
 * on this machine (docs/gicerun.md); its parts, one concern each:
 *   options.c  the command line (opt)
 *   netns.c    network namespaces: probing them, entering one, the fabric variables they need
 *   output.c   the ranks' stdout/stderr pipes, printed line by line with a "[r] " prefix
 *   job.c      the process group holder, signals, one rank's set-up and exec
 *   trace.c    --trace: the ranks' GICE_TRACE files merged into one
 *   gicerun.c  main: bootstrap address, launch, the wait loop, exit codes
 * Only libc is used (and fab_shm_remove, to clean up after a killed rank). */
#ifndef GICERUN_H
#define GICERUN_H

#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define MAX_RANKS      65536
#define MAX_DEVICES    65536
#define MAX_TIMEOUT_S  31536000.0 /* one year */
#define KILL_GRACE_MS  2000       /* SIGTERM -> SIGKILL */
#define DRAIN_GRACE_MS 1000       /* after the last rank exits: wait this long for EOF on its pipes */
#define LINE_CAP       (1u << 20) /* a longer line is printed in pieces of this size */
#define READ_CHUNK     65536
#define EXIT_NOEXEC    127        /* the rank's program could not be exec'd */
#define EXIT_SETUP     126        /* the rank could not be set up (namespace, process group, env) */

extern const char *prog_name;

/* ---- options.c */
typedef struct {
	long nranks, devices, port; /* port 0: find a free one */
	double timeout_s;           /* 0: none */
	char *netns_buf;            /* the --netns argument, split in place */
	char **netns;
	int nnetns;
	int keep_going;
	const char *trace; /* --trace OUT.json, or NULL */
	char **argv;       /* prog args... */
} gicerun_opt_t;

extern gicerun_opt_t opt;

/* 0, or the exit status of a usage error (its message printed); --help exits 0 here. */
int parse_args(int argc, char **argv);

/* ---- netns.c */
typedef struct {
	int ok;
	char iface[IF_NAMESIZE];
	char addr[INET_ADDRSTRLEN];
	int port;
	char err[512];
} ns_probe_t;

int free_port(const char *addr, int *port, char *err, size_t errlen);
int enter_netns(const char *name, char *err, size_t errlen);
int probe_netns(const char *name, int want_port, ns_probe_t *out);
int netns_fabric_env(const ns_probe_t *ns_info);
/* In rank r's process, inside its namespace: GICE_FAB_IFACE and the overridden interface
 * variables set to that namespace's interface; 0, or -1 with errno. */
int netns_rank_env(int r, const ns_probe_t *ns_info);

/* ---- output.c */
typedef struct {
	int fd;     /* read end, -1 once closed */
	int out_fd; /* 1 or 2 */
	int rank;
	char *buf; /* the partial line so far */
	size_t len, cap;
} stream_t;

void write_all(int fd, const char *p, size_t n);
int stream_read(stream_t *s);
void stream_close(stream_t *s);
void stream_drop_if_broken(stream_t *s);
void stream_drain(stream_t *s);
void output_free(void);

/* ---- job.c */
typedef struct {
	pid_t pid;
	int reaped;
	int status;
	stream_t out, err;
} rank_t;

extern rank_t *ranks;
extern pid_t holder_pid; /* leader of the ranks' process group */
extern int sig_pipe[2];
extern volatile sig_atomic_t sig_pending[NSIG];
extern const int handled_sigs[];
#define NHANDLED 4

void on_signal(int sig);
void running_ranks(char *buf, size_t len);
void signal_job(int sig);
int start_holder(void);
void stop_holder(void);
void rank_exec(int r, int out_w, int err_w, const char *bootstrap, const ns_probe_t *ns_info,
	       const sigset_t *old_mask, pid_t gicerun_pid);
void ensure_stdio(void);
int check_fd_limit(void);

/* ---- trace.c */
/* With --trace: GICE_TRACE of every rank set to a file in a new private directory; 0 or -1. */
int trace_prepare(void);
/* With --trace, after the ranks: their files merged into OUT.json, the directory removed; 0, or
 * -1 when OUT.json could not be written or holds no rank's trace. */
int trace_merge(void);
/* The private directory and what the ranks left in it removed (a launch that failed early). */
void trace_remove(void);

/* ---- gicerun.c */
uint64_t now_ms(void);

#endif
