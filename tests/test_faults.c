/* Description: fault injection and its helpers. CRC-32C: known vectors, chaining, unaligned
 * buffers, and the SSE4.2 path agreeing with the table on random data. GICE_FAULTS: every key
 * parses to the exact values, bad specs are GICE_ERR_CONFIG, formatting reads back. The
 * fault-injecting endpoint (fab_fault) over real libfabric endpoints of this process (shm, and
 * tcp over loopback for the fault-free case): without faults every packet arrives once and in
 * order; dropped packets are exactly the missing ones; duplicates arrive twice; corrupted ones
 * differ in exactly one bit; reordered and delayed ones all arrive; the same seed gives the same
 * received sequence and counts, another seed another; a send refused with GICE_ERR_AGAIN keeps
 * its decision; faults can be changed while another thread sends. The raw udp datagram endpoint
 * (GICE_FI_PROVIDER=udp): unreliable, max_packet clamped to 1472, 1473 bytes refused; udp;ofi_rxd
 * reliable. GICE_LOG_LEVEL=off silences every message. Providers are probed before the run: the
 * cases of one that libfabric does not have here are left out of the suite, and the binary's
 * last line says so ("skipped: N cases (...)"). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/common/common.h"
#include "emu/common/config.h"
#include "emu/common/crc32c.h"
#include "emu/common/faults.h"
#include "fabric/fab_fault.h"
#include "fabric/fabric.h"
#include "tests/test_util.h"

#define DEADLINE_NS test_scaled(10ull * 1000000000ull)
#define HDR 16 /* test packet header: id (8 bytes LE), length (4), zero (4) */

/* ================================================================ CRC-32C */

