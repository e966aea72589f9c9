/* ct_params.c: the engine's parameters (GICE_MTU, GICE_CT_*, GICE_RTO_*, ...) and how a device
 * reads them at creation: sizes, "auto" choices per provider, QoS weights. */
#include "emu/ct_engine/ct_internal.h"

#include <stdio.h>
#include <string.h>

const gice_param_t ct_params[] = {
	{"GICE_CTS", "2", "CT engine threads per device", GICE_PARAM_U64, 1, TM_MAX_CTS},
	{"GICE_MTU", "16384",
	 "largest packet on the link in bytes, the 96-byte header included (connections may use less)",
	 GICE_PARAM_SIZE, CT_MTU_MIN, CT_MAX_PAYLOAD},
	{"GICE_CT_SPIN_US", "200",
	 "microseconds a CT polls after its last work before it sleeps on its doorbell (a kernel that waits and "
	 "steps the CTs spins as long in their place); unset, at most CPUs / (the job's devices on this machine) "
	 "CT threads of a device spin at once, the others sleep at once",
	 GICE_PARAM_U64, 0, 10000000},
	{"GICE_CT_POLL_US", "2000",
	 "while idle, CT 0 wakes this often to poll the fabric for arriving packets (microseconds); over a "
	 "provider whose wait fd CT 0 cannot sleep on (shm, udp;ofi_rxd, net) it bounds how late an idle device "
	 "sees a packet from another process or host",
	 GICE_PARAM_U64, 10, 10000000},
	{"GICE_CT_MAX_DESCS", "4096", "armed descriptors per device", GICE_PARAM_U64, 16, 1u << 20},
	{"GICE_CT_MAX_PEERS", "64", "largest global device id + 1 a device can talk to", GICE_PARAM_U64, 1, 65536},
	{"GICE_CT_CREDITS", "128", "unacknowledged packets in flight per peer (any value works with any GICE_CT_ACK_EVERY)",
	 GICE_PARAM_U64, 1, CT_PSN_WIN},
	{"GICE_CT_ACK_EVERY", "16",
	 "a receiver acknowledges at least every this many packets, or every GICE_CT_CREDITS/2 if fewer (and every "
	 "message end; the rest after a quarter of GICE_RTO_MIN_US)",
	 GICE_PARAM_U64, 1, CT_PSN_WIN / 2},
	{"GICE_CT_RNDV_BYTES", "auto",
	 "puts and gets of at least this many bytes move by rendezvous: one remote read (or NVLink plane copy) "
	 "after the peer validated the range, when the provider offers reads or the peer is on the plane; "
	 "auto: a size per provider, op, path and whether CTs spin (GICE_CT_SPIN_US), measured (docs/protocol.md); "
	 "0: always packets",
	 GICE_PARAM_STR, 0, UINT32_MAX},
	{"GICE_QOS_WEIGHTS", "8,4,2,1", "packets per turn of QoS classes 0..3 in the MPG weighted round robin",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_RTO_MIN_US", "1000", "smallest retransmission timeout (microseconds); the timeout follows the measured "
	 "round trip (srtt + 4 rttvar) and doubles at each expiry", GICE_PARAM_U64, 10, 10000000},
	{"GICE_RTO_MAX_US", "100000", "largest retransmission timeout (microseconds)", GICE_PARAM_U64, 100, 60000000},
	{"GICE_RELIABLE", "auto",
	 "1: gice retransmits lost packets itself (timeouts, selective acks); 0: it relies on the provider; "
	 "auto: 1 on unreliable providers (udp datagrams) or when GICE_FAULTS injects network faults",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_CHECKSUM", "auto",
	 "1: every packet carries a CRC32C of header and payload, checked on receipt (a bad one is dropped and "
	 "retransmitted); 0: none; auto: 1 on unreliable providers or when GICE_FAULTS corrupts packets",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_CT_AUTH", "1",
	 "1: every packet carries a MAC under the job's key (from the bootstrap's secret) and its claimed sender "
	 "must be the endpoint it came from; packets failing either are dropped and counted (rx_auth_bad); "
	 "0: neither (to measure the cost; every rank of the job must agree)",
	 GICE_PARAM_U64, 0, 1},
	{"GICE_CT_POLL_EVERY", "16",
	 "a pass of the link polls the fabric only when same-host peers announced packets (their kicks count "
	 "them), a peer is on another host or the endpoint has work of its own; and every this many passes "
	 "whatever the counts say; 0: only then (tests use it to show the counts are exact)",
	 GICE_PARAM_U64, 0, 1u << 20},
	{"GICE_CT_LEASE_US", "10",
	 "a kernel that queues a request counts for this long as looking at its device's link (it does at its "
	 "next request if anything arrived): same-host peers' packets meanwhile do not wake its CT 0 unless the "
	 "kernel has not come back by then (microseconds; 0: they always do)",
	 GICE_PARAM_U64, 0, 60000000},
	{"GICE_BUNDLE_BYTES", "auto",
	 "small packets to one peer travel bundled, back to back in fabric messages of up to this many bytes or "
	 "GICE_MTU, whichever is larger; auto: a size per provider, measured (docs/protocol.md): 65536 over tcp, "
	 "GICE_MTU elsewhere; every rank of the job must agree",
	 GICE_PARAM_STR, 0, CT_MAX_PAYLOAD},
	{"GICE_CT_SMALL_PUTS", "auto",
	 "puts of at most this many bytes queued one after another to one peer share a packet (PUTS: one header, "
	 "one MAC, each put a 32-byte entry); 0: every put its own packets; auto: 1024, and 0 while GICE_FAULTS "
	 "injects network faults (the injector then sees one packet per put, as before)",
	 GICE_PARAM_STR, 0, 65535},
	{NULL, NULL, NULL, 0, 0, 0},
};

