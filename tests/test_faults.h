/* test_faults.h: helpers shared by the test_faults_*.c binaries (the fault-injecting endpoint,
 * fab_fault, and the pieces it relies on). mix and fill_random make a deterministic byte
 * pattern from a seed. A pair is two endpoints of one libfabric provider of this process, the
 * sender wrapped with the faults (stream 3), the receiver raw; packet id has a length and bytes
 * that follow from the id (pkt_len, pkt_fill), send_id sends it, pump and settle receive, and
 * rx_add records and checks each arrival (rx_t: by id, by position, or raw). fault_main is the
 * main() of such a binary: its cases, each with a 30 s timeout; providers are probed before the
 * run (probe_open, in a child), and the cases of one that libfabric does not have here are left
 * out of the suite, the binary's last line saying so ("skipped: N cases (...)"). */
#ifndef GICE_TEST_FAULTS_H
#define GICE_TEST_FAULTS_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/common/common.h"
#include "emu/common/crc32c.h"
#include "emu/common/faults.h"
#include "fabric/fab_fault.h"
#include "fabric/fabric.h"
#include "tests/test_util.h"

#define DEADLINE_NS test_scaled(10ull * 1000000000ull)
#define HDR 16 /* test packet header: id (8 bytes LE), length (4), zero (4) */

static inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline void fill_random(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(mix(seed + i / 8) >> (8 * (i % 8)));
}

/* ---------------------------------------------------------------- endpoint pairs */

typedef struct {
	fab_ep_t *a, *b; /* a: the sender, wrapped; b: the receiver, raw */
	fab_ep_t *inner; /* what a wraps */
	fab_addr_t a2b;
} pair_t;

/* Open two endpoints of prov (main() found it here), wrap the first with faults f (stream 3). */
static inline void pair_open(pair_t *p, const char *prov, size_t max_packet, uint32_t tx_depth, const gice_faults_t *f)
{
	fab_attr_t attr = {.provider = prov, .max_packet = max_packet, .tx_depth = tx_depth};
	char addr_b[FAB_ADDR_MAX];
	size_t lb = sizeof(addr_b);
	fab_ep_t *raw;
	int rc = fab_open(&attr, &raw);

	ck_assert_msg(rc == GICE_OK, "fab_open(%s): %s", prov, gice_status_name(rc));
	ck_assert_int_eq(fab_fault_wrap(raw, f, 3, NULL, &p->a), GICE_OK);
	p->inner = raw;
	ck_assert_int_eq(fab_open(&attr, &p->b), GICE_OK);
	ck_assert_int_eq(fab_getname(p->b, addr_b, &lb), GICE_OK);
	ck_assert_int_eq(fab_insert(p->a, addr_b, lb, &p->a2b), GICE_OK);
}

static inline void pair_close(pair_t *p)
{
	fab_close(p->a);
	fab_close(p->b);
}

static inline gice_faults_t faults(const char *spec)
{
	gice_faults_t f;

	ck_assert_msg(gice_faults_parse(spec, &f) == GICE_OK, "spec \"%s\"", spec);
	return f;
}

static inline size_t pkt_len(uint64_t id, size_t max) { return HDR + mix(id ^ 0xabcdef) % (max - HDR + 1); }

static inline void pkt_fill(uint64_t id, unsigned char *buf, size_t len)
{
	uint32_t l = (uint32_t)len, z = 0;

	memcpy(buf, &id, 8);
	memcpy(buf + 8, &l, 4);
	memcpy(buf + 12, &z, 4);
	fill_random(buf + HDR, len - HDR, mix(id));
}

typedef struct {
	uint64_t id;
	size_t len;
	uint32_t crc;   /* of the bytes received */
	int diff_bits;  /* against the packet expected (by_pos: the n-th sent; else the id read) */
} rec_t;

/* How rx_add checks a packet: BY_ID: it is exactly the packet its id names; BY_POS: it is the
 * n-th packet sent, with diff_bits counted (no loss, order kept: for corruption); RAW: only
 * recorded (a flipped bit may hit the id, and packets may be lost). */