START_TEST(test_crc32c_known_vectors)
{
	unsigned char buf[32];

	ck_assert_uint_eq(gice_crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(gice_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(gice_crc32c_hw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(gice_crc32c(0, NULL, 0), 0);
	ck_assert_uint_eq(gice_crc32c(0x12345678u, NULL, 0), 0x12345678u);
	/* RFC 3720 (iSCSI) B.4 */
	memset(buf, 0, sizeof(buf));
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x8A9136AAu);
	ck_assert_uint_eq(gice_crc32c_sw(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x113FDB5Cu);
	printf("crc32c: SSE4.2 path %s\n", gice_crc32c_hw_available() ? "available" : "not available (table only)");
}
END_TEST

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill_random(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(mix(seed + i / 8) >> (8 * (i % 8)));
}

START_TEST(test_crc32c_chaining_unaligned)
{
	enum { LEN = 1000 };
	unsigned char *data = malloc(LEN + 16), *copy = malloc(LEN + 16);
	uint32_t whole;

	fill_random(data, LEN + 16, 42);
	whole = gice_crc32c(0, data, LEN);
	ck_assert_uint_eq(whole, gice_crc32c_sw(0, data, LEN));
	/* every split point chains to the same CRC, in both implementations */
	for (size_t n = 0; n <= LEN; n += (n < 40 ? 1 : 37)) {
		ck_assert_uint_eq(gice_crc32c(gice_crc32c(0, data, n), data + n, LEN - n), whole);
		ck_assert_uint_eq(gice_crc32c_sw(gice_crc32c_sw(0, data, n), data + n, LEN - n), whole);
		ck_assert_uint_eq(gice_crc32c_hw(gice_crc32c_hw(0, data, n), data + n, LEN - n), whole);
	}
	/* a three-way split */
	ck_assert_uint_eq(gice_crc32c(gice_crc32c(gice_crc32c(0, data, 3), data + 3, 500), data + 503, LEN - 503),
			  whole);
	/* the same bytes at every alignment give the same CRC */
	for (size_t off = 0; off < 16; off++) {
		memmove(copy + off, data, LEN);
		ck_assert_uint_eq(gice_crc32c(0, copy + off, LEN), whole);
		ck_assert_uint_eq(gice_crc32c_sw(0, copy + off, LEN), whole);
		for (size_t len = 0; len < 24; len++)
			ck_assert_uint_eq(gice_crc32c(0, copy + off, len), gice_crc32c_sw(0, data, len));
	}
	free(data);
	free(copy);
}
END_TEST

START_TEST(test_crc32c_hw_matches_table)
{
	enum { MAXLEN = 4096 + 64 };
	unsigned char *buf = malloc(MAXLEN);
	int n = 0;

	fill_random(buf, MAXLEN, 7);
	for (uint64_t i = 0; i < 3000; i++) {
		uint64_t r = mix(i);
		size_t off = r % 64, len = i < 300 ? i : (r >> 8) % (MAXLEN - 64);
		uint32_t seed = (uint32_t)(r >> 40);
		uint32_t sw = gice_crc32c_sw(seed, buf + off, len);

		ck_assert_msg(gice_crc32c_hw(seed, buf + off, len) == sw, "len %zu off %zu: hw %08x table %08x", len, off,
			      gice_crc32c_hw(seed, buf + off, len), sw);
		ck_assert_uint_eq(gice_crc32c(seed, buf + off, len), sw);
		n++;
	}
	printf("crc32c: %d random buffers agree (hw %s)\n", n, gice_crc32c_hw_available() ? "on" : "off");
	free(buf);
}
END_TEST

/* ================================================================ GICE_FAULTS */

START_TEST(test_faults_parse_valid)
{
	gice_faults_t f;

	/* nothing */
	ck_assert_int_eq(gice_faults_parse(NULL, &f), GICE_OK);
	ck_assert_uint_eq(f.n_rules, 0);
	ck_assert_uint_eq(f.seed, 1);
	ck_assert_uint_eq(f.n_stall, 0);
	ck_assert_int_eq(f.hang_rank, -1);
	ck_assert_int_eq(f.kill_rank, -1);
	ck_assert_int_eq(gice_faults_any_net(&f), 0);
	ck_assert_int_eq(gice_faults_parse("", &f), GICE_OK);
	ck_assert_int_eq(gice_faults_any_net(&f), 0);
	ck_assert_int_eq(gice_faults_any_net(NULL), 0);

	/* every key */
	ck_assert_int_eq(gice_faults_parse("drop=0.05,dup=0.25,reorder=1,corrupt=0,delay_us=300,seed=7,"
					   "stall_ct=2@2s+500ms,stall_ct=0@200us+inf,stall_ct=1@1500+100ns,"
					   "hang_rank=3@10s,kill_rank=1@250ms",
					   &f),
			 GICE_OK);
	ck_assert_uint_eq(f.n_rules, 5);
	ck_assert(f.rule[0].kind == GICE_FK_DROP && f.rule[0].p == 0.05);
	ck_assert(f.rule[1].kind == GICE_FK_DUP && f.rule[1].p == 0.25);
	ck_assert(f.rule[2].kind == GICE_FK_REORDER && f.rule[2].p == 1.0);
	ck_assert(f.rule[3].kind == GICE_FK_CORRUPT && f.rule[3].p == 0.0);
	ck_assert(f.rule[4].kind == GICE_FK_DELAY && f.rule[4].n == 300000);
	for (int i = 0; i < 5; i++) { /* unscoped, for good */
		ck_assert_uint_eq(f.rule[i].from, GICE_FAULTS_ANY);
		ck_assert_uint_eq(f.rule[i].to, GICE_FAULTS_ANY);
		ck_assert_uint_eq(f.rule[i].at_ns, 0);
		ck_assert_uint_eq(f.rule[i].dur_ns, UINT64_MAX);
	}
	ck_assert_uint_eq(f.seed, 7);
	ck_assert_uint_eq(f.n_stall, 3);
	ck_assert_uint_eq(f.stall[0].ct, 2);
	ck_assert_uint_eq(f.stall[0].at_ns, 2000000000ull);
	ck_assert_uint_eq(f.stall[0].dur_ns, 500000000ull);
	ck_assert_uint_eq(f.stall[1].ct, 0);
	ck_assert_uint_eq(f.stall[1].at_ns, 200000ull);
	ck_assert_uint_eq(f.stall[1].dur_ns, UINT64_MAX);
	ck_assert_uint_eq(f.stall[2].ct, 1);
	ck_assert_uint_eq(f.stall[2].at_ns, 1500000000ull); /* bare number: ms */
	ck_assert_uint_eq(f.stall[2].dur_ns, 100);
	ck_assert_int_eq(f.hang_rank, 3);
	ck_assert_uint_eq(f.hang_at_ns, 10000000000ull);
	ck_assert_int_eq(f.kill_rank, 1);
	ck_assert_uint_eq(f.kill_at_ns, 250000000ull);
	ck_assert_int_eq(gice_faults_any_net(&f), 1);

	/* blanks and empty tokens are fine; each network fault alone turns "any" on */
	ck_assert_int_eq(gice_faults_parse(" drop = 0.5 , ,seed=18446744073709551615,", &f), GICE_OK);
	ck_assert(f.n_rules == 1 && f.rule[0].p == 0.5);
	ck_assert_uint_eq(f.seed, UINT64_MAX);
	ck_assert_int_eq(gice_faults_parse("delay_us=1", &f), GICE_OK);
	ck_assert_int_eq(gice_faults_any_net(&f), 1);
	ck_assert_int_eq(gice_faults_parse("corrupt=1e-3", &f), GICE_OK);
	ck_assert(f.rule[0].kind == GICE_FK_CORRUPT && f.rule[0].p == 0.001);
	ck_assert_int_eq(gice_faults_any_net(&f), 1);
	ck_assert_int_eq(gice_faults_parse("kill_rank=0@0", &f), GICE_OK);
	ck_assert_int_eq(f.kill_rank, 0);
	ck_assert_uint_eq(f.kill_at_ns, 0);
	ck_assert_int_eq(gice_faults_any_net(&f), 0); /* kills are not network faults */

	/* eight stalls is the limit */
	ck_assert_int_eq(gice_faults_parse("stall_ct=0@1+1,stall_ct=1@1+1,stall_ct=2@1+1,stall_ct=3@1+1,"
					   "stall_ct=4@1+1,stall_ct=5@1+1,stall_ct=6@1+1,stall_ct=7@1s+2s",
					   &f),
			 GICE_OK);
	ck_assert_uint_eq(f.n_stall, GICE_FAULTS_MAX_STALLS);
	ck_assert_uint_eq(f.stall[7].ct, 7);
	ck_assert_uint_eq(f.stall[7].dur_ns, 2000000000ull);
}
END_TEST

START_TEST(test_faults_parse_invalid)
{
	static const char *const bad[] = {
		"bogus=1",                /* unknown key */
		"drop",                   /* no '=' */
		"drop=",                  /* no value */
		"drop=1.5",               /* P > 1 */
		"drop=-0.1",              /* P < 0 */
		"dup=nan",                /* not a number in range */
		"reorder=0.1x",           /* trailing junk */
		"corrupt=inf",            /* not finite */
		"drop=0.1,drop=0.2",      /* twice */
		"delay_us=-5",            /* not an integer */
		"delay_us=1.5",           /* not an integer */
		"seed=99999999999999999999", /* above 64 bits */
		"stall_ct=1",             /* missing '@' */
		"stall_ct=1@2s",          /* missing '+' */
		"stall_ct=1@2x+1s",       /* bad duration unit */
		"stall_ct=1@2s+",         /* empty duration */
		"stall_ct=1@inf+1s",      /* inf only for the duration */
		"stall_ct=x@1s+1s",       /* bad CT */
		"stall_ct=1@s+1s",        /* unit without number */
		"hang_rank=1",            /* missing '@' */
		"hang_rank=1@2 s",        /* blank inside */
		"kill_rank=-1@1s",        /* negative rank */
		"kill_rank=2147483648@1s", /* above int32 */
		"stall_ct=0@1+1,stall_ct=1@1+1,stall_ct=2@1+1,stall_ct=3@1+1,stall_ct=4@1+1,"
		"stall_ct=5@1+1,stall_ct=6@1+1,stall_ct=7@1+1,stall_ct=8@1+1", /* nine stalls */
		"drop=0.1:dup=0.1",       /* wrong separator */
	};
	gice_faults_t f, before;

	memset(&f, 0xa5, sizeof(f));
	before = f;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(gice_faults_parse(bad[i], &f) == GICE_ERR_CONFIG, "\"%s\" was accepted", bad[i]);
		ck_assert_msg(!memcmp(&f, &before, sizeof(f)), "\"%s\" changed the output", bad[i]);
	}
	ck_assert_int_eq(gice_faults_parse("drop=0.1", NULL), GICE_ERR_INVALID);
}
END_TEST

START_TEST(test_faults_format_round_trip)
{
	static const char *const specs[] = {
		"",
		"drop=0.05,seed=7",
		"drop=0.3,dup=0.1,reorder=0.2,corrupt=0.01,delay_us=250,seed=99",
		"seed=5",
		"stall_ct=2@2s+500ms,stall_ct=0@200us+inf,stall_ct=1@1500+100ns,hang_rank=3@10s,kill_rank=1@0",
		"drop=0.1234567890123,seed=1",
	};
	char buf[512];
	gice_faults_t f, g;

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		ck_assert_int_eq(gice_faults_parse(specs[i], &f), GICE_OK);
		gice_faults_format(&f, buf, sizeof(buf));
		ck_assert_msg(gice_faults_parse(buf, &g) == GICE_OK, "\"%s\" formatted as \"%s\"", specs[i], buf);
		ck_assert_msg(!memcmp(&f, &g, sizeof(f)), "\"%s\" formatted as \"%s\" reads back differently", specs[i],
			      buf);
	}
	ck_assert_int_eq(gice_faults_parse("seed=7,drop=0.05", &f), GICE_OK);
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "drop=0.05,seed=7");
	ck_assert_int_eq(gice_faults_parse("stall_ct=1@1500+inf", &f), GICE_OK);
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "stall_ct=1@1500ms+inf");
	ck_assert_int_eq(gice_faults_parse("", &f), GICE_OK);
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	gice_faults_format(NULL, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	/* a short buffer is cut, and still a string */
	ck_assert_int_eq(gice_faults_parse("drop=0.05,seed=7", &f), GICE_OK);
	gice_faults_format(&f, buf, 6);
	ck_assert_str_eq(buf, "drop=");
}
END_TEST

