/* Description: the raw udp datagram endpoint (GICE_FI_PROVIDER=udp), the unreliable one that
 * gice's own retransmission covers: it says it is unreliable and unordered with no RMA,
 * max_packet is clamped to 1472 (the fault wrapper carries that over) and 1473 bytes are
 * refused, every size up to it arrives intact, it binds to the interface of GICE_FAB_IFACE
 * (127.0.0.1 for lo), and its wait fd, when it has one, wakes on a datagram. "udp;ofi_rxd" is
 * still the reliable RDM endpoint. A provider that libfabric does not have here is probed
 * before the run and its case left out ("skipped: N cases (...)"). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/common/common.h"
#include "fabric/fab_fault.h"
#include "fabric/fabric.h"
#include "tests/test_faults.h"

/* ================================================================ udp datagrams */

START_TEST(test_udp_dgram)
{
	fab_attr_t attr = {.max_packet = 4096};
	unsigned char buf[1473];
	char addr_b[FAB_ADDR_MAX];
	size_t lb = sizeof(addr_b);
	static const size_t sizes[] = {1, 16, 100, 1000, 1471, 1472};
	fab_ep_t *a, *b, *w;
	fab_addr_t a2b;
	int rc;

	setenv("GICE_FI_PROVIDER", "udp", 1);
	rc = fab_open(&attr, &a);
	unsetenv("GICE_FI_PROVIDER");
	ck_assert_msg(rc == GICE_OK, "fab_open(udp): %s", gice_status_name(rc));
	printf("udp: provider %s, max_packet %zu, reliable %d, ordered %d, rma %d, wait fd %d\n", a->provider,
	       a->max_packet, a->reliable, a->ordered, a->rma, fab_wait_fd(a));
	ck_assert_str_eq(a->provider, "udp");
	ck_assert_uint_eq(a->max_packet, 1472);
	ck_assert_int_eq(a->reliable, 0);
	ck_assert_int_eq(a->ordered, 0);
	ck_assert_int_eq(a->rma, 0);
	attr.provider = "udp";
	ck_assert_int_eq(fab_open(&attr, &b), GICE_OK);
	ck_assert_int_eq(fab_getname(b, addr_b, &lb), GICE_OK);
	ck_assert_int_eq(fab_insert(a, addr_b, lb, &a2b), GICE_OK);
	/* bound to the interface of GICE_FAB_IFACE (default lo), through FI_UDP_IFACE */
	if (getenv("FI_UDP_IFACE") && !strcmp(getenv("FI_UDP_IFACE"), "lo")) {
		struct sockaddr_in sin;
		char ip[INET_ADDRSTRLEN];

		ck_assert_uint_eq(lb, sizeof(sin));
		memcpy(&sin, addr_b, sizeof(sin));
		ck_assert_int_eq(sin.sin_family, AF_INET);
		ck_assert_ptr_nonnull(inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip)));
		printf("udp: FI_UDP_IFACE=lo, bound to %s:%u\n", ip, ntohs(sin.sin_port));
		ck_assert_str_eq(ip, "127.0.0.1");
	}
	/* the wrapper carries it over */
	ck_assert_int_eq(fab_fault_wrap(a, NULL, 1, NULL, &w), GICE_OK);
	ck_assert_uint_eq(w->max_packet, 1472);
	ck_assert_int_eq(w->reliable, 0);
	ck_assert_int_eq(w->ordered, 0);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t t0 = gice_now_ns();
		fab_event_t ev;
		int got = 0;

		fill_random(buf, sizes[s], s);
		while ((rc = fab_send(w, a2b, buf, sizes[s] < 8 ? sizes[s] : 8, buf + (sizes[s] < 8 ? sizes[s] : 8),
				      sizes[s] < 8 ? 0 : sizes[s] - 8)) == GICE_ERR_AGAIN)
			ck_assert(fab_poll(w, &ev, 1) >= 0);
		ck_assert_msg(rc == GICE_OK, "udp send of %zu bytes: %s", sizes[s], gice_status_name(rc));
		while (!got) {
			ck_assert(fab_poll(w, &ev, 1) >= 0);
			if (fab_poll(b, &ev, 1) == 1) {
				ck_assert_int_eq(ev.type, FAB_EV_RX);
				ck_assert_uint_eq(ev.len, sizes[s]);
				ck_assert(!memcmp(ev.buf, buf, sizes[s]));
				fab_release(b, ev.buf);
				got = 1;
			}
			ck_assert_msg(gice_now_ns() - t0 < DEADLINE_NS, "udp packet of %zu bytes did not arrive",
				      sizes[s]);
		}
	}
	ck_assert_int_eq(fab_send(w, a2b, buf, 1000, buf, 473), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_send(a, a2b, buf, 1473, NULL, 0), GICE_ERR_INVALID);
	/* the wait fd, when there is one, wakes on a datagram */
	int fd = fab_wait_fd(b);
	if (fd >= 0) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t t0 = gice_now_ns();
		fab_event_t ev;

		while ((rc = fab_trywait(b)) == GICE_ERR_AGAIN)
			ck_assert(fab_poll(b, &ev, 1) == 0 && gice_now_ns() - t0 < DEADLINE_NS);
		ck_assert_int_eq(rc, GICE_OK);
		ck_assert_int_eq(fab_send(w, a2b, "wake", 4, NULL, 0), GICE_OK);
		ck_assert_msg(poll(&pfd, 1, (int)test_scaled(1000)) == 1, "udp: the wait fd did not wake within 1 s of a datagram");
		while (fab_poll(b, &ev, 1) != 1)
			ck_assert(gice_now_ns() - t0 < DEADLINE_NS);
		ck_assert_uint_eq(ev.len, 4);
		fab_release(b, ev.buf);
		printf("udp: wait fd %d woke on a datagram\n", fd);
	}
	fab_close(w);
	fab_close(b);
}
END_TEST

/* "udp;ofi_rxd" is still the reliable RDM endpoint */
START_TEST(test_udp_rxd_reliable)
{
	fab_attr_t attr = {.provider = "udp;ofi_rxd", .max_packet = 4096};
	fab_ep_t *a;

	ck_assert_int_eq(fab_open(&attr, &a), GICE_OK);
	ck_assert_str_eq(a->provider, "udp;ofi_rxd");
	ck_assert_int_eq(a->reliable, 1);
	ck_assert_uint_eq(a->max_packet, 4096);
	fab_close(a);
}
END_TEST

int main(void)
{
	struct fault_case cases[] = {
		{"udp_dgram", test_udp_dgram, 0, "udp"},
		{"udp_rxd_reliable", test_udp_rxd_reliable, 0, "udp;ofi_rxd"},
	};

	return fault_main("faults_udp", cases, sizeof(cases) / sizeof(cases[0]));
}
