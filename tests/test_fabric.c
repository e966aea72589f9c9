/* Description: the fabric ops table over libfabric ("ofi" backend). For each provider of the
 * list (shm, tcp, and udp where it matters) two endpoints in this process exchange addresses and
 * packets: 1000 packets of random sizes arrive bit-exact and in order, sends beyond tx_depth
 * fail with GICE_ERR_AGAIN until the queue drains, oversize sends are GICE_ERR_INVALID, and a
 * poll() on the wait fd wakes when the other endpoint sends. A provider is probed before the run:
 * when fi_getinfo finds none (fab_open says GICE_ERR_NOT_FOUND) its cases are left out of the
 * suite and the binary's last line says so ("skipped: N cases (...)"). Provider choice,
 * interface binding and an unknown provider (GICE_ERR_NOT_FOUND) are checked too. */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric/fabric.h"
#include "tests/test_util.h"

#define HLEN 16
#define DEADLINE_NS test_scaled(10ull * 1000000000ull)

/* data tests on each; net: libfabric 1.17's native RDM over TCP, the default between hosts */
static const char *const providers[] = {"shm", "tcp", "udp;ofi_rxd", "net"};
#define NPROV 4
static const char *avail[NPROV]; /* those fab_open finds here: the loop tests' _i indexes this */
static int navail;

typedef struct {
	fab_ep_t *a, *b;
	fab_addr_t a2b, b2a; /* b as seen by a, a as seen by b */
} pair_t;

/* Open two endpoints of provider prov (one main() found here) and introduce them. */
static void pair_open(pair_t *p, const char *prov, size_t max_packet, uint32_t tx_depth)
{
	fab_attr_t attr = {.provider = prov, .max_packet = max_packet, .tx_depth = tx_depth};
	char addr_a[FAB_ADDR_MAX], addr_b[FAB_ADDR_MAX];
	size_t la = sizeof(addr_a), lb = sizeof(addr_b);
	int rc = fab_open(&attr, &p->a);

	ck_assert_msg(rc == GICE_OK, "fab_open(%s): %s", prov, gice_status_name(rc));
	ck_assert_int_eq(fab_open(&attr, &p->b), GICE_OK);
	ck_assert_int_eq(fab_getname(p->a, addr_a, &la), GICE_OK);
	ck_assert_int_eq(fab_getname(p->b, addr_b, &lb), GICE_OK);
	ck_assert_uint_gt(la, 0);
	ck_assert_int_eq(fab_insert(p->a, addr_b, lb, &p->a2b), GICE_OK);
	ck_assert_int_eq(fab_insert(p->b, addr_a, la, &p->b2a), GICE_OK);
}

static void pair_close(pair_t *p)
{
	fab_close(p->a);
	fab_close(p->b);
}

/* Packet i: size and bytes derived from i alone, so that the receiver can check them. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static size_t pkt_size(uint64_t i, size_t max) { return 1 + mix(i ^ 0xabcdef) % max; }

static void pkt_fill(uint64_t i, unsigned char *buf, size_t len)
{
	uint64_t s = mix(i);

	for (size_t k = 0; k < len; k++) {
		if (k % 8 == 0)
			s = mix(s + k);
		buf[k] = (unsigned char)(s >> (8 * (k % 8)));
	}
}

/* Poll ep once; returns the number of rx events, checks each against the expected sequence
 * (*next), releases buffers. Errors fail the test. */
static int drain_check(fab_ep_t *ep, uint64_t *next, size_t max, unsigned char *scratch)
{
	fab_event_t ev[16];
	int n = fab_poll(ep, ev, 16);

	ck_assert_int_ge(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ev[i].type == FAB_EV_RX, "event %d: type %d status %s", i, ev[i].type,
			      gice_status_name(ev[i].status));
		size_t want = pkt_size(*next, max);
		ck_assert_msg(ev[i].len == want, "packet %llu: %zu bytes, want %zu (out of order or cut)",
			      (unsigned long long)*next, ev[i].len, want);
		pkt_fill(*next, scratch, want);
		ck_assert_msg(!memcmp(ev[i].buf, scratch, want), "packet %llu: bytes differ",
			      (unsigned long long)*next);
		fab_release(ep, ev[i].buf);
		(*next)++;
	}
	return n;
}

