/* boot_clock.c: each rank's CLOCK_MONOTONIC against rank 0's, for traces that line up across
 * ranks (boot_clock). Under gicerun, pings over the rendezvous sockets. Under PMIx there are no
 * such sockets: ranks on rank 0's machine (the same boot id) share its clock exactly, and the
 * others ping rank 0 over a socket it opens for that alone (GICE_CLOCK_SYNC).
 *
 * A ping: t1 = the rank's clock, sent; rank 0 answers with its clock t0; back at t2. The rank
 * keeps the ping of the shortest round trip: offset = t0 - (t1 + t2) / 2. Rank 0 read t0
 * between t1 and t2, so the true offset is within rtt / 2 of the estimate, whatever the delays
 * of each direction. */
#include "fabric/boot_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/common/common.h"

#define BOOT_CLOCK_PINGS 8
#define CLOCK_MAGIC 0x434c4f4bu   /* "CLOK" */
#define CLOCK_ADDRS 8
#define CLOCK_WAIT_NS 5000000000ull /* the PMIx clock phase gives up after this */

const gice_param_t boot_clock_params[] = {
	{"GICE_CLOCK_SYNC", "auto",
	 "under PMIx (srun, mpirun), how each rank's clock is aligned with rank 0's for traces: auto: ranks on rank 0's "
	 "machine share its clock, the others ping rank 0 over a TCP socket it opens for that; ping: every rank "
	 "pings; off: none (the trace says its clocks are not aligned). Under gicerun, ranks always ping over the "
	 "rendezvous",
	 GICE_PARAM_STR, 0, 0},
	{NULL, NULL, NULL, 0, 0, 0},
};

/* rank 0's side: answer BOOT_CLOCK_PINGS pings on fd */
static int serve_pings(int fd, uint64_t deadline)
{
	uint64_t t0, t1;
	int rc;

	for (int i = 0; i < BOOT_CLOCK_PINGS; i++) {
		if ((rc = boot_xfer(fd, &t1, sizeof(t1), 0, deadline)))
			return rc;
		t0 = gice_now_ns();
		if ((rc = boot_xfer(fd, &t0, sizeof(t0), 1, deadline)))
			return rc;
	}
	return GICE_OK;
}

/* another rank's side: ping rank 0 on fd, keep the estimate of the shortest round trip */
static int ping_root(boot_t *b, int fd, uint64_t deadline)
{
	uint64_t t0, t1, t2;
	int rc;

	for (int i = 0; i < BOOT_CLOCK_PINGS; i++) {
		t1 = gice_now_ns();
		if ((rc = boot_xfer(fd, &t1, sizeof(t1), 1, deadline)) || (rc = boot_xfer(fd, &t0, sizeof(t0), 0, deadline)))
			return rc;
		t2 = gice_now_ns();
		if (!b->clock_rtt_ns || t2 - t1 < b->clock_rtt_ns) {
			b->clock_rtt_ns = GICE_MAX(t2 - t1, (uint64_t)2); /* 1 means exact */
			b->clock_offset_ns = (int64_t)(t0 - t1) - (int64_t)((t2 - t1) / 2);
		}
	}
	gice_debug("boot", "rank %u: clock offset to rank 0 %lld ns (+- %llu ns)", b->rank, (long long)b->clock_offset_ns,
		   (unsigned long long)(b->clock_rtt_ns / 2));
	return GICE_OK;
}

int boot_clock_sync(boot_t *b)
{
	uint64_t deadline = boot_deadline(b);
	int rc;

	if (b->rank != 0) {
		if ((rc = ping_root(b, b->fds[0], deadline)))
			gice_error("boot", "rank %u: clock alignment with rank 0 failed: %s", b->rank, gice_status_name(rc));
		return rc;
	}
	b->clock_rtt_ns = 1; /* its own clock: exact */
	for (uint32_t r = 1; r < b->size; r++)
		if ((rc = serve_pings(b->fds[r], deadline))) {
			gice_error("boot", "rank 0: clock alignment with rank %u failed: %s", r, gice_status_name(rc));
			return rc;
		}
	return GICE_OK;
}

int boot_clock(const boot_t *b, int64_t *offset_ns, uint64_t *bound_ns)
{
	if (b->size > 1 && !b->clock_rtt_ns)
		return 0;
	*offset_ns = b->clock_offset_ns;
	*bound_ns = b->size > 1 && b->rank ? b->clock_rtt_ns / 2 : 0;
	return 1;
}

/* ---------------------------------------------------------------- under PMIx */

struct clock_card { /* what each rank tells the others first */
	char boot[40];    /* /proc/sys/kernel/random/boot_id: one machine, one CLOCK_MONOTONIC */
	uint32_t ping;    /* GICE_CLOCK_SYNC=ping: measure even on rank 0's machine */
	uint32_t off;     /* GICE_CLOCK_SYNC=off */
};

struct clock_where { /* rank 0's socket for the pings (its part of the second exchange) */
	uint16_t port, n_addr;
	uint32_t addr[CLOCK_ADDRS]; /* IPv4, network order: its interfaces', loopback last */
};

struct clock_hello {
	uint32_t magic, rank;
	uint64_t secret; /* the job's: rank 0 answers no one else */
};

