/* ct_internal.h: state shared by the CT engine's files (not for other modules). */
#ifndef GICE_CT_INTERNAL_H
#define GICE_CT_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "emu/ct_engine/ct_engine.h"
#include "emu/ct_engine/ct_proto.h"

#define CT_MSGS_PER_CT 1024u  /* message entries per CT (power of two) */
#define CT_RESP_MSGS 1024u    /* response messages owned by the link */
/* Logging on paths a peer can drive as fast as it likes (each bad packet): the first 10 of a
 * count, then every 1000th, each line with the count. n counts from 0 (ct_stat_add's result). */
#define CT_LOG_DUE(n) ((n) < 10 || (n) % 1000 == 0)
#define CT_RESP_MIN_SHARE 16u /* response entries a peer may always hold (see resp_share) */
#define CT_RESP_NACK_EXTRA 8u /* past its share, a peer's NACKs may take this many more */
#define CT_PEER_WIN 256u      /* outstanding request ids per peer (power of two) */
#define CT_PSN_WIN 1024u      /* receive window in packets (power of two) */
#define CT_NIL UINT32_MAX
#define CT_PUB_MIXED (UINT32_MAX - 1)
/* A kernel's burst of small puts sends its corked bundle on each time this many puts have joined
 * it (ct_step.c), so that the peer takes them in while the burst goes on: a count of puts (a
 * packet each), not bytes, as the peer's work per packet is what a push (a fabric send, a kick
 * and an ACK back) must be worth. gice-bench rate over shm, 2 ranks, medians of alternated runs: 8 B 2.63 -> 2.72
 * M puts/s (21 runs; 2.55 -> 2.68 in 11), 256 B 1.70 -> 1.83 M (11); tcp the same. Pushing every
 * 2.5 KiB instead made 1 KiB puts (3 to a push) 11% slower (15 runs). With small puts sharing
 * PUTS packets, 40 made 8 B puts 4.6% faster (3.66 -> 3.83 M, 11 runs) but 256 B ones 6% slower
 * (2.06 -> 1.93 M), and a push every 8 puts made 1 KiB ones 23% slower: 24 stays. */
#define CT_PUSH_PUTS 24u
#define CT_SIG_RECENT 8u      /* signal counters remembered per peer */
#define CT_READS 1024u        /* rendezvous reads a device runs or queues (FAB_READS_MAX posted) */

enum { CT_BUSY_BUNDLE = 1, CT_BUSY_FLIGHT = 2 }; /* ct_engine_t.ep_busy */
enum ct_read_kind { CT_RD_PUT, CT_RD_GET }; /* a put's data at its target, a get's at its requester */
enum ct_read_state { CT_RD_FREE, CT_RD_WAITING, CT_RD_POSTED };
enum ct_msg_kind { MK_PUT, MK_GET, MK_AMO, MK_FENCE, MK_GET_RESP, MK_AMO_RESP, MK_PUT_DONE, MK_NACK };
#define MK_ANY 0xffu /* ct_req_by_id: a request of any kind (no message has it) */
enum { NEED_ACK = 1, NEED_RESP = 2 };

/* A message's life (the Initiator's state machine; see ct_link.c):
 *   FREE -> QUEUED    its CT took the request (or the link queued a response)
 *   QUEUED -> READY   the link moved it onto its QoS class list (a fence completes instead)
 *   READY -> SENDING  its first packet got a msg_id and a psn
 *   SENDING -> WAITING every packet is out: it awaits its ACK (NEED_ACK) and its response
 *                     (NEED_RESP: a get's data, an atomic's old value, a rendezvous's PUT_DONE)
 *   any -> FREE       completed: counter written, ticket retired (or failed: the same). */
enum ct_msg_state { MS_FREE, MS_QUEUED, MS_READY, MS_SENDING, MS_WAITING };

/* One message: a request being sent or awaiting its ack/response, or a response. Plain data.
 * req is the operation as its CT took it from the queue or a descriptor (one representation:
 * the link reads the request's fields there); for a response, what it answers with. */