/* Progress a sender that expects nothing back. */
static void drain_none(fab_ep_t *ep)
{
	fab_event_t ev[16];
	int n = fab_poll(ep, ev, 16);

	ck_assert_int_ge(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ev[i].type == FAB_EV_RX, "unexpected error event: %s", gice_status_name(ev[i].status));
		fab_release(ep, ev[i].buf);
	}
}

/* Send packet i from a to b, progressing both while the send queue is full. */
static void send_pkt(pair_t *p, uint64_t i, size_t max, unsigned char *buf, uint64_t *next_rx,
		     unsigned char *scratch)
{
	size_t len = pkt_size(i, max), hlen = len < HLEN ? len : HLEN;
	uint64_t t0 = gice_now_ns();
	int rc;

	pkt_fill(i, buf, len);
	while ((rc = fab_send(p->a, p->a2b, buf, hlen, buf + hlen, len - hlen)) == GICE_ERR_AGAIN) {
		drain_none(p->a);
		drain_check(p->b, next_rx, max, scratch);
		ck_assert_msg(gice_now_ns() - t0 < DEADLINE_NS, "send of packet %llu stuck in AGAIN",
			      (unsigned long long)i);
	}
	ck_assert_msg(rc == GICE_OK, "send of packet %llu (%zu bytes): %s", (unsigned long long)i, len,
		      gice_status_name(rc));
}

static void wait_rx(pair_t *p, uint64_t *next_rx, uint64_t upto, size_t max, unsigned char *scratch)
{
	uint64_t t0 = gice_now_ns();

	while (*next_rx < upto) {
		drain_none(p->a);
		if (!drain_check(p->b, next_rx, max, scratch))
			usleep(50);
		ck_assert_msg(gice_now_ns() - t0 < DEADLINE_NS, "received %llu of %llu packets",
			      (unsigned long long)*next_rx, (unsigned long long)upto);
	}
}

START_TEST(test_exchange_addresses)
{
	const char *prov = avail[_i];
	char addr[FAB_ADDR_MAX];
	size_t len = 1;
	uint64_t next = 0, back = 0;
	unsigned char buf[256], scratch[256];
	pair_t p;

	pair_open(&p, prov, sizeof(buf), 0);
	printf("%s: provider %s, %s\n", prov, p.a->provider, p.a->ordered ? "ordered" : "unordered");
	ck_assert_ptr_nonnull(strstr(p.a->provider, prov));
	ck_assert_int_eq(fab_getname(p.a, addr, &len), GICE_ERR_INVALID); /* too small */
	ck_assert_uint_eq(len, 1);
	/* one packet each way */
	send_pkt(&p, 0, sizeof(buf), buf, &next, scratch);
	wait_rx(&p, &next, 1, sizeof(buf), scratch);
	pair_t q = {.a = p.b, .b = p.a, .a2b = p.b2a, .b2a = p.a2b};
	send_pkt(&q, 0, sizeof(buf), buf, &back, scratch);
	wait_rx(&q, &back, 1, sizeof(buf), scratch);
	pair_close(&p);
}
END_TEST

START_TEST(test_packets_in_order)
{
	enum { N = 1000 };
	const size_t max = 65536;
	const char *prov = avail[_i];
	unsigned char *buf = malloc(max), *scratch = malloc(max);
	uint64_t next = 0, t0;
	pair_t p;

	pair_open(&p, prov, max, 0);
	ck_assert_msg(p.a->ordered, "%s did not grant FI_ORDER_SAS", p.a->provider);
	t0 = gice_now_ns();
	for (uint64_t i = 0; i < N; i++) {
		send_pkt(&p, i, max, buf, &next, scratch);
		drain_none(p.a);
		drain_check(p.b, &next, max, scratch);
	}
	wait_rx(&p, &next, N, max, scratch);
	printf("%s: %d packets of 1..%zu bytes in %.1f ms\n", p.a->provider, N, max,
	       (gice_now_ns() - t0) / 1e6);
	pair_close(&p);
	free(buf);
	free(scratch);
}
END_TEST

