/* gice.c: the library and the job — configuration, gice_init / gice_finalize, rank and size,
 * host-side collectives over the bootstrap, statistics and traces. The rest of the API: devices
 * (api_device.c), counters and operations (api_ops.c), streams and kernels (api_stream.c), the
 * watchdog and faults (api_watchdog.c). */
#include "api/api_internal.h"
#include "api/api_sym.h"
#include "api/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fabric/fab_fault.h"

const gice_param_t api_params[] = {
	{"GICE_TIMEOUT_MS", "10000", "default timeout of every wait (device waits, quiet, stream waits, syncs): how long a wait goes without "
	 "progress before it fails; a peer silent this long is dead or hung",
	 GICE_PARAM_U64, 1, 86400000},
	{"GICE_WAIT_SPIN_US", "20", "microseconds a waiting kernel or host spins before sleeping on the futex",
	 GICE_PARAM_U64, 0, 1000000},
	{"GICE_MAX_DEVICES", "16", "devices one process may open", GICE_PARAM_U64, 1, 1024},
	{"GICE_WAIT_PROGRESS", "1",
	 "1: a kernel that waits on a counter or has just queued a request, and a stream that has just written a "
	 "counter, run their device's CT work themselves whenever no CT thread holds it (no thread hand-off; "
	 "host threads never do); 0: only the CT threads do",
	 GICE_PARAM_U64, 0, 1},
	{"GICE_DEVICES_PER_RANK", "1",
	 "devices each rank of a job opens, for programs that follow it (gice-demo); set by gicerun "
	 "--devices-per-rank", GICE_PARAM_U64, 1, 16},
	{"GICE_PLANE", "auto",
	 "auto or nvlink: devices on one host (same machine and network namespace) map each other's device "
	 "memory (NVLink plane: large puts are copied with memcpy, gice_peer_ptr gives load/store pointers); "
	 "net: every byte goes through libfabric, also from same-host ranks that allow the plane (a pair uses "
	 "it only when both do)",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_BIND", "0",
	 "where a device's SM and CT threads run: 0 anywhere (the scheduler moves a CT that wakes to an idle "
	 "core: with compute on every core, a 1 MiB put is acknowledged 10x sooner than bound); 1 on CPU "
	 "(k + rank) mod the CPUs this process may use, for its k-th device; 2 like 1 when the job has more "
	 "than one rank, else like 0",
	 GICE_PARAM_U64, 0, 2},
	{"GICE_ON_TIMEOUT", "error",
	 "what the watchdog does when an operation times out, a peer dies or a CT stalls: error (the "
	 "operations fail, waiters get the status), fallback (a stalled CT's operations are issued by a host "
	 "proxy thread instead), abort (print the diagnostic and abort the process)",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_ON_PEER_DEAD", "abort",
	 "when the watchdog finds a peer dead or hung: abort (every device of this process is aborted: "
	 "every wait on it returns that status, as an NCCL communicator abort) or tolerate (only the operations "
	 "to that peer fail)",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_MODE", "device",
	 "device: kernels hand operations to the CTs as they run (GPU-initiated); host: a kernel's operations "
	 "are issued by a host proxy thread after the kernel completes, like a CPU-driven stack",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_STATS", "0",
	 "1: print at gice_finalize, per rank on stderr, its counters (packets, retransmissions, faults, watchdog), "
	 "per-stage latency percentiles of its devices' recent operations and each CT's busy and CPU shares; json: the same "
	 "as one JSON object per rank and line; 0: nothing",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_TRACE", "",
	 "path: at gice_finalize write a Chrome/Perfetto trace (Trace Event JSON) of each device's recent network "
	 "operations (issue, CT pickup, first packet, completion); a job of several ranks writes one file per rank, "
	 "PATH with .json replaced by .R.json (scripts/gice-trace-merge merges them); empty: none",
	 GICE_PARAM_STR, 0, 0},
	{NULL, NULL, NULL, 0, 0, 0},
};

struct api_state api_g = {.lock = PTHREAD_MUTEX_INITIALIZER, .err_lock = PTHREAD_MUTEX_INITIALIZER};

