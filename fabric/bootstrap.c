/* bootstrap.c: TCP rendezvous run by rank 0 (star: every rank talks to rank 0 only). */
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

#ifdef GICE_HAVE_PMIX
#include <pmix.h>
#endif

#define BOOT_MAGIC 0x424f4f54u /* "BOOT" */
#define BOOT_VERSION 1

#define BOOT_HOW_TO_LAUNCH                                                                             \
	"start a job of several ranks with srun --mpi=pmix, with Open MPI's mpirun, or with gicerun -n N"

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

#ifdef GICE_HAVE_PMIX
/* Under mpirun or srun --mpi=pmix: PMIX_RANK is set and the launcher runs a PMIx server. */
static int pmix_init(boot_t *b)
{
	pmix_status_t rc = PMIx_Init(&b->me, NULL, 0);
	pmix_proc_t wild;
	pmix_value_t *val = NULL;

	if (rc != PMIX_SUCCESS) {
		gice_error("boot", "PMIX_RANK=%s is set but PMIx_Init failed: %s; %s", getenv("PMIX_RANK"),
			   PMIx_Error_string(rc), BOOT_HOW_TO_LAUNCH);
		return GICE_ERR_CONFIG;
	}
	b->pmix = 1;
	PMIX_PROC_CONSTRUCT(&wild);
	PMIX_LOAD_PROCID(&wild, b->me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || !val) {
		gice_error("boot", "PMIx_Get(PMIX_JOB_SIZE) failed: %s", PMIx_Error_string(rc));
		return GICE_ERR_IO;
	}
	b->rank = b->me.rank;
	b->size = val->data.uint32;
	PMIX_VALUE_RELEASE(val);
	return GICE_OK;
}

/* One non-blocking PMIx call waited for with our own deadline, so that a server which ignores
 * PMIX_TIMEOUT cannot hang us. Shared by the waiter and PMIx's callback: whoever drops the last
 * reference frees it (a waiter that gave up leaves it to a late callback). */
struct pmix_call {
	_Atomic int refs;
	_Atomic int done;
	pmix_status_t status;
};

static pmix_call_t *pmix_call_new(void)
{
	pmix_call_t *c = calloc(1, sizeof(*c));

	if (c)
		atomic_init(&c->refs, 2); /* the waiter's and the callback's */
	return c;
}

static void pmix_call_put(pmix_call_t *c)
{
	if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		free(c);
}

/* The waiter is done with c: a call whose callback is still due is kept until PMIx_Finalize
 * (boot_fini), after which no callback comes, so that nothing is left allocated at exit. */
static void pmix_call_drop(boot_t *b, pmix_call_t *c)
{
	if (!atomic_load_explicit(&c->done, memory_order_acquire) && b->n_abandoned < PMIX_ABANDONED_MAX)
		b->abandoned[b->n_abandoned++] = c;
	else
		pmix_call_put(c);
}

static void pmix_call_done(pmix_call_t *c, pmix_status_t status)
{
	c->status = status;
	/* release: the waiter that sees done also sees status */
	atomic_store_explicit(&c->done, 1, memory_order_release);
	pmix_call_put(c);
}

static void pmix_fence_cb(pmix_status_t status, void *cbdata) { pmix_call_done(cbdata, status); }

static void pmix_get_cb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
	(void)kv; /* PMIx releases it after we return; a probe needs only the status */
	pmix_call_done(cbdata, status);
}

/* Wait for every call of c[0..n) (NULL entries skipped) to be done, or until deadline; short
 * sleeps: set-up path only. The caller reads done/status, then drops its references. */