/* Poll ep once, count rx packets of exactly len bytes (anything else fails), release them. */
static int count_rx(fab_ep_t *ep, size_t len)
{
	fab_event_t ev[16];
	int n = fab_poll(ep, ev, 16);

	ck_assert_int_ge(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ev[i].type == FAB_EV_RX, "error event: %s", gice_status_name(ev[i].status));
		ck_assert_uint_eq(ev[i].len, len);
		fab_release(ep, ev[i].buf);
	}
	return n;
}

/* Send one packet of len bytes from a to b, progressing both sides while AGAIN; returns the
 * packets b received meanwhile. */
static int send_retry(pair_t *p, const void *buf, size_t len)
{
	uint64_t t0 = gice_now_ns();
	int rc, got = 0;

	while ((rc = fab_send(p->a, p->a2b, buf, 0, buf, len)) == GICE_ERR_AGAIN) {
		drain_none(p->a);
		got += count_rx(p->b, len);
		ck_assert_msg(gice_now_ns() - t0 < DEADLINE_NS, "send stuck in AGAIN");
	}
	ck_assert_int_eq(rc, GICE_OK);
	return got;
}

static void wait_count(pair_t *p, size_t len, uint64_t *got, uint64_t want)
{
	uint64_t t0 = gice_now_ns();

	while (*got < want) {
		drain_none(p->a);
		int n = count_rx(p->b, len);
		*got += (uint64_t)n;
		if (!n)
			usleep(50);
		ck_assert_msg(gice_now_ns() - t0 < DEADLINE_NS, "received %llu of %llu packets",
			      (unsigned long long)*got, (unsigned long long)want);
	}
}

START_TEST(test_send_full_again)
{
	enum { TX = 8 };
	const size_t max = 65536; /* above every inject size: each send holds a tx buffer */
	const char *prov = avail[_i];
	unsigned char *buf = calloc(1, max);
	uint64_t got = 0, sent = 0, inflight = 0;
	int rc;
	pair_t p;

	pair_open(&p, prov, max, TX);
	/* connect first (the first send to a new peer may need progress on both sides) */
	got += (uint64_t)send_retry(&p, buf, max);
	sent++;
	wait_count(&p, max, &got, sent);
	/* now nobody polls the receiver: large sends cannot complete, so the sender runs out */
	while ((rc = fab_send(p.a, p.a2b, buf, 0, buf, max)) == GICE_OK) {
		sent++;
		inflight++;
		ck_assert_uint_le(inflight, 64 * TX);
	}
	ck_assert_int_eq(rc, GICE_ERR_AGAIN);
	printf("%s: %llu sends accepted before GICE_ERR_AGAIN (tx_depth %d)\n", p.a->provider,
	       (unsigned long long)inflight, TX);
	ck_assert_uint_ge(inflight, TX);
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, 0, buf, max), GICE_ERR_AGAIN); /* still full */
	/* progress both sides: everything arrives and sending works again */
	wait_count(&p, max, &got, sent);
	got += (uint64_t)send_retry(&p, buf, max);
	sent++;
	wait_count(&p, max, &got, sent);
	pair_close(&p);
	free(buf);
}
END_TEST

START_TEST(test_send_oversize_invalid)
{
	const char *prov = avail[_i];
	unsigned char buf[1025] = {0};
	uint64_t next = 0;
	pair_t p;

	pair_open(&p, prov, 1024, 0);
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, 16, buf, 1009), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, 1025, buf, 0), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, SIZE_MAX, buf, 2), GICE_ERR_INVALID); /* wraps */
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, 2, buf, SIZE_MAX), GICE_ERR_INVALID);
	/* exactly max_packet is fine (the first send to a new peer may need progress: retry) */
	next = (uint64_t)send_retry(&p, buf, 1024);
	wait_count(&p, 1024, &next, 1);
	pair_close(&p);
}
END_TEST