START_TEST(test_faults_param_registered)
{
	const gice_param_t *p = gice_param_find(fab_params, "GICE_FAULTS");

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->type, GICE_PARAM_STR);
	ck_assert_str_eq(p->defval, "");
	ck_assert_ptr_nonnull(strstr(p->help, "empty"));
	ck_assert_ptr_nonnull(strstr(p->help, "stall_ct"));
	printf("GICE_FAULTS: %s\n", p->help);
}
END_TEST

/* ================================================================ endpoint pairs */

typedef struct {
	fab_ep_t *a, *b; /* a: the sender, wrapped; b: the receiver, raw */
	fab_ep_t *inner; /* what a wraps */
	fab_addr_t a2b;
} pair_t;

/* Open two endpoints of prov (main() found it here), wrap the first with faults f (stream 3). */
static void pair_open(pair_t *p, const char *prov, size_t max_packet, uint32_t tx_depth, const gice_faults_t *f)
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

static void pair_close(pair_t *p)
{
	fab_close(p->a);
	fab_close(p->b);
}

static gice_faults_t faults(const char *spec)
{
	gice_faults_t f;

	ck_assert_msg(gice_faults_parse(spec, &f) == GICE_OK, "spec \"%s\"", spec);
	return f;
}

static size_t pkt_len(uint64_t id, size_t max) { return HDR + mix(id ^ 0xabcdef) % (max - HDR + 1); }

