/* fab_addr.c: the ofi backend's socket addresses and interfaces: GICE_FAB_IFACE copied into
 * the socket providers' interface variables before libfabric reads them (fab_ofi_bind_iface,
 * called when an endpoint opens), and the helpers that tell a loopback peer address and where
 * the interface came from (fab_addr_loopback, fab_iface_source; see fabric.h). */
#include "fabric/fab_ofi_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The socket providers' interface variables, and which of them fab_ofi_bind_iface filled in from
 * GICE_FAB_IFACE (the others, if set, the user chose). */
static const char *const ofi_iface_vars[] = {"FI_TCP_IFACE", "FI_UDP_IFACE", "FI_SOCKETS_IFACE", "FI_NET_IFACE"};
static int ofi_iface_copied[GICE_ARRAY_SIZE(ofi_iface_vars)];

/* Copy GICE_FAB_IFACE into the socket providers' interface variables the user left unset. They
 * are read when libfabric initializes its providers (the first fi_getinfo). */
void fab_ofi_bind_iface(void)
{
	const char *iface = gice_param_str(&fab_params[P_IFACE]);

	for (size_t i = 0; i < GICE_ARRAY_SIZE(ofi_iface_vars); i++) {
		const char *v = getenv(ofi_iface_vars[i]);
		if (!v || !*v) {
			setenv(ofi_iface_vars[i], iface, 1);
			ofi_iface_copied[i] = 1;
		}
	}
}

/* tcp;ofi_rxm (libfabric 1.17) copies each message it reads from a connection into one of
 * FI_OFI_RXM_MSG_RX_SIZE posted buffers of 16 KiB and keeps those no receive is posted for (its
 * unexpected messages) in buffers it allocates without limit: a flood of small packets while the
 * CT falls behind took a device from 0.1 to 2.5-5 GB with the default of 128. With at most 8
 * the same 300,000-packet flood usually adds ~45-75 MB, but not always (docs/protocol.md,
 * "Floods": the provider "net", the default between hosts, is the bounded choice). Read when libfabric initializes rxm:
 * before the first fi_getinfo. */
int fab_ofi_bound_rxm(void)
{
	uint64_t n;
	char v[24];
	int rc = gice_param_u64(&fab_params[P_RXM_MSG_RX], &n);

	if (rc || !n || getenv("FI_OFI_RXM_MSG_RX_SIZE"))
		return rc;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)n);
	setenv("FI_OFI_RXM_MSG_RX_SIZE", v, 1);
	return GICE_OK;
}

/* Index in ofi_iface_vars of the variable that picks the interface of provider's core (the name
 * before any ';' layer: "tcp;ofi_rxm" is tcp), or -1 for a provider whose addresses are not
 * sockaddrs. */
static int ofi_sockaddr_prov(const char *provider)
{
	static const char *const core[] = {"tcp", "udp", "sockets", "net"}; /* as ofi_iface_vars */
	size_t n = strcspn(provider, ";");

	for (size_t i = 0; i < GICE_ARRAY_SIZE(core); i++)
		if (n == strlen(core[i]) && !strncmp(provider, core[i], n))
			return (int)i;
	return -1;
}

int fab_addr_loopback(const char *provider, const void *addr, size_t len, char *text, size_t textlen)
{
	struct sockaddr_storage ss = {0};
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	int loop = 0;

	if (!provider || !addr || ofi_sockaddr_prov(provider) < 0 || len < sizeof(sa_family_t))
		return 0;
	memcpy(&ss, addr, GICE_MIN(len, sizeof(ss)));
	if (ss.ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		loop = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		const uint8_t *b = in6->sin6_addr.s6_addr;
		loop = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127);
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	} else {
		return 0;
	}
	if (loop && text && textlen)
		snprintf(text, textlen, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
	return loop;
}

void fab_iface_source(const char *provider, char *text, size_t len)
{
	int i = provider ? ofi_sockaddr_prov(provider) : -1;
	const char *v = i >= 0 ? getenv(ofi_iface_vars[i]) : NULL;
	const char *g = getenv(fab_params[P_IFACE].name);

	if (i < 0)
		snprintf(text, len, "provider %s (no interface variable)", provider ? provider : "?");
	else if (!ofi_iface_copied[i] && v && *v)
		snprintf(text, len, "%s=%s", ofi_iface_vars[i], v);
	else if (g && *g)
		snprintf(text, len, "GICE_FAB_IFACE=%s (copied into the unset %s)", g, ofi_iface_vars[i]);
	else
		snprintf(text, len, "GICE_FAB_IFACE's default %s (%s unset)", fab_params[P_IFACE].defval,
			 ofi_iface_vars[i]);
}