enum { RX_BY_ID, RX_BY_POS, RX_RAW };

typedef struct {
	rec_t *r;
	size_t n, cap;
	size_t max; /* packet size bound */
	int mode;   /* RX_* */
	unsigned char *scratch;
} rx_t;

static inline void rx_init(rx_t *rx, size_t max, int mode)
{
	memset(rx, 0, sizeof(*rx));
	rx->max = max;
	rx->mode = mode;
	rx->scratch = malloc(max);
}

static inline void rx_free(rx_t *rx)
{
	free(rx->r);
	free(rx->scratch);
}

static inline int popcount8(unsigned char c) { return __builtin_popcount(c); }

static inline void rx_add(rx_t *rx, const unsigned char *buf, size_t len)
{
	rec_t rec = {.len = len, .crc = gice_crc32c(0, buf, len)};
	uint64_t want;

	if (rx->n == rx->cap) {
		rx->cap = rx->cap ? 2 * rx->cap : 256;
		rx->r = realloc(rx->r, rx->cap * sizeof(*rx->r));
		ck_assert_ptr_nonnull(rx->r);
	}
	if (len >= 8)
		memcpy(&rec.id, buf, 8);
	if (rx->mode != RX_RAW) {
		want = rx->mode == RX_BY_POS ? rx->n : rec.id;
		ck_assert_msg(want < (1u << 20) && len == pkt_len(want, rx->max),
			      "packet %llu: %zu bytes, want %zu", (unsigned long long)want, len,
			      pkt_len(want, rx->max));
		pkt_fill(want, rx->scratch, len);
		for (size_t i = 0; i < len; i++)
			rec.diff_bits += popcount8(buf[i] ^ rx->scratch[i]);
		if (rx->mode == RX_BY_ID)
			ck_assert_msg(rec.diff_bits == 0, "packet %llu: %d bits differ", (unsigned long long)want,
				      rec.diff_bits);
	}
	rx->r[rx->n++] = rec;
}

/* Poll both: the sender (flushes held packets, reaps completions) and the receiver (records). */
static inline int pump(pair_t *p, rx_t *rx)
{
	fab_event_t ev[16];
	int n;

	n = fab_poll(p->a, ev, 16);
	ck_assert_int_ge(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ev[i].type == FAB_EV_RX, "sender event %d: %s", ev[i].type, gice_status_name(ev[i].status));
		fab_release(p->a, ev[i].buf);
	}
	n = fab_poll(p->b, ev, 16);
	ck_assert_int_ge(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ev[i].type == FAB_EV_RX, "receiver event %d: %s", ev[i].type,
			      gice_status_name(ev[i].status));
		rx_add(rx, ev[i].buf, ev[i].len);
		fab_release(p->b, ev[i].buf);
	}
	return n;
}

/* Send packet id, pumping while GICE_ERR_AGAIN; returns the number of AGAINs seen. */
static inline int send_id(pair_t *p, uint64_t id, unsigned char *buf, rx_t *rx)
{
	size_t len = pkt_len(id, rx->max);
	uint64_t t0 = gice_now_ns();
	int rc, again = 0;

	pkt_fill(id, buf, len);
	while ((rc = fab_send(p->a, p->a2b, buf, HDR, buf + HDR, len - HDR)) == GICE_ERR_AGAIN) {
		again++;
		pump(p, rx);
		ck_assert_msg(gice_now_ns() - t0 < DEADLINE_NS, "send of packet %llu stuck in AGAIN",
			      (unsigned long long)id);
	}
	ck_assert_msg(rc == GICE_OK, "send of packet %llu: %s", (unsigned long long)id, gice_status_name(rc));
	return again;
}

/* Pump until want packets arrived and nothing is held, then quiet_ms more (extra arrivals
 * would show there). */
