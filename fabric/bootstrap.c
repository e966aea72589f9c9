/* bootstrap.c: TCP rendezvous run by rank 0 (star: every rank talks to rank 0 only); under a
 * launcher with PMIx, boot_pmix.c instead. */
#include "fabric/boot_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "emu/common/common.h"
#include "emu/common/tsan.h"

#define BOOT_MAGIC 0x424f4f54u /* "BOOT" */
#define BOOT_VERSION 1

const gice_param_t boot_params[] = {
	{"GICE_RANK", "0", "rank of this process in the job (set by gicerun)", GICE_PARAM_U64, 0, 65535},
	{"GICE_WORLD_SIZE", "1", "ranks in the job (set by gicerun); 1: no bootstrap", GICE_PARAM_U64, 1, 65536},
	{"GICE_BOOTSTRAP", "", "host:port where rank 0 runs the rendezvous (set by gicerun); empty: a job of one rank", GICE_PARAM_STR, 0, 0},
	{"GICE_BOOTSTRAP_TIMEOUT_MS", "30000", "how long ranks wait for each other at the rendezvous and in exchanges",
	 GICE_PARAM_U64, 100, 86400000},
	{NULL, NULL, NULL, 0, 0, 0},
};

typedef struct {
	uint32_t magic, version, rank, size;
	uint64_t secret; /* rank 0's answer; zero in a hello */
} boot_hello_t;

uint64_t boot_deadline(const boot_t *b) { return gice_now_ns() + b->timeout_ns; }

int boot_wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		uint64_t now = gice_now_ns();
		if (now >= deadline)
			return GICE_ERR_TIMED_OUT;
		struct pollfd p = {.fd = fd, .events = ev};
		int ms = (int)GICE_MIN((deadline - now) / 1000000 + 1, (uint64_t)1000);
		int rc = poll(&p, 1, ms);
		if (rc > 0)
			return GICE_OK;
		if (rc < 0 && errno != EINTR)
			return GICE_ERR_IO;
	}
}

/* Move exactly len bytes, or fail: GICE_ERR_PEER_DEAD when the other side closed. */
int boot_xfer(int fd, void *buf, size_t len, int sending, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len) {
		int rc = boot_wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
		if (rc)
			return rc;
		ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n == 0)
			return GICE_ERR_PEER_DEAD;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == EPIPE || errno == ECONNRESET ? GICE_ERR_PEER_DEAD : GICE_ERR_IO;
		}
		p += n;
		len -= (size_t)n;
	}
	return GICE_OK;
}

static int resolve(const char *spec, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host) || !colon[1]) {
		gice_error("boot", "GICE_BOOTSTRAP=\"%s\" is not host:port", spec);
		return GICE_ERR_CONFIG;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	int rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		gice_error("boot", "GICE_BOOTSTRAP=\"%s\": %s", spec, gai_strerror(rc));
		return GICE_ERR_CONFIG;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return GICE_OK;
}

void boot_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int root_accept(boot_t *b, const struct sockaddr_storage *ss, socklen_t sl, const char *spec)
{
	int one = 1, ls = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint64_t start = gice_now_ns(), deadline = boot_deadline(b);
	uint32_t arrived = 1;
	int rc;

	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (const struct sockaddr *)ss, sl) || listen(ls, 128)) {
		gice_error("boot", "rank 0 cannot listen on %s: %m", spec);
		if (ls >= 0)
			close(ls);
		return GICE_ERR_IO;
	}
	while (arrived < b->size) {
		if ((rc = boot_wait_fd(ls, POLLIN, deadline))) {
			char missing[512];
			size_t off = 0;
			for (uint32_t r = 1; r < b->size && off < sizeof(missing) - 16; r++)
				if (b->fds[r] < 0)
					off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u", off ? "," : "", r);
			gice_error("boot", "rank(s) %s of %u never arrived at %s after %llu ms", missing, b->size, spec,
				   (unsigned long long)((gice_now_ns() - start) / 1000000));
			close(ls);
			return rc;
		}
		int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		boot_hello_t h;
		if (boot_xfer(fd, &h, sizeof(h), 0, deadline) || h.magic != BOOT_MAGIC || h.version != BOOT_VERSION ||
		    h.size != b->size || h.rank == 0 || h.rank >= b->size || b->fds[h.rank] >= 0) {
			gice_warn("boot", "rank 0: refused a bootstrap connection (rank %u of %u, magic 0x%x)", h.rank,
				  h.size, h.magic);
			close(fd);
			continue;
		}
		boot_nodelay(fd);
		b->fds[h.rank] = fd;
		arrived++;
	}
	close(ls);
	boot_hello_t w = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .size = b->size, .secret = b->secret};
	for (uint32_t r = 1; r < b->size; r++) {
		w.rank = r;
		if ((rc = boot_xfer(b->fds[r], &w, sizeof(w), 1, deadline))) {
			gice_error("boot", "rank 0: lost rank %u while welcoming it: %s", r, gice_status_name(rc));
			return rc;
		}
	}
	return GICE_OK;
}