/* Same string on two ranks = same machine and network namespace (an emulated host). */
static void host_identity(char *out, size_t len)
{
	char name[64] = "?";
	struct stat st = {0};

	gethostname(name, sizeof(name) - 1);
	stat("/proc/self/ns/net", &st);
	snprintf(out, len, "%s/netns:%llu", name, (unsigned long long)st.st_ino);
}

/* Same string on two ranks = a pid of one names a live process of the other: the machine's boot
 * and the pid namespace. */
static void pid_identity(char *out, size_t len)
{
	char boot[40] = "?";
	struct stat st = {0};
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			snprintf(boot, sizeof(boot), "?");
		boot[strcspn(boot, "\n")] = 0;
		fclose(f);
	}
	stat("/proc/self/ns/pid", &st);
	snprintf(out, len, "%s/pidns:%llu", boot, (unsigned long long)st.st_ino);
}

/* Where the job's ranks are, in one exchange of every rank's identities: api_g.machine_ranks,
 * the ranks on this machine (sharing its CPUs, whatever their network namespace: boot and pid
 * namespace match ours), and api_g.spans_hosts, whether a rank is on another host (its host
 * identity differs: another machine or network namespace). A failed exchange leaves 1 and 0. */
static void job_layout(void)
{
	struct ids {
		char pidns[sizeof(api_g.pidns)];
		char host[sizeof(api_g.host)];
	} mine, *all;
	uint32_t n = 0;

	api_g.machine_ranks = 1;
	api_g.spans_hosts = 0;
	if (api_g.size <= 1)
		return;
	memcpy(mine.pidns, api_g.pidns, sizeof(mine.pidns));
	memcpy(mine.host, api_g.host, sizeof(mine.host));
	all = calloc(api_g.size, sizeof(*all));
	if (all && boot_allgather(api_g.boot, &mine, sizeof(mine), all) == GICE_OK)
		for (uint32_t r = 0; r < api_g.size; r++) {
			n += !strncmp(all[r].pidns, mine.pidns, sizeof(mine.pidns));
			api_g.spans_hosts |= strncmp(all[r].host, mine.host, sizeof(mine.host)) != 0;
		}
	free(all);
	api_g.machine_ranks = n ? n : 1;
}

/* GICE_ON_TIMEOUT, GICE_MODE, GICE_STATS, GICE_FAULTS, GICE_FAULT_SCRIPT. */
static int read_fault_params(void)
{
	const char *ot = gice_param_str(gice_param_find(api_params, "GICE_ON_TIMEOUT"));
	const char *mode = gice_param_str(gice_param_find(api_params, "GICE_MODE"));
	const char *dead = gice_param_str(gice_param_find(api_params, "GICE_ON_PEER_DEAD"));
	const char *stats = gice_param_str(gice_param_find(api_params, "GICE_STATS"));

	if (!strcmp(ot, "error"))
		api_g.on_timeout = CT_ON_TIMEOUT_ERROR;
	else if (!strcmp(ot, "fallback"))
		api_g.on_timeout = CT_ON_TIMEOUT_FALLBACK;
	else if (!strcmp(ot, "abort"))
		api_g.on_timeout = CT_ON_TIMEOUT_ABORT;
	else {
		gice_error("api", "GICE_ON_TIMEOUT=\"%s\" is not error, fallback or abort", ot);
		return GICE_ERR_CONFIG;
	}
	if (strcmp(dead, "abort") && strcmp(dead, "tolerate")) {
		gice_error("api", "GICE_ON_PEER_DEAD=\"%s\" is not abort or tolerate", dead);
		return GICE_ERR_CONFIG;
	}
	api_g.tolerate_dead = !strcmp(dead, "tolerate");
	if (strcmp(mode, "device") && strcmp(mode, "host")) {
		gice_error("api", "GICE_MODE=\"%s\" is not device or host", mode);
		return GICE_ERR_CONFIG;
	}
	api_g.host_mode = !strcmp(mode, "host");
	if (strcmp(stats, "0") && strcmp(stats, "1") && strcmp(stats, "json")) {
		gice_error("api", "GICE_STATS=\"%s\" is not 0, 1 or json", stats);
		return GICE_ERR_CONFIG;
	}
	api_g.stats = !strcmp(stats, "json") ? 2 : stats[0] - '0';
	snprintf(api_g.trace_path, sizeof(api_g.trace_path), "%s",
		 gice_param_str(gice_param_find(api_params, "GICE_TRACE")));
	return gice_faults_load(gice_param_str(gice_param_find(fab_params, "GICE_FAULTS")),
				gice_param_str(gice_param_find(fab_params, "GICE_FAULT_SCRIPT")), &api_g.faults);
}