typedef struct {
	ct_req_t req;
	uint8_t kind, qos, need, state; /* enum ct_msg_kind, QoS class, NEED_*, enum ct_msg_state */
	uint8_t rndv;        /* its data moves by rendezvous (a put or get; ct_rndv_choose) */
	uint8_t nack_unsent; /* MK_NACK: counted in its peer's nack_unsent */
	uint32_t owner;   /* CT index whose pool holds it, or CT_NIL for the link pool */
	uint32_t peer, msg_id, first_psn, last_psn, mtu, next;
	uint32_t trig;    /* counter whose trigger fired it (armed descriptor), or TM_NONE */
	uint64_t thresh;  /* ... at this threshold */
	int32_t status;
	uint64_t ticket;  /* request queue ticket to retire, or UINT64_MAX */
	uint64_t sent, recvd;
	uint64_t aux;     /* request: which atomic (enum ct_op); response: the request's msg_id */
	uint64_t t_pickup, t_first_tx;
} ct_msg_t;

/* Single-producer (one CT) single-consumer (the link holder) ring of message indices. */
typedef struct {
	_Atomic uint32_t head __attribute__((aligned(GICE_CACHELINE))); /* consumer */
	_Atomic uint32_t tail __attribute__((aligned(GICE_CACHELINE))); /* producer */
	uint32_t slot[CT_MSGS_PER_CT];
} ct_ring_t;

typedef struct {
	uint32_t id1;  /* msg_id + 1 of the message in this slot, 0 if free */
	uint32_t len, got;
	uint8_t flags, landed;
	int32_t status;
	uint32_t sig_id;
	uint64_t value;
} ct_rx_slot_t;

#define CT_POFF_GRANT UINT64_MAX
#define CT_POFF_PUTS (UINT64_MAX - 1) /* a PUTS: its entries are built again from its messages */
/* A sent packet kept until it is acknowledged, to be sent again (reliability). */
typedef struct {
	uint8_t hdr[CT_HDR_BYTES]; /* encoded, csum field zero */
	uint64_t poff;             /* payload: device offset, or CT_POFF_GRANT: grant below */
	uint8_t grant[CT_GRANT_BYTES]; /* the payload of PUT_RTS and GET_GO */
	uint32_t plen;
	uint16_t tries;            /* times sent */
	uint8_t sacked;            /* the receiver has it (selective ack) */
	uint64_t t_tx;             /* last sent */
} ct_txrec_t;

/* One registered region exposed to peers' rendezvous reads (ct_grant.c). */
typedef struct {
	uint64_t key;       /* the region's gice key */
	uint64_t off, len;  /* its device bytes */
	fab_mr_t *mr;       /* its own provider registration */
	fab_mr_info_t info; /* key and base a peer reads it with */
} ct_grant_t;

