/* ct_engine.h: the Communication Tiles of one device. C engine threads watch the device's
 * trigger memory: they execute requests that kernels write into their queues, fire armed
 * descriptors when a counter reaches a threshold, and run the Initiator (translate, read HBM,
 * cut MTU packets), the MPG scheduler (QoS weighted round robin, per-peer credits) and the
 * receive path (validate, write, ack, signal) over the device's fabric endpoint.
 *
 * Kernels reach a CT only through memory: a ct_req_t pushed into a tm request queue
 * (tm_queue_push) of CT ct_for_conn(). Host set-up calls (peers, connections, arming) are below.
 */
#ifndef GICE_CT_ENGINE_H
#define GICE_CT_ENGINE_H

#include <stdint.h>

#include "api/gice_stats.h"
#include "emu/common/common.h"
#include "emu/common/config.h"
#include "emu/common/faults.h"
#include "emu/hbm/hbm.h"
#include "emu/triggermem/triggermem.h"
#include "fabric/fab_fault.h"
#include "fabric/fabric.h"

#define CT_QOS_CLASSES 4

/* Request/descriptor ops. Never renumbered (descriptors are plain data). */
enum ct_op {
	CT_OP_NOP = 0,
	CT_OP_PUT = 1,        /* src_off,len → (conn, rkey, roff); optional signal */
	CT_OP_GET = 2,        /* (conn, rkey, roff),len → src_off */
	CT_OP_AMO_FADD = 3,   /* *(rkey,roff) += value; old → src_off (unless TM_NONE flag) */
	CT_OP_AMO_CSWAP = 4,  /* if *(rkey,roff) == compare: = value; old → src_off */
	CT_OP_CTR_ADD = 5,    /* local counter sig_id += value (chaining, like PtlTriggeredCTInc) */
	CT_OP_CTR_SET = 6,    /* local counter sig_id = value */
	CT_OP_FENCE = 7,      /* later messages of conn start after earlier ones are acked */
	CT_OP_ARM_ = 8,       /* internal: host asks the CT to take armed descriptor `desc` */
	CT_OP_DISARM_ = 9,    /* internal */
	/* storage path: src_off,len of device memory <-> file rkey (a file id of the device's storage
	 * engine) at offset roff; handed to the engine's storage hook (ct_engine_set_storage) */
	CT_OP_FILE_READ = 10, /* file -> device */
	CT_OP_FILE_WRITE = 11, /* device -> file */
	CT_OP_FILE_OPEN = 12,  /* reserved file rkey by the path at src_off,len, flags in value */
	CT_OP_FILE_CLOSE = 13, /* file rkey (it stays reserved) */
	CT_OP_FILE_SYNC = 14,  /* fsync file rkey (value: its flags) */
};
/* ops the storage hook carries out */
#define CT_OP_IS_FILE(op) ((op) >= CT_OP_FILE_READ && (op) <= CT_OP_FILE_SYNC)

enum ct_req_flags {
	CT_RF_SIGNAL = 1u << 0,   /* PUT: apply signal (sig_id, value) at the target */
	CT_RF_SIG_ADD = 1u << 1,  /* signal adds (else sets) */
	CT_RF_STRONG = 1u << 2,   /* signal lands after every earlier put to that peer */
	CT_RF_NO_RESULT = 1u << 3 /* atomics: discard the old value */
};

/* One request: 96 bytes, plain data (offsets only), fits a tm queue slot. */
typedef struct {
	uint8_t op;        /* enum ct_op */
	uint8_t flags;     /* enum ct_req_flags */
	uint16_t conn;     /* connection id */
	uint32_t counter;  /* local completion counter, or TM_NONE */
	uint64_t src_off;  /* local device offset: put source, get destination, atomic result */
	uint64_t len;      /* bytes (put, get) */
	uint64_t rkey;     /* target region key */
	uint64_t roff;     /* offset in the target region */
	uint64_t value;    /* signal value, atomic operand, counter value */
	uint64_t compare;  /* compare-swap */
	uint32_t sig_id;   /* target signal counter (PUT) or local counter (CTR_*) */
	uint32_t desc;     /* ARM/DISARM: descriptor id */
	uint64_t t_issue;  /* gice_now_ns() when the kernel issued it (0 if not stamped) */
	uint64_t pad[3];
} ct_req_t;
_Static_assert(sizeof(ct_req_t) == 96 && sizeof(ct_req_t) <= TM_REQ_MAX_BYTES, "request fits a slot");