typedef struct {
	pair_t *p;
	int rc;
} waker_t;

static void *waker(void *arg)
{
	waker_t *w = arg;
	unsigned char msg[32] = "wake up";

	usleep(200 * 1000);
	w->rc = fab_send(w->p->a, w->p->a2b, msg, sizeof(msg), NULL, 0);
	return NULL;
}

START_TEST(test_wait_fd_wakes)
{
	const char *prov = avail[_i];
	unsigned char buf[64] = {0}, scratch[64];
	uint64_t next = 0, t0, slept;
	pthread_t th;
	waker_t w;
	pair_t p;
	int fd, rc;

	pair_open(&p, prov, sizeof(buf), 0);
	fd = fab_wait_fd(p.b);
	if (fd < 0) {
		ck_assert_int_eq(fab_trywait(p.b), GICE_ERR_UNSUPPORTED);
		printf("%s: no wait fd (callers poll)\n", p.b->provider);
		pair_close(&p);
		return;
	}
	/* connect, and leave both sides idle */
	send_pkt(&p, 0, sizeof(buf), buf, &next, scratch);
	wait_rx(&p, &next, 1, sizeof(buf), scratch);
	t0 = gice_now_ns();
	while ((rc = fab_trywait(p.b)) == GICE_ERR_AGAIN) {
		drain_check(p.b, &next, sizeof(buf), scratch);
		ck_assert(gice_now_ns() - t0 < DEADLINE_NS);
	}
	ck_assert_int_eq(rc, GICE_OK);
	/* nothing arrived: a sleeper must not wake (libfabric 1.17's net left its fd readable for
	 * good once a peer connected: a CT sleeping on it spun) */
	struct pollfd idle = {.fd = fd, .events = POLLIN};
	ck_assert_msg(poll(&idle, 1, 0) == 0, "%s: the wait fd is readable with nothing arrived (revents %#x)",
		      p.b->provider, idle.revents);

	w = (waker_t){.p = &p, .rc = 1};
	ck_assert_int_eq(pthread_create(&th, NULL, waker, &w), 0);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	t0 = gice_now_ns();
	rc = poll(&pfd, 1, (int)test_scaled(1000));
	slept = gice_now_ns() - t0;
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, GICE_OK);
	printf("%s: wait fd %d: poll() returned %d after %.1f ms (send at 200 ms)\n", p.b->provider, fd, rc,
	       slept / 1e6);
	ck_assert_msg(rc == 1, "%s: poll() on the wait fd did not wake within 1 s of a send", p.b->provider);
	/* the packet is there (maybe after a little more progress) */
	t0 = gice_now_ns();
	while (next < 2) {
		fab_event_t ev;
		drain_none(p.a);
		if (fab_poll(p.b, &ev, 1) == 1) {
			ck_assert_int_eq(ev.type, FAB_EV_RX);
			ck_assert(!memcmp(ev.buf, "wake up", 8));
			fab_release(p.b, ev.buf);
			next++;
		}
		ck_assert(gice_now_ns() - t0 < DEADLINE_NS);
	}
	pair_close(&p);
}
END_TEST

START_TEST(test_unknown_provider_not_found)
{
	fab_attr_t attr = {.provider = "no-such-provider", .max_packet = 1024};
	fab_ep_t *ep = (fab_ep_t *)0x1;

	ck_assert_int_eq(fab_open(&attr, &ep), GICE_ERR_NOT_FOUND);
	ck_assert_ptr_eq(ep, (fab_ep_t *)0x1);
	setenv("GICE_FI_PROVIDER", "no-such-provider", 1);
	attr.provider = NULL;
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_ERR_NOT_FOUND);
	unsetenv("GICE_FI_PROVIDER");
	attr.max_packet = 0;
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_open(NULL, &ep), GICE_ERR_INVALID);
}
END_TEST

