/* gice.c: the host and device API over the modules: a device is an HBM arena (hbm), trigger
 * memory (triggermem), SM threads (sm_threads), CT threads (ct_engine) and a fabric endpoint. */
#include "api/gice.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/common/common.h"
#include "emu/common/config.h"
#include "emu/common/faults.h"
#include "emu/ct_engine/ct_engine.h"
#include "emu/hbm/hbm.h"
#include "emu/sm_threads/sm_threads.h"
#include "emu/triggermem/triggermem.h"
#include "fabric/bootstrap.h"
#include "fabric/fab_fault.h"
#include "fabric/fabric.h"

static const gice_param_t api_params[] = {
	{"GICE_TIMEOUT_MS", "10000", "default timeout of every wait (device waits, quiet, stream waits, syncs)",
	 GICE_PARAM_U64, 1, 86400000},
	{"GICE_WAIT_SPIN_US", "20", "microseconds a waiting kernel or host spins before sleeping on the futex",
	 GICE_PARAM_U64, 0, 1000000},
	{"GICE_MAX_DEVICES", "16", "devices one process may open", GICE_PARAM_U64, 1, 1024},
	{"GICE_DEVICES_PER_RANK", "1",
	 "devices each rank of a job opens, for programs that follow it (gice-demo); set by gicerun "
	 "--devices-per-rank", GICE_PARAM_U64, 1, 16},
	{"GICE_PLANE", "auto",
	 "auto or nvlink: devices on one host (same machine and network namespace) map each other's device "
	 "memory (NVLink plane: large puts are copied with memcpy, gice_peer_ptr gives load/store pointers); "
	 "net: every byte goes through libfabric",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_BIND", "2",
	 "where a device's SM and CT threads run: 1 on CPU (k + rank) mod the CPUs this process may use, for "
	 "its k-th device, as a GPU's SMs and CTs share one chip; 0 anywhere; 2 (auto) like 1 when the job has "
	 "more than one rank (it keeps the scheduler from stacking busy ranks on one core), else like 0",
	 GICE_PARAM_U64, 0, 2},
	{"GICE_ON_TIMEOUT", "error",
	 "what the watchdog does when an operation times out, a peer dies or a CT stalls: error (the "
	 "operations fail, waiters get the status), fallback (a stalled CT's operations are issued by a host "
	 "proxy thread instead), abort (print the diagnostic and abort the process)",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_MODE", "device",
	 "device: kernels hand operations to the CTs as they run (GPU-initiated); host: a kernel's operations "
	 "are issued by a host proxy thread after the kernel completes, like a CPU-driven stack",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_STATS", "0", "1: print each rank's packet, retransmission, fault and watchdog counters at gice_finalize",
	 GICE_PARAM_U64, 0, 1},
	{NULL, NULL, NULL, 0, 0, 0},
};

struct gice_device {
	uint32_t gid, index;
	hbm_t *hbm;
	tm_region_t *tm;
	fab_ep_t *ep;
	ct_engine_t *ct;
	smt_dev_t *smt;
	uint8_t *base;
	uint64_t size;
	uint32_t n_cts;
	uint8_t addr[FAB_ADDR_MAX];
	size_t addr_len;
	fab_mr_info_t mr; /* device memory for peers' rendezvous reads */
	int has_mr;
	int host_mode;    /* GICE_MODE=host: kernels' operations wait for the kernel's end */
	int live;         /* (g.lock) its engine and SMs run: others may wire to it and watch it */
};

struct gice_stream {
	gice_device_t *dev;
	smt_stream_t *s;
};