int gice_init(void)
{
	uint64_t v[5];
	int rc;

	pthread_mutex_lock(&api_g.lock);
	if (api_g.refs++) {
		pthread_mutex_unlock(&api_g.lock);
		return GICE_OK;
	}
	const char *const names[5] = {"GICE_TIMEOUT_MS", "GICE_WAIT_SPIN_US", "GICE_MAX_DEVICES", "GICE_BIND",
				      "GICE_WAIT_PROGRESS"};
	for (int i = 0; i < 5; i++)
		if ((rc = gice_param_u64(gice_param_find(api_params, names[i]), &v[i]))) {
			api_g.refs = 0;
			pthread_mutex_unlock(&api_g.lock);
			return rc;
		}
	api_g.timeout_ns = v[0] * 1000000ull;
	/* a wait without progress fails a quarter later than the watchdog judges a silent peer:
	 * when a peer is lost, the wait names that (not a bare timeout) */
	api_g.idle_ns = api_g.timeout_ns + api_g.timeout_ns / 4;
	api_g.spin_ns = v[1] * 1000ull;
	api_g.max_devices = v[2];
	const char *plane = gice_param_str(gice_param_find(api_params, "GICE_PLANE"));
	if (strcmp(plane, "auto") && strcmp(plane, "nvlink") && strcmp(plane, "net")) {
		gice_error("api", "GICE_PLANE=\"%s\" is not auto, nvlink or net", plane);
		api_g.refs = 0;
		pthread_mutex_unlock(&api_g.lock);
		return GICE_ERR_CONFIG;
	}
	api_g.nvlink = strcmp(plane, "net") != 0;
	api_g.bind = (int)v[3];
	api_g.wait_steps = (int)v[4];
	if ((rc = read_fault_params())) {
		api_g.refs = 0;
		pthread_mutex_unlock(&api_g.lock);
		return rc;
	}
	api_g.t0_ns = gice_now_ns();
	memset(&api_g.job_err, 0, sizeof(api_g.job_err)); /* a new life: no error yet */
	atomic_store(&api_g.kill_at_ns, 0);
	for (size_t i = 0; i < GICE_ARRAY_SIZE(api_g.fault_sig); i++)
		atomic_store(&api_g.fault_sig[i].at_ns, 0);
	api_g.devs = calloc(api_g.max_devices, sizeof(*api_g.devs));
	if (gice_param_u64(gice_param_find(ct_params, "GICE_CT_MAX_PEERS"), &api_g.max_gids) == GICE_OK)
		api_g.peer_tm = calloc(api_g.max_gids, sizeof(*api_g.peer_tm));
	if (!api_g.devs || !api_g.peer_tm) {
		free(api_g.peer_tm);
		api_g.peer_tm = NULL;
		free(api_g.devs);
		api_g.devs = NULL;
		api_g.refs = 0;
		pthread_mutex_unlock(&api_g.lock);
		return GICE_ERR_NO_MEMORY;
	}
	/* find the other ranks of the job (one rank without GICE_WORLD_SIZE) */
	if ((rc = boot_init(&api_g.boot))) {
		free(api_g.devs);
		api_g.devs = NULL;
		free(api_g.peer_tm);
		api_g.peer_tm = NULL;
		api_g.refs = 0;
		pthread_mutex_unlock(&api_g.lock);
		return rc;
	}
	api_g.rank = boot_rank(api_g.boot);
	api_g.size = boot_size(api_g.boot);
	api_g.clock_offset_ns = 0;
	api_g.clock_bound_ns = 0;
	api_g.clock_aligned = boot_clock(api_g.boot, &api_g.clock_offset_ns, &api_g.clock_bound_ns);
	host_identity(api_g.host, sizeof(api_g.host));
	pid_identity(api_g.pidns, sizeof(api_g.pidns));
	job_layout();
	if (api_g.size > 1)
		gice_log_set_rank((int)api_g.rank);
	api_g.opened = 0;
	memset(&api_g.closed_stats, 0, sizeof(api_g.closed_stats));
	atomic_store(&api_g.watchdog_stop, 0);
	api_g.watchdog_on = pthread_create(&api_g.watchdog, NULL, api_watchdog_main, NULL) == 0;
	if (!api_g.watchdog_on)
		gice_warn("api", "no watchdog thread: timeouts, dead peers and stalls go unnoticed");
	if (gice_faults_any_net(&api_g.faults) || api_g.faults.n_stall || api_g.faults.hang_rank >= 0 || api_g.faults.kill_rank >= 0) {
		char spec[256];
		gice_faults_format(&api_g.faults, spec, sizeof(spec));
		gice_warn("fault", "rank %u: injecting faults (times from the end of each device's open): %s", api_g.rank,
			  spec);
	}
	pthread_mutex_unlock(&api_g.lock);
	return GICE_OK;
}