START_TEST(test_provider_choice)
{
	fab_attr_t attr = {.max_packet = 1024};
	fab_ep_t *ep;

	/* auto: shm first */
	unsetenv("GICE_FI_PROVIDER");
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK);
	printf("auto: %s\n", ep->provider);
	ck_assert_str_eq(ep->provider, "shm");
	fab_close(ep);
	/* auto for a job spanning hosts: net first (shm reaches only this machine) */
	attr.cross_host = 1;
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK);
	printf("auto across hosts: %s\n", ep->provider);
	ck_assert_str_eq(ep->provider, "net");
	fab_close(ep);
	attr.cross_host = 0;
	/* the environment */
	setenv("GICE_FI_PROVIDER", "tcp", 1);
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK);
	ck_assert_str_eq(ep->provider, "tcp;ofi_rxm");
	fab_close(ep);
	/* attr beats the environment */
	attr.provider = "shm";
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK);
	ck_assert_str_eq(ep->provider, "shm");
	fab_close(ep);
	unsetenv("GICE_FI_PROVIDER");
}
END_TEST

START_TEST(test_iface_binding)
{
	fab_attr_t attr = {.provider = "tcp", .max_packet = 1024};
	fab_ep_t *ep;

	/* unset: take GICE_FAB_IFACE's default "lo"; set: left alone */
	unsetenv("FI_TCP_IFACE");
	unsetenv("FI_UDP_IFACE");
	unsetenv("GICE_FAB_IFACE");
	setenv("FI_SOCKETS_IFACE", "lo", 1);
	setenv("GICE_FAB_IFACE", "lo", 1);
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK);
	ck_assert_str_eq(getenv("FI_TCP_IFACE"), "lo");
	ck_assert_str_eq(getenv("FI_UDP_IFACE"), "lo");
	ck_assert_str_eq(getenv("FI_SOCKETS_IFACE"), "lo");
	fab_close(ep);
	setenv("GICE_FAB_IFACE", "gice-none0", 1);
	ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK); /* FI_*_IFACE already set: untouched */
	ck_assert_str_eq(getenv("FI_TCP_IFACE"), "lo");
	fab_close(ep);
	unsetenv("GICE_FAB_IFACE");
}
END_TEST

/* The loopback check of gice_device_open (a rank must not hand another host a 127.x address)
 * knows the addresses of tcp and net, and which variable chose each one's interface. */
START_TEST(test_loopback_address_named)
{
	static const char *const provs[][2] = {{"tcp", "FI_TCP_IFACE"}, {"net", "FI_NET_IFACE"}};
	char addr[FAB_ADDR_MAX], text[64], src[128];

	/* set by the user (before libfabric reads them, at the first open) */
	for (size_t i = 0; i < sizeof(provs) / sizeof(provs[0]); i++)
		setenv(provs[i][1], "lo", 1);
	for (size_t i = 0; i < sizeof(provs) / sizeof(provs[0]); i++) {
		fab_attr_t attr = {.provider = provs[i][0], .max_packet = 1024};
		size_t len = sizeof(addr);
		fab_ep_t *ep;
		char want[64];

		ck_assert_int_eq(fab_open(&attr, &ep), GICE_OK);
		ck_assert_int_eq(fab_getname(ep, addr, &len), GICE_OK);
		ck_assert_msg(fab_addr_loopback(ep->provider, addr, len, text, sizeof(text)),
			      "%s: an endpoint on lo is not seen as a loopback address", ep->provider);
		ck_assert_msg(!strncmp(text, "127.0.0.1:", 10), "%s: loopback address \"%s\"", ep->provider, text);
		fab_iface_source(ep->provider, src, sizeof(src));
		snprintf(want, sizeof(want), "%s=lo", provs[i][1]);
		ck_assert_str_eq(src, want);
		fab_close(ep);
	}
	for (size_t i = 0; i < sizeof(provs) / sizeof(provs[0]); i++)
		unsetenv(provs[i][1]);
	/* shm's addresses are not sockaddrs */
	ck_assert_int_eq(fab_addr_loopback("shm", "fi_shm://1", 11, text, sizeof(text)), 0);
}
END_TEST