static void pkt_fill(uint64_t id, unsigned char *buf, size_t len)
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

static void rx_init(rx_t *rx, size_t max, int mode)
{
	memset(rx, 0, sizeof(*rx));
	rx->max = max;
	rx->mode = mode;
	rx->scratch = malloc(max);
}

static void rx_free(rx_t *rx)
{
	free(rx->r);
	free(rx->scratch);
}

static int popcount8(unsigned char c) { return __builtin_popcount(c); }

static void rx_add(rx_t *rx, const unsigned char *buf, size_t len)
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
static int pump(pair_t *p, rx_t *rx)
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
static int send_id(pair_t *p, uint64_t id, unsigned char *buf, rx_t *rx)
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
static void settle(pair_t *p, rx_t *rx, size_t want, int quiet_ms)
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

static fab_fault_stats_t stats_of(fab_ep_t *ep)
{
	fab_fault_stats_t st;

	ck_assert_int_eq(fab_fault_stats(ep, &st), GICE_OK);
	return st;
}

static void print_stats(const char *what, const fab_fault_stats_t *s)
{
	printf("%s: sent %llu dropped %llu duplicated %llu reordered %llu delayed %llu corrupted %llu\n", what,
	       (unsigned long long)s->sent, (unsigned long long)s->dropped, (unsigned long long)s->duplicated,
	       (unsigned long long)s->reordered, (unsigned long long)s->delayed, (unsigned long long)s->corrupted);
}

/* ================================================================ the wrapper */

static const char *const clean_providers[] = {"shm", "tcp"};