static struct {
	pthread_mutex_t lock;
	int refs;
	uint64_t timeout_ns, spin_ns, max_devices;
	int bind;
	gice_device_t **devs;
	uint32_t opened; /* devices opened so far: the k-th open on every rank is collective round k */
	boot_t *boot;
	uint32_t rank, size;
	struct dev_blob *remote; /* devices of other ranks, learned at each collective open */
	struct peer_map *remote_map; /* parallel to remote */
	uint32_t n_remote;
	int nvlink;      /* GICE_PLANE allows mapping same-host peers */
	char host[96];
	/* watchdog and faults */
	gice_faults_t faults;
	uint64_t t0_ns;
	_Atomic uint64_t kill_at_ns; /* this rank SIGKILLs itself then (fault injection); 0: never */
	int on_timeout, host_mode, stats;
	pthread_t watchdog;
	int watchdog_on;
	_Atomic uint32_t watchdog_stop; /* futex word: gice_finalize wakes the watchdog at once */
	gice_error_cb_t err_cb;
	void *err_arg;
	gice_stats_t closed_stats; /* summed over the devices closed so far (GICE_STATS) */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* What a rank tells the others about a device it opened. */
struct dev_blob {
	uint32_t gid, addr_len, has_mr, pid;
	fab_mr_info_t mr;
	uint8_t addr[FAB_ADDR_MAX];
	char host[96];       /* host identity: same string = same host (NVLink plane) */
	int32_t hbm_fd;      /* in process pid: the memfd of its device memory */
	int32_t tm_fd;       /* and of its trigger memory */
	uint64_t hbm_size;
};

/* A remote device's memory mapped here over the NVLink plane, or NULL. */
struct peer_map {
	uint8_t *base;
	uint64_t size;
	tm_region_t *tm; /* its trigger memory, attached here */
};

/* Same string on two ranks = same machine and network namespace (an emulated host). */
static void host_identity(char *out, size_t len)
{
	char name[64] = "?";
	struct stat st = {0};

	gethostname(name, sizeof(name) - 1);
	stat("/proc/self/ns/net", &st);
	snprintf(out, len, "%s/netns:%llu", name, (unsigned long long)st.st_ino);
}

/* ---------------------------------------------------------------- watchdog */

struct wd_events {
	ct_event_t ev[16];
	uint32_t n;
};

static void wd_collect(const ct_event_t *ev, void *arg)
{
	struct wd_events *w = arg;

	if (w->n < GICE_ARRAY_SIZE(w->ev))
		w->ev[w->n++] = *ev;
}

static void wd_report(const ct_event_t *e)
{
	gice_error_info_t info = {.status = e->status, .device = e->device_gid, .peer = e->peer_gid, .ct = e->ct,
				  .n_ops = e->n_ops, .waited_ns = e->waited_ns, .psn_acked = e->psn_acked,
				  .psn_next = e->psn_next, .retransmits = e->retransmits, .op = e->op_name,
				  .bytes = e->bytes, .msg_id = e->msg_id, .trigger = e->trigger,
				  .threshold = e->threshold, .counter = e->counter, .counter_value = e->counter_value,
				  .fallback = e->fallback, .message = e->text};
	gice_error_cb_t cb;
	void *arg;

	pthread_mutex_lock(&g.lock);
	cb = g.err_cb;
	arg = g.err_arg;
	pthread_mutex_unlock(&g.lock);
	if (cb)
		cb(&info, arg);
	if (g.on_timeout == CT_ON_TIMEOUT_ABORT) {
		fprintf(stderr, "gice: rank %u: GICE_ON_TIMEOUT=abort: %s\n", g.rank, e->text);
		signal(SIGABRT, SIG_DFL); /* libfabric's psm providers trap SIGABRT and exit(1) */
		abort();
	}
}

/* One thread per process: every period, each device's engine checks its CTs and peers (and
 * sends heartbeats); the fault schedule kills this rank when told to. */
static void *watchdog_main(void *arg)
{
	uint64_t period = GICE_MAX(GICE_MIN(g.timeout_ns / 10, 100000000ull), 1000000ull);
	struct wd_events w;

	(void)arg;
	pthread_setname_np(pthread_self(), "gice-watchdog");
	while (!atomic_load(&g.watchdog_stop)) {
		gice_futex_wait(&g.watchdog_stop, 0, period);
		if (atomic_load(&g.watchdog_stop))
			break;
		uint64_t now = gice_now_ns();
		uint64_t kill_at = atomic_load(&g.kill_at_ns);
		if (kill_at && now >= kill_at) {
			fprintf(stderr, "gice: rank %u: fault injection kill_rank=%u: killing this process %llu ms after "
				"gice_init\n", g.rank, g.rank, (unsigned long long)((now - g.t0_ns) / 1000000));
			raise(SIGKILL);
		}
		w.n = 0;
		pthread_mutex_lock(&g.lock);
		for (uint64_t i = 0; g.devs && i < g.max_devices; i++)
			if (g.devs[i] && g.devs[i]->live)
				ct_engine_watch(g.devs[i]->ct, g.on_timeout, wd_collect, &w);
		pthread_mutex_unlock(&g.lock);
		for (uint32_t i = 0; i < w.n; i++)
			wd_report(&w.ev[i]);
	}
	return NULL;
}

int gice_set_error_callback(gice_error_cb_t cb, void *arg)
{
	pthread_mutex_lock(&g.lock);
	g.err_cb = cb;
	g.err_arg = arg;
	pthread_mutex_unlock(&g.lock);
	return GICE_OK;
}

/* GICE_ON_TIMEOUT, GICE_MODE, GICE_STATS, GICE_FAULTS. */
static int read_fault_params(void)
{
	const char *ot = gice_param_str(gice_param_find(api_params, "GICE_ON_TIMEOUT"));
	const char *mode = gice_param_str(gice_param_find(api_params, "GICE_MODE"));
	uint64_t stats;
	int rc;

	if (!strcmp(ot, "error"))
		g.on_timeout = CT_ON_TIMEOUT_ERROR;
	else if (!strcmp(ot, "fallback"))
		g.on_timeout = CT_ON_TIMEOUT_FALLBACK;
	else if (!strcmp(ot, "abort"))
		g.on_timeout = CT_ON_TIMEOUT_ABORT;
	else {
		gice_error("api", "GICE_ON_TIMEOUT=\"%s\" is not error, fallback or abort", ot);
		return GICE_ERR_CONFIG;
	}
	if (strcmp(mode, "device") && strcmp(mode, "host")) {
		gice_error("api", "GICE_MODE=\"%s\" is not device or host", mode);
		return GICE_ERR_CONFIG;
	}
	g.host_mode = !strcmp(mode, "host");
	if ((rc = gice_param_u64(gice_param_find(api_params, "GICE_STATS"), &stats)))
		return rc;
	g.stats = (int)stats;
	return gice_faults_parse(gice_param_str(gice_param_find(fab_params, "GICE_FAULTS")), &g.faults);
}

int gice_init(void)
{
	uint64_t v[4];
	int rc;

	pthread_mutex_lock(&g.lock);
	if (g.refs++) {
		pthread_mutex_unlock(&g.lock);
		return GICE_OK;
	}
	const char *const names[4] = {"GICE_TIMEOUT_MS", "GICE_WAIT_SPIN_US", "GICE_MAX_DEVICES", "GICE_BIND"};
	for (int i = 0; i < 4; i++)
		if ((rc = gice_param_u64(gice_param_find(api_params, names[i]), &v[i]))) {
			g.refs = 0;
			pthread_mutex_unlock(&g.lock);
			return rc;
		}
	g.timeout_ns = v[0] * 1000000ull;
	g.spin_ns = v[1] * 1000ull;
	g.max_devices = v[2];
	const char *plane = gice_param_str(gice_param_find(api_params, "GICE_PLANE"));
	if (strcmp(plane, "auto") && strcmp(plane, "nvlink") && strcmp(plane, "net")) {
		gice_error("api", "GICE_PLANE=\"%s\" is not auto, nvlink or net", plane);
		g.refs = 0;
		pthread_mutex_unlock(&g.lock);
		return GICE_ERR_CONFIG;
	}
	g.nvlink = strcmp(plane, "net") != 0;
	g.bind = (int)v[3];
	if ((rc = read_fault_params())) {
		g.refs = 0;
		pthread_mutex_unlock(&g.lock);
		return rc;
	}
	g.t0_ns = gice_now_ns();
	atomic_store(&g.kill_at_ns, 0);
	g.devs = calloc(g.max_devices, sizeof(*g.devs));
	if (!g.devs) {
		g.refs = 0;
		pthread_mutex_unlock(&g.lock);
		return GICE_ERR_NO_MEMORY;
	}
	/* find the other ranks of the job (one rank without GICE_WORLD_SIZE) */
	if ((rc = boot_init(&g.boot))) {
		free(g.devs);
		g.devs = NULL;
		g.refs = 0;
		pthread_mutex_unlock(&g.lock);
		return rc;
	}
	g.rank = boot_rank(g.boot);
	g.size = boot_size(g.boot);
	if (g.faults.kill_rank == (int32_t)g.rank)
		atomic_store(&g.kill_at_ns, g.t0_ns + GICE_MAX(g.faults.kill_at_ns, 1ull));
	host_identity(g.host, sizeof(g.host));
	g.opened = 0;
	memset(&g.closed_stats, 0, sizeof(g.closed_stats));
	atomic_store(&g.watchdog_stop, 0);
	g.watchdog_on = pthread_create(&g.watchdog, NULL, watchdog_main, NULL) == 0;
	if (!g.watchdog_on)
		gice_warn("api", "no watchdog thread: timeouts, dead peers and stalls go unnoticed");
	if (gice_faults_any_net(&g.faults) || g.faults.n_stall || g.faults.hang_rank >= 0 || g.faults.kill_rank >= 0) {
		char spec[256];
		gice_faults_format(&g.faults, spec, sizeof(spec));
		gice_warn("fault", "rank %u: injecting faults: %s", g.rank, spec);
	}
	pthread_mutex_unlock(&g.lock);
	return GICE_OK;
}

uint32_t gice_rank(void) { return g.rank; }

uint32_t gice_devices_per_rank(void)
{
	uint64_t v = 1;

	gice_param_u64(gice_param_find(api_params, "GICE_DEVICES_PER_RANK"), &v);
	return (uint32_t)v;
}
uint32_t gice_world_size(void) { return g.size ? g.size : 1; }
uint32_t gice_device_id_of(uint32_t rank, uint32_t index) { return index * gice_world_size() + rank; }

int gice_barrier(void)
{
	return g.boot ? boot_barrier(g.boot) : GICE_ERR_INVALID;
}

int gice_allgather(const void *mine, size_t len, void *all)
{
	return g.boot ? boot_allgather(g.boot, mine, len, all) : GICE_ERR_INVALID;
}

static void stats_add(gice_stats_t *sum, const gice_stats_t *st)
{
	uint64_t *a = (uint64_t *)sum;
	const uint64_t *b = (const uint64_t *)st;

	_Static_assert(sizeof(gice_stats_t) % sizeof(uint64_t) == 0, "all counters");
	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		a[i] += b[i];
}

/* GICE_STATS=1: this rank's counters, summed over its devices (g.lock held). */
static void print_stats(void)
{
	gice_stats_t t = g.closed_stats, st;

	for (uint64_t i = 0; i < g.max_devices; i++)
		if (g.devs[i] && g.devs[i]->live && gice_device_stats(g.devs[i], &st) == GICE_OK)
			stats_add(&t, &st);
	fprintf(stderr,
		"gice stats: rank %u: packets tx %llu rx %llu, bytes tx %llu rx %llu, ops done %llu failed %llu, "
		"acks %llu, nacks %llu, rx dup %llu bad %llu csum_bad %llu unknown %llu; retransmits %llu "
		"(rto %llu, fast %llu); faults dropped %llu dup %llu reordered %llu delayed %llu corrupted %llu; "
		"timed out %llu, peers dead %llu, ct stalls %llu, fallback ops %llu\n",
		g.rank, (unsigned long long)t.tx_pkts, (unsigned long long)t.rx_pkts, (unsigned long long)t.tx_bytes,
		(unsigned long long)t.rx_bytes, (unsigned long long)t.ops_done, (unsigned long long)t.ops_failed,
		(unsigned long long)t.acks_sent, (unsigned long long)t.nacks_sent, (unsigned long long)t.rx_dup,
		(unsigned long long)t.rx_bad, (unsigned long long)t.rx_csum_bad, (unsigned long long)t.rx_unknown_peer,
		(unsigned long long)t.retransmits, (unsigned long long)t.rto_expired,
		(unsigned long long)t.fast_retransmits, (unsigned long long)t.fault_drops,
		(unsigned long long)t.fault_dups, (unsigned long long)t.fault_reorders,
		(unsigned long long)t.fault_delays, (unsigned long long)t.fault_corrupts,
		(unsigned long long)t.ops_timed_out, (unsigned long long)t.peers_dead, (unsigned long long)t.ct_stalls,
		(unsigned long long)t.fallback_ops);
}

int gice_finalize(void)
{
	pthread_mutex_lock(&g.lock);
	if (g.refs == 0) {
		pthread_mutex_unlock(&g.lock);
		return GICE_ERR_INVALID;
	}
	if (--g.refs == 0) {
		if (g.watchdog_on) {
			atomic_store(&g.watchdog_stop, 1);
			gice_futex_wake(&g.watchdog_stop, 1);
			pthread_mutex_unlock(&g.lock); /* it takes the lock */
			pthread_join(g.watchdog, NULL);
			pthread_mutex_lock(&g.lock);
			g.watchdog_on = 0;
		}
		if (g.stats)
			print_stats();
		for (uint64_t i = 0; i < g.max_devices; i++)
			if (g.devs[i])
				gice_warn("api", "gice_finalize: device %u is still open", g.devs[i]->gid);
		free(g.devs);
		g.devs = NULL;
		boot_fini(g.boot);
		g.boot = NULL;
		for (uint32_t i = 0; i < g.n_remote; i++) {
			if (g.remote_map[i].base)
				munmap(g.remote_map[i].base, g.remote_map[i].size);
			tm_region_destroy(g.remote_map[i].tm);
		}
		free(g.remote);
		free(g.remote_map);
		g.remote = NULL;
		g.remote_map = NULL;
		g.n_remote = 0;
	}
	pthread_mutex_unlock(&g.lock);
	return GICE_OK;
}

static uint64_t timeout_ns_of(uint64_t ms) { return ms ? ms * 1000000ull : g.timeout_ns; }

/* ---------------------------------------------------------------- devices */

static int param_u32(const gice_param_t *table, const char *name, uint32_t given, uint32_t *out)
{
	uint64_t v;
	int rc;

	if (given) {
		*out = given;
		return GICE_OK;
	}
	if ((rc = gice_param_u64(gice_param_find(table, name), &v)))
		return rc;
	*out = (uint32_t)v;
	return GICE_OK;
}

/* Restrict the calling thread to the index-th CPU it may use (round robin); *saved gets the old
 * mask. Returns 1 if the mask changed. One CPU allowed: nothing to do. */
static int bind_to_device_cpu(uint32_t index, cpu_set_t *saved)
{
	cpu_set_t one;
	int n, k = 0;

	if (pthread_getaffinity_np(pthread_self(), sizeof(*saved), saved) || (n = CPU_COUNT(saved)) < 2)
		return 0;
	int want = (int)((index + gice_rank()) % (uint32_t)n);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, saved) && k++ == want) {
			CPU_SET(c, &one);
			break;
		}
	return pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
}