enum { P_MTU = 1, P_RNDV = 8, P_BUNDLE = 17, P_SMALL = 18 };
_Static_assert(sizeof(ct_params) / sizeof(ct_params[0]) == P_SMALL + 2, "indices follow the table");

/* "auto", "0" or "1" → -1, 0, 1; GICE_ERR_CONFIG otherwise. */
static int param_auto(const gice_param_t *p, int *out)
{
	const char *v = gice_param_str(p);

	if (!strcmp(v, "auto"))
		*out = -1;
	else if (!strcmp(v, "0") || !strcmp(v, "1"))
		*out = v[0] - '0';
	else {
		gice_error("ct", "%s=\"%s\": expected auto, 0 or 1", p->name, v);
		return GICE_ERR_CONFIG;
	}
	return GICE_OK;
}

/* A parameter that is "auto" (*automatic set, *v untouched) or a size in bytes (what 0 means:
 * zero, in the message of a bad value). */
static int size_or_auto(const gice_param_t *p, const char *zero, uint64_t *v, int *automatic)
{
	gice_param_t size = *p;

	size.type = GICE_PARAM_SIZE;
	*automatic = !strcmp(gice_param_str(p), "auto");
	if (*automatic)
		return GICE_OK;
	if (gice_param_str(p)[0] < '0' || gice_param_str(p)[0] > '9') {
		gice_error("ct", "%s=\"%s\": expected auto or a size in bytes (0: %s)", p->name, gice_param_str(p), zero);
		return GICE_ERR_CONFIG;
	}
	return gice_param_u64(&size, v); /* logged there: suffix, range */
}

/* GICE_CT_RNDV_BYTES: "auto" (ct_rndv_auto for this endpoint's provider, and whether its CTs
 * spin: spin_ns, read before) or one size for every op and path (0: never). Rendezvous reads
 * and copies go around the fault injector: while GICE_FAULTS injects network faults, auto keeps
 * the former 64 KiB, so that it sees the packets it saw. */