START_TEST(test_wrap_no_faults_in_order)
{
	enum { N = 500 };
	const size_t max = 4096;
	const char *prov = clean_providers[_i];
	unsigned char *buf = malloc(max);
	gice_faults_t none = faults("");
	fab_fault_stats_t st;
	fab_ep_t *raw;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, prov, max, 0, _i ? &none : NULL);
	ck_assert_str_eq(p.a->provider, p.b->provider);
	ck_assert_int_eq(p.a->ordered, p.b->ordered);
	ck_assert_int_eq(p.a->ordered, 1);
	ck_assert_int_eq(p.a->reliable, 1);
	ck_assert_int_eq(p.a->rma, p.b->rma);
	ck_assert_uint_eq(p.a->max_packet, max);
	ck_assert_uint_eq(p.b->max_packet, max);
	ck_assert_int_eq(fab_wait_fd(p.a), fab_wait_fd(p.inner));
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &rx);
		pump(&p, &rx);
	}
	settle(&p, &rx, N, 20);
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(rx.r[i].id, i);
	/* settled, nothing of the sender's own is in flight: the wrapper says so as its inner
	 * endpoint does (the engine then polls only for what peers announced) */
	ck_assert_int_eq(fab_quiet(p.inner), 1);
	ck_assert_int_eq(fab_quiet(p.a), 1);
	ck_assert_int_eq(fab_in_flight(p.inner), 0);
	ck_assert_int_eq(fab_in_flight(p.a), 0);
	st = stats_of(p.a);
	ck_assert_uint_eq(st.sent + st.dropped + st.duplicated + st.reordered + st.delayed + st.corrupted, 0);
	/* oversize through the wrapper: the inner endpoint's answer */
	ck_assert_int_eq(fab_send(p.a, p.a2b, buf, 16, buf, max), GICE_ERR_INVALID);
	/* not a wrapper */
	ck_assert_int_eq(fab_fault_stats(p.b, &st), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_set(p.b, &none), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_stats(p.a, NULL), GICE_ERR_INVALID);
	pair_close(&p);
	/* bad arguments leave inner with the caller */
	fab_attr_t attr = {.provider = prov, .max_packet = max};
	gice_faults_t bad = faults("drop=0.5");
	bad.rule[0].p = 1.5;
	ck_assert_int_eq(fab_open(&attr, &raw), GICE_OK);
	ck_assert_int_eq(fab_fault_wrap(raw, &bad, 0, NULL, &p.a), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_wrap(raw, NULL, 0, NULL, NULL), GICE_ERR_INVALID);
	ck_assert_int_eq(fab_fault_wrap(NULL, NULL, 0, NULL, &p.a), GICE_ERR_INVALID);
	fab_close(raw);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_drop_counted)
{
	enum { N = 1000 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("drop=0.3,seed=11");
	fab_fault_stats_t st;
	char *seen = calloc(N, 1);
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	ck_assert_int_eq(p.a->ordered, 1); /* drops do not reorder */
	for (uint64_t i = 0; i < N; i++)
		send_id(&p, i, buf, &rx);
	st = stats_of(p.a);
	print_stats("drop=0.3", &st);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.dropped, N / 5);
	ck_assert_uint_lt(st.dropped, N * 2 / 5);
	ck_assert_uint_eq(st.duplicated + st.reordered + st.delayed + st.corrupted, 0);
	settle(&p, &rx, N - st.dropped, 30);
	for (size_t i = 0; i < rx.n; i++) {
		ck_assert_uint_lt(rx.r[i].id, N);
		ck_assert_msg(!seen[rx.r[i].id], "packet %llu twice", (unsigned long long)rx.r[i].id);
		seen[rx.r[i].id] = 1;
		if (i)
			ck_assert_uint_gt(rx.r[i].id, rx.r[i - 1].id);
	}
	pair_close(&p);
	free(seen);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_dup_counted)
{
	enum { N = 600 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("dup=0.25,seed=5");
	fab_fault_stats_t st;
	int *times = calloc(N, sizeof(int));
	uint64_t twice = 0;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	for (uint64_t i = 0; i < N; i++)
		send_id(&p, i, buf, &rx);
	st = stats_of(p.a);
	print_stats("dup=0.25", &st);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.duplicated, N / 8);
	ck_assert_uint_eq(st.dropped + st.reordered + st.delayed + st.corrupted, 0);
	settle(&p, &rx, N + st.duplicated, 30);
	for (size_t i = 0; i < rx.n; i++) {
		ck_assert_uint_lt(rx.r[i].id, N);
		times[rx.r[i].id]++;
		if (i) /* the copy comes right after the original */
			ck_assert_uint_ge(rx.r[i].id, rx.r[i - 1].id);
	}
	for (size_t i = 0; i < N; i++) {
		ck_assert_msg(times[i] == 1 || times[i] == 2, "packet %zu arrived %d times", i, times[i]);
		twice += times[i] == 2;
	}
	ck_assert_uint_eq(twice, st.duplicated);
	pair_close(&p);
	free(times);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_corrupt_one_bit)
{
	enum { N = 600 };
	const size_t max = 2048;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("corrupt=0.2,seed=9");
	fab_fault_stats_t st;
	uint64_t bad = 0, in_hdr = 0;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_POS); /* a flipped bit may hit the id */
	pair_open(&p, "shm", max, 0, &f);
	for (uint64_t i = 0; i < N; i++)
		send_id(&p, i, buf, &rx);
	st = stats_of(p.a);
	print_stats("corrupt=0.2", &st);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.corrupted, N / 10);
	ck_assert_uint_eq(st.dropped + st.duplicated + st.reordered + st.delayed, 0);
	settle(&p, &rx, N, 20);
	for (size_t i = 0; i < N; i++) {
		ck_assert_msg(rx.r[i].diff_bits <= 1, "packet %zu: %d bits differ", i, rx.r[i].diff_bits);
		bad += rx.r[i].diff_bits == 1;
		in_hdr += rx.r[i].diff_bits == 1 && rx.r[i].id != i;
	}
	ck_assert_uint_eq(bad, st.corrupted);
	printf("corrupt: %llu packets with one bit flipped, %llu of them in the id\n", (unsigned long long)bad,
	       (unsigned long long)in_hdr);
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

/* All N ids arrived exactly once, whatever the order; returns how many came after a larger id. */
static uint64_t check_all_once(const rx_t *rx, uint64_t n)
{
	char *seen = calloc(n, 1);
	uint64_t late = 0, top = 0;

	ck_assert_uint_eq(rx->n, n);
	for (size_t i = 0; i < rx->n; i++) {
		ck_assert_uint_lt(rx->r[i].id, n);
		ck_assert_msg(!seen[rx->r[i].id], "packet %llu twice", (unsigned long long)rx->r[i].id);
		seen[rx->r[i].id] = 1;
		if (i && rx->r[i].id < top)
			late++;
		top = GICE_MAX(top, rx->r[i].id);
	}
	free(seen);
	return late;
}

START_TEST(test_reorder_delivers_all)
{
	enum { N = 600 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("reorder=0.2,seed=3");
	fab_fault_stats_t st;
	uint64_t late;
	int saw_hold = 0;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	ck_assert_int_eq(p.a->ordered, 0);
	ck_assert_int_eq(p.b->ordered, 1);
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &rx);
		if (atomic_load(&p.a->held) && !saw_hold) {
			/* a held packet: poll before sleeping */
			ck_assert_int_eq(fab_trywait(p.a), GICE_ERR_AGAIN);
			saw_hold = 1;
		}
	}
	ck_assert(saw_hold);
	/* the last one may wait for its 1 ms */
	settle(&p, &rx, N, 10);
	st = stats_of(p.a);
	print_stats("reorder=0.2", &st);
	late = check_all_once(&rx, N);
	ck_assert_uint_eq(st.sent, N);
	ck_assert_uint_gt(st.reordered, N / 10);
	ck_assert_uint_eq(st.dropped + st.duplicated + st.delayed + st.corrupted, 0);
	ck_assert_uint_gt(late, 0);
	printf("reorder: %llu packets arrived after a later one\n", (unsigned long long)late);
	ck_assert_int_eq(fab_trywait(p.a), fab_trywait(p.b)); /* nothing held: the inner answer (shm: no fd) */
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