typedef struct { /* link-private (under the link lock) */
	int present, rma;
	uint8_t dead;         /* declared dead (or closed): operations to it fail with dead_status */
	int32_t dead_status;
	int32_t pid;          /* its process, if that pid is meaningful here (ct_peer_info_t) */
	tm_region_t *tm;       /* its trigger memory, if mapped here (ct_peer_info_t) */
	uint8_t kick;          /* in e->kick for this pass */
	uint32_t serving;      /* GET_GOs sent it over the provider, their GET_DONE not yet here */
	uint32_t kick_pkts;    /* packets sent to it since its last kick (tm_doorbell_kick counts them) */
	uint64_t kick_due;     /* a kick its kernel's lease took: nudge it then (ct_kick), 0: none */
	uint32_t sig_recent[CT_SIG_RECENT]; /* counters its signals set here lately (fail them if
					       it dies: their waiters would wait for nothing) */
	uint32_t sig_next;
	fab_addr_t addr;
	fab_mr_info_t mr; /* its device memory, for rendezvous reads (rma) */
	uint8_t *map;     /* NVLink plane: its device memory mapped here (copy engine), or NULL */
	uint64_t map_size;
	/* tx */
	uint32_t next_psn, acked_psn, next_msg_id, done_upto, inflight;
	uint32_t wait_head, wait_tail; /* sent messages awaiting ack, in last_psn order */
	ct_txrec_t *tx;                /* sent packets not yet acked, by psn & tx_mask */
	uint32_t tx_mask;
	uint64_t srtt, rttvar, rto;    /* ns */
	uint32_t backoff;              /* RTO doublings since the last ack progress */
	uint32_t cwnd, ssthresh;       /* congestion window in packets (reliable mode: AIMD) */
	uint32_t cwnd_frac;            /* acked packets towards the next +1 in avoidance */
	uint32_t recover;              /* no new window cut until acked passes this psn */
	uint64_t t_progress;           /* last ack progress (or first packet outstanding) */
	_Atomic uint64_t t_rx;         /* last packet heard from this peer (relaxed: the watchdog
					* reads it of a link stuck in its holder's hands, link_stuck) */
	uint64_t t_tx;                 /* last packet sent to it */
	uint8_t hb_due;                /* a heartbeat to send at the next pass (the watchdog's ask) */
	uint64_t t_poke;               /* last poke for an overdue ACK (ct_poke_silent) */
	uint64_t retx;                 /* packets sent again */
	uint32_t held_cum, held_fence; /* an ack waiting for the reverse stream (see ct_rx_ack) */
	uint8_t ack_held;
	uint32_t nack_unsent;          /* NACKs queued, not yet sent: ACKs wait for them */
	uint32_t resp_held;            /* entries of the response pool its requests hold (until it
					* acknowledges their responses): at most e->resp_share */
	uint32_t by_id[CT_PEER_WIN];   /* msg_id % WIN → message index + 1 */
	/* rx */
	uint32_t rx_next_psn, rx_landed, ack_unsent;
	uint32_t dack_pos;             /* its place in the engine's dack_peers + 1 (ack_unsent), or 0 */
	uint8_t ack_due;
	uint32_t ack_soon;             /* a message end awaits its ACK: link pass that saw it, or 0 */
	uint64_t t_ack_wait;           /* when the oldest packet not yet acknowledged arrived */
	uint64_t rx_seen[CT_PSN_WIN / 64];
	ct_rx_slot_t rx[CT_PEER_WIN];
	/* the counters of GICE_PEER_STATS_LIST that the engine keeps, for this peer (relaxed:
	 * ct_stat_add_peer; read by ct_engine_peer_stats from any thread) */
	_Atomic uint64_t st[CT_STATS];
	/* the link's round trip (GICE_PEER_GAUGE_LIST): written under the link lock by
	 * ct_rtt_sample, read by ct_engine_peer_gauges from any thread */
	_Atomic uint64_t gauge[CT_GAUGES];
} ct_peer_t;

typedef struct {
	int open;
	uint32_t peer, mtu;
	uint8_t qos;
} ct_conn_t;

enum { DS_FREE, DS_ARMING, DS_ARMED, DS_FIRED, DS_DISARMED };

typedef struct {
	ct_req_t req;
	uint32_t trig, ct, next, gen;
	uint64_t threshold, period, seq;
	_Atomic int state;
} ct_desc_t;

/* Tickets retire in order: done[t & mask] = t + 1 when ticket t completes; the cursor passes
 * every completed ticket and adds one to tm counter `counter` for each. */
typedef struct {
	_Atomic uint64_t *done;
	uint32_t mask;
	uint32_t counter;
	_Atomic uint64_t cursor;
} ct_retire_seq_t;
#define CT_TICKET_FIRED (1ull << 62) /* a fired descriptor's ticket (UINT64_MAX: none) */

typedef struct ct_tile {
	struct ct_engine *e;
	uint32_t idx;
	pthread_t thread;
	int started;
	/* message pool: private free list, plus a return stack the link pushes onto */
	uint32_t free_head;
	_Atomic uint32_t ret_head; /* index + 1 */
	ct_ring_t mpg[CT_QOS_CLASSES];
	/* in-order retirement (quiet): of queue tickets, and of the operations fired by armed
	 * descriptors (tickets with CT_TICKET_FIRED set) */
	ct_retire_seq_t rq, rf;
	uint64_t next_ticket;
	_Atomic uint64_t fired_next; /* fired tickets handed out (this tile's thread writes) */
	/* armed descriptors: per counter, a list sorted by (threshold, arming order) */
	uint32_t *armed;
	uint64_t arm_seq;
	uint64_t last_work_ns;
	uint8_t spin_slot; /* its thread holds one of the engine's spin_slots (ct_tile.c) */
	/* what its current step handed to the MPG (its owner writes and reads): the peer when
	 * every message is a small put to that one peer (CT_NIL: none yet; CT_PUB_MIXED: any
	 * other), their packets' bytes and how many puts (ct_engine_submitted) */
	uint32_t pub_peer, pub_bytes, pub_puts;
	uint8_t backlog; /* its current step left requests queued (no message entry or ticket) */
	/* watchdog */
	_Atomic int own;              /* held while a thread runs this tile's step */
	_Atomic uint64_t hb_ns;       /* last time its thread came round its loop */
	_Atomic uint64_t consumed;    /* queue tickets taken */
	_Atomic int proxied;          /* the host proxy runs this tile too (fallback) */
	int stalled;                  /* watchdog: a stall was reported */
	_Atomic int32_t tid;          /* its thread's kernel id (0 until it runs) */
	struct {                      /* watchdog: its thread's scheduler counters at the last look */
		uint64_t run_ns, wait_ns, at_ns;
		int valid;
	} sched;
	_Atomic uint64_t stall_from, stall_until; /* injected stall (absolute ns), from 0: none */
	/* GICE_STATS: its thread's start, and the time it spent in passes that found work (its
	 * thread writes, relaxed; ct_engine_ct_busy reads) */
	_Atomic uint64_t t_start_ns, busy_ns;
	/* messages this tile made (ct_exec_req), for ct_msgs_live: its owner alone writes it, with
	 * a plain load and store (a locked add per put was measurable) */
	_Atomic uint64_t made;
} ct_tile_t;

