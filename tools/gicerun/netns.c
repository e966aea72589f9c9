/* netns.c: --netns. Each listed namespace is probed from a forked child (gicerun itself never
 * changes namespace) for its first IPv4 interface and, for the first, a free bootstrap port; a
 * rank enters its namespace just before exec. */
#include "tools/gicerun/gicerun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the caller's network namespace: the first non-loopback interface with an IPv4 address
 * (getifaddrs order, which is interface index order) and that address. */
static int first_iface(ns_probe_t *r)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa)) {
		snprintf(r->err, sizeof(r->err), "getifaddrs: %s", strerror(errno));
		return -1;
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		snprintf(r->iface, sizeof(r->iface), "%s", i->ifa_name);
		inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, r->addr, sizeof(r->addr));
		break;
	}
	freeifaddrs(ifa);
	if (!i) {
		snprintf(r->err, sizeof(r->err), "no non-loopback interface with an IPv4 address");
		return -1;
	}
	return 0;
}

/* A free TCP port on addr: bind port 0, read it back, close. The port is free now; rank 0 binds
 * it a moment later (a small race with other programs picking ports, as with any launcher). */
int free_port(const char *addr, int *port, char *err, size_t errlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	inet_pton(AF_INET, addr, &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		snprintf(err, errlen, "cannot bind a TCP port on %s: %s", addr, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	*port = ntohs(sa.sin_port);
	return 0;
}

int enter_netns(const char *name, char *err, size_t errlen)
{
	char path[sizeof("/run/netns/") + NAME_MAX]; /* parse_netns bounds the name */
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (setns(fd, CLONE_NEWNET)) {
		snprintf(err, errlen, "cannot enter it: setns(%s, CLONE_NEWNET): %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Look inside namespace `name` from a forked child (so gicerun itself never changes namespace);
 * with want_port, also find a free port on the interface address there. */
int probe_netns(const char *name, int want_port, ns_probe_t *out)
{
	ns_probe_t r = {0};
	int p[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "%s: pipe: %s\n", prog_name, strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog_name, strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		if (!enter_netns(name, r.err, sizeof(r.err)) && !first_iface(&r) &&
		    (!want_port || !free_port(r.addr, &r.port, r.err, sizeof(r.err))))
			r.ok = 1;
		/* one write, smaller than PIPE_BUF: atomic */
		n = write(p[1], &r, sizeof(r));
		_exit(n == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	do
		n = read(p[0], &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(r)) {
		fprintf(stderr, "%s: network namespace '%s': probe process failed\n", prog_name, name);
		return -1;
	}
	r.err[sizeof(r.err) - 1] = '\0';
	if (!r.ok) {
		fprintf(stderr, "%s: network namespace '%s': %s\n", prog_name, name, r.err);
		return -1;
	}
	*out = r;
	return 0;
}

/* The socket providers' interface variables: with --netns each rank's must name its
 * namespace's interface, or it advertises an address the other namespaces cannot reach. */
static const char *const iface_vars[] = {"FI_TCP_IFACE", "FI_UDP_IFACE", "FI_SOCKETS_IFACE", "FI_NET_IFACE"};
#define NIFACE_VARS ((int)(sizeof(iface_vars) / sizeof(iface_vars[0])))
static int iface_override[NIFACE_VARS]; /* set in our environment: replaced in every rank */

/* --netns: ranks talk across namespaces, so the provider must be one that crosses them, and the
 * socket providers must bind each namespace's interface. Pick net (libfabric 1.17's native RDM
 * over TCP, bounded under floods: docs/protocol.md, "Floods") when no provider is set, refuse
 * shared-memory ones, and note the interface variables to replace; say so on stderr. */
int netns_fabric_env(const ns_probe_t *ns_info)
{
	const char *prov = getenv("GICE_FI_PROVIDER");

	if (!prov || !*prov) {
		if (setenv("GICE_FI_PROVIDER", "net", 1)) {
			fprintf(stderr, "%s: setenv: %s\n", prog_name, strerror(errno));
			return -1;
		}
		fprintf(stderr, "%s: --netns: GICE_FI_PROVIDER=net for every rank (libfabric's native RDM over "
				"TCP; the default on one host, shm, would pass the bytes through shared memory instead "
				"of across the namespaces; GICE_FI_PROVIDER=tcp chooses tcp;ofi_rxm)\n",
			prog_name);
	} else {
		size_t n = strcspn(prov, ";");
		if ((n == 3 && !strncmp(prov, "shm", 3)) || (n == 3 && !strncmp(prov, "sm2", 3))) {
			fprintf(stderr, "%s: --netns: GICE_FI_PROVIDER=%s cannot cross network namespaces (it goes "
					"through shared memory); unset it (gicerun then picks net) or choose net, tcp, "
					"udp or sockets\n",
				prog_name, prov);
			return -1;
		}
	}
	for (int v = 0; v < NIFACE_VARS; v++) {
		const char *val = getenv(iface_vars[v]);
		char list[256] = "";
		size_t off = 0;
		int differs = 0;
		if (!val || !*val)
			continue; /* unset: the library copies GICE_FAB_IFACE, which we set */
		iface_override[v] = 1;
		for (int i = 0; i < opt.nnetns; i++) {
			int seen = 0;
			for (int j = 0; j < i && !seen; j++)
				seen = !strcmp(ns_info[i].iface, ns_info[j].iface);
			differs |= strcmp(val, ns_info[i].iface) != 0;
			if (!seen && off + IF_NAMESIZE + 8 < sizeof(list))
				off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", off ? ", " : "",
							ns_info[i].iface);
		}
		if (differs)
			fprintf(stderr, "%s: --netns: %s=%s replaced in every rank by its namespace's interface (%s)\n",
				prog_name, iface_vars[v], val, list);
	}
	return 0;
}
int netns_rank_env(int r, const ns_probe_t *ns_info)
{
	const char *iface = ns_info[r % opt.nnetns].iface;

	if (setenv("GICE_FAB_IFACE", iface, 1))
		return -1;
	for (int v = 0; v < NIFACE_VARS; v++)
		if (iface_override[v] && setenv(iface_vars[v], iface, 1))
			return -1;
	return 0;
}
