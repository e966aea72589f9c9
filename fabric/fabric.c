/* fabric.c: backend and provider choice for fab_open, and the GICE_FI_* / GICE_FAB_* / GICE_FAULTS
 * parameters. */
#include "fabric/fabric.h"

#include <string.h>

/* Backends, defined in their own files. */
extern const fab_ops_t fab_ofi_ops;

const gice_param_t fab_params[] = {
	{"GICE_FI_PROVIDER", "",
	 "libfabric provider (shm, net, tcp, udp, sockets, verbs, ...; passed to fi_getinfo; tcp is "
	 "tcp;ofi_rxm, net libfabric 1.17's native RDM over TCP); empty: the first that opens of shm, net, "
	 "tcp in a job on one host, of net, tcp in a job spanning hosts (machines or network namespaces: "
	 "shm reaches only its own machine; net keeps memory bounded under floods, docs/protocol.md "
	 "\"Floods\")",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_FAB_IFACE", "lo",
	 "network interface of the socket providers: copied into FI_TCP_IFACE, FI_UDP_IFACE, "
	 "FI_SOCKETS_IFACE and FI_NET_IFACE when those are unset (keeps traffic on loopback or in our "
	 "own namespace)",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_FAB_TX_DEPTH", "256", "send buffers per endpoint (packets in flight)", GICE_PARAM_U64, 1, 65536},
	{"GICE_FAB_RX_DEPTH", "256", "receive buffers posted per endpoint", GICE_PARAM_U64, 1, 65536},
	{"GICE_FAB_RXM_MSG_RX", "8",
	 "receive buffers tcp;ofi_rxm posts per connection: copied into FI_OFI_RXM_MSG_RX_SIZE when that "
	 "is unset, before libfabric first reads it; with libfabric 1.17's default (128) a flood of "
	 "small packets makes rxm buffer 16 KiB per packet without limit, with 8 usually not "
	 "(docs/protocol.md, \"Floods\"; provider net is bounded); 0: leave libfabric's default",
	 GICE_PARAM_U64, 0, 65536},
	{"GICE_FAULTS", "",
	 "faults to inject (docs/faults.md); empty: none. Groups separated by ';', items by ','. Per "
	 "packet sent: drop=P dup=P reorder=P corrupt=P (P in [0,1]), delay_us=N, latency=DUR, "
	 "rate=N(B|KB|MB|GB)ps, partition=A|B, nth_put=N, corrupt_msg=N, each with an optional window "
	 "@T+D, or @collN+K (from the device's N-th collective operation for K of them); scope of a group: "
	 "link=A->B, peer=P, rank=R, after_ops=N, ctl=1; seed=N (default 1); stall_ct=C@T+D (repeatable), "
	 "hang_rank=R@T, kill_rank=R@T (or @collN: at the start of rank R's N-th collective). T, D: 2s, "
	 "500ms, 200us, 100ns or bare ms from the end of the device's open; D, K may be inf",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_FAULT_SCRIPT", "",
	 "a fault scenario file (docs/faults.md): one GICE_FAULTS group a line, each line may start "
	 "with a window @T+D or @collN+K; read at gice_init after GICE_FAULTS; empty: none",
	 GICE_PARAM_STR, 0, 0},
	{NULL, NULL, NULL, 0, 0, 0},
};

static const fab_ops_t *const fab_backends[] = {&fab_ofi_ops};

/* The automatic choice, best first: on one host shared memory; between hosts (and where shm does
 * not open) net, whose receive buffering is bounded (docs/protocol.md, "Floods"), then
 * tcp;ofi_rxm, for a libfabric without net. */
static const char *const auto_one_host[] = {"shm", "net", "tcp", NULL};
static const char *const auto_cross_host[] = {"net", "tcp", NULL};

int fab_open(const fab_attr_t *attr, fab_ep_t **out)
{
	const fab_ops_t *be = fab_backends[0]; /* only "ofi" for now */
	const char *env = gice_param_str(&fab_params[0]);
	const char *const *auto_providers;
	fab_attr_t a;
	int rc = GICE_ERR_NOT_FOUND;

	if (!attr || !out) {
		gice_error("fab", "fab_open: attr and out are required");
		return GICE_ERR_INVALID;
	}
	a = *attr;
	if ((attr->provider && *attr->provider) || *env) {
		a.provider = (attr->provider && *attr->provider) ? attr->provider : env;
		rc = be->open(&a, out);
		if (rc == GICE_ERR_NOT_FOUND)
			gice_error("fab", "no libfabric provider \"%s\" with %s messaging here (fi_info -l lists "
				   "them)", a.provider, strcmp(a.provider, "udp") ? "RDM" : "datagram");
		return rc;
	}
	auto_providers = attr->cross_host ? auto_cross_host : auto_one_host;
	for (size_t i = 0; auto_providers[i]; i++) {
		a.provider = auto_providers[i];
		rc = be->open(&a, out);
		if (rc == GICE_OK || rc == GICE_ERR_INVALID || rc == GICE_ERR_CONFIG)
			return rc; /* opened, or the attributes are wrong for any provider */
		gice_info("fab", "provider %s did not open (%s), trying the next one", a.provider,
			  gice_status_name(rc));
	}
	gice_error("fab", "no libfabric provider opened: tried %s (set GICE_FI_PROVIDER)",
		   attr->cross_host ? "net, tcp (the job spans hosts)" : "shm, net, tcp");
	return rc;
}