typedef struct ct_engine ct_engine_t;
struct ct_event;

typedef struct {
	uint32_t gid;      /* global device id, unique in the job */
	uint32_t index;    /* device index in this process (thread names) */
	uint32_t n_cts;    /* engine threads, <= the tm layout's n_cts */
	hbm_t *hbm;
	tm_region_t *tm;
	fab_ep_t *ep;
	uint64_t timeout_ns;  /* GICE_TIMEOUT_MS: a peer silent or not acking this long fails */
	/* fault injection (may be NULL): stall_ct entries stall CT threads of this device; hang_at_ns
	 * (absolute CLOCK_MONOTONIC, 0: never) stalls every CT and the link for good */
	const gice_faults_t *faults;
	uint64_t t0_ns;       /* origin of the fault schedule (gice_init) */
	uint64_t hang_at_ns;
	int host_proxy;       /* GICE_MODE=host: the one CT thread is the host's proxy thread */
	int fail_signals;     /* a peer found dead or hung fails the counters its signals set here */
	/* called by ct_engine_watch when a peer is found dead or hung, before anything is failed
	 * (whoever aborts the device does it before a waiter wakes: tm_region_set_status; the
	 * engine wakes the waits left with tm_region_abort once it has failed the operations to
	 * the peer); may be NULL */
	void (*on_peer_lost)(void *arg, const struct ct_event *ev);
	void *on_peer_lost_arg;
	/* called when peer src_gid asks this rank (a FAULT packet, carrying the job's MAC) to kill
	 * (kill 1) or hang (kill 0) itself delay_ns from now: by the link's holder, so it only
	 * records it (the action happens elsewhere); NULL: such requests are refused */
	void (*on_fault)(void *arg, uint32_t src_gid, int kill, uint64_t delay_ns);
	void *on_fault_arg;
	/* devices of the whole job on this machine (0: unknown): unless GICE_CT_SPIN_US is set,
	 * at most (CPUs this process may use) / machine_devices CT threads of this device spin at
	 * once when idle, the others sleep at once (none spins when the devices outnumber the
	 * CPUs), as a spinner that must yield its core holds up the thread that has work */
	uint32_t machine_devices;
	/* the job's key for the packets' MAC (GICE_CT_AUTH), the same on every device of the job:
	 * derived from the bootstrap's secret, which only the job's processes have */
	uint64_t job_key[2];
} ct_engine_attr_t;

typedef struct {
	uint32_t peer_gid; /* device at the other end (added with ct_peer_add) */
	uint8_t qos;       /* 0..CT_QOS_CLASSES-1; 0 is the most urgent */
	uint32_t mtu;      /* largest packet, header included; 0: GICE_MTU */
} ct_conn_attr_t;

/* The engine's counters: the ENGINE entries of GICE_STATS_LIST (api/gice_stats.h), indexed by
 * CT_STAT_<name>. The FAULT entries are the fault injector's (fab_fault_stats). */
#define CT_STAT_ENUM_ENGINE(name) CT_STAT_##name,
#define CT_STAT_ENUM_FAULT(name)
#define CT_STAT_ENUM_STORAGE(name)
#define CT_STAT_ENUM_POOL(name)
#define CT_STAT_ENUM(name, from, field, help) CT_STAT_ENUM_##from(name)
typedef enum { GICE_STATS_LIST(CT_STAT_ENUM) CT_STATS } ct_stat_t;
#undef CT_STAT_ENUM

typedef struct {
	uint64_t v[CT_STATS];
} ct_stats_t;

