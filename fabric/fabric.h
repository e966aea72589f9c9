/* fabric.h: the link between devices. An endpoint sends and receives opaque packets (a header
 * and a payload, at most max_packet bytes in all) to and from other endpoints named by address.
 * Backends fill a fab_ops_t; the engine never sees which one it has.
 *
 * Backends: "ofi" (libfabric endpoints; provider from GICE_FI_PROVIDER, default: the first of
 * shm, net, tcp that opens, or of net, tcp for a job spanning hosts: fab_attr_t.cross_host).
 * Every provider but one opens a reliable RDM endpoint (exactly once, e.g. "shm", "net" (libfabric
 * 1.17's native RDM over TCP), "tcp" = "tcp;ofi_rxm", "udp;ofi_rxd"); GICE_FI_PROVIDER=udp (exactly "udp") opens
 * a raw datagram endpoint of the udp provider instead (FI_EP_DGRAM: packets may be lost,
 * duplicated or reordered; at most max_msg_size bytes, 1472 with libfabric 1.17), for the
 * engine's own reliability to work against a truly lossy link. More later (NVLink plane).
 *
 * Decorators: fab_fault.h wraps any endpoint to inject network faults (GICE_FAULTS) on send.
 *
 * Thread safety: an endpoint is used by one thread at a time (the caller serializes: the CT
 * engine holds its link lock). Per packet: no malloc, no lock; send copies into a pre-registered
 * tx buffer, so the caller's buffers are reusable as soon as send returns.
 */
#ifndef GICE_FABRIC_H
#define GICE_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include "emu/common/common.h"
#include "emu/common/config.h"

#define FAB_ADDR_MAX 128 /* bytes of a raw endpoint address */

typedef uint64_t fab_addr_t; /* handle of a peer inserted into an endpoint's address vector */
#define FAB_ADDR_UNKNOWN UINT64_MAX
typedef struct fab_ep fab_ep_t;

typedef struct {
	const char *provider; /* NULL: GICE_FI_PROVIDER, else the automatic choice (fab_open) */
	int cross_host;       /* for the automatic choice: some peer is on another host, so skip
			       * shm (which reaches only this machine) */
	size_t max_packet;    /* largest header+payload this endpoint must carry (a datagram
			       * endpoint may grant less: see fab_ep.max_packet) */
	uint32_t tx_depth;    /* send buffers (0: GICE_FAB_TX_DEPTH) */
	uint32_t rx_depth;    /* posted receive buffers (0: GICE_FAB_RX_DEPTH) */
} fab_attr_t;

enum { FAB_EV_RX = 1, FAB_EV_ERR = 2, FAB_EV_READ = 3 };

/* What a peer needs to read a region exposed with mr_expose (a read grant): the provider's key
 * of that registration and the base the remote address is counted from (the region's virtual
 * address on FI_MR_VIRT_ADDR providers, else 0: the offset in the region). */
typedef struct {
	uint64_t key, addr;
} fab_mr_info_t;
typedef struct fab_mr fab_mr_t; /* one exposed region (mr_expose) */

typedef struct {
	int type;        /* FAB_EV_RX: a packet in buf/len; FAB_EV_ERR: a failed send or receive */
	void *buf;       /* FAB_EV_RX: packet bytes, valid until fab_release(ep, buf) */
	size_t len;
	int status;      /* FAB_EV_ERR: GICE_ERR_* (provider error converted once, here) */
	fab_addr_t peer; /* FAB_EV_RX: the sender as inserted here, when the endpoint can tell
			  * (fab_ep.source) and knows it; FAB_EV_ERR of a send: destination, when
			  * known. Else FAB_ADDR_UNKNOWN */
	void *ctx;       /* FAB_EV_READ: the read's ctx; status is its outcome */
} fab_event_t;