static int rndv_param(ct_engine_t *e, const gice_param_t *p)
{
	uint64_t v = 0;
	int rc, automatic;

	if ((rc = size_or_auto(p, "never", &v, &automatic)))
		return rc;
	if (automatic && gice_faults_any_net(e->attr.faults)) {
		automatic = 0;
		v = 65536;
	}
	for (int get = 0; get < 2; get++)
		for (int plane = 0; plane < 2; plane++)
			e->rndv_from[get][plane] =
				automatic ? ct_rndv_auto(e->attr.ep->provider, get, plane, e->spin_ns > 0) : v;
	gice_debug("ct", "device %u over %s: rendezvous from %llu bytes (put) and %llu (get), on the NVLink plane "
		   "from %llu and %llu (GICE_CT_RNDV_BYTES=%s)", e->attr.gid, e->attr.ep->provider,
		   (unsigned long long)e->rndv_from[0][0], (unsigned long long)e->rndv_from[1][0],
		   (unsigned long long)e->rndv_from[0][1], (unsigned long long)e->rndv_from[1][1], gice_param_str(p));
	return GICE_OK;
}

int ct_provider_is(const char *provider, const char *prefix)
{
	size_t n = strlen(prefix);

	return !strncmp(provider, prefix, n) && (provider[n] == '\0' || provider[n] == ';');
}

/* GICE_BUNDLE_BYTES=auto: the largest bundle per provider (bundle_auto), never below the MTU.
 * Over tcp every fabric message costs both ends a turn of rxm and of the socket: 4 KiB puts (3
 * to a bundle of 16 KiB) went 1.31x faster in bundles of 64 KiB (gice-bench rate against
 * GICE_BUNDLE_BYTES=16384, 7 runs alternated); 8 B and 1 KiB puts showed no difference beyond
 * the noise, and over shm 64 KiB gave mixed results (docs/protocol.md, Packet). The fault
 * injector acts on fabric messages: while GICE_FAULTS injects network faults, auto keeps
 * bundles to the MTU, so that it sees the messages it saw. */
static const struct {
	const char *prefix; /* as ct_provider_is */
	uint64_t bytes;
} bundle_table[] = {
	{"tcp", 65536},
};

static uint64_t bundle_auto(const char *provider) /* 0: not listed (the MTU) */
{
	for (size_t i = 0; provider && i < GICE_ARRAY_SIZE(bundle_table); i++)
		if (ct_provider_is(provider, bundle_table[i].prefix))
			return bundle_table[i].bytes;
	return 0;
}

int ct_fabric_packet_bytes(uint64_t *out)
{
	uint64_t mtu, bundle = 0;
	int rc, automatic;

	if ((rc = gice_param_u64(&ct_params[P_MTU], &mtu)) || (rc = size_or_auto(&ct_params[P_BUNDLE], "GICE_MTU", &bundle, &automatic)))
		return rc;
	/* auto: the largest any provider bundles, whichever the endpoint turns out to use (a peer's
	 * bundle fits what we post, whatever provider each side chose) */
	for (size_t i = 0; automatic && i < GICE_ARRAY_SIZE(bundle_table); i++)
		bundle = GICE_MAX(bundle, bundle_table[i].bytes);
	*out = GICE_MAX(mtu, bundle);
	return GICE_OK;
}

static int bundle_param(ct_engine_t *e, uint64_t mtu)
{
	const char *prov = e->attr.ep->provider;
	uint64_t v = 0;
	int rc, automatic;

	if ((rc = size_or_auto(&ct_params[P_BUNDLE], "GICE_MTU", &v, &automatic)))
		return rc;
	if (automatic)
		v = gice_faults_any_net(e->attr.faults) ? 0 : bundle_auto(prov);
	v = GICE_MAX(v, mtu);
	if (e->attr.ep->max_packet && v > e->attr.ep->max_packet)
		v = e->attr.ep->max_packet; /* the endpoint's buffers (ct_fabric_packet_bytes); udp: 1472 */
	e->bundle_max = (uint32_t)v;
	gice_debug("ct", "device %u over %s: bundles of up to %u bytes (GICE_BUNDLE_BYTES=%s)", e->attr.gid, prov,
		   e->bundle_max, gice_param_str(&ct_params[P_BUNDLE]));
	return GICE_OK;
}

/* GICE_CT_SMALL_PUTS=auto: puts up to 1 KiB share packets (PUTS), except while the fault
 * injector acts on the link, which then sees one packet per put as it did. */
#define SMALL_PUTS_AUTO 1024u