START_TEST(test_params_documented)
{
	int n = 0;

	for (const gice_param_t *p = fab_params; p->name; p++, n++) {
		ck_assert_msg(p->help && *p->help, "%s has no help text", p->name);
		ck_assert_msg(!strncmp(p->name, "GICE_", 5), "%s", p->name);
	}
	ck_assert_int_eq(n, 7);
	ck_assert_ptr_nonnull(gice_param_find(fab_params, "GICE_FAB_IFACE"));
	ck_assert_ptr_nonnull(gice_param_find(fab_params, "GICE_FAB_RXM_MSG_RX"));
	ck_assert_ptr_nonnull(gice_param_find(fab_params, "GICE_FAULT_SCRIPT"));
}
END_TEST

/* In a child (test_probe): 0 when fab_open finds provider arg here, 1 when it does not
 * (GICE_ERR_NOT_FOUND); any other outcome is 0, so that the cases run and show the error. */
static int probe_open(void *arg)
{
	fab_attr_t attr = {.provider = arg, .max_packet = 1024};
	fab_ep_t *ep;
	int rc;

	setenv("GICE_LOG_LEVEL", "off", 1); /* the probe's "no such provider" is not an error */
	rc = fab_open(&attr, &ep);
	if (rc == GICE_OK)
		fab_close(ep);
	return rc == GICE_ERR_NOT_FOUND;
}

/* 1 when provider prov is here; the ones that are go into avail[] (called in order, once each). */
static int probe_provider(void *prov)
{
	if (test_probe(probe_open, prov) == 1)
		return 0;
	avail[navail++] = prov;
	return 1;
}

static Suite *fabric_suite(void)
{
	Suite *s = suite_create("fabric");
	const char *missing[NPROV];
	int nper = 0, nmissing = 0;
	struct {
		const char *name;
		const TTest *fn;
		int per_prov;      /* 1: once per provider found here; 0: once */
		const char *needs; /* once: the providers it asserts on, or NULL */
	} cases[] = {
		{"exchange_addresses", test_exchange_addresses, 1, NULL},
		{"packets_in_order", test_packets_in_order, 1, NULL},
		{"send_full_again", test_send_full_again, 1, NULL},
		{"send_oversize_invalid", test_send_oversize_invalid, 1, NULL},
		{"wait_fd_wakes", test_wait_fd_wakes, 1, NULL},
		{"unknown_provider_not_found", test_unknown_provider_not_found, 0, NULL},
		{"provider_choice", test_provider_choice, 0, "shm tcp net"},
		{"loopback_address_named", test_loopback_address_named, 0, "tcp net"},
		{"iface_binding", test_iface_binding, 0, "tcp"},
		{"params_documented", test_params_documented, 0, NULL},
	};

	for (int i = 0; i < NPROV; i++)
		if (!probe_provider((void *)providers[i]))
			missing[nmissing++] = providers[i];
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *gone = NULL;

		for (int m = 0; m < nmissing && cases[i].needs; m++)
			if (test_has_word(cases[i].needs, missing[m]))
				gone = missing[m];
		if (gone) {
			test_skip_cases(1, "%s: provider %s is not here", cases[i].name, gone);
			continue;
		}
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 20);
		nper += cases[i].per_prov;
		if (cases[i].per_prov)
			tcase_add_loop_test(tc, cases[i].fn, 0, navail);
		else
			tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	for (int i = 0; i < nmissing; i++)
		test_skip_cases(nper, "provider %s: fi_getinfo finds no such provider with RDM messaging here",
				missing[i]);
	return s;
}

int main(void)
{
	SRunner *sr;
	int rc;

	/* no FI_*_IFACE here: fab_open binds the socket providers to GICE_FAB_IFACE (default lo) */
	setvbuf(stdout, NULL, _IOLBF, 0);
	sr = srunner_create(fabric_suite());
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