static inline void settle(pair_t *p, rx_t *rx, size_t want, int quiet_ms)
{
	uint64_t t0 = gice_now_ns(), tq = 0;

	for (;;) {
		int n = pump(p, rx);
		uint64_t now = gice_now_ns();

		ck_assert_msg(now - t0 < DEADLINE_NS, "received %zu of %zu packets (%u held)", rx->n, want,
			      atomic_load(&p->a->held));
		if (rx->n >= want && !atomic_load(&p->a->held)) {
			if (!tq)
				tq = now;
			if (now - tq >= (uint64_t)quiet_ms * 1000000)
				break;
		}
		if (!n)
			usleep(20);
	}
	ck_assert_uint_eq(rx->n, want);
}

static inline fab_fault_stats_t stats_of(fab_ep_t *ep)
{
	fab_fault_stats_t st;

	ck_assert_int_eq(fab_fault_stats(ep, &st), GICE_OK);
	return st;
}

static inline void print_stats(const char *what, const fab_fault_stats_t *s)
{
	printf("%s: sent %llu dropped %llu duplicated %llu reordered %llu delayed %llu corrupted %llu\n", what,
	       (unsigned long long)s->sent, (unsigned long long)s->dropped, (unsigned long long)s->duplicated,
	       (unsigned long long)s->reordered, (unsigned long long)s->delayed, (unsigned long long)s->corrupted);
}

/* ---------------------------------------------------------------- main */

/* In a child (test_probe): 1 when fab_open finds no provider arg here (GICE_ERR_NOT_FOUND),
 * else 0 (an error other than "not here" is left to the cases to show). "udp" is the raw
 * datagram endpoint, chosen through GICE_FI_PROVIDER as test_udp_dgram does. */
static inline int probe_open(void *arg)
{
	fab_attr_t attr = {.provider = arg, .max_packet = 1024};
	fab_ep_t *ep;
	int rc;

	setenv("GICE_LOG_LEVEL", "off", 1); /* the probe's "no such provider" is not an error */
	if (!strcmp(arg, "udp")) {
		setenv("GICE_FI_PROVIDER", "udp", 1);
		attr.provider = NULL;
	}
	rc = fab_open(&attr, &ep);
	if (rc == GICE_OK)
		fab_close(ep);
	return rc == GICE_ERR_NOT_FOUND;
}

/* A case of a test_faults_* binary. */
struct fault_case {
	const char *name;
	const TTest *fn;
	int loop;          /* 0: run once */
	const char *needs; /* the providers it opens: left out when one is not here */
};

/* main() of a test_faults_* binary: suite name of the n cases (a provider is probed only when a
 * case needs it), then test_exit's status. */
static inline int fault_main(const char *name, const struct fault_case *cases, size_t n)
{
	static const char *const provs[] = {"shm", "tcp", "udp", "udp;ofi_rxd"};
	Suite *s;
	int here[4];

	/* no FI_*_IFACE here: fab_open binds the socket providers to GICE_FAB_IFACE (default lo) */
	setvbuf(stdout, NULL, _IOLBF, 0);
	s = suite_create(name);
	for (int p = 0; p < 4; p++) {
		int needed = 0;

		for (size_t i = 0; i < n; i++)
			needed |= cases[i].needs && test_has_word(cases[i].needs, provs[p]);
		here[p] = !needed || test_probe(probe_open, (void *)provs[p]) != 1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *gone = NULL;

		for (int p = 0; p < 4 && cases[i].needs; p++)
			if (!here[p] && test_has_word(cases[i].needs, provs[p]))
				gone = provs[p];
		if (gone) {
			test_skip_cases(cases[i].loop ? cases[i].loop : 1,
					"%s: fi_getinfo finds no libfabric provider %s here", cases[i].name, gone);
			continue;
		}
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 30);
		if (cases[i].loop)
			tcase_add_loop_test(tc, cases[i].fn, 0, cases[i].loop);
		else
			tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return test_run_suite(s);
}

#endif