uint32_t gice_rank(void) { return api_g.rank; }

uint32_t gice_devices_per_rank(void)
{
	uint64_t v = 1;

	gice_param_u64(gice_param_find(api_params, "GICE_DEVICES_PER_RANK"), &v);
	return (uint32_t)v;
}
uint32_t gice_world_size(void) { return api_g.size ? api_g.size : 1; }
uint32_t gice_device_id_of(uint32_t rank, uint32_t index) { return index * gice_world_size() + rank; }

int gice_barrier(void)
{
	return api_g.boot ? boot_barrier(api_g.boot) : GICE_ERR_INVALID;
}

int gice_allgather(const void *mine, size_t len, void *all)
{
	return api_g.boot ? boot_allgather(api_g.boot, mine, len, all) : GICE_ERR_INVALID;
}

void api_stats_add(gice_stats_t *sum, const gice_stats_t *st)
{
	uint64_t *a = (uint64_t *)sum;
	const uint64_t *b = (const uint64_t *)st;

	_Static_assert(sizeof(gice_stats_t) % sizeof(uint64_t) == 0, "all counters");
	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		a[i] += b[i];
}

/* GICE_STATS=1: a line per peer that device d exchanged packets with (GICE_PEER_STATS_LIST,
 * then GICE_PEER_GAUGE_LIST), "gice peer stats: rank R: device D peer P (rank Q): name value
 * ...", at its close or at gice_finalize. */
