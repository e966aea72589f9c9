/* api_internal.h: state shared by the API's files (api/ files) — a device, a stream, the process's
 * job and watchdog state — and the helpers they share. Not for other modules. */
#ifndef GICE_API_INTERNAL_H
#define GICE_API_INTERNAL_H

#include <pthread.h>

#include "api/api_ev.h"
#include "api/gice.h"
#include "emu/common/common.h"
#include "emu/common/config.h"
#include "emu/common/faults.h"
#include "emu/ct_engine/ct_engine.h"
#include "emu/hbm/hbm.h"
#include "emu/sm_threads/sm_threads.h"
#include "emu/storage/storage.h"
#include "emu/triggermem/triggermem.h"
#include "fabric/bootstrap.h"
#include "fabric/fabric.h"

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
	int live;         /* (api_g.lock) its engine and SMs run: others may wire to it and watch it */
	/* its first error (gice_device_error), under api_g.err_lock; set once */
	gice_error_info_t err;
	char err_text[640];
	/* storage path and pools (api_storage.c, api_pool.c) */
	_Atomic(sto_engine_t *) sto; /* started by the first gice_file_open, under api_g.lock */
	uint64_t comm_off;           /* the communication pool is [comm_off, size); size: none */
	/* GICE_STATS / GICE_TRACE: its stage ring (api_ev.h), NULL when both are off */
	api_ev_t *evs;
	_Atomic uint64_t evs_n;
	/* collectives (api_faults.c): how many it started, and the one at whose start this rank
	 * is killed or hung (@collN of kill_rank / hang_rank; 0: none) */
	_Atomic uint64_t colls, kill_coll, hang_coll;
};

/* A slot of d's stage ring to fill, or NULL when GICE_STATS and GICE_TRACE are off. */
static inline api_ev_t *api_ev_take(gice_device_t *d)
{
	if (!d->evs)
		return NULL;
	return &d->evs[atomic_fetch_add_explicit(&d->evs_n, 1, memory_order_relaxed) % API_EVS];
}
/* A wait (kind API_EV_WAIT_*) on counter c of d for value, from t0 to t_woke, has ended with
 * status: record it with the counter's last write (nothing when d has no ring). sid: the
 * stream of a stream wait. */
void api_ev_wait(gice_device_t *d, uint32_t kind, uint32_t c, uint64_t value, uint64_t t0, uint64_t t_woke,
		 uint32_t sid, int status);

struct launch;

/* GICE_TRACE: one kernel a stream ran — its first block's start and the stream seeing its end */
typedef struct {
	uint64_t t_start, t_end;
	uintptr_t fn;
	uint32_t nblocks;
	int32_t status;
} api_kslice_t;

struct gice_stream {
	gice_device_t *dev;
	smt_stream_t *s;
	struct launch *launches; /* api_stream.c: a launch record per command queue position */
	uint32_t n_launches;
	/* GICE_TRACE: a ring of its last API_KSLICES kernels (its stream thread writes; read once
	 * that thread has ended, at gice_stream_destroy); NULL without GICE_TRACE */
	api_kslice_t *ks;
	uint64_t ks_n;
};
#define API_KSLICES 1024u