START_TEST(test_delay_delivers_all)
{
	enum { N = 300 };
	const size_t max = 1024;
	unsigned char *buf = malloc(max);
	gice_faults_t f = faults("delay_us=2000,seed=4");
	fab_fault_stats_t st;
	uint64_t t0, late;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, &f);
	ck_assert_int_eq(p.a->ordered, 0);
	t0 = gice_now_ns();
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &rx);
		pump(&p, &rx);
		if (i % 8 == 0)
			usleep(100); /* spread the sends over more than the delay */
	}
	settle(&p, &rx, N, 10);
	/* with a network fault on, a poll may have held copies to send: never quiet */
	ck_assert_int_eq(fab_quiet(p.inner), 1);
	ck_assert_int_eq(fab_quiet(p.a), 0);
	ck_assert_int_eq(fab_in_flight(p.inner), 0);
	ck_assert_int_eq(fab_in_flight(p.a), 1);
	st = stats_of(p.a);
	print_stats("delay_us=2000", &st);
	late = check_all_once(&rx, N);
	ck_assert_uint_eq(st.sent, N);
	/* pool of 64 holds: sends beyond it go straight out, so not every packet is delayed */
	ck_assert_uint_gt(st.delayed, N / 4);
	ck_assert_uint_eq(st.dropped + st.duplicated + st.reordered + st.corrupted, 0);
	printf("delay: %llu of %d packets arrived after a later one, all in %.1f ms\n", (unsigned long long)late, N,
	       (gice_now_ns() - t0) / 1e6);
	ck_assert_uint_gt(late, 0);
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

/* One run of N packets through a fresh pair with faults spec; returns the received records and the
 * counts. */
static void run_once(const char *spec, uint64_t n, size_t max, rx_t *rx, fab_fault_stats_t *st)
{
	gice_faults_t f = faults(spec);
	unsigned char *buf = malloc(max);
	pair_t p;

	rx_init(rx, max, RX_RAW);
	pair_open(&p, "shm", max, 0, &f);
	for (uint64_t i = 0; i < n; i++)
		send_id(&p, i, buf, rx);
	*st = stats_of(p.a);
	settle(&p, rx, n - st->dropped + st->duplicated, 20);
	pair_close(&p);
	free(buf);
}

static int same_records(const rx_t *x, const rx_t *y)
{
	if (x->n != y->n)
		return 0;
	for (size_t i = 0; i < x->n; i++)
		if (x->r[i].len != y->r[i].len || x->r[i].crc != y->r[i].crc || x->r[i].id != y->r[i].id)
			return 0;
	return 1;
}