#define CT_TRACE_RING 256u

struct ct_engine {
	ct_engine_attr_t attr;
	uint32_t n_counters, mtu_max, bundle_max, credits, ack_every, max_peers, max_descs;
	uint32_t weights[CT_QOS_CLASSES];
	uint64_t spin_ns, poll_ns;
	uint64_t spin_cfg_ns; /* GICE_CT_SPIN_US (spin_ns: 0 when no CT thread may spin) */
	/* CT threads that may spin at once (the device's share of the CPUs, ct_params.c), and
	 * those that do (ct_tile.c) */
	uint32_t spin_slots;
	_Atomic uint32_t spinning;
	/* rendezvous from this many bytes (0: never), [put, get][over the provider, on the NVLink
	 * plane] (GICE_CT_RNDV_BYTES; auto: ct_rndv_auto) */
	uint64_t rndv_from[2][2];
	uint64_t rto_min_ns, rto_max_ns, timeout_ns, hb_ns;
	_Atomic int reliable; /* retransmit on timeout / selective ack */
	_Atomic int csum;     /* send and require CRC32C */
	_Atomic int csum_tx;  /* send CRC32C (peers check a packet that carries one): run-time faults */
	int auth;             /* GICE_CT_AUTH: sign packets with attr.job_key, check MAC and sender */
	uint64_t n_refused;   /* requests refused (NACKed): for rate-limited logging */
	/* while a PUTS packet lands (ct_rx_puts): the adds its puts signal to one counter, summed
	 * (sig_src: the peer, CT_NIL while no sum is open; ct_link_rx.c) */
	int sig_batch;
	uint32_t sig_src, sig_id;
	uint64_t sig_sum;
	int rma;           /* device memory registered for remote reads */
	fab_mr_info_t mr;
	/* read grants: the registered regions exposed to peers' reads (ct_grant.c; link lock) */
	ct_grant_t *grants;
	uint32_t n_grants, grants_cap;
	uint8_t *base; /* HBM base in this process */
	_Atomic int stop;
	/* messages not yet complete (sleep policy): those the tiles made (ct_tile_t.made) plus
	 * msgs_adj, which the link moves: + its responses and queued reads, - what completed
	 * (release: ct_msgs_live) */
	_Atomic uint64_t msgs_adj;
	_Atomic int first_fail;     /* first failed operation's status since the last take (quiet) */

	ct_tile_t *tiles;
	ct_msg_t *msgs; /* n_cts * CT_MSGS_PER_CT + CT_RESP_MSGS */