typedef struct {
	const char *name;
	int (*open)(const fab_attr_t *attr, fab_ep_t **out);
	void (*close)(fab_ep_t *ep);
	/* raw address of this endpoint, to hand to peers */
	int (*getname)(fab_ep_t *ep, void *addr, size_t *len);
	/* make a peer sendable; *out names it in send */
	int (*insert)(fab_ep_t *ep, const void *addr, size_t len, fab_addr_t *out);
	/* copy hdr and payload into one packet and post it; GICE_ERR_AGAIN when every tx buffer is
	 * in flight (poll, then retry); GICE_ERR_INVALID when hlen+plen > max_packet */
	int (*send)(fab_ep_t *ep, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload,
		    size_t plen);
	/* progress: reap tx completions, return up to max received packets or errors */
	int (*poll)(fab_ep_t *ep, fab_event_t *ev, int max);
	/* give a received buffer back (reposted for receive) */
	void (*release)(fab_ep_t *ep, void *buf);
	/* 1 when nothing of the endpoint's own waits for a poll: no send or read in flight, no
	 * buffer to repost, no event queued (a poll can then only find arrivals); optional */
	int (*quiet)(fab_ep_t *ep);
	/* 1 when sends or reads of the endpoint's own are in flight, or their events wait for a
	 * poll: the provider completes them only while polled. Unlike quiet, receive buffers
	 * waiting to be posted again do not count (a later poll posts them); optional */
	int (*in_flight)(fab_ep_t *ep);
	/* fd that becomes readable when poll may have work, or -1 when the backend has none;
	 * before sleeping on it call trywait: 0 means safe to sleep, GICE_ERR_AGAIN means poll first
	 * (GICE_ERR_UNSUPPORTED without a wait fd). ofi with libfabric 1.17: tcp and raw udp
	 * datagrams have one; shm and udp;ofi_rxd have none (see fab_ofi.c) */
	int (*wait_fd)(fab_ep_t *ep);
	int (*trywait)(fab_ep_t *ep);
	/* Remote reads (ep->rma set when the provider offers them). mr_reg registers the one region
	 * (device memory) this endpoint reads into, for local access only (FI_READ: no peer can
	 * read or write through it); GICE_ERR_UNSUPPORTED without RMA, GICE_ERR_BUSY the second
	 * time. mr_expose registers [off, off+len) of that region as its own provider region that
	 * peers may read (FI_REMOTE_READ) with the key in *info, nothing outside it; mr_revoke
	 * closes it: reads with its key fail at this provider from then on. read copies len bytes
	 * at remote_off of the peer's exposed region remote into local_off of ours; completion is
	 * a FAB_EV_READ event carrying ctx. GICE_ERR_AGAIN when FAB_READS_MAX reads are in flight. */
	int (*mr_reg)(fab_ep_t *ep, void *base, size_t len);
	int (*mr_expose)(fab_ep_t *ep, uint64_t off, size_t len, fab_mr_t **mr, fab_mr_info_t *info);
	void (*mr_revoke)(fab_ep_t *ep, fab_mr_t *mr);
	int (*read)(fab_ep_t *ep, fab_addr_t src, uint64_t local_off, size_t len, const fab_mr_info_t *remote,
		    uint64_t remote_off, void *ctx);
	/* dest has closed: drop whatever the endpoint still holds for it (NULL: it holds nothing) */
	void (*forget)(fab_ep_t *ep, fab_addr_t dest);
} fab_ops_t;

#define FAB_READS_MAX 64

/* Every endpoint starts with this; backends embed it first. */
struct fab_ep {
	const fab_ops_t *ops;
	char provider[32]; /* provider actually in use, e.g. "tcp;ofi_rxm" or "shm" */
	int rma;           /* remote reads available (mr_reg/read) */
	int ordered;       /* 1: poll returns the packets of one sender in send order (the provider
			    * granted FI_ORDER_SAS); 0: they may come reordered */
	int reliable;      /* 1: the provider delivers every packet exactly once (RDM); 0: it may
			    * drop or duplicate them (datagrams) */
	int source;        /* 1: a received packet names its sender (FI_SOURCE): fab_event_t.peer
			    * is the handle insert gave for it, FAB_ADDR_UNKNOWN for an endpoint
			    * never inserted here */
	int closed_peer_unsafe; /* 1: sending to a peer whose endpoint has closed, or progress after
				 * an in-process peer closed, may crash (libfabric 1.17 shm): do not
				 * send to a peer that may be gone, keep closed peers' endpoints */
	size_t max_packet; /* largest header+payload this endpoint carries, as granted: the
			    * requested fab_attr_t.max_packet, or less on a datagram endpoint */
	_Atomic uint32_t held; /* packets a decorator (fab_fault) holds to send later; they go out
				* from later send and poll calls, so keep polling while non-zero */
};

/* Open an endpoint: backend "ofi"; provider attr->provider, else GICE_FI_PROVIDER, else the first
 * that opens of shm, net, tcp (attr->cross_host: of net, tcp). Socket providers are bound to GICE_FAB_IFACE (see fab_params).
 * "udp" opens a datagram endpoint (reliable 0, ordered 0, no RMA) whose max_packet is clamped
 * to the provider's max_msg_size; any other provider an RDM endpoint (reliable 1).
 * GICE_ERR_NOT_FOUND: libfabric has no such provider with RDM messaging (or, for "udp", datagram
 * messaging) here;
 * GICE_ERR_INVALID: bad attributes (max_packet 0, or above an RDM provider's limit);
 * GICE_ERR_CONFIG: a bad GICE_FAB_* value; GICE_ERR_FABRIC / NO_MEMORY: set-up failed. */
int fab_open(const fab_attr_t *attr, fab_ep_t **out);