static void pmix_calls_wait(pmix_call_t **c, uint32_t n, uint64_t deadline)
{
	for (uint32_t i = 0; i < n; i++) {
		while (c[i] && !atomic_load_explicit(&c[i]->done, memory_order_acquire) && gice_now_ns() < deadline) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

/* PMIX_TIMEOUT is whole seconds: round up, at least 1. */
static int pmix_timeout_s(uint64_t ns) { return (int)GICE_MAX((ns + 999999999ull) / 1000000000ull, 1ull); }

#define PMIX_PROBE_S 1    /* PMIX_TIMEOUT of a probe for a rank's key (whole seconds) */
#define PMIX_PROBE_MS 500 /* how long we wait for the probes: a key that is there comes in ms */

/* After a failed exchange: which ranks did not put key? Ask for every rank's key at once, each
 * with a short timeout, and list the ranks whose key did not come into missing (as "1,3").
 * Returns how many there are (0: every key is there, or PMIx cannot tell). */
static uint32_t pmix_missing(boot_t *b, const char *key, char *missing, size_t len)
{
	pmix_call_t **c = calloc(b->size, sizeof(*c));
	pmix_info_t info;
	int tmo = PMIX_PROBE_S;
	uint32_t n = 0;
	size_t off = 0;

	missing[0] = '\0';
	if (!c)
		return 0;
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &tmo, PMIX_INT);
	for (uint32_t r = 0; r < b->size; r++) {
		pmix_proc_t p;
		if (r == b->rank || !(c[r] = pmix_call_new()))
			continue;
		PMIX_LOAD_PROCID(&p, b->me.nspace, r);
		pmix_status_t rc = PMIx_Get_nb(&p, key, &info, 1, pmix_get_cb, c[r]);
		if (rc != PMIX_SUCCESS) { /* no callback will come */
			pmix_call_done(c[r], rc);
		}
	}
	PMIX_INFO_DESTRUCT(&info);
	pmix_calls_wait(c, b->size, gice_now_ns() + PMIX_PROBE_MS * 1000000ull);
	for (uint32_t r = 0; r < b->size; r++) {
		if (!c[r])
			continue;
		if (!atomic_load_explicit(&c[r]->done, memory_order_acquire) || c[r]->status != PMIX_SUCCESS) {
			n++;
			if (off + 16 < len)
				off += (size_t)snprintf(missing + off, len - off, "%s%u", off ? "," : "", r);
			else if (off + 4 < len && !strstr(missing, ",..."))
				off += (size_t)snprintf(missing + off, len - off, ",...");
		}
		pmix_call_drop(b, c[r]);
	}
	free(c);
	return n;
}

/* Put+commit our part under key, then a fence collecting everyone's, bounded by the bootstrap
 * timeout. On failure, name the ranks whose part is missing. */
static int pmix_exchange(boot_t *b, const char *key, const void *mine, size_t len)
{
	uint64_t start = gice_now_ns(), waited_ms;
	pmix_call_t *c = NULL;
	pmix_value_t v;
	pmix_info_t info[2];
	bool collect = true;
	int tmo = pmix_timeout_s(b->timeout_ns);
	pmix_status_t st;
	char missing[256];

	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)mine;
	v.data.bo.size = len;
	st = PMIx_Put(PMIX_GLOBAL, key, &v);
	if (st == PMIX_SUCCESS)
		st = PMIx_Commit();
	if (st != PMIX_SUCCESS) {
		gice_error("boot", "rank %u: PMIx_Put/Commit of %s failed: %s", b->rank, key, PMIx_Error_string(st));
		return GICE_ERR_IO;
	}
	if (!(c = pmix_call_new()))
		return GICE_ERR_NO_MEMORY;
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
	st = PMIx_Fence_nb(NULL, 0, info, 2, pmix_fence_cb, c);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	if (st != PMIX_SUCCESS)
		pmix_call_done(c, st); /* no callback will come */
	/* a little past our own deadline: a server honouring PMIX_TIMEOUT answers first */
	pmix_calls_wait(&c, 1, start + b->timeout_ns + 100000000ull);
	st = atomic_load_explicit(&c->done, memory_order_acquire) ? c->status : PMIX_ERR_TIMEOUT;
	pmix_call_drop(b, c);
	if (st == PMIX_SUCCESS)
		return GICE_OK;

	waited_ms = (gice_now_ns() - start) / 1000000;
	if (st == PMIX_ERR_LOST_CONNECTION || st == PMIX_ERR_UNREACH) {
		gice_error("boot", "rank %u: lost the PMIx server during exchange %s: %s", b->rank, key,
			   PMIx_Error_string(st));
		return GICE_ERR_IO;
	}
	uint32_t n = pmix_missing(b, key, missing, sizeof(missing));
	if (st == PMIX_ERR_TIMEOUT) {
		if (n)
			gice_error("boot", "rank %u: rank(s) %s of %u never arrived at PMIx exchange %s after %llu ms "
					   "(GICE_BOOTSTRAP_TIMEOUT_MS=%llu)",
				   b->rank, missing, b->size, key, (unsigned long long)waited_ms,
				   (unsigned long long)(b->timeout_ns / 1000000));
		else
			gice_error("boot", "rank %u: PMIx exchange %s timed out after %llu ms (GICE_BOOTSTRAP_TIMEOUT_MS=%llu); "
					   "every rank's part is there, the PMIx server did not complete the fence",
				   b->rank, key, (unsigned long long)waited_ms, (unsigned long long)(b->timeout_ns / 1000000));
		return GICE_ERR_TIMED_OUT;
	}
	/* PMIX_ERR_PARTIAL_SUCCESS, PMIX_ERR_PROC_TERM_WO_SYNC and the like: a rank is gone */
	if (n)
		gice_error("boot", "rank %u: rank(s) %s of %u died during PMIx exchange %s (%s, after %llu ms)", b->rank,
			   missing, b->size, key, PMIx_Error_string(st), (unsigned long long)waited_ms);
	else
		gice_error("boot", "rank %u: PMIx exchange %s failed after %llu ms: %s (PMIx does not say which rank)",
			   b->rank, key, (unsigned long long)waited_ms, PMIx_Error_string(st));
	return GICE_ERR_PEER_DEAD;
}