/* The per-peer gauges of GICE_PEER_GAUGE_LIST (the link's round-trip time), by CT_GAUGE_<name>. */
#define CT_GAUGE_ENUM(name, help) CT_GAUGE_##name,
typedef enum { GICE_PEER_GAUGE_LIST(CT_GAUGE_ENUM) CT_GAUGES } ct_gauge_t;
#undef CT_GAUGE_ENUM

/* What the watchdog found (ct_engine_watch): a peer dead or not acknowledging, or a CT stalled. */
typedef struct ct_event {
	int status;            /* GICE_ERR_PEER_DEAD, GICE_ERR_PEER_HUNG, GICE_ERR_TIMED_OUT or
				  GICE_ERR_CT_STALLED */
	const char *reason;    /* one phrase: "process exited", "process alive, not responding", ... */
	uint32_t device_gid;
	uint32_t peer_gid;     /* UINT32_MAX for a CT stall */
	uint32_t ct;           /* the stalled CT, else UINT32_MAX */
	uint32_t n_ops;        /* operations failed (or re-driven by the fallback) */
	uint64_t waited_ns;    /* how long nothing happened */
	uint32_t psn_acked, psn_next; /* peer: packets acked / sent */
	uint64_t retransmits;
	/* the oldest operation involved, when known (op_name NULL otherwise) */
	const char *op_name;
	uint64_t bytes;
	uint32_t msg_id;
	uint32_t trigger;      /* trigger that fired it, or UINT32_MAX */
	uint64_t threshold;
	uint32_t counter;      /* its completion counter, or UINT32_MAX */
	uint64_t counter_value;
	int fallback;          /* the host proxy took over (GICE_ON_TIMEOUT=fallback) */
	char text[600];        /* the whole diagnostic, one line */
} ct_event_t;
typedef void (*ct_event_cb)(const ct_event_t *ev, void *arg);

enum { CT_ON_TIMEOUT_ERROR, CT_ON_TIMEOUT_FALLBACK, CT_ON_TIMEOUT_ABORT };

/* One watchdog pass (the API's watchdog thread calls it every few ms): heartbeats to quiet
 * peers; peers silent for timeout_ns are dead (GICE_ERR_PEER_DEAD: their process is gone or
 * cannot be seen) or hung (GICE_ERR_PEER_HUNG: their process is alive), and fail their
 * operations (and, with attr.fail_signals, the counters they signal here); peers not
 * acknowledging for timeout_ns fail their operations (GICE_ERR_TIMED_OUT); a CT with
 * work and no progress for timeout_ns / 2 is stalled: its queued operations fail with
 * GICE_ERR_CT_STALLED (error, abort) or a host proxy thread runs them (fallback) until it
 * recovers. cb runs once per event. Returns the number of events. */
int ct_engine_watch(ct_engine_t *e, int on_timeout, ct_event_cb cb, void *arg);
/* Fault injection: CT ct stalls from at_ns (CLOCK_MONOTONIC) for dur_ns (UINT64_MAX: for good),
 * replacing a stall set before (GICE_ERR_INVALID for a bad ct); the whole device hangs from
 * at_ns (no progress, no heartbeats) until it is destroyed. */
int ct_engine_fault_stall(ct_engine_t *e, uint32_t ct, uint64_t at_ns, uint64_t dur_ns);
void ct_engine_fault_hang(ct_engine_t *e, uint64_t at_ns);
/* Reliability and checksums on (1) or off (0), or unchanged (-1); GICE_RELIABLE and
 * GICE_CHECKSUM set them at creation. */
void ct_engine_set_reliable(ct_engine_t *e, int reliable, int csum);
/* Network faults were turned on at run time on this device: it retransmits what is lost
 * (reliability on) and, when they corrupt, puts a CRC32C on what it sends, which every peer
 * checks since the packet says so. It does not start requiring checksums from its peers (they
 * did not change): a fault turned on at one rank never cuts it off from the others. */
void ct_engine_fault_on(ct_engine_t *e, int corrupts);