static int cmp_rec(const void *a, const void *b)
{
	const rec_t *x = a, *y = b;

	if (x->crc != y->crc)
		return x->crc < y->crc ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

START_TEST(test_same_seed_same_sequence)
{
	enum { N = 400 };
	const size_t max = 512;
	rx_t r1, r2, r3;
	fab_fault_stats_t s1, s2, s3;

	/* packets are lost and bits flipped: compare what arrived (id read, length, crc) */
	run_once("drop=0.2,dup=0.15,corrupt=0.1,seed=21", N, max, &r1, &s1);
	run_once("drop=0.2,dup=0.15,corrupt=0.1,seed=21", N, max, &r2, &s2);
	run_once("drop=0.2,dup=0.15,corrupt=0.1,seed=22", N, max, &r3, &s3);
	print_stats("seed 21", &s1);
	print_stats("seed 22", &s3);
	ck_assert(s1.dropped && s1.duplicated && s1.corrupted);
	ck_assert(!memcmp(&s1, &s2, sizeof(s1)));
	ck_assert_msg(same_records(&r1, &r2), "same seed, different received sequence");
	ck_assert(memcmp(&s1, &s3, sizeof(s1)) || !same_records(&r1, &r3));
	ck_assert_msg(!same_records(&r1, &r3), "another seed, the same received sequence");
	rx_free(&r1);
	rx_free(&r2);
	rx_free(&r3);

	/* with reordering the arrival order depends on timing (the 1 ms limit), the set and the
	 * counts do not */
	run_once("drop=0.1,reorder=0.2,seed=8", N, max, &r1, &s1);
	run_once("drop=0.1,reorder=0.2,seed=8", N, max, &r2, &s2);
	ck_assert(!memcmp(&s1, &s2, sizeof(s1)));
	qsort(r1.r, r1.n, sizeof(rec_t), cmp_rec);
	qsort(r2.r, r2.n, sizeof(rec_t), cmp_rec);
	ck_assert(same_records(&r1, &r2));
	rx_free(&r1);
	rx_free(&r2);
}
END_TEST

/* GICE_ERR_AGAIN from the inner endpoint: the packet is retried with its decision, so the packets
 * dropped are the same as in a run without AGAIN. */
START_TEST(test_again_keeps_decision)
{
	enum { N = 300 };
	const size_t max = 65536; /* above the inject size: every send takes a tx buffer */
	gice_faults_t f = faults("drop=0.5,seed=77");
	unsigned char *buf = malloc(max);
	fab_fault_stats_t s1, s2;
	rx_t r1, r2;
	int again = 0;
	pair_t p;

	/* easy: deep queues, the receiver polled after every send */
	rx_init(&r1, max, RX_BY_ID);
	pair_open(&p, "shm", max, 256, &f);
	for (uint64_t i = 0; i < N; i++) {
		send_id(&p, i, buf, &r1);
		pump(&p, &r1);
	}
	s1 = stats_of(p.a);
	settle(&p, &r1, N - s1.dropped, 10);
	pair_close(&p);

	/* hard: 4 tx buffers and the receiver not polled until sends fail */
	rx_init(&r2, max, RX_BY_ID);
	pair_open(&p, "shm", max, 4, &f);
	for (uint64_t i = 0; i < N; i++)
		again += send_id(&p, i, buf, &r2);
	s2 = stats_of(p.a);
	settle(&p, &r2, N - s2.dropped, 10);
	pair_close(&p);
	printf("again: %d sends refused with GICE_ERR_AGAIN and retried; %llu dropped both times\n", again,
	       (unsigned long long)s1.dropped);
	ck_assert_int_gt(again, 0);
	ck_assert(!memcmp(&s1, &s2, sizeof(s1)));
	ck_assert(same_records(&r1, &r2));
	rx_free(&r2);
	rx_free(&r1);
	free(buf);
}
END_TEST

typedef struct {
	fab_ep_t *ep;
	_Atomic int stop;
	_Atomic int sets;
	int fails;
} setter_t;

static void *setter(void *arg)
{
	setter_t *s = arg;
	gice_faults_t on = faults("drop=0.5,corrupt=0,seed=12");

	while (!atomic_load(&s->stop)) {
		on.seed++;
		if (fab_fault_set(s->ep, (s->sets & 1) ? NULL : &on) != GICE_OK)
			s->fails++;
		s->sets++;
		usleep(50);
	}
	return NULL;
}

START_TEST(test_set_while_sending)
{
	enum { N = 3000 };
	const size_t max = 256;
	unsigned char *buf = malloc(max);
	gice_faults_t all = faults("drop=1"), reorder = faults("reorder=0.1");
	fab_fault_stats_t st, st0;
	setter_t s = {0};
	pthread_t th;
	pair_t p;
	rx_t rx;

	rx_init(&rx, max, RX_BY_ID);
	pair_open(&p, "shm", max, 0, NULL);
	/* on and off from this thread */
	ck_assert_int_eq(fab_fault_set(p.a, &all), GICE_OK);
	for (uint64_t i = 0; i < 50; i++)
		send_id(&p, i, buf, &rx);
	st0 = stats_of(p.a);
	ck_assert_uint_eq(st0.sent, 50);
	ck_assert_uint_eq(st0.dropped, 50);
	ck_assert_int_eq(fab_fault_set(p.a, NULL), GICE_OK);
	for (uint64_t i = 50; i < 100; i++)
		send_id(&p, i, buf, &rx);
	settle(&p, &rx, 50, 10);
	ck_assert_uint_eq(rx.r[0].id, 50);
	st = stats_of(p.a);
	ck_assert(!memcmp(&st, &st0, sizeof(st))); /* fault-free sends are not counted */
	/* reorder/delay on an endpoint that promised order: refused */
	ck_assert_int_eq(fab_fault_set(p.a, &reorder), GICE_ERR_UNSUPPORTED);
	reorder.rule[0].p = 2;
	ck_assert_int_eq(fab_fault_set(p.a, &reorder), GICE_ERR_INVALID);

	/* from another thread, while this one sends */
	s.ep = p.a;
	ck_assert_int_eq(pthread_create(&th, NULL, setter, &s), 0);
	/* N sends, and on until the setter has changed the faults a few times (a loaded machine
	 * may not have run it yet) */
	uint64_t i = 100;
	for (; i < 100 + N || (atomic_load(&s.sets) < 3 && i < 100 + 50 * N); i++) {
		send_id(&p, i, buf, &rx);
		if (i % 16 == 0)
			pump(&p, &rx);
	}
	const int n_sent = (int)(i - 100);
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	st = stats_of(p.a);
	settle(&p, &rx, 50 + n_sent - (st.dropped - 50), 10);
	printf("set while sending: %d sets, %llu of %d packets dropped\n", atomic_load(&s.sets),
	       (unsigned long long)(st.dropped - 50), n_sent);
	ck_assert_int_eq(s.fails, 0);
	ck_assert_int_gt(atomic_load(&s.sets), 2);
	ck_assert_uint_eq(st.duplicated + st.reordered + st.delayed + st.corrupted, 0);
	pair_close(&p);
	rx_free(&rx);
	free(buf);
}
END_TEST

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

/* In a child (test_probe): 1 when fab_open finds no provider arg here (GICE_ERR_NOT_FOUND),
 * else 0 (an error other than "not here" is left to the cases to show). "udp" is the raw
 * datagram endpoint, chosen through GICE_FI_PROVIDER as test_udp_dgram does. */
static int probe_open(void *arg)
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

/* ================================================================ GICE_LOG_LEVEL */

/* In a child with GICE_LOG_LEVEL=level: log one error and one warning into a file and return
 * which levels were enabled (bit 0 error, bit 1 warn, bit 2 trace) in *mask; the file's text
 * in out. */
static void log_child(const char *level, int *mask, char *out, size_t outlen)
{
	char path[] = "/tmp/gice-log-XXXXXX";
	int fd = mkstemp(path), w;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fd, 2);
		setenv("GICE_LOG_LEVEL", level, 1);
		setenv("GICE_LOG_SUBSYS", "all", 1);
		gice_error("ct", "an error line");
		gice_warn("ct", "a warning line");
		_exit(gice_log_enabled(GICE_LOG_ERROR, "ct") | gice_log_enabled(GICE_LOG_WARN, "ct") << 1 |
		      gice_log_enabled(GICE_LOG_TRACE, "ct") << 2);
	}
	ck_assert_int_eq(waitpid(pid, &w, 0), pid);
	ck_assert(WIFEXITED(w));
	*mask = WEXITSTATUS(w);
	n = pread(fd, out, outlen - 1, 0);
	ck_assert_int_ge(n, 0);
	out[n] = '\0';
	close(fd);
	unlink(path);
}