static int leaf_connect(boot_t *b, const struct sockaddr_storage *ss, socklen_t sl, const char *spec)
{
	uint64_t start = gice_now_ns(), deadline = boot_deadline(b);
	int fd = -1, err = 0, rc;

	/* rank 0 may not be listening yet: retry */
	while (gice_now_ns() < deadline) {
		fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (const struct sockaddr *)ss, sl) == 0)
			break;
		err = errno;
		if (fd >= 0)
			close(fd);
		fd = -1;
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	if (fd < 0) {
		gice_error("boot", "rank %u could not reach rank 0 at %s after %llu ms: %s", b->rank, spec,
			   (unsigned long long)((gice_now_ns() - start) / 1000000), strerror(err));
		return GICE_ERR_TIMED_OUT;
	}
	boot_nodelay(fd);
	b->fds[0] = fd;
	boot_hello_t h = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .rank = b->rank, .size = b->size};
	if ((rc = boot_xfer(fd, &h, sizeof(h), 1, deadline)) || (rc = boot_xfer(fd, &h, sizeof(h), 0, deadline))) {
		gice_error("boot", "rank %u: rank 0 at %s did not welcome us within %llu ms: %s", b->rank, spec,
			   (unsigned long long)(b->timeout_ns / 1000000), gice_status_name(rc));
		return rc;
	}
	if (h.magic != BOOT_MAGIC || h.rank != b->rank || h.size != b->size) {
		gice_error("boot", "rank %u: bad welcome from %s (rank %u, size %u)", b->rank, spec, h.rank, h.size);
		return GICE_ERR_IO;
	}
	b->secret = h.secret;
	return GICE_OK;
}

/* Task count a foreign launcher gave this process, or 0: srun (SLURM_STEP_NUM_TASKS; inside a
 * step only, so that a batch script or salloc shell, which also has SLURM_NTASKS, is one rank),
 * PMI-1/PMI-2 (srun --mpi=pmi2, MPICH's hydra: PMI_SIZE), Open MPI (OMPI_COMM_WORLD_SIZE). */