/* Per-operation stage timestamps (CLOCK_MONOTONIC ns), kept in a ring of recent operations. */
typedef struct {
	uint32_t op, peer_gid;
	uint64_t bytes;
	uint64_t t_issue, t_pickup, t_first_tx, t_complete;
	int32_t status;
	uint32_t msg_id; /* its id towards peer_gid: the target's ct_rx_trace_t names it too */
} ct_trace_t;
/* A request message that landed here (its data written, its signal due): the target's side. */
typedef struct {
	uint32_t src_gid, msg_id;
	uint64_t t_landed;
} ct_rx_trace_t;

int ct_engine_create(const ct_engine_attr_t *attr, ct_engine_t **out);
/* Stops the threads; pending operations complete with GICE_ERR_CANCELED. */
void ct_engine_destroy(ct_engine_t *e);
/* Whether the link is held by a call that does not return, as the watchdog judged it (and it
 * still is, for over the timeout: *held_ns): the engine cannot be destroyed then, as its
 * destruction needs the link. */
int ct_engine_link_stuck(ct_engine_t *e, uint64_t *held_ns);
/* For such an engine: its threads are told to stop; those that end by deadline_ns (gice_now_ns
 * time) are joined, the rest left to run on (detached). Frees nothing, fails nothing (the link's
 * holder has it). Returns the threads left. */
uint32_t ct_engine_abandon(ct_engine_t *e, uint64_t deadline_ns);

/* Device gid (in this process) is closing: stop talking to it now, failing what is in flight
 * to it with GICE_ERR_PEER_DEAD. Peers in other processes learn it from a BYE packet (or the
 * silence, over shm). */
void ct_peer_closed(ct_engine_t *e, uint32_t gid);

/* How to reach a peer device. */
typedef struct {
	const void *addr;          /* raw fabric address */
	size_t addr_len;
	const fab_mr_info_t *mr;   /* its device memory registered for rendezvous reads, or NULL */
	void *hbm;                 /* NVLink plane: its device memory mapped in this process, or NULL;
				      rendezvous puts from it are then copied with memcpy */
	uint64_t hbm_size;
	int32_t pid;               /* its process when that pid means it here (same pid namespace and
				      machine), else 0: tells a hung peer from a dead one */
	tm_region_t *tm;           /* its trigger memory mapped here (same host), or NULL: tells a
				      closed device (state GICE_ERR_CANCELED) from a dead one, and
				      wakes its link when no one polls it (tm_doorbell_kick) */
} ct_peer_info_t;

/* Progress by the device's kernels (ct_step.c; never from a host thread). step: run the step of
 * every CT not held by another thread, and the link if free (a waiting kernel's pass: the ACKs
 * riding on what it takes in are processed by the next one); returns the work done (0: nothing
 * moved). submitted: a kernel has just queued a request on CT ct with tm_queue_put, or written
 * a counter CT ct watches (tm_counter_write_quiet): step that CT now if free and send what it
 * handed the link (no fabric poll unless a peer announced packets), else ring it. stepping: a
 * kernel starts (1) or stops (0) stepping while it waits: the CT threads leave it the cores
 * meanwhile; stopping takes one last step. */
int ct_engine_step(ct_engine_t *e);
/* The same after a counter write that marked CTs ring (a mask) dirty without ringing them
 * (tm_counter_write_quiet): those it cannot step now are rung. */
int ct_engine_step_ring(ct_engine_t *e, uint32_t ring);
void ct_engine_submitted(ct_engine_t *e, uint32_t ct);
void ct_engine_stepping(ct_engine_t *e, int on);
/* A kernel's block ends: the link work its last wait left to the kernel's next request (an ACK
 * taken in with the answer it waited for: ct_ack_in_defer; the ACKs it owes, when its last pass
 * ended at such an ACK) is done now, if the link is free. */
void ct_engine_block_end(ct_engine_t *e);
/* How long a CT spins after its last work before it sleeps (GICE_CT_SPIN_US): a kernel that
 * steps while it waits spins as long, in the CT threads' place (they do not spin meanwhile, and
 * no more of them at once than the device's share of the CPUs). */