	/* kernels waiting on this device that step its CTs now (ct_step.c): the CT threads do not
	 * spin meanwhile */
	_Atomic uint32_t steppers;
	/* CT 0 sleeps long, as the backstop of a link that kernels step (ct_tile.c): the last of
	 * them to leave rings it if the link then needs a short timer (ct_link_needs_timer) */
	_Atomic int ct0_parked;
	/* the bundle the link holder left corked at the end of its last pass: its peer (CT_NIL:
	 * none) and the bytes it still takes, less those of the small puts that joined it since
	 * without a pass (ct_engine_submitted), and how many those are */
	_Atomic uint32_t cork_gid;
	/* its room (low 32 bits) and the puts joined since it was published (high 32 bits:
	 * CT_PUSH_PUTS, bundle_joins), one word so that a put joins with one CAS */
	_Atomic uint64_t cork;
	_Atomic uint8_t ep_busy; /* at the end of the last pass, CT_BUSY_BUNDLE: a corked bundle;
				  * CT_BUSY_FLIGHT: the endpoint's own sends or reads in flight
				  * (fab_in_flight). The link holder writes */

	/* link: everything below is touched only by the holder of link_lock */
	_Atomic int link_lock;
	_Atomic uint32_t link_turn; /* set-up calls or the watchdog wait for the link: steppers
				       stand aside meanwhile */
	_Atomic int link_pending; /* a thread wanted a pass while the link was held (it handed over
				     messages, or meant to look): the holder comes round again */
	_Atomic uint32_t mpg_new; /* a tile published messages to its MPG rings since the link last
				     emptied them: a pass with nothing new reads one word, not every ring */
	uint32_t kick[16];        /* peers sent to in this pass whose CT 0 may sleep (same host) */
	uint32_t n_kick;
	uint8_t kick_overflow;    /* more than kick[] holds: kick_peers scans every peer */
	/* peers with a kick to nudge (kick_due), and the earliest due; atomic: CT 0's sleep reads
	 * it (ct_link_needs_timer) */
	_Atomic uint32_t n_kick_due;
	uint64_t kick_next_ns;
	/* packets taken in from same-host peers (their kicks count what they sent: ct_step.c), and
	 * peers elsewhere, whose packets no one counts; read without the lock */
	_Atomic uint32_t rx_local, n_remote;
	_Atomic uint32_t pokes_seen; /* their pokes (tm_doorbell_pokes) as of our last poll */
	uint32_t poll_turn;          /* passes since the last one that polled (link holder) */
	uint32_t poll_every;         /* GICE_CT_POLL_EVERY: a pass polls at least this often (0: never
					unless announced) */
	uint64_t lease_ns;           /* GICE_CT_LEASE_US: a kernel's request holds its lease this long */
	/* rendezvous gets peers read from this device over the provider, not yet ended
	 * (GET_DONE), and until when that keeps CT 0 polling (ct_link_serving) */
	_Atomic uint32_t serving;
	_Atomic uint64_t serve_until;
	/* packets to one peer waiting to leave together in one fabric message (ct_link_xmit.c) */
	uint8_t *bundle;
	uint32_t bundle_len, bundle_gid;
	uint8_t bundle_cork; /* its first packet found earlier ones to that peer unacknowledged */
	/* puts of at most small_max bytes queued one after another to one peer share a PUTS packet
	 * (GICE_CT_SMALL_PUTS; 0: never); puts_buf holds the payload being built (mtu_max bytes) */
	uint32_t small_max;
	uint8_t *puts_buf;
	_Atomic uint8_t bundle_held; /* the fabric refused the bundle for now (EAGAIN): link work,
				      * CT 0 comes round soon (ct_link_busy) */
	ct_peer_t *peers;
	uint32_t act_head[CT_QOS_CLASSES], act_tail[CT_QOS_CLASSES]; /* messages being sent */
	uint32_t resp_head[CT_QOS_CLASSES], resp_tail[CT_QOS_CLASSES];
	uint32_t resp_free;
	uint32_t resp_share;  /* response entries one peer may hold: CT_RESP_MSGS over the peers,
			       * at least CT_RESP_MIN_SHARE (a peer that withholds its ACKs starves
			       * only itself); NACKs may take CT_RESP_NACK_EXTRA more */
	uint32_t n_present;   /* peers added */
	/* rendezvous reads this device runs (as a put's target, as a get's requester): posted, or
	 * waiting in FIFO order for one of the fabric's FAB_READS_MAX read slots (ct_link_rndv.c) */
	struct ct_read {
		uint32_t gid, msg_id; /* the peer read from, and the message the read serves */
		uint64_t off, len;    /* where the bytes go in this device's memory */
		fab_mr_info_t from;   /* where they are in the peer's: the grant of its region,
				       * addr that of the first byte (ct_grant.c) */
		uint8_t kind;         /* enum ct_read_kind */
		uint8_t state;        /* enum ct_read_state */
	} reads[CT_READS];
	uint32_t reads_free[CT_READS], n_reads_free, reads_fresh; /* free: a stack, then never used */
	uint32_t reads_wait[CT_READS], reads_wait_head;           /* waiting: a ring of indices */
	uint32_t reads_waiting;                                    /* ... this many from the head */
	uint32_t reads_posted; /* posted, their end not yet taken from fab_poll: <= FAB_READS_MAX */
	uint32_t act_len[CT_QOS_CLASSES];
	uint32_t wrr_class;
	uint32_t acks_pending;
	/* peers owed an ACK for packets received since the last one (delayed ack); atomic: the
	 * sleep policy reads it outside the link lock. dack_peers lists them, in no order: a pass
	 * that looks for due ACKs reads those, not every peer's line (GICE_CT_MAX_PEERS of them). */
	_Atomic uint32_t acks_delayed;
	uint32_t *dack_peers;
	uint64_t dack_next_ns; /* earliest time one of them is due */
	/* An ACK that rode on a packet, left for the next pass (ct_ack_in_defer): from peer
	 * ackin_gid (CT_NIL: none; atomic: a kernel's block end reads it outside the lock), its
	 * cumulative psn and fence, and when it arrived */
	_Atomic uint32_t ackin_gid;
	uint32_t ackin_cum, ackin_fence;
	uint64_t ackin_t;
	uint8_t ack_defer; /* this pass is a waiting kernel's: riding ACKs are left (ct_link.c) */
	uint32_t pass;         /* link passes (ct_link.c; never 0): a message end is acked by the next */
	uint64_t next_timer_ns; /* next retransmission check */
	ct_trace_t trace[CT_TRACE_RING];
	uint64_t trace_n;
	ct_rx_trace_t rx_trace[CT_TRACE_RING]; /* requests landed here (ct_landed), link lock */
	uint64_t rx_trace_n;