static unsigned long foreign_tasks(const char **var)
{
	static const char *const vars[] = {"SLURM_STEP_NUM_TASKS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};

	for (size_t i = 0; i < GICE_ARRAY_SIZE(vars); i++) {
		const char *v = getenv(vars[i]);
		char *end;
		unsigned long n;
		if (!v || !*v)
			continue;
		errno = 0;
		n = strtoul(v, &end, 10);
		if (!errno && !*end && n > 1) {
			*var = vars[i];
			return n;
		}
	}
	return 0;
}

int boot_init(boot_t **out)
{
	uint64_t rank, size, tmo;
	const char *spec, *var = NULL;
	const char *ws = getenv("GICE_WORLD_SIZE");
	int explicit = ws && *ws; /* gicerun's variables win over any outer launcher's */
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned long tasks;
	boot_t *b;
	int rc;

	if ((rc = gice_param_u64(&boot_params[3], &tmo)))
		return rc;
#ifdef GICE_HAVE_PMIX
	if (!explicit && getenv("PMIX_RANK"))
		return boot_pmix_open(tmo * 1000000ull, out);
#endif
	/* one of N tasks of a launcher we cannot talk to: N one-rank jobs would each "succeed" */
	if (!explicit && (tasks = foreign_tasks(&var))) {
		gice_error("boot", "this process is one of %lu tasks (%s=%lu) but has no way to find the others "
				   "(%s); %s",
			   tasks, var, tasks,
			   getenv("PMIX_RANK") ? "PMIX_RANK is set but gice was built without PMIx (Debian libpmix-dev)"
					       : "no PMIx: PMIX_RANK is not set",
			   BOOT_HOW_TO_LAUNCH);
		return GICE_ERR_CONFIG;
	}
	if ((rc = gice_param_u64(&boot_params[0], &rank)) || (rc = gice_param_u64(&boot_params[1], &size)))
		return rc;
	spec = gice_param_str(&boot_params[2]);
	if (rank >= size) {
		gice_error("boot", "GICE_RANK=%llu is not below GICE_WORLD_SIZE=%llu", (unsigned long long)rank,
			   (unsigned long long)size);
		return GICE_ERR_CONFIG;
	}
	if (size > 1 && !*spec) {
		gice_error("boot", "GICE_WORLD_SIZE=%llu but GICE_BOOTSTRAP is not set (start the job with gicerun)",
			   (unsigned long long)size);
		return GICE_ERR_CONFIG;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return GICE_ERR_NO_MEMORY;
	b->fds = malloc(sizeof(int) * size);
	if (!b->fds) {
		free(b);
		return GICE_ERR_NO_MEMORY;
	}
	for (uint64_t r = 0; r < size; r++)
		b->fds[r] = -1;
	b->rank = (uint32_t)rank;
	b->size = (uint32_t)size;
	b->timeout_ns = tmo * 1000000ull;
	b->secret = gice_random_u64();
	if (size > 1) {
		if ((rc = resolve(spec, &ss, &sl)) ||
		    (rc = rank == 0 ? root_accept(b, &ss, sl, spec) : leaf_connect(b, &ss, sl, spec)) ||
		    (rc = boot_clock_sync(b))) {
			boot_fini(b);
			return rc;
		}
	}
	*out = b;
	return GICE_OK;
}

void boot_fini(boot_t *b)
{
	if (!b)
		return;
#ifdef GICE_HAVE_PMIX
	boot_pmix_fini(b);
#endif
	for (uint32_t r = 0; b->fds && r < b->size; r++)
		if (b->fds[r] >= 0)
			close(b->fds[r]);
	free(b->fds);
	free(b);
}

uint32_t boot_rank(const boot_t *b) { return b->rank; }
uint32_t boot_size(const boot_t *b) { return b->size; }
uint64_t boot_secret(const boot_t *b) { return b->secret; }

int boot_allgather(boot_t *b, const void *mine, size_t len, void *all)
{
	uint64_t deadline = boot_deadline(b);
	uint8_t *out = all;
	int rc;

#ifdef GICE_HAVE_PMIX
	if (b->pmix)
		return boot_pmix_allgather(b, mine, len, all);
#endif
	memcpy(out + (size_t)b->rank * len, mine, len);
	if (b->size == 1)
		return GICE_OK;
	GICE_TSAN_OUT(); /* an exchange orders this process with the others (tsan.h) */
	if (b->rank != 0) {
		if ((rc = boot_xfer(b->fds[0], (void *)mine, len, 1, deadline)) ||
		    (rc = boot_xfer(b->fds[0], all, len * b->size, 0, deadline))) {
			gice_error("boot", "rank %u: exchange with rank 0 failed: %s", b->rank, gice_status_name(rc));
			return rc;
		}
		GICE_TSAN_IN();
		return GICE_OK;
	}
	for (uint32_t r = 1; r < b->size; r++)
		if ((rc = boot_xfer(b->fds[r], out + (size_t)r * len, len, 0, deadline))) {
			gice_error("boot", "rank 0: rank %u %s during an exchange", r,
				   rc == GICE_ERR_TIMED_OUT ? "did not answer" : "is gone");
			return rc;
		}
	for (uint32_t r = 1; r < b->size; r++)
		if ((rc = boot_xfer(b->fds[r], all, len * b->size, 1, deadline))) {
			gice_error("boot", "rank 0: rank %u is gone during an exchange", r);
			return rc;
		}
	GICE_TSAN_IN();
	return GICE_OK;
}

int boot_barrier(boot_t *b)
{
	uint8_t one = 1, *all = malloc(b->size);
	int rc;

	if (!all)
		return GICE_ERR_NO_MEMORY;
	rc = boot_allgather(b, &one, 1, all);
	free(all);
	return rc;
}