static int pmix_allgather(boot_t *b, const void *mine, size_t len, void *all)
{
	char key[PMIX_MAX_KEYLEN];
	pmix_info_t info;
	int tmo = pmix_timeout_s(b->timeout_ns), rc;

	snprintf(key, sizeof(key), "gice.ag.%u", b->round++);
	if ((rc = pmix_exchange(b, key, mine, len)))
		return rc;
	/* the fence collected every part: these gets are local; the timeout is a safety net */
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &tmo, PMIX_INT);
	for (uint32_t r = 0; r < b->size && !rc; r++) {
		pmix_value_t *val = NULL;
		pmix_proc_t p;
		PMIX_LOAD_PROCID(&p, b->me.nspace, r);
		pmix_status_t st = PMIx_Get(&p, key, &info, 1, &val);
		if (st != PMIX_SUCCESS || !val || val->type != PMIX_BYTE_OBJECT || val->data.bo.size != len) {
			gice_error("boot", "rank %u: PMIx_Get of %s from rank %u failed: %s", b->rank, key, r,
				   st != PMIX_SUCCESS ? PMIx_Error_string(st) : "not a byte object of the right size");
			rc = st == PMIX_ERR_TIMEOUT ? GICE_ERR_TIMED_OUT : GICE_ERR_IO;
		} else {
			memcpy((uint8_t *)all + (size_t)r * len, val->data.bo.bytes, len);
		}
		if (val)
			PMIX_VALUE_RELEASE(val);
	}
	PMIX_INFO_DESTRUCT(&info);
	return rc;
}
#endif

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
	if (!explicit && getenv("PMIX_RANK")) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return GICE_ERR_NO_MEMORY;
		b->timeout_ns = tmo * 1000000ull;
		if ((rc = pmix_init(b)) || !(b->fds = malloc(sizeof(int) * b->size))) {
			boot_fini(b);
			return rc ? rc : GICE_ERR_NO_MEMORY;
		}
		for (uint32_t r = 0; r < b->size; r++)
			b->fds[r] = -1;
		/* the job secret is rank 0's random number */
		uint64_t mine = gice_random_u64(), *all = malloc(sizeof(uint64_t) * b->size);
		if (!all || (rc = pmix_allgather(b, &mine, sizeof(mine), all))) {
			free(all);
			boot_fini(b);
			return rc ? rc : GICE_ERR_NO_MEMORY;
		}
		b->secret = all[0];
		free(all);
		boot_clock_pmix(b);
		gice_info("boot", "rank %u of %u (PMIx namespace %s)", b->rank, b->size, b->me.nspace);
		*out = b;
		return GICE_OK;
	}
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
	if (b->pmix)
		PMIx_Finalize(NULL, 0);
	/* no callback comes any more: a done call holds our reference only, the others both */
	for (uint32_t i = 0; i < b->n_abandoned; i++)
		if (atomic_load_explicit(&b->abandoned[i]->done, memory_order_acquire))
			pmix_call_put(b->abandoned[i]);
		else
			free(b->abandoned[i]);
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
		return pmix_allgather(b, mine, len, all);
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