static void boot_id(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	snprintf(out, len, "?");
	if (f) {
		if (!fgets(out, (int)len, f))
			snprintf(out, len, "?");
		out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

/* rank 0: a listening socket on every interface, and the addresses to reach it by */
static int clock_listen(struct clock_where *w)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
	socklen_t sl = sizeof(sa);
	struct ifaddrs *ifs, *i;
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(w, 0, sizeof(*w));
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 128) ||
	    getsockname(ls, (struct sockaddr *)&sa, &sl)) {
		gice_warn("boot", "rank 0: no socket for clock alignment: %m");
		if (ls >= 0)
			close(ls);
		return -1;
	}
	if (getifaddrs(&ifs) == 0) {
		for (int loop = 0; loop < 2; loop++) /* loopback last: it reaches this machine only */
			for (i = ifs; i && w->n_addr < CLOCK_ADDRS; i = i->ifa_next)
				if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
				    !!(i->ifa_flags & IFF_LOOPBACK) == loop)
					w->addr[w->n_addr++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		freeifaddrs(ifs);
	}
	w->port = ntohs(sa.sin_port);
	return ls;
}

/* another rank: connect to rank 0 by the first of its addresses that answers */
static int clock_connect(const struct clock_where *w, uint64_t deadline)
{
	for (uint32_t k = 0; k < w->n_addr && k < CLOCK_ADDRS; k++) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(w->port), .sin_addr.s_addr = w->addr[k]};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
		socklen_t el = sizeof(err);
		uint64_t now = gice_now_ns(), by = GICE_MIN(deadline, now + 1000000000ull); /* 1 s an address */

		if (fd < 0)
			return -1;
		if ((connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
		     (errno == EINPROGRESS && boot_wait_fd(fd, POLLOUT, by) == GICE_OK &&
		      !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) && !err))) {
			fcntl(fd, F_SETFL, 0);
			boot_nodelay(fd);
			return fd;
		}
		close(fd);
	}
	return -1;
}

/* rank 0: take the pings of the n ranks that need them, in the order they connect */
static void clock_serve(boot_t *b, int ls, const uint8_t *need, uint32_t n, uint64_t deadline)
{
	uint32_t served = 0;

	while (served < n && boot_wait_fd(ls, POLLIN, deadline) == GICE_OK) {
		struct clock_hello h;
		int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		boot_nodelay(fd);
		if (boot_xfer(fd, &h, sizeof(h), 0, deadline) || h.magic != CLOCK_MAGIC || h.secret != b->secret ||
		    h.rank >= b->size || !need[h.rank]) {
			gice_warn("boot", "rank 0: refused a clock connection (not a rank of this job)");
			close(fd);
			continue;
		}
		int rc = serve_pings(fd, deadline);
		close(fd);
		if (rc)
			gice_warn("boot", "rank 0: clock pings of rank %u failed: %s", h.rank, gice_status_name(rc));
		served++;
	}
	if (served < n)
		gice_warn("boot", "rank 0: %u of %u ranks of other machines aligned their clocks with ours", served, n);
}

void boot_clock_pmix(boot_t *b)
{
	const char *mode = gice_param_str(&boot_clock_params[0]);
	struct clock_card me = {.ping = !strcmp(mode, "ping"), .off = !strcmp(mode, "off")}, *all;
	uint64_t deadline = gice_now_ns() + GICE_MIN(b->timeout_ns, CLOCK_WAIT_NS);
	uint8_t *need;
	uint32_t n = 0;

	if (!me.off && !me.ping && strcmp(mode, "auto"))
		gice_warn("boot", "GICE_CLOCK_SYNC=\"%s\" is not auto, ping or off: auto", mode);
	boot_id(me.boot, sizeof(me.boot));
	all = calloc(b->size, sizeof(*all));
	need = calloc(b->size, 1);
	if (!all || !need || boot_allgather(b, &me, sizeof(me), all)) {
		free(all);
		free(need);
		return; /* the next exchange fails the job the same way */
	}
	for (uint32_t r = 1; r < b->size; r++)
		if (!all[r].off && !all[0].off && (all[r].ping || all[0].ping || strcmp(all[r].boot, all[0].boot)))
			need[r] = 1, n++;
	if (b->rank == 0 || (!need[b->rank] && !all[b->rank].off && !all[0].off))
		b->clock_rtt_ns = 1; /* rank 0's clock itself */
	if (n) {
		struct clock_where w = {0}, *where = calloc(b->size, sizeof(*where));
		int ls = b->rank == 0 ? clock_listen(&w) : -1;

		if (where && boot_allgather(b, &w, sizeof(w), where) == GICE_OK && where[0].port) {
			if (b->rank == 0) {
				clock_serve(b, ls, need, n, deadline);
			} else if (need[b->rank]) {
				struct clock_hello h = {.magic = CLOCK_MAGIC, .rank = b->rank, .secret = b->secret};
				int fd = clock_connect(&where[0], deadline), rc = fd < 0 ? GICE_ERR_PEER_DEAD : GICE_OK;
				if (!rc && !(rc = boot_xfer(fd, &h, sizeof(h), 1, deadline)))
					rc = ping_root(b, fd, deadline);
				if (fd >= 0)
					close(fd);
				if (rc) {
					b->clock_rtt_ns = 0;
					gice_warn("boot", "rank %u: no clock alignment with rank 0 (%s): this rank's trace times "
							  "are its own clock's", b->rank, gice_status_name(rc));
				}
			}
		}
		if (ls >= 0)
			close(ls);
		free(where);
	}
	free(all);
	free(need);
}