struct dev_blob {
	uint32_t gid, addr_len, has_mr, pid;
	uint32_t auth;      /* GICE_CT_AUTH: every device of the job must agree */
	uint32_t plane;     /* GICE_PLANE lets it map same-host peers: two devices of one host use
			     * the NVLink plane between them only when both do (map_peer) */
	char provider[32];   /* fab_ep.provider: every device of the job must agree */
	fab_mr_info_t mr;
	uint8_t addr[FAB_ADDR_MAX];
	char host[96];       /* host identity: same string = same host (NVLink plane) */
	char pidns[64];      /* same string: its pid means the same process here (liveness) */
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


/* The process: library state, the job, the devices open, the watchdog. */
struct api_state {
	pthread_mutex_t lock;
	int refs;
	uint64_t timeout_ns, spin_ns, max_devices;
	uint64_t idle_ns; /* default waits fail after this long without progress */
	int bind;
	int wait_steps; /* GICE_WAIT_PROGRESS: kernels step their device's CTs (ct_step.c) */
	gice_device_t **devs;
	/* endpoints and device memory of devices closed while others of this process were open,
	 * released with the last: libfabric's shm provider touches an in-process peer's memory from
	 * its own progress (a CT of another device crashed in fi_cq_read as a closing device's
	 * memory was unmapped) */
	struct api_grave {
		fab_ep_t *ep;
		hbm_t *hbm;
	} *graves;
	uint32_t n_graves;
	uint32_t opened; /* devices opened so far: the k-th open on every rank is collective round k */
	boot_t *boot;
	uint32_t rank, size;
	/* GICE_TRACE: rank 0's CLOCK_MONOTONIC = ours + clock_offset_ns, within +- clock_bound_ns
	 * (boot_clock); clock_aligned 0 when it was not measured (PMIx) */
	int64_t clock_offset_ns;
	uint64_t clock_bound_ns;
	int clock_aligned;
	struct dev_blob *remote; /* devices of other ranks, learned at each collective open */
	struct peer_map *remote_map; /* parallel to remote */
	uint32_t n_remote;
	int nvlink;      /* GICE_PLANE allows mapping same-host peers */
	/* NVLink plane, by global device id (GICE_CT_MAX_PEERS of them): the trigger memory a kernel
	 * here may write (gice_peer_trigger_add), or NULL. Set under lock at wiring, read without it
	 * (acquire): the device path takes no lock. */
	_Atomic(tm_region_t *) *peer_tm;
	uint64_t max_gids;
	char host[96];
	char pidns[64];  /* this machine's boot and pid namespace */
	uint32_t machine_ranks; /* ranks of the job on this machine (sharing its CPUs) */
	int spans_hosts;        /* some rank of the job is on another host (host identity): the
				 * automatic provider choice must cross hosts (fab_attr_t.cross_host) */
	/* watchdog and faults */
	gice_faults_t faults;
	uint64_t t0_ns;
	_Atomic uint64_t kill_at_ns; /* this rank SIGKILLs itself then (fault injection); 0: never */
	_Atomic uint64_t hang_at_ns; /* every device of this rank hangs then (a FAULT request from another
				      * machine: the watchdog does it); 0: never */
	/* gice_faults_set's kill_rank / hang_rank of another rank of this machine: the watchdog
	 * sends sig to pid at at_ns (0: none) */
	struct api_fault_signal {
		_Atomic uint64_t at_ns;
		int32_t pid, sig;
		uint32_t rank;
	} fault_sig[4];
	int on_timeout, host_mode, stats; /* stats: GICE_STATS, 0 off, 1 text, 2 json */
	char trace_path[512];             /* GICE_TRACE, "" off */
	pthread_t watchdog;
	int watchdog_on;
	_Atomic uint32_t watchdog_stop; /* futex word: gice_finalize wakes the watchdog at once */
	_Atomic uint64_t watch_at_ns;   /* the watchdog's last look (its thread's or a wait's) */
	gice_error_cb_t err_cb;
	void *err_arg;
	int tolerate_dead;        /* GICE_ON_PEER_DEAD=tolerate: a dead peer fails only what it is in */
	pthread_mutex_t err_lock; /* error records: every device's and the process's first */
	gice_error_info_t job_err;
	char job_err_text[640];
	gice_stats_t closed_stats; /* summed over the devices closed so far (GICE_STATS) */
};

extern struct api_state api_g;
extern const gice_param_t api_params[];

static inline uint64_t api_timeout_ns(uint64_t ms) { return ms ? ms * 1000000ull : api_g.timeout_ns; }

/* Whether d's kernels step its CTs while they wait (ct_step.c): GICE_WAIT_PROGRESS, device mode. */
static inline int api_kernel_steps(const gice_device_t *d) { return api_g.wait_steps && !d->host_mode; }

/* Device offset of ptr: GICE_ERR_UNREGISTERED outside the device's memory. */
static inline int api_dev_off(const gice_device_t *d, const void *ptr, uint64_t *off)
{
	uintptr_t p = (uintptr_t)ptr, b = (uintptr_t)d->base;

	if (p < b || p - b >= d->size)
		return GICE_ERR_UNREGISTERED;
	*off = p - b;
	return GICE_OK;
}

/* gice.c */
void api_stats_add(gice_stats_t *sum, const gice_stats_t *st);
/* api_obs.c (GICE_STATS, GICE_TRACE; api_g.lock held): sample d's trace ring and CT busy
 * times (at its close); print the stage percentiles and CT busy shares of the samples as text
 * lines or (json) one JSON object holding the counters t as well. */
void api_obs_collect(gice_device_t *d);
void api_obs_collect_open(void); /* every device still open */
void api_obs_print(const gice_stats_t *t, int json);
/* The samples so far: their traces and each one's device; the count. */
uint32_t api_obs_traces(const ct_trace_t **tr, const uint32_t **gid);
/* The requests that landed on the devices sampled, each with the device; the count. */
uint32_t api_obs_landed(const ct_rx_trace_t **rx, const uint32_t **gid);
/* GICE_TRACE: keep the kernel ring of stream s, id sid (at its destroy, its thread ended;
 * takes api_g.lock); the kernels kept so far, each with its device and stream id in *gid,
 * *sid; the count. */
void api_obs_collect_kernels(const gice_stream_t *s, uint32_t sid);
uint32_t api_obs_kernels(const api_kslice_t **k, const uint32_t **gid, const uint32_t **sid);
/* The stage records (api_ev.h) collected so far, each with its device in *gid; the count. */
uint32_t api_obs_events(const api_ev_t **ev, const uint32_t **gid);
void api_obs_reset(void);
/* api_trace.c: GICE_TRACE=path: write the samples as Trace Event JSON (gice_finalize). */
void api_trace_write(const char *path);
void api_print_peer_stats(gice_device_t *d);
/* api_watchdog.c: the watchdog thread (started by gice_init) */
void *api_watchdog_main(void *arg);
/* The watchdog's look at d, taken now by a wait about to time out; the events found.
 * _if_late: only when the watchdog thread has not looked for two of its periods (a loaded
 * machine), for waits whose own timeout ended them. */
int api_watch_now(gice_device_t *d);
int api_watch_if_late(gice_device_t *d);
/* The fault schedule of GICE_FAULTS starts for device d (end of its open): network faults,
 * stalls, hang and kill count from now. */
void api_faults_start(gice_device_t *d);
/* Device d starts a collective operation (coll_run, once its checks passed): count it for the
 * faults aimed at collectives (@collN); the rank is killed or hung here when one is due. */
void api_faults_coll(gice_device_t *d);
/* ct_engine_attr_t.on_fault of device arg: a peer on another machine asked this rank to kill or
 * hang itself (the watchdog does it, at kill_at_ns / hang_at_ns). */
void api_fault_request(void *arg, uint32_t src_gid, int kill, uint64_t delay_ns);
/* Every device of this process hangs from at on (takes api_g.lock). */
void api_faults_hang_all(uint64_t at);
/* An origin for the engine's fault schedule that never comes: api_faults_start sets the real one. */
#define API_FAULTS_LATER (UINT64_MAX / 2)
/* Abort d with status (what info says, when not NULL): record it as d's error, end every wait
 * on d at once (wake_later: the caller wakes them, with tm_region_abort) and fail what is issued
 * later. */
void api_device_abort(gice_device_t *d, int status, const gice_error_info_t *info, int wake_later);
/* ct_engine_attr_t.on_peer_lost of device arg. */
void api_peer_lost(void *arg, const ct_event_t *e);
/* d's error message ("" if none). */
const char *api_error_text(gice_device_t *d);
/* api_ops.c */
int api_ctr_ok(const gice_device_t *d, gice_counter_t c);
/* An operation that failed before reaching a CT: status (< 0) also fails its completion
 * counter, when that is a valid id. Returns status. */
int api_op_fail_now(gice_device_t *d, uint32_t completion, int status);
/* Release a closed device's endpoint and memory now, or, while other devices of this process
 * are open, when the last of them closes (ep NULL: release what waits); never once a device
 * was abandoned (api_left.c). Takes api_g.lock. */
void api_device_bury(fab_ep_t *ep, hbm_t *hbm);
/* Device gid's trigger memory on this process's NVLink plane (NULL: off it). api_g.lock held. */
void api_plane_set(uint32_t gid, tm_region_t *tm);
/* A device was abandoned with a thread stuck in a call that may still return (api_left.c). */
void api_left_abandoned(void);
/* Once one was: keep p (a peer's trigger memory, memory, endpoint, or what holds them) to the
 * process's exit and return 1; the caller must not release it. Else 0. */
int api_left_keep(void *p);
/* Push request r into its CT's queue (the SM -> CT path: memory and a doorbell); a failure
 * also fails its completion counter. by_kernel: a kernel of d in device mode queued it: it
 * steps that CT now (GICE_WAIT_PROGRESS) instead of handing it to the CT thread. */
int api_push_req(gice_device_t *d, ct_req_t *r, int by_kernel, const char *who);
/* api_stream.c: GICE_MODE=host, a kernel's operations deferred to its end */
int api_launch_defer(gice_kctx_t *k, ct_req_t *r);
/* ---- storage path and pools (issue 12) */
/* api_storage.c: op (GICE_OP_FILE_*) as a request (r's common fields already set). */
int api_file_req(gice_device_t *d, const gice_op_t *op, ct_req_t *r);
/* Before the engine stops: refuse new file operations, finish the accepted ones. After it has
 * stopped: stop the storage engine. */
void api_storage_quiesce(gice_device_t *d);
void api_storage_destroy(gice_device_t *d);
void api_storage_stats(gice_device_t *d, sto_stats_t *st);
/* api_pool.c: the pools' bounds for a device of d->size bytes (GICE_COMM_POOL_BYTES);
 * GICE_ERR_CONFIG when the quota leaves no compute pool. */
int api_pool_setup(gice_device_t *d);
typedef struct {
	uint64_t pool_comm_used, pool_comm_free, pool_comm_largest;
	uint64_t pool_comp_used, pool_comp_free, pool_comp_largest;
} api_pool_stats_t;
void api_pool_stats(gice_device_t *d, api_pool_stats_t *st);
extern const gice_param_t api_pool_params[];
int api_launch_flush(gice_kctx_t *k);
/* The kernel of k failed (first failure kept: block, what, status); its stream reports it. */
void api_kernel_failed(gice_kctx_t *k, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