void api_print_peer_stats(gice_device_t *d)
{
	gice_peer_stats_t ps;
	char line[1024];
	int n;

	for (uint32_t g = 0; g < api_g.max_gids; g++) {
		if (gice_device_peer_stats(d, g, &ps) || !(ps.tx_pkts || ps.rx_pkts || ps.fault_drops))
			continue;
		if (api_g.stats == 2) { /* GICE_STATS=json: a JSON object per line, as api_obs.c's */
			const char *sep = "";
			n = snprintf(line, sizeof(line), "{\"rank\":%u,\"device\":%u,\"peer\":%u,\"peer_rank\":%u,\"peer_counters\":{",
				     api_g.rank, d->gid, g, g % (api_g.size ? api_g.size : 1));
#define API_PEER_STAT_JSON(name)                                                                                    \
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%s\"" #name "\":%llu", sep, (unsigned long long)ps.name); \
	sep = ",";
#define API_PEER_GAUGE_JSON(name, help) API_PEER_STAT_JSON(name)
			GICE_PEER_STATS_LIST(API_PEER_STAT_JSON)
			GICE_PEER_GAUGE_LIST(API_PEER_GAUGE_JSON)
#undef API_PEER_GAUGE_JSON
#undef API_PEER_STAT_JSON
			fprintf(stderr, "%s}}\n", line);
			continue;
		}
		n = snprintf(line, sizeof(line), "gice peer stats: rank %u: device %u peer %u (rank %u):", api_g.rank,
			     d->gid, g, g % (api_g.size ? api_g.size : 1));
#define API_PEER_STAT_PRINT(name) \
	n += snprintf(line + n, sizeof(line) - (size_t)n, " " #name " %llu", (unsigned long long)ps.name);
		GICE_PEER_STATS_LIST(API_PEER_STAT_PRINT)
#define API_PEER_GAUGE_PRINT(name, help) API_PEER_STAT_PRINT(name)
		GICE_PEER_GAUGE_LIST(API_PEER_GAUGE_PRINT)
#undef API_PEER_GAUGE_PRINT
#undef API_PEER_STAT_PRINT
		fprintf(stderr, "%s\n", line);
	}
}

/* GICE_STATS=1: this rank's counters, summed over its devices (api_g.lock held). */
#define API_STAT_NAME_FITS(name, from, field, help) _Static_assert(sizeof(#name) <= 20, #name " fits print_stats");
GICE_STATS_LIST(API_STAT_NAME_FITS)
#undef API_STAT_NAME_FITS

static void print_stats(void)
{
	gice_stats_t t = api_g.closed_stats, st;

	for (uint64_t i = 0; i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->live && gice_device_stats(api_g.devs[i], &st) == GICE_OK)
			api_stats_add(&t, &st);
	/* one line per rank, "gice stats: rank R: name value name value ..." in GICE_STATS_LIST
	 * order, written at once so that the ranks sharing a stderr do not interleave */
	char line[4096];
	int n = snprintf(line, sizeof(line), "gice stats: rank %u:", api_g.rank);
#define API_STAT_PRINT(name, from, field, help)                                                              \
	n += snprintf(line + n, sizeof(line) - (size_t)n, " " #name " %llu", (unsigned long long)t.name);
	GICE_STATS_LIST(API_STAT_PRINT)
#undef API_STAT_PRINT
	_Static_assert(sizeof(gice_stats_t) / sizeof(uint64_t) * (20 + 1 + 20 + 1) + 40 < sizeof(line),
		       "every name value pair fits");
	if (api_g.stats == 1)
		fprintf(stderr, "%s\n", line);
	api_obs_print(&t, api_g.stats == 2);
	/* then the per-peer lines of the devices still open (a closed one printed its own) */
	for (uint64_t i = 0; i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->live)
			api_print_peer_stats(api_g.devs[i]);
}

/* What GICE_STATS and GICE_TRACE report at gice_finalize (api_g.lock held). */
static void report(void)
{
	if (!api_g.stats && !api_g.trace_path[0])
		return;
	api_obs_collect_open();
	if (api_g.stats)
		print_stats();
	if (api_g.trace_path[0])
		api_trace_write(api_g.trace_path);
	api_obs_reset();
}

int gice_finalize(void)
{
	pthread_mutex_lock(&api_g.lock);
	if (api_g.refs == 0) {
		pthread_mutex_unlock(&api_g.lock);
		return GICE_ERR_INVALID;
	}
	if (--api_g.refs == 0) {
		if (api_sym.on) { /* the program did not call gice_sym_fini */
			pthread_mutex_unlock(&api_g.lock);
			api_sym_fini(0);
			pthread_mutex_lock(&api_g.lock);
		}
		if (api_g.watchdog_on) {
			atomic_store(&api_g.watchdog_stop, 1);
			gice_futex_wake(&api_g.watchdog_stop, 1);
			pthread_mutex_unlock(&api_g.lock); /* it takes the lock */
			pthread_join(api_g.watchdog, NULL);
			pthread_mutex_lock(&api_g.lock);
			api_g.watchdog_on = 0;
		}
		report();
		for (uint64_t i = 0; i < api_g.max_devices; i++)
			if (api_g.devs[i])
				gice_warn("api", "gice_finalize: device %u is still open", api_g.devs[i]->gid);
		pthread_mutex_unlock(&api_g.lock);
		api_device_bury(NULL, NULL); /* what devices closed while others were open left */
		pthread_mutex_lock(&api_g.lock);
		free(api_g.devs);
		api_g.devs = NULL;
		free(api_g.peer_tm);
		api_g.peer_tm = NULL;
		boot_fini(api_g.boot);
		api_g.boot = NULL;
		/* other ranks' trigger memory and memory, unless an abandoned device may touch them
		 * (kept, with what they are reached through) */
		if (!api_left_keep(api_g.remote_map)) {
			for (uint32_t i = 0; i < api_g.n_remote; i++) {
				if (api_g.remote_map[i].base)
					munmap(api_g.remote_map[i].base, api_g.remote_map[i].size);
				tm_region_destroy(api_g.remote_map[i].tm);
			}
			free(api_g.remote_map);
		}
		free(api_g.remote);
		api_g.remote = NULL;
		api_g.remote_map = NULL;
		api_g.n_remote = 0;
	}
	pthread_mutex_unlock(&api_g.lock);
	return GICE_OK;
}

/* ---------------------------------------------------------------- introspection */

/* Where gice_device_stats reads a counter: the from column of GICE_STATS_LIST. */
#define API_STAT_FROM_ENGINE(name, field) c.v[CT_STAT_##name]
#define API_STAT_FROM_FAULT(name, field) f.field
#define API_STAT_FROM_STORAGE(name, field) s.name
#define API_STAT_FROM_POOL(name, field) p.name

int gice_device_stats(gice_device_t *d, gice_stats_t *st)
{
	ct_stats_t c;
	fab_fault_stats_t f = {0}; /* zero when the device has no fault injector */

	sto_stats_t s;
	api_pool_stats_t p;

	ct_engine_stats(d->ct, &c);
	fab_fault_stats(d->ep, &f);
	api_storage_stats(d, &s);
	api_pool_stats(d, &p);
#define API_STAT_FILL(name, from, field, help) st->name = API_STAT_FROM_##from(name, field);
	GICE_STATS_LIST(API_STAT_FILL)
#undef API_STAT_FILL
	return GICE_OK;
}

int gice_device_peer_stats(gice_device_t *d, uint32_t peer, gice_peer_stats_t *st)
{
	ct_stats_t c;
	fab_fault_stats_t f = {0};
	sto_stats_t s = {0};     /* storage and pools are the device's, not a peer's: not per peer */
	api_pool_stats_t p = {0};
	gice_stats_t all;
	int rc;

	if (!d || !st)
		return GICE_ERR_INVALID;
	if ((rc = ct_engine_peer_stats(d->ct, peer, &c))) {
		gice_error("api", "gice_device_peer_stats: device %u is not below GICE_CT_MAX_PEERS", peer);
		return rc;
	}
	fab_fault_peer_stats(d->ep, peer, &f); /* zero when the injector keeps no per-peer counts */
#define API_STAT_FILL(name, from, field, help) all.name = API_STAT_FROM_##from(name, field);
	GICE_STATS_LIST(API_STAT_FILL)
#undef API_STAT_FILL
#define API_PEER_STAT_COPY(name) st->name = all.name;
	GICE_PEER_STATS_LIST(API_PEER_STAT_COPY)
#undef API_PEER_STAT_COPY
	uint64_t g[CT_GAUGES];
	ct_engine_peer_gauges(d->ct, peer, g); /* peer is below GICE_CT_MAX_PEERS (checked above) */
#define API_PEER_GAUGE_COPY(name, help) st->name = g[CT_GAUGE_##name];
	GICE_PEER_GAUGE_LIST(API_PEER_GAUGE_COPY)
#undef API_PEER_GAUGE_COPY
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
	const gice_param_t *tables[] = {gice_common_params, api_params, api_sym_params, api_coll_params, smt_params, ct_params,
					tm_params, hbm_params, fab_params, boot_params, boot_clock_params, sto_params, api_pool_params};

	for (size_t t = 0; t < GICE_ARRAY_SIZE(tables); t++)
		for (const gice_param_t *p = tables[t]; p->name; p++) {
			int set;
			const char *v = gice_param_raw(p, &set);
			cb(p->name, v, p->defval, set, p->help, arg);
		}
}