static inline void fab_close(fab_ep_t *ep) { ep->ops->close(ep); }
static inline int fab_getname(fab_ep_t *ep, void *addr, size_t *len) { return ep->ops->getname(ep, addr, len); }
static inline int fab_insert(fab_ep_t *ep, const void *addr, size_t len, fab_addr_t *out)
{
	return ep->ops->insert(ep, addr, len, out);
}
static inline int fab_send(fab_ep_t *ep, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload,
			   size_t plen)
{
	return ep->ops->send(ep, dest, hdr, hlen, payload, plen);
}
static inline int fab_poll(fab_ep_t *ep, fab_event_t *ev, int max) { return ep->ops->poll(ep, ev, max); }
static inline void fab_release(fab_ep_t *ep, void *buf) { ep->ops->release(ep, buf); }
/* See fab_ops_t.quiet; 0 for a backend or decorator without it (always poll) and while a
 * decorator holds packets. */
static inline int fab_quiet(fab_ep_t *ep)
{
	return ep->ops->quiet && !atomic_load_explicit(&ep->held, memory_order_relaxed) && ep->ops->quiet(ep);
}
/* See fab_ops_t.in_flight; 1 for a backend or decorator without it and while a decorator holds
 * packets. */
static inline int fab_in_flight(fab_ep_t *ep)
{
	return !ep->ops->in_flight || atomic_load_explicit(&ep->held, memory_order_relaxed) || ep->ops->in_flight(ep);
}
static inline int fab_wait_fd(fab_ep_t *ep) { return ep->ops->wait_fd(ep); }
static inline int fab_trywait(fab_ep_t *ep) { return ep->ops->trywait(ep); }
static inline void fab_forget(fab_ep_t *ep, fab_addr_t dest)
{
	if (ep->ops->forget)
		ep->ops->forget(ep, dest);
}
static inline int fab_mr_reg(fab_ep_t *ep, void *base, size_t len) { return ep->ops->mr_reg(ep, base, len); }
static inline int fab_mr_expose(fab_ep_t *ep, uint64_t off, size_t len, fab_mr_t **mr, fab_mr_info_t *info)
{
	return ep->ops->mr_expose(ep, off, len, mr, info);
}
static inline void fab_mr_revoke(fab_ep_t *ep, fab_mr_t *mr) { ep->ops->mr_revoke(ep, mr); }
static inline int fab_read(fab_ep_t *ep, fab_addr_t src, uint64_t local_off, size_t len,
			   const fab_mr_info_t *remote, uint64_t remote_off, void *ctx)
{
	return ep->ops->read(ep, src, local_off, len, remote, remote_off, ctx);
}

/* Whether addr, a raw endpoint address of provider as fab_getname gives it, is a loopback
 * address (127.0.0.0/8, ::1, ::ffff:127.x.y.z), which no other host reaches. Decoded only for
 * providers whose addresses are sockaddrs: tcp, udp, sockets, net and their layered names
 * ("tcp;ofi_rxm", "udp;ofi_rxd"); 0 for any other provider or a malformed address. When it is,
 * text (if not NULL) receives it as "127.0.0.1:PORT" or "[::1]:PORT". */
int fab_addr_loopback(const char *provider, const void *addr, size_t len, char *text, size_t textlen);
/* For messages: the variable that chose the interface provider binds in this process, as
 * "FI_TCP_IFACE=lo" when the user set it, else how GICE_FAB_IFACE filled it in. */
void fab_iface_source(const char *provider, char *text, size_t len);

/* libfabric 1.17's shm provider names its regions /dev/shm/PID:DOMAIN:EP and creates them
 * exclusively; a process killed outright leaves them behind, and a later process given the same
 * pid then cannot enable shm endpoints. Remove the regions of pid last written before before_s
 * (CLOCK_REALTIME seconds; 0: all of them). Call it only for a pid that is dead (fab_open does
 * it for its own pid's leftovers). Returns how many were removed. */
int fab_shm_remove(int pid, double before_s);
/* An endpoint that will never be closed (left to the process's exit with a device whose thread
 * is stuck in the provider): unlink its shm region's name now, as no close will and the exit
 * does not, so that the region does not outlive the process in /dev/shm. Whoever maps it keeps
 * it; a peer that would connect to it from now on finds it gone, as it finds a closed one.
 * Returns 1 if a region was unlinked, 0 for other providers (they name no region) or if none
 * was. */
int fab_shm_unlink_left(fab_ep_t *ep);

/* GICE_FI_PROVIDER, GICE_FAB_IFACE, GICE_FAB_TX_DEPTH, GICE_FAB_RX_DEPTH, GICE_FAULTS (parsed by
 * gice_faults_parse, emu/common/faults.h, and applied by whoever wraps endpoints with fab_fault). */
extern const gice_param_t fab_params[];

#endif