uint64_t ct_engine_spin_ns(const ct_engine_t *e);

/* Make device gid reachable. Re-adding the same gid is GICE_OK. */
int ct_peer_add(ct_engine_t *e, uint32_t gid, const ct_peer_info_t *info);
/* Whether this device takes part in rendezvous reads over the provider: GICE_OK (and *mr, which
 * names no memory: peers read only what a grant names) or GICE_ERR_UNSUPPORTED when the
 * provider has no remote reads or GICE_CT_RNDV_BYTES is 0. */
int ct_engine_mr(const ct_engine_t *e, fab_mr_info_t *mr);
/* A region registered under gice key `key` (device bytes [off, off+len)) becomes its own
 * provider registration that peers may read (a read grant, ct_grant.c); revoke closes it, so
 * reads with its key fail at the provider from then on. GICE_OK without remote reads (nothing
 * to do); revoke: GICE_ERR_BAD_KEY when key was never exposed. Set-up calls. */
int ct_engine_expose(ct_engine_t *e, uint64_t key, uint64_t off, uint64_t len);
int ct_engine_revoke(ct_engine_t *e, uint64_t key);
/* Ask the rank of peer device gid to kill (kill 1) or hang (kill 0) itself
 * delay_ns after the request arrives: one FAULT packet, signed with the job's MAC (unsequenced,
 * like a heartbeat: an unreliable provider may lose it). GICE_OK once handed to the fabric;
 * GICE_ERR_UNSUPPORTED: GICE_CT_AUTH is off (a receiver could not trust it; logged);
 * GICE_ERR_INVALID: gid is not a peer; GICE_ERR_PEER_DEAD: it was declared dead; or the
 * fabric's error. */
int ct_engine_fault_request(ct_engine_t *e, uint32_t gid, int kill, uint64_t delay_ns);
/* GICE_CT_AUTH of this engine: 1 if it signs its packets and checks its peers' (every device of
 * a job must agree). */
int ct_engine_auth(const ct_engine_t *e);
int ct_conn_open(ct_engine_t *e, const ct_conn_attr_t *attr, uint32_t *conn);
int ct_conn_close(ct_engine_t *e, uint32_t conn);
/* Queue a connection's requests go to (same connection → same CT → issue order kept). */
uint32_t ct_for_conn(const ct_engine_t *e, uint32_t conn);
uint32_t ct_num_cts(const ct_engine_t *e);

/* Quiet: every operation issued so far — queued requests and operations fired by armed
 * descriptors — has completed when each point's counter reaches its target. Fills up to
 * CT_QUIET_POINTS(n_cts) points; returns the count. */
typedef struct {
	uint32_t counter;
	uint64_t upto;
} ct_quiet_point_t;
#define CT_QUIET_POINTS(n_cts) (2 * (n_cts))
uint32_t ct_quiet_points(const ct_engine_t *e, ct_quiet_point_t *pts);
/* 1 when counter id is one the engine allocated for itself (CT *ct's count of retired fired
 * operations, which quiet waits on): not the program's to write or reset. */
int ct_counter_engine_owned(const ct_engine_t *e, uint32_t id, uint32_t *ct);
/* The status of the first operation that failed since the last call (GICE_OK if none), and
 * forget it. */
int ct_failure_take(ct_engine_t *e);

/* Arm: when counter `trig` reaches threshold (wraparound-safe >=), the CT executes *op (a
 * ct_req_t; its t_issue is ignored). Equal thresholds fire in arming order. period > 0 re-arms
 * the descriptor at threshold + period after each firing (persistent); 0 fires once. An already
 * reached threshold fires at once. Returns a descriptor id; GICE_ERR_OVERFLOW when all
 * GICE_CT_MAX_DESCS are armed, GICE_ERR_INVALID on a bad counter or op. */
int ct_arm(ct_engine_t *e, uint32_t trig, uint64_t threshold, uint64_t period, const ct_req_t *op,
	   uint32_t *desc);