	_Atomic uint64_t t_poll; /* last link progress pass */
	uint8_t hb_due;          /* some peer's hb_due is set (link lock) */
	_Atomic int stuck_told;  /* the watchdog's verdict on a link held by a call that does not
				  * return (ct_link_watch.c): 1 told, 2 told with a lost peer named;
				  * 0 again once the watchdog takes the link */
	_Atomic uint64_t hang_at_ns;
	pthread_t proxy;         /* fallback host proxy thread */
	_Atomic int proxy_started;

	/* set-up state */
	pthread_mutex_t setup_lock;
	ct_conn_t *conns;
	uint32_t n_conns;
	ct_desc_t *descs;

	_Atomic uint64_t st[CT_STATS]; /* the counters (ct_engine.h), relaxed: ct_stat_add */
	/* storage path hook (ct_engine_set_storage): fn published after arg (release) */
	_Atomic(ct_storage_fn) sto_fn;
	void *_Atomic sto_arg;
};

#define CT_MAX_CONNS 4096u

/* Add v to counter id of e; returns its value before. Relaxed: a counter orders nothing, so add
 * it before publishing the status that releases a waiter who may read it. */
static inline uint64_t ct_stat_add(struct ct_engine *e, ct_stat_t id, uint64_t v)
{
	return atomic_fetch_add_explicit(&e->st[id], v, memory_order_relaxed);
}

/* Add v to a counter that only the link's holder adds to (the per-packet ones): a load and a
 * store, not a locked add (6 to 8 of them per message and its ACK); readers see whole values. */