/* GICE_LOG_LEVEL=off (any case) is accepted and silences every level, errors included; error
 * keeps errors only; an unknown level is reported, naming off among the choices, and is warn. */
START_TEST(test_log_level_off)
{
	char out[4096];
	int mask;

	log_child("off", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 0);
	ck_assert_msg(!*out, "GICE_LOG_LEVEL=off printed: %s", out);
	log_child("OFF", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 0);
	ck_assert_msg(!*out, "GICE_LOG_LEVEL=OFF printed: %s", out);
	log_child("error", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 1);
	ck_assert_msg(strstr(out, "an error line") && !strstr(out, "a warning line"), "output: %s", out);
	log_child("trace", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 7);
	log_child("quiet", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 3);
	ck_assert_msg(strstr(out, "GICE_LOG_LEVEL=\"quiet\" is not one of off, error,"), "output: %s", out);
	ck_assert_msg(strstr(out, "a warning line"), "output: %s", out);
	const gice_param_t *p = gice_param_find(gice_common_params, "GICE_LOG_LEVEL");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(strstr(p->help, "off (no messages at all)"));
}
END_TEST

static Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	struct {
		const char *name;
		const TTest *fn;
		int loop;          /* 0: run once */
		const char *needs; /* the providers it opens: left out when one is not here */
	} cases[] = {
		{"crc32c_known_vectors", test_crc32c_known_vectors, 0, NULL},
		{"crc32c_chaining_unaligned", test_crc32c_chaining_unaligned, 0, NULL},
		{"crc32c_hw_matches_table", test_crc32c_hw_matches_table, 0, NULL},
		{"faults_parse_valid", test_faults_parse_valid, 0, NULL},
		{"faults_parse_invalid", test_faults_parse_invalid, 0, NULL},
		{"faults_format_round_trip", test_faults_format_round_trip, 0, NULL},
		{"faults_param_registered", test_faults_param_registered, 0, NULL},
		{"wrap_no_faults_in_order", test_wrap_no_faults_in_order, 2, "shm tcp"},
		{"drop_counted", test_drop_counted, 0, "shm"},
		{"dup_counted", test_dup_counted, 0, "shm"},
		{"corrupt_one_bit", test_corrupt_one_bit, 0, "shm"},
		{"reorder_delivers_all", test_reorder_delivers_all, 0, "shm"},
		{"delay_delivers_all", test_delay_delivers_all, 0, "shm"},
		{"same_seed_same_sequence", test_same_seed_same_sequence, 0, "shm"},
		{"again_keeps_decision", test_again_keeps_decision, 0, "shm"},
		{"set_while_sending", test_set_while_sending, 0, "shm"},
		{"udp_dgram", test_udp_dgram, 0, "udp"},
		{"udp_rxd_reliable", test_udp_rxd_reliable, 0, "udp;ofi_rxd"},
		{"log_level_off", test_log_level_off, 0, NULL},
	};
	static const char *const provs[] = {"shm", "tcp", "udp", "udp;ofi_rxd"};
	int here[4];

	for (int p = 0; p < 4; p++)
		here[p] = test_probe(probe_open, (void *)provs[p]) != 1;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
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
	return s;
}

int main(void)
{
	SRunner *sr;
	int rc;

	/* no FI_*_IFACE here: fab_open binds the socket providers to GICE_FAB_IFACE (default lo) */
	setvbuf(stdout, NULL, _IOLBF, 0);
	sr = srunner_create(faults_suite());
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