/* NVLink plane: map a same-host device's memory through its process's memfd. */
static struct peer_map map_peer(const struct dev_blob *b)
{
	struct peer_map m = {0};
	char path[64];

	if (!g.nvlink || strcmp(b->host, g.host) || b->hbm_fd < 0)
		return m;
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", b->pid, b->hbm_fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		gice_warn("api", "NVLink plane: cannot open device %u's memory (%s): %m; using the network", b->gid,
			  path);
		return m;
	}
	void *p = mmap(NULL, b->hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		gice_warn("api", "NVLink plane: cannot map %llu bytes of device %u's memory: %m; using the network",
			  (unsigned long long)b->hbm_size, b->gid);
		return m;
	}
	m.base = p;
	m.size = b->hbm_size;
	/* its trigger memory too: a kernel here may write the peer's triggers and signals */
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", b->pid, b->tm_fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || tm_region_attach(fd, &m.tm))
		gice_warn("api", "NVLink plane: cannot attach device %u's trigger memory (%s)", b->gid, path);
	if (fd >= 0)
		close(fd); /* attach keeps its own descriptor */
	return m;
}

static int add_peer(ct_engine_t *ct, const struct dev_blob *b, const struct peer_map *m)
{
	ct_peer_info_t pi = {.addr = b->addr, .addr_len = b->addr_len, .mr = b->has_mr ? &b->mr : NULL,
			     .hbm = m->base, .hbm_size = m->size};
	return ct_peer_add(ct, b->gid, &pi);
}

/* Collective round of a device open in a multi-rank job: tell every rank about the new device
 * and learn theirs; the new device meets every remote device known so far, this process's other
 * devices meet this round's remote ones. */