static inline void ct_stat_link(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

/* The same, counted for peer p too (GICE_PEER_STATS_LIST): the link's holder only. */
static inline void ct_stat_add_peer(struct ct_engine *e, ct_peer_t *p, ct_stat_t id, uint64_t v)
{
	ct_stat_link(&p->st[id], v);
	ct_stat_link(&e->st[id], v);
}

/* Messages not yet complete, seen from any thread: msgs_adj first (acquire: every message whose
 * completion it counts was made, and counted in its tile's made, before), then the tiles'. */
static inline uint64_t ct_msgs_live(struct ct_engine *e)
{
	uint64_t n = atomic_load_explicit(&e->msgs_adj, memory_order_acquire);

	for (uint32_t c = 0; c < e->attr.n_cts; c++)
		n += atomic_load_explicit(&e->tiles[c].made, memory_order_relaxed);
	return n; /* modulo 2^64: msgs_adj goes below zero by what completed */
}

/* The link lock: whoever holds it drives the endpoint (any CT's step: ct_link_progress; host
 * set-up calls and the watchdog briefly). seq_cst: a CT that hands the link a message sets
 * link_pending, then tries the lock; a holder releases, then reads link_pending (ct_link.c). */
static inline int ct_link_trylock(struct ct_engine *e)
{
	return !atomic_exchange_explicit(&e->link_lock, 1, memory_order_seq_cst);
}

/* A thread that is not a stepper (set-up, the watchdog) takes the link: it asks the steppers to
 * stand aside (link_turn: they skip their passes, ct_link.c), then tries for up to wait_ns.
 * Returns 1 holding the lock, 0 if the holder kept it that long. */
static inline int ct_link_wait_turn(struct ct_engine *e, uint64_t wait_ns)
{
	uint64_t until = gice_now_ns() + wait_ns;
	int got;

	atomic_fetch_add_explicit(&e->link_turn, 1, memory_order_seq_cst);
	while (!(got = ct_link_trylock(e)) && gice_now_ns() < until)
		sched_yield();
	atomic_fetch_sub_explicit(&e->link_turn, 1, memory_order_relaxed);
	return got;
}

static inline void ct_link_lock(struct ct_engine *e)
{
	while (!ct_link_wait_turn(e, UINT64_MAX / 2))
		;
}

/* Release by a holder that did not poll (set-up, watchdog): a thread that wanted a pass
 * meanwhile (link_pending: it handed over messages, or was about to look for packets before
 * sleeping) counted on the holder: ring CT 0 to make it. */
int ct_bundle_flush(struct ct_engine *e);

static inline void ct_link_unlock(struct ct_engine *e)
{
	ct_bundle_flush(e); /* what it sent leaves now */
	atomic_store_explicit(&e->link_lock, 0, memory_order_seq_cst);
	if (atomic_load_explicit(&e->link_pending, memory_order_seq_cst))
		tm_doorbell_ring(e->attr.tm, 0);
}

/* The link is held and no pass has ended for over half the timeout: its holder is stuck (the
 * watchdog's view; ct_link_watch.c judges it). */
static inline int ct_link_held_stale(struct ct_engine *e, uint64_t now)
{
	uint64_t t = atomic_load_explicit(&e->t_poll, memory_order_relaxed);

	return atomic_load_explicit(&e->link_lock, memory_order_relaxed) && now > t && now - t > e->timeout_ns / 2;
}

/* Release by the watchdog, which never calls into the provider: a call there may not return (a
 * same-host peer that died or stopped holding a lock in its shared memory leaves libfabric's
 * shm spinning on it), and the watchdog must stay free to say so. What is left to send (a
 * bundle, heartbeats due) goes at CT 0's next pass, rung now. */
static inline void ct_link_unlock_watch(struct ct_engine *e)
{
	int left = e->bundle_len || e->hb_due;

	atomic_store_explicit(&e->link_lock, 0, memory_order_seq_cst);
	if (left || atomic_load_explicit(&e->link_pending, memory_order_seq_cst))
		tm_doorbell_ring(e->attr.tm, 0);
}

/* a before b in packet sequence order (psns wrap) */
static inline int ct_psn_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

/* link-private FIFOs of message indices, linked through msg.next */
static inline void ct_fifo_push(ct_engine_t *e, uint32_t *head, uint32_t *tail, uint32_t idx)
{
	e->msgs[idx].next = CT_NIL;
	if (*tail == CT_NIL)
		*head = idx;
	else
		e->msgs[*tail].next = idx;
	*tail = idx;
}

static inline uint32_t ct_fifo_pop(ct_engine_t *e, uint32_t *head, uint32_t *tail)
{
	uint32_t idx = *head;

	if (idx != CT_NIL) {
		*head = e->msgs[idx].next;
		if (*head == CT_NIL)
			*tail = CT_NIL;
	}
	return idx;
}

/* A tile's step runs in one thread at a time: its CT thread or the host proxy (fallback). */
static inline int ct_own_try(ct_tile_t *t) { return !atomic_exchange_explicit(&t->own, 1, memory_order_acquire); }
static inline void ct_own_drop(ct_tile_t *t) { atomic_store_explicit(&t->own, 0, memory_order_release); }

static inline void ct_nap_us(uint64_t us)
{
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* ct_params.c: read the engine's parameters into e at its creation (its endpoint open). */
int ct_read_params(struct ct_engine *e);
/* Whether provider is prefix or has it as its first layer ("tcp" matches "tcp;ofi_rxm"). */
int ct_provider_is(const char *provider, const char *prefix);
/* ct_tile.c: the CT thread, requests, retirement */
void *ct_thread(void *arg);
/* One pass of a tile's work (triggers, queue, due descriptors). The caller holds t->own: its CT
 * thread, a waiting kernel (ct_step.c) or the host proxy (by_proxy); then, having dropped it,
 * it drives the link (ct_link_progress): every CT drives its own messages, no hand-off. */
int ct_tile_step(ct_tile_t *t, int by_proxy);
int ct_exec_req(ct_tile_t *t, const ct_req_t *r, uint64_t ticket, uint32_t trig, uint64_t thresh);
int ct_counter_ok(const struct ct_engine *e, uint32_t id);
void ct_fail_now(struct ct_engine *e, ct_tile_t *t, const ct_req_t *r, uint64_t ticket, int status);
void ct_msg_release(struct ct_engine *e, uint32_t idx);
void ct_retire(struct ct_engine *e, uint32_t ct, uint64_t ticket);
void ct_complete_counter(struct ct_engine *e, uint32_t counter, int status);
/* A batch of completions (ct_complete.c): between begin and end, this thread's completions and
 * retirements on engine e (ct_complete_counter, ct_retire, ct_op_counted, ct_live_drop,
 * ct_msg_release) are written at the end, once each: a counter add per counter, one advance of
 * each retirement cursor, ops_done/ops_failed and the live count once, the messages onto their CT's
 * return stack at once (an ACK completes many puts of one kernel). A failure writes the batch
 * first, so the order of counter writes is kept. */
typedef struct ct_adds {
	struct ct_engine *e;
	uint32_t n_ids, id[4];
	uint64_t n[4];
	uint64_t done, failed, live;      /* ops_done, ops_failed, messages no longer live */
	ct_retire_seq_t *seq[2];          /* retirement sequences to advance */
	uint32_t n_seq;
	int progress;                     /* an operation ended: tm_progress at the end */
	uint32_t rel_owner, rel_first, rel_last; /* messages to give back to tile rel_owner: a
						   * chain from rel_first (CT_NIL: none) */
} ct_adds_t;
void ct_adds_begin(struct ct_engine *e, ct_adds_t *b);
void ct_adds_end(ct_adds_t *b);
/* An operation ended with status: counted in ops_done or ops_failed. */
void ct_op_counted(struct ct_engine *e, int status);
/* A message is no longer live (ct_msgs_live). */
void ct_live_drop(struct ct_engine *e);
/* ct_armed.c: armed descriptors */
/* Fire the descriptors of counter id that value v (the counter as read before the queue was
 * drained: ct_tile_step) makes due. Returns the number fired. */
int ct_fire_due(ct_tile_t *t, uint32_t id, uint64_t v);
/* An ARM or DISARM control request, taken from the queue in its place. */
void ct_control_req(ct_tile_t *t, const ct_req_t *r, uint64_t ticket);
/* ct_peer_stats.c: a packet of len bytes failed its checksum: count it for the peer its header
 * names (when that is a peer) */
void ct_rx_csum_peer(struct ct_engine *e, const uint8_t *buf, size_t len);
/* A round-trip sample rtt (ns) of peer p, whose smoothed value is now srtt: into its gauges
 * (link lock held). */
void ct_rtt_sample(struct ct_engine *e, ct_peer_t *p, uint64_t rtt, uint64_t srtt);
/* ct_watch.c: stalled CTs, fault injection */
int ct_injected_stall(ct_tile_t *t, uint64_t now);
/* A FAULT packet from a peer (parsed, authentic if authentication is on): obeyed only under
 * GICE_CT_AUTH, through attr.on_fault; else counted in rx_auth_bad and logged. */
void ct_rx_fault(struct ct_engine *e, const ct_hdr_t *h);

#include "emu/ct_engine/ct_link_internal.h" /* the link's modules: their entry points */

#endif