static int small_param(ct_engine_t *e)
{
	uint64_t v = 0;
	int rc, automatic;

	if ((rc = size_or_auto(&ct_params[P_SMALL], "every put its own packets", &v, &automatic)))
		return rc; /* logged there, also a size above an entry's u16 len */
	if (automatic)
		v = gice_faults_any_net(e->attr.faults) ? 0 : SMALL_PUTS_AUTO;
	e->small_max = (uint32_t)v;
	return GICE_OK;
}

int ct_read_params(ct_engine_t *e)
{
	uint64_t v[8];
	const char *w;
	int rc;

	for (int i = 0; i < 8; i++)
		if ((rc = gice_param_u64(&ct_params[i], &v[i])))
			return rc;
	e->spin_ns = e->spin_cfg_ns = v[2] * 1000;
	int spin_set = 0;
	gice_param_raw(&ct_params[2], &spin_set);
	/* The device's share of the CPUs spins: one CT of each of two devices on two cores keeps
	 * a served peer from paying a wake-up per request (~20 us here), and four devices there
	 * spin none, as a spinner that must yield its core holds up a thread that has work. */
	e->spin_slots = e->attr.n_cts;
	if (!spin_set && e->attr.machine_devices)
		e->spin_slots = GICE_MIN(e->spin_slots, gice_cpus_usable() / e->attr.machine_devices);
	if (!e->spin_slots) {
		gice_debug("ct", "device %u: %u devices on this machine, %u CPUs: CTs sleep when idle", e->attr.gid,
			   e->attr.machine_devices, gice_cpus_usable());
		e->spin_ns = 0;
	}
	if ((rc = rndv_param(e, &ct_params[P_RNDV])))
		return rc;
	e->mtu_max = (uint32_t)v[P_MTU];
	if (e->attr.ep->max_packet && e->mtu_max > e->attr.ep->max_packet)
		e->mtu_max = (uint32_t)e->attr.ep->max_packet; /* datagrams: 1472 bytes on udp */
	if ((rc = bundle_param(e, e->mtu_max)) || (rc = small_param(e)))
		return rc;
	e->poll_ns = v[3] * 1000;
	e->max_descs = (uint32_t)v[4];
	e->max_peers = (uint32_t)v[5];
	e->credits = (uint32_t)v[6];
	e->ack_every = (uint32_t)v[7];
	if ((rc = gice_param_u64(&ct_params[10], &v[0])) || (rc = gice_param_u64(&ct_params[11], &v[1])))
		return rc;
	e->rto_min_ns = v[0] * 1000;
	e->rto_max_ns = GICE_MAX(v[1] * 1000, e->rto_min_ns);
	int rel, csum;
	if ((rc = param_auto(&ct_params[12], &rel)) || (rc = param_auto(&ct_params[13], &csum)))
		return rc;
	const gice_faults_t *f = e->attr.faults;
	int lossy = !e->attr.ep->reliable || gice_faults_any_net(f);
	atomic_store(&e->reliable, rel < 0 ? lossy : rel);
	atomic_store(&e->csum, csum < 0 ? !e->attr.ep->reliable || gice_faults_corrupts(f) : csum);
	if ((rc = gice_param_u64(&ct_params[14], &v[0])))
		return rc;
	e->auth = (int)v[0];
	if ((rc = gice_param_u64(&ct_params[15], &v[0])))
		return rc;
	e->poll_every = (uint32_t)v[0];
	if ((rc = gice_param_u64(&ct_params[16], &v[0])))
		return rc;
	e->lease_ns = v[0] * 1000;
	w = gice_param_str(&ct_params[9]);
	if (sscanf(w, "%u,%u,%u,%u", &e->weights[0], &e->weights[1], &e->weights[2], &e->weights[3]) != 4) {
		gice_error("ct", "GICE_QOS_WEIGHTS=\"%s\" is not four comma-separated numbers", w);
		return GICE_ERR_CONFIG;
	}
	for (int i = 0; i < CT_QOS_CLASSES; i++)
		if (e->weights[i] == 0 || e->weights[i] > 1024) {
			gice_error("ct", "GICE_QOS_WEIGHTS=\"%s\": weight %u of class %d is outside [1, 1024]", w,
				   e->weights[i], i);
			return GICE_ERR_CONFIG;
		}
	return GICE_OK;
}