static int wire_remote(gice_device_t *d)
{
	struct dev_blob mine = {.gid = d->gid, .addr_len = (uint32_t)d->addr_len, .has_mr = (uint32_t)d->has_mr,
				.mr = d->mr, .pid = (uint32_t)getpid(), .hbm_fd = hbm_fd(d->hbm), .hbm_size = d->size,
				.tm_fd = tm_region_fd(d->tm)};
	struct dev_blob *all, *grown;
	struct peer_map *grown_map;
	int rc;

	memcpy(mine.addr, d->addr, d->addr_len);
	snprintf(mine.host, sizeof(mine.host), "%s", g.host);
	all = calloc(g.size, sizeof(*all));
	if (!all)
		return GICE_ERR_NO_MEMORY;
	if ((rc = boot_allgather(g.boot, &mine, sizeof(mine), all))) {
		gice_error("api", "device %u: exchanging addresses with the other %u ranks failed", d->gid, g.size - 1);
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	grown = realloc(g.remote, (g.n_remote + g.size) * sizeof(*grown));
	if (grown)
		g.remote = grown;
	grown_map = realloc(g.remote_map, (g.n_remote + g.size) * sizeof(*grown_map));
	if (grown_map)
		g.remote_map = grown_map;
	if (!grown || !grown_map) {
		pthread_mutex_unlock(&g.lock);
		rc = GICE_ERR_NO_MEMORY;
		goto out;
	}
	uint32_t first_new = g.n_remote;
	for (uint32_t r = 0; r < g.size; r++)
		if (r != g.rank) {
			g.remote[g.n_remote] = all[r];
			g.remote_map[g.n_remote] = map_peer(&all[r]);
			g.n_remote++;
		}
	for (uint32_t i = 0; i < g.n_remote && !rc; i++) {
		rc = add_peer(d->ct, &g.remote[i], &g.remote_map[i]);
		for (uint64_t j = 0; j < g.max_devices && !rc && i >= first_new; j++)
			if (g.devs[j] && g.devs[j] != d && g.devs[j]->live)
				rc = add_peer(g.devs[j]->ct, &g.remote[i], &g.remote_map[i]);
	}
	pthread_mutex_unlock(&g.lock);
out:
	free(all);
	return rc;
}

int gice_device_open(const gice_device_attr_t *attr, gice_device_t **out)
{
	gice_device_attr_t a = {0};
	gice_device_t *d;
	tm_layout_t lay;
	uint64_t v;
	char name[32];
	int rc;

	if (attr)
		a = *attr;
	if (!g.refs) {
		gice_error("api", "gice_device_open before gice_init");
		return GICE_ERR_INVALID;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return GICE_ERR_NO_MEMORY;
	if ((rc = param_u32(ct_params, "GICE_CTS", a.n_cts, &d->n_cts)) ||
	    (rc = param_u32(smt_params, "GICE_SMS", a.n_sms, &a.n_sms)) ||
	    (rc = param_u32(tm_params, "GICE_COUNTERS", 0, &lay.n_counters)) ||
	    (rc = param_u32(tm_params, "GICE_CT_QUEUE_DEPTH", 0, &lay.queue_depth)))
		goto err_free;
	if (!a.hbm_bytes) {
		if ((rc = gice_param_u64(gice_param_find(hbm_params, "GICE_HBM_BYTES"), &v)))
			goto err_free;
		a.hbm_bytes = v;
	}
	if (g.host_mode)
		d->n_cts = 1; /* one host proxy thread replaces the CTs */
	lay.n_cts = d->n_cts;

	pthread_mutex_lock(&g.lock);
	for (d->index = 0; d->index < g.max_devices && g.devs[d->index]; d->index++)
		;
	if (d->index == g.max_devices) {
		pthread_mutex_unlock(&g.lock);
		gice_error("api", "all %llu devices (GICE_MAX_DEVICES) are open", (unsigned long long)g.max_devices);
		rc = GICE_ERR_OVERFLOW;
		goto err_free;
	}
	d->gid = g.opened++ * g.size + g.rank; /* collective round k on rank r */
	g.devs[d->index] = d; /* reserve the slot; peers are wired below */
	pthread_mutex_unlock(&g.lock);

	snprintf(name, sizeof(name), "gice-hbm-%u", d->gid);
	if ((rc = hbm_create(a.hbm_bytes, name, &d->hbm)))
		goto err_slot;
	d->base = hbm_base(d->hbm);
	d->size = hbm_size(d->hbm);
	snprintf(name, sizeof(name), "gice-tm-%u", d->gid);
	if ((rc = tm_region_create(&lay, name, &d->tm)))
		goto err_hbm;
	uint64_t mtu;
	if ((rc = gice_param_u64(gice_param_find(ct_params, "GICE_MTU"), &mtu)))
		goto err_tm;
	fab_attr_t fa = {.provider = a.provider, .max_packet = mtu};
	fab_ep_t *raw;
	if ((rc = fab_open(&fa, &raw)))
		goto err_tm;
	/* every endpoint goes through the fault injector (a pass-through without GICE_FAULTS) */
	if ((rc = fab_fault_wrap(raw, &g.faults, d->gid, &d->ep))) {
		fab_close(raw);
		goto err_tm;
	}
	d->addr_len = sizeof(d->addr);
	if ((rc = fab_getname(d->ep, d->addr, &d->addr_len)))
		goto err_ep;
	ct_engine_attr_t ca = {.gid = d->gid, .index = d->index, .n_cts = d->n_cts, .hbm = d->hbm, .tm = d->tm,
			       .ep = d->ep, .timeout_ns = g.timeout_ns, .faults = &g.faults, .t0_ns = g.t0_ns,
			       .host_proxy = g.host_mode};
	if (g.faults.hang_rank == (int32_t)g.rank)
		ca.hang_at_ns = g.t0_ns + GICE_MAX(g.faults.hang_at_ns, 1ull);
	d->host_mode = g.host_mode;
	/* threads inherit their creator's CPU mask: create the device's threads on its CPU */
	cpu_set_t saved;
	int bound = (g.bind == 1 || (g.bind == 2 && g.size > 1)) && bind_to_device_cpu(d->index, &saved);
	rc = ct_engine_create(&ca, &d->ct);
	if (!rc && (rc = smt_create(a.n_sms, d->index, d->tm, &d->smt)))
		ct_engine_destroy(d->ct);
	if (bound)
		pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	if (rc)
		goto err_ep;
	d->has_mr = ct_engine_mr(d->ct, &d->mr) == GICE_OK;

	/* wire peers both ways, including the device itself (loopback through its endpoint) */
	pthread_mutex_lock(&g.lock);
	d->live = 1;
	for (uint64_t i = 0; i < g.max_devices && !rc; i++) {
		gice_device_t *p = g.devs[i];
		if (!p || !p->live)
			continue;
		/* devices of one process share its address space: the NVLink plane is free */
		ct_peer_info_t to_p = {.addr = p->addr, .addr_len = p->addr_len, .mr = p->has_mr ? &p->mr : NULL,
				       .hbm = g.nvlink ? p->base : NULL, .hbm_size = p->size};
		ct_peer_info_t to_d = {.addr = d->addr, .addr_len = d->addr_len, .mr = d->has_mr ? &d->mr : NULL,
				       .hbm = g.nvlink ? d->base : NULL, .hbm_size = d->size};
		rc = ct_peer_add(d->ct, p->gid, &to_p);
		if (!rc && p != d)
			rc = ct_peer_add(p->ct, d->gid, &to_d);
	}
	pthread_mutex_unlock(&g.lock);
	if (!rc && g.size > 1)
		rc = wire_remote(d);
	if (rc)
		goto err_smt;
	gice_info("api", "device %u open: %u SMs, %u CTs, %llu bytes HBM, provider %s", d->gid, a.n_sms, d->n_cts,
		  (unsigned long long)d->size, d->ep->provider);
	*out = d;
	return GICE_OK;

err_smt:
	pthread_mutex_lock(&g.lock);
	d->live = 0; /* out of the watchdog's sight */
	pthread_mutex_unlock(&g.lock);
	smt_destroy(d->smt);
	d->smt = NULL;
	ct_engine_destroy(d->ct);
err_ep:
	fab_close(d->ep);
err_tm:
	tm_region_destroy(d->tm);
err_hbm:
	hbm_destroy(d->hbm);
err_slot:
	pthread_mutex_lock(&g.lock);
	g.devs[d->index] = NULL;
	pthread_mutex_unlock(&g.lock);
err_free:
	free(d);
	return rc;
}

int gice_device_close(gice_device_t *d)
{
	gice_stats_t st;

	if (!d)
		return GICE_ERR_INVALID;
	smt_destroy(d->smt);
	pthread_mutex_lock(&g.lock); /* out of the watchdog's sight first */
	g.devs[d->index] = NULL;
	d->live = 0;
	/* the other devices of this process stop sending to it before its endpoint closes */
	for (uint64_t i = 0; i < g.max_devices; i++)
		if (g.devs[i] && g.devs[i]->live)
			ct_peer_closed(g.devs[i]->ct, d->gid);
	pthread_mutex_unlock(&g.lock);
	if (gice_device_stats(d, &st) == GICE_OK) {
		pthread_mutex_lock(&g.lock);
		stats_add(&g.closed_stats, &st);
		pthread_mutex_unlock(&g.lock);
	}
	ct_engine_destroy(d->ct);
	d->smt = NULL;
	fab_close(d->ep);
	tm_region_destroy(d->tm);
	hbm_destroy(d->hbm);
	free(d);
	return GICE_OK;
}

uint32_t gice_device_id(const gice_device_t *d) { return d->gid; }
const char *gice_device_provider(const gice_device_t *d) { return d->ep->provider; }

/* ---------------------------------------------------------------- memory */

static int dev_off(const gice_device_t *d, const void *ptr, uint64_t *off)
{
	uintptr_t p = (uintptr_t)ptr, b = (uintptr_t)d->base;

	if (p < b || p - b >= d->size)
		return GICE_ERR_UNREGISTERED;
	*off = p - b;
	return GICE_OK;
}

int gice_mem_alloc(gice_device_t *d, size_t size, void **ptr)
{
	uint64_t off;
	int rc = hbm_alloc(d->hbm, size, 0, &off);

	if (rc == GICE_OK)
		*ptr = d->base + off;
	return rc;
}

int gice_mem_free(gice_device_t *d, void *ptr)
{
	uint64_t off;

	if (dev_off(d, ptr, &off)) {
		gice_error("api", "gice_mem_free(%p): not in device %u memory", ptr, d->gid);
		return GICE_ERR_INVALID;
	}
	return hbm_free(d->hbm, off);
}

int gice_mem_register(gice_device_t *d, void *ptr, size_t len, uint64_t *key)
{
	uint64_t off;

	if (dev_off(d, ptr, &off)) {
		gice_error("api", "gice_mem_register(%p, %zu): not in device %u memory", ptr, len, d->gid);
		return GICE_ERR_INVALID;
	}
	return hbm_register(d->hbm, off, len, key);
}

int gice_mem_deregister(gice_device_t *d, uint64_t key) { return hbm_deregister(d->hbm, key); }

int gice_mem_offset(gice_device_t *d, const void *ptr, uint64_t *offset)
{
	uint64_t off;

	if (dev_off(d, ptr, &off))
		return GICE_ERR_INVALID;
	*offset = off;
	return GICE_OK;
}

int gice_peer_trigger_add(gice_kctx_t *k, uint32_t peer_id, gice_trigger_t t, uint64_t value)
{
	tm_region_t *tm = NULL;

	pthread_mutex_lock(&g.lock);
	for (uint64_t i = 0; i < g.max_devices && !tm; i++)
		if (g.devs[i] && g.devs[i]->gid == peer_id && g.nvlink)
			tm = g.devs[i]->tm;
	for (uint32_t i = 0; i < g.n_remote && !tm; i++)
		if (g.remote[i].gid == peer_id)
			tm = g.remote_map[i].tm;
	pthread_mutex_unlock(&g.lock);
	(void)k;
	if (!tm) {
		gice_error("api", "gice_peer_trigger_add: device %u is not on this device's NVLink plane", peer_id);
		return GICE_ERR_UNSUPPORTED;
	}
	if (t < tm_region_layout(tm)->n_cts || t >= tm_region_layout(tm)->n_counters) {
		gice_error("api", "gice_peer_trigger_add: %u is not a counter of device %u", t, peer_id);
		return GICE_ERR_INVALID;
	}
	tm_counter_add(tm, t, value);
	return GICE_OK;
}

void *gice_peer_ptr(gice_device_t *d, uint32_t peer_id, uint64_t offset, size_t len)
{
	uint8_t *base = NULL;
	uint64_t size = 0;

	pthread_mutex_lock(&g.lock);
	for (uint64_t i = 0; i < g.max_devices && !base; i++)
		if (g.devs[i] && g.devs[i]->gid == peer_id && g.nvlink) {
			base = g.devs[i]->base;
			size = g.devs[i]->size;
		}
	for (uint32_t i = 0; i < g.n_remote && !base; i++)
		if (g.remote[i].gid == peer_id) {
			base = g.remote_map[i].base;
			size = g.remote_map[i].size;
		}
	pthread_mutex_unlock(&g.lock);
	(void)d;
	if (!base || offset > size || len > size - offset)
		return NULL;
	return base + offset;
}

/* ---------------------------------------------------------------- connections, counters */

int gice_conn_open(gice_device_t *d, uint32_t peer_id, const gice_conn_attr_t *attr, gice_conn_t *conn)
{
	ct_conn_attr_t ca = {.peer_gid = peer_id, .qos = attr ? attr->qos : 0, .mtu = attr ? attr->mtu : 0};

	return ct_conn_open(d->ct, &ca, conn);
}

int gice_conn_close(gice_device_t *d, gice_conn_t conn) { return ct_conn_close(d->ct, conn); }

static int ctr_ok(const gice_device_t *d, gice_counter_t c)
{
	if (c >= d->n_cts && c < tm_region_layout(d->tm)->n_counters)
		return 1;
	gice_error("api", "counter %u is not a counter of device %u (valid %u..%u)", c, d->gid, d->n_cts,
		   tm_region_layout(d->tm)->n_counters - 1);
	return 0;
}

int gice_counter_alloc(gice_device_t *d, gice_counter_t *c)
{
	gice_counter_t id;
	int rc = tm_counter_alloc(d->tm, &id);

	if (rc)
		return rc;
	tm_counter_reset(d->tm, id); /* a recycled counter starts from zero */
	*c = id;
	return GICE_OK;
}
int gice_counter_free(gice_device_t *d, gice_counter_t c) { return tm_counter_free(d->tm, c); }

uint64_t gice_counter_read(gice_device_t *d, gice_counter_t c)
{
	return ctr_ok(d, c) ? tm_counter_read(d->tm, c) : 0;
}

int gice_counter_get(gice_device_t *d, gice_counter_t c, gice_counter_state_t *st)
{
	tm_counter_state_t s;

	if (!ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_get(d->tm, c, &s);
	st->value = s.value;
	st->fail = s.fail;
	st->status = s.status;
	st->ts_ns = s.ts_ns;
	return GICE_OK;
}

int gice_counter_set(gice_device_t *d, gice_counter_t c, uint64_t v)
{
	if (!ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_set(d->tm, c, v);
	return GICE_OK;
}

int gice_counter_add(gice_device_t *d, gice_counter_t c, uint64_t v)
{
	if (!ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_add(d->tm, c, v);
	return GICE_OK;
}

int gice_counter_reset(gice_device_t *d, gice_counter_t c)
{
	if (!ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_reset(d->tm, c);
	return GICE_OK;
}

static const char *const cmp_names[] = {"==", "!=", ">", ">=", "<", "<="};

static int wait_counter(gice_device_t *d, gice_counter_t c, gice_cmp_t cmp, uint64_t target, uint64_t timeout_ns,
			uint64_t *found, const char *who)
{
	uint64_t seen = 0;
	int rc;

	if (!ctr_ok(d, c) || (unsigned)cmp > GICE_CMP_LE)
		return GICE_ERR_INVALID;
	rc = tm_counter_wait(d->tm, c, (tm_cmp_t)cmp, target, timeout_ns, g.spin_ns, &seen);
	if (rc == GICE_ERR_TIMED_OUT)
		gice_error("api", "%s on device %u counter %u timed out after %llu ms: expected value %s %llu, found %llu",
			   who, d->gid, c, (unsigned long long)(timeout_ns / 1000000), cmp_names[cmp],
			   (unsigned long long)target, (unsigned long long)seen);
	if (found)
		*found = seen;
	return rc;
}

int gice_counter_wait(gice_device_t *d, gice_counter_t c, gice_cmp_t cmp, uint64_t target, uint64_t timeout_ms,
		      uint64_t *found)
{
	return wait_counter(d, c, cmp, target, timeout_ns_of(timeout_ms), found, "gice_counter_wait");
}

/* ---------------------------------------------------------------- operations */

static int op_to_req(gice_device_t *d, const gice_op_t *op, ct_req_t *r)
{
	uint64_t off = 0;

	memset(r, 0, sizeof(*r));
	r->counter = op->completion;
	r->conn = (uint16_t)op->conn;
	r->rkey = op->rkey;
	r->roff = op->roff;
	r->value = op->value;
	r->compare = op->compare;
	r->len = op->bytes;
	r->sig_id = op->signal;
	if (op->completion != GICE_NO_COUNTER && !ctr_ok(d, op->completion))
		return GICE_ERR_INVALID;
	switch (op->type) {
	case GICE_OP_PUT:
	case GICE_OP_GET:
		r->op = op->type == GICE_OP_PUT ? CT_OP_PUT : CT_OP_GET;
		if (op->bytes && dev_off(d, op->local, &off)) {
			gice_error("api", "%s of %zu bytes: local buffer %p is not device %u memory",
				   op->type == GICE_OP_PUT ? "put" : "get", op->bytes, op->local, d->gid);
			return GICE_ERR_UNREGISTERED;
		}
		if (op->type == GICE_OP_PUT && op->signal != GICE_NO_COUNTER) {
			r->flags |= CT_RF_SIGNAL;
			if (op->signal_flags & GICE_SIGNAL_ADD)
				r->flags |= CT_RF_SIG_ADD;
			if (op->signal_flags & GICE_SIGNAL_STRONG)
				r->flags |= CT_RF_STRONG;
		}
		break;
	case GICE_OP_ATOMIC_ADD:
	case GICE_OP_ATOMIC_CSWAP:
		r->op = op->type == GICE_OP_ATOMIC_ADD ? CT_OP_AMO_FADD : CT_OP_AMO_CSWAP;
		if (!op->local)
			r->flags |= CT_RF_NO_RESULT;
		else if (dev_off(d, op->local, &off)) {
			gice_error("api", "atomic result %p is not device %u memory", op->local, d->gid);
			return GICE_ERR_UNREGISTERED;
		}
		break;
	case GICE_OP_COUNTER_ADD:
	case GICE_OP_COUNTER_SET:
		r->op = op->type == GICE_OP_COUNTER_ADD ? CT_OP_CTR_ADD : CT_OP_CTR_SET;
		if (!ctr_ok(d, op->signal))
			return GICE_ERR_INVALID;
		break;
	default:
		gice_error("api", "unknown operation type %d", (int)op->type);
		return GICE_ERR_INVALID;
	}
	r->src_off = off;
	return GICE_OK;
}

/* Push a request into the connection's CT queue (the SM → CT path: memory and a doorbell). */
static int push_req(gice_device_t *d, ct_req_t *r, const char *who)
{
	uint32_t ct = (r->op == CT_OP_CTR_ADD || r->op == CT_OP_CTR_SET || r->op == CT_OP_NOP)
			      ? 0 : ct_for_conn(d->ct, r->conn);
	uint64_t ticket, deadline = 0;
	unsigned spins = 0;
	int rc;

	if (!r->t_issue) /* host mode: the kernel's call stamped it */
		r->t_issue = gice_now_ns();
	while ((rc = tm_queue_push(d->tm, ct, r, sizeof(*r), &ticket)) == GICE_ERR_AGAIN) {
		/* queue full: the CT is behind; wait for room, not forever */
		if (!deadline)
			deadline = gice_now_ns() + g.timeout_ns;
		if (gice_now_ns() > deadline) {
			gice_error("api", "%s on device %u: CT %u request queue full for %llu ms", who, d->gid, ct,
				   (unsigned long long)(g.timeout_ns / 1000000));
			return GICE_ERR_TIMED_OUT;
		}
		if ((++spins & 15) == 0)
			sched_yield();
		else
			gice_cpu_relax();
	}
	return rc;
}

int gice_post(gice_device_t *d, const gice_op_t *op)
{
	ct_req_t r;
	int rc = op_to_req(d, op, &r);

	return rc ? rc : push_req(d, &r, "gice_post");
}

int gice_arm(gice_device_t *d, gice_trigger_t trig, uint64_t threshold, uint64_t period, const gice_op_t *op,
	     gice_desc_t *desc)
{
	ct_req_t r;
	int rc;

	if (!ctr_ok(d, trig))
		return GICE_ERR_INVALID;
	if ((rc = op_to_req(d, op, &r)))
		return rc;
	return ct_arm(d->ct, trig, threshold, period, &r, desc);
}

int gice_disarm(gice_device_t *d, gice_desc_t desc) { return ct_disarm(d->ct, desc); }

static int quiet(gice_device_t *d, uint64_t timeout_ns, const char *who)
{
	uint64_t upto[TM_MAX_CTS];
	int rc;

	for (uint32_t c = 0; c < d->n_cts; c++)
		upto[c] = tm_queue_prod(d->tm, c);
	for (uint32_t c = 0; c < d->n_cts; c++) {
		uint64_t seen;
		/* counter c counts the retired tickets of CT c's queue */
		rc = tm_counter_wait(d->tm, c, TM_CMP_GE, upto[c], timeout_ns, g.spin_ns, &seen);
		if (rc == GICE_ERR_TIMED_OUT) {
			gice_error("api", "%s on device %u: CT %u has completed %llu of %llu operations after %llu ms",
				   who, d->gid, c, (unsigned long long)seen, (unsigned long long)upto[c],
				   (unsigned long long)(timeout_ns / 1000000));
			return rc;
		}
		if (rc) {
			gice_error("api", "%s on device %u: CT %u failed operations: %s (the watchdog said why)", who,
				   d->gid, c, gice_status_name(rc));
			return rc;
		}
	}
	return GICE_OK;
}

int gice_device_quiet(gice_device_t *d, uint64_t timeout_ms) { return quiet(d, timeout_ns_of(timeout_ms), "gice_device_quiet"); }

/* ---------------------------------------------------------------- device side */

void gice_trigger_store(gice_kctx_t *k, gice_trigger_t t, uint64_t v)
{
	if (ctr_ok(k->dev, t))
		tm_counter_set(k->dev->tm, t, v);
}

void gice_trigger_add(gice_kctx_t *k, gice_trigger_t t, uint64_t v)
{
	if (ctr_ok(k->dev, t))
		tm_counter_add(k->dev->tm, t, v);
}

static int launch_defer_k(gice_kctx_t *k, ct_req_t *r);
static int launch_flush_k(gice_kctx_t *k);

/* A kernel's request: to its CT now (device mode), or to the host proxy at the kernel's end. */
static int kernel_req(gice_kctx_t *k, ct_req_t *r, const char *who)
{
	if (k->dev->host_mode && k->launch)
		return launch_defer_k(k, r);
	return push_req(k->dev, r, who);
}

int gice_issue(gice_kctx_t *k, const gice_op_t *op)
{
	ct_req_t r;
	int rc = op_to_req(k->dev, op, &r);

	return rc ? rc : kernel_req(k, &r, "device op");
}

int gice_put(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, const void *src, size_t bytes,
	     gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = (void *)src, .bytes = bytes, .rkey = rkey,
			.roff = roff, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_put_signal(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, const void *src,
		    size_t bytes, gice_counter_t sig, uint64_t value, int signal_flags, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = (void *)src, .bytes = bytes, .rkey = rkey,
			.roff = roff, .value = value, .signal = sig, .signal_flags = signal_flags,
			.completion = completion};
	return gice_issue(k, &op);
}

int gice_get(gice_kctx_t *k, gice_conn_t conn, void *dst, uint64_t rkey, uint64_t roff, size_t bytes,
	     gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_GET, .conn = conn, .local = dst, .bytes = bytes, .rkey = rkey, .roff = roff,
			.signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_atomic_fetch_add(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, uint64_t value,
			  uint64_t *result, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_ATOMIC_ADD, .conn = conn, .local = result, .rkey = rkey, .roff = roff,
			.value = value, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_atomic_cswap(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, uint64_t compare,
		      uint64_t value, uint64_t *result, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_ATOMIC_CSWAP, .conn = conn, .local = result, .rkey = rkey, .roff = roff,
			.value = value, .compare = compare, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_wait_until(gice_kctx_t *k, gice_counter_t c, gice_cmp_t cmp, uint64_t value, uint64_t timeout_us,
		    uint64_t *found)
{
	int rc = launch_flush_k(k);

	if (rc)
		return rc;
	return wait_counter(k->dev, c, cmp, value, timeout_us ? timeout_us * 1000ull : g.timeout_ns, found,
			    "gice_wait_until");
}

int gice_fence(gice_kctx_t *k, gice_conn_t conn)
{
	ct_req_t r = {.op = CT_OP_FENCE, .conn = (uint16_t)conn, .counter = TM_NONE};

	return kernel_req(k, &r, "gice_fence");
}

int gice_quiet(gice_kctx_t *k)
{
	int rc = launch_flush_k(k);

	return rc ? rc : quiet(k->dev, g.timeout_ns, "gice_quiet");
}

/* ---------------------------------------------------------------- streams */

typedef struct {
	gice_kernel_t fn;
	gice_device_t *dev;
	/* GICE_MODE=host: the operations its blocks issued, handed to the host proxy at its end */
	pthread_mutex_t mu;
	ct_req_t *ops;
	uint32_t n_ops, cap_ops;
	size_t size;
	uint8_t args[];
} launch_t;

static void run_block(void *arg, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	launch_t *l = arg;
	gice_kctx_t k = {.block = block, .nblocks = nblocks, .sm = sm, .dev = l->dev, .launch = l};

	l->fn(&k, l->size ? l->args : NULL);
}

/* Host mode: hand the kernel's operations so far to the host proxy (CT 0's queue, in issue
 * order). Called at the kernel's end, and before a wait inside it (a wait ends the batch, as a
 * CPU-driven stack splits kernels at communication). */
static int launch_flush(launch_t *l)
{
	int rc = GICE_OK;

	pthread_mutex_lock(&l->mu);
	for (uint32_t i = 0; i < l->n_ops && !rc; i++)
		rc = push_req(l->dev, &l->ops[i], "host proxy");
	l->n_ops = 0;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static void launch_done(void *arg)
{
	launch_t *l = arg;

	if (l->dev->host_mode) {
		launch_flush(l);
		free(l->ops);
	}
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* Host mode: record a kernel's operation for the host proxy. t_issue stays the kernel's call. */
static int launch_defer(launch_t *l, ct_req_t *r)
{
	pthread_mutex_lock(&l->mu);
	if (l->n_ops == l->cap_ops) { /* a kernel issuing many: grow rarely (doubling) */
		uint32_t cap = l->cap_ops ? 2 * l->cap_ops : 64;
		ct_req_t *ops = realloc(l->ops, cap * sizeof(*ops));
		if (!ops) {
			pthread_mutex_unlock(&l->mu);
			return GICE_ERR_NO_MEMORY;
		}
		l->ops = ops;
		l->cap_ops = cap;
	}
	r->t_issue = gice_now_ns();
	l->ops[l->n_ops++] = *r;
	pthread_mutex_unlock(&l->mu);
	return GICE_OK;
}

static int launch_defer_k(gice_kctx_t *k, ct_req_t *r) { return launch_defer(k->launch, r); }

static int launch_flush_k(gice_kctx_t *k)
{
	return k->dev->host_mode && k->launch ? launch_flush(k->launch) : GICE_OK;
}

int gice_stream_create(gice_device_t *d, gice_stream_t **out)
{
	gice_stream_t *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return GICE_ERR_NO_MEMORY;
	s->dev = d;
	if ((rc = smt_stream_create(d->smt, &s->s))) {
		free(s);
		return rc;
	}
	*out = s;
	return GICE_OK;
}

int gice_stream_destroy(gice_stream_t *s)
{
	int rc = smt_stream_destroy(s->s, g.timeout_ns);

	if (rc == GICE_OK)
		free(s);
	return rc;
}

int gice_launch(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args, size_t args_size)
{
	launch_t *l;
	int rc;

	if (!kernel || !nblocks)
		return GICE_ERR_INVALID;
	l = malloc(sizeof(*l) + args_size);
	if (!l)
		return GICE_ERR_NO_MEMORY;
	l->fn = kernel;
	l->dev = s->dev;
	l->ops = NULL;
	l->n_ops = l->cap_ops = 0;
	if (s->dev->host_mode) { /* room for the kernel's operations, at launch rather than per op */
		l->ops = malloc(64 * sizeof(*l->ops));
		if (!l->ops) {
			free(l);
			return GICE_ERR_NO_MEMORY;
		}
		l->cap_ops = 64;
	}
	pthread_mutex_init(&l->mu, NULL);
	l->size = args_size;
	if (args_size)
		memcpy(l->args, args, args_size);
	if ((rc = smt_launch(s->s, run_block, l, nblocks, launch_done))) {
		pthread_mutex_destroy(&l->mu);
		free(l->ops);
		free(l);
	}
	return rc;
}

int gice_stream_wait_value(gice_stream_t *s, gice_counter_t c, gice_cmp_t cmp, uint64_t value, uint64_t timeout_ms)
{
	if (!ctr_ok(s->dev, c) || (unsigned)cmp > GICE_CMP_LE)
		return GICE_ERR_INVALID;
	return smt_wait_value(s->s, c, (tm_cmp_t)cmp, value, timeout_ns_of(timeout_ms));
}

int gice_stream_write_value(gice_stream_t *s, gice_counter_t c, uint64_t value, int add)
{
	if (!ctr_ok(s->dev, c))
		return GICE_ERR_INVALID;
	return smt_write_value(s->s, c, value, add);
}

int gice_stream_sync(gice_stream_t *s, uint64_t timeout_ms) { return smt_stream_sync(s->s, timeout_ns_of(timeout_ms)); }

/* ---------------------------------------------------------------- introspection */

int gice_device_stats(gice_device_t *d, gice_stats_t *st)
{
	ct_stats_t c;

	ct_engine_stats(d->ct, &c);
	st->tx_pkts = c.tx_pkts;
	st->rx_pkts = c.rx_pkts;
	st->tx_bytes = c.tx_bytes;
	st->rx_bytes = c.rx_bytes;
	st->ops_done = c.msgs_done;
	st->ops_failed = c.msgs_failed;
	st->nacks_sent = c.nacks_sent;
	st->acks_sent = c.acks_sent;
	st->rx_bad = c.rx_bad;
	st->rx_dup = c.rx_dup;
	st->rx_unknown_peer = c.rx_dropped_unknown_peer;
	st->fired = c.fired;
	st->tx_again = c.tx_again;
	st->retransmits = c.retransmits;
	st->rto_expired = c.rto_expired;
	st->fast_retransmits = c.fast_retransmits;
	st->rx_csum_bad = c.rx_csum_bad;
	st->ops_timed_out = c.ops_timed_out;
	st->peers_dead = c.peers_dead;
	st->ct_stalls = c.ct_stalls;
	st->fallback_ops = c.fallback_ops;
	fab_fault_stats_t f = {0};
	fab_fault_stats(d->ep, &f);
	st->fault_drops = f.dropped;
	st->fault_dups = f.duplicated;
	st->fault_reorders = f.reordered;
	st->fault_delays = f.delayed;
	st->fault_corrupts = f.corrupted;
	return GICE_OK;
}

int gice_faults_set(gice_device_t *d, const char *spec)
{
	uint64_t now = gice_now_ns();
	gice_faults_t f;
	int rc;

	if (!d)
		return GICE_ERR_INVALID;
	if ((rc = gice_faults_parse(spec, &f)))
		return rc;
	for (uint32_t i = 0; i < f.n_stall; i++)
		if (f.stall[i].ct >= d->n_cts) {
			gice_error("fault", "gice_faults_set(\"%s\"): device %u has CTs 0..%u", spec, d->gid, d->n_cts - 1);
			return GICE_ERR_INVALID;
		}
	if ((rc = fab_fault_set(d->ep, &f)))
		return rc;
	if (gice_faults_any_net(&f))
		ct_engine_set_reliable(d->ct, 1, f.corrupt > 0 ? 1 : -1);
	/* times count from now */
	for (uint32_t i = 0; i < f.n_stall; i++)
		ct_engine_fault_stall(d->ct, f.stall[i].ct, now + f.stall[i].at_ns, f.stall[i].dur_ns);
	if (f.hang_rank == (int32_t)g.rank) {
		pthread_mutex_lock(&g.lock);
		for (uint64_t i = 0; i < g.max_devices; i++)
			if (g.devs[i] && g.devs[i]->live)
				ct_engine_fault_hang(g.devs[i]->ct, now + f.hang_at_ns);
		pthread_mutex_unlock(&g.lock);
	}
	if (f.kill_rank == (int32_t)g.rank)
		atomic_store(&g.kill_at_ns, now + GICE_MAX(f.kill_at_ns, 1ull));
	if (f.n_stall || f.hang_rank >= 0 || f.kill_rank >= 0 || gice_faults_any_net(&f)) {
		char text[256];
		gice_faults_format(&f, text, sizeof(text));
		gice_warn("fault", "device %u: injecting faults from now: %s", d->gid, text);
	}
	return GICE_OK;
}

uint32_t gice_device_trace(gice_device_t *d, gice_trace_t *out, uint32_t max)
{
	ct_trace_t tr[256];
	uint32_t n = ct_trace_read(d->ct, tr, GICE_MIN(max, 256u));

	for (uint32_t i = 0; i < n; i++) {
		out[i].op = tr[i].op;
		out[i].peer = tr[i].peer_gid;
		out[i].bytes = tr[i].bytes;
		out[i].t_issue = tr[i].t_issue;
		out[i].t_pickup = tr[i].t_pickup;
		out[i].t_first_tx = tr[i].t_first_tx;
		out[i].t_complete = tr[i].t_complete;
		out[i].status = tr[i].status;
	}
	return n;
}

void gice_config_list(gice_param_cb cb, void *arg)
{
	const gice_param_t *tables[] = {gice_common_params, api_params, smt_params, ct_params,
					tm_params, hbm_params, fab_params, boot_params};

	for (size_t t = 0; t < GICE_ARRAY_SIZE(tables); t++)
		for (const gice_param_t *p = tables[t]; p->name; p++) {
			int set;
			const char *v = gice_param_raw(p, &set);
			cb(p->name, v, p->defval, set, p->help, arg);
		}
}