/* Disarm a descriptor that has not fired (or a persistent one). GICE_ERR_NOT_FOUND when it has
 * already fired or is unknown. Waits until its CT has dropped it. */
int ct_disarm(ct_engine_t *e, uint32_t desc);

/* Storage path: the file operations a CT takes (CT_OP_FILE_*, from its queue or an armed
 * descriptor) go to submit(arg, request, ct, ticket), which returns GICE_OK when the operation
 * will end with ct_engine_op_done, or its failure (then the CT fails it). Set once, before the
 * first file operation; without it file operations fail with GICE_ERR_INVALID. */
typedef int (*ct_storage_fn)(void *arg, const ct_req_t *r, uint32_t ct, uint64_t ticket);
void ct_engine_set_storage(ct_engine_t *e, ct_storage_fn submit, void *arg);
/* An operation handed to the storage hook ended (any thread): counted, its completion counter
 * written with status, its ticket on CT ct retired (quiet covers it). */
void ct_engine_op_done(ct_engine_t *e, uint32_t ct, uint64_t ticket, uint32_t counter, int status);
/* How many operations may be outstanding on e at once (every CT's queue and fired tickets). */
uint32_t ct_engine_max_ops(const ct_engine_t *e);

/* Copy e's counters (relaxed loads, each one consistent, not the set) into *st. */
void ct_engine_stats(const ct_engine_t *e, ct_stats_t *st);
/* CT ct's thread: ns since it started (*alive_ns), of those the ns it spent in passes that found
 * work (*busy_ns; the rest it polled or slept), and the CPU time it has used (*cpu_ns: its
 * thread's CPU clock, spinning included; 0 when the thread has not started). Its thread must not
 * have been joined (ct_engine_destroy). GICE_ERR_INVALID for a bad ct. */
int ct_engine_ct_busy(const ct_engine_t *e, uint32_t ct, uint64_t *busy_ns, uint64_t *alive_ns, uint64_t *cpu_ns);
/* Copy e's counters for peer device gid (those of GICE_PEER_STATS_LIST it keeps; the others
 * zero) into *st. GICE_OK; GICE_ERR_OUT_OF_BOUNDS: gid not below GICE_CT_MAX_PEERS. */
int ct_engine_peer_stats(const ct_engine_t *e, uint32_t gid, ct_stats_t *st);
/* Copy e's gauges for peer device gid (GICE_PEER_GAUGE_LIST) into g: a consistent view of the
 * round trip (rtt_min_ns <= srtt_ns <= rtt_max_ns once sampled; all 0 before). GICE_OK;
 * GICE_ERR_OUT_OF_BOUNDS: gid not below GICE_CT_MAX_PEERS. */
int ct_engine_peer_gauges(const ct_engine_t *e, uint32_t gid, uint64_t g[CT_GAUGES]);
/* Copy up to max most recent traces (oldest first); returns the count. */
uint32_t ct_trace_read(const ct_engine_t *e, ct_trace_t *out, uint32_t max);
/* The same for the request messages that landed here. */
uint32_t ct_rx_trace_read(const ct_engine_t *e, ct_rx_trace_t *out, uint32_t max);

/* The fault injector's classifier of gice packets (fab_fault_attr_t.classify): link, psn,
 * whether a packet is sequenced and starts an operation (ct_fault_peek.c). */
int ct_fault_classify(const void *buf, size_t len, fab_fault_pkt_t *out);

/* The largest fabric message a device sends or takes: GICE_MTU, or its largest bundle of packets
 * if larger (GICE_BUNDLE_BYTES; auto: the largest any provider uses). Sizes its endpoint's
 * buffers (fab_attr_t.max_packet). GICE_ERR_CONFIG for a bad value of either. */
int ct_fabric_packet_bytes(uint64_t *out);

/* GICE_CTS, GICE_MTU, GICE_CT_SPIN_US, GICE_CT_POLL_US, GICE_CT_MAX_DESCS, GICE_QOS_WEIGHTS … */
extern const gice_param_t ct_params[];

#endif
