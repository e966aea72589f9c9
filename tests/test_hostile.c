/* Description: a hostile sender against a device. The sender is a bare fabric endpoint of the
 * device's provider (fabric/, libfabric underneath; no gice device, no engine) that speaks
 * docs/protocol.md with packets built by hand: forged sources, the device's own id, another
 * job's key, the job's key from an endpoint that is not the device it claims (tcp and udp name
 * the sender of each packet; shm cannot be trusted to: fab_ofi.c), forged BYEs, floods; then, as
 * a member of the job would (GICE_CT_AUTH=0: the MAC and the sender binding off), GET_REQs with
 * bad lengths, rendezvous announcements that would make the device read its own memory, a
 * peer that never acknowledges, and FAULT requests (kill yourself), refused without the MAC. Each case checks that the device stays up, that no byte of its
 * memory changes (the whole arena is compared), that the rejection is counted in its named
 * statistic, and that the device's own traffic still completes. Over shm, tcp, net and raw udp
 * (whose device checks CRC32Cs: the hostile sender computes them, as anyone can); read grants
 * over tcp and net. */
#include <check.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_internal.h"
#include "emu/ct_engine/ct_internal.h"
#include "emu/ct_engine/ct_proto.h"
#include "fabric/bootstrap.h"
#include "fabric/fabric.h"
#include "tests/test_util.h"

#define REGION (64u * 1024u)

static const char *provider;
static const uint64_t bad_key = 0xbadbadbad; /* registered nowhere (keys are random 64-bit) */
static gice_device_t *d, *d2;       /* the target, and a second device of the job */
static uint8_t *region, *region2;   /* registered on d and d2 */
static uint64_t rkey, rkey2;
static gice_conn_t c_self, c_d2;    /* d -> d, d -> d2 */
static fab_ep_t *h;                 /* the hostile endpoint */
static fab_addr_t to_d;
static uint8_t *arena_before;       /* d's whole device memory before the attack */
static uint32_t psn, msg_id;        /* the next the hostile sender uses as "device 1" */

static void open_all(void)
{
	void *p;

	ck_assert_int_eq(gice_init(), GICE_OK);
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20, .provider = provider};
	ck_assert_int_eq(gice_device_open(&a, &d), GICE_OK);
	ck_assert_int_eq(gice_device_open(&a, &d2), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(d, REGION, &p), GICE_OK);
	region = p;
	memset(region, 0x5a, REGION);
	ck_assert_int_eq(gice_mem_register(d, region, REGION, &rkey), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(d2, REGION, &p), GICE_OK);
	region2 = p;
	ck_assert_int_eq(gice_mem_register(d2, region2, REGION, &rkey2), GICE_OK);
	ck_assert_int_eq(gice_conn_open(d, gice_device_id(d), NULL, &c_self), GICE_OK);
	ck_assert_int_eq(gice_conn_open(d, gice_device_id(d2), NULL, &c_d2), GICE_OK);

	fab_attr_t fa = {.provider = provider, .max_packet = 16384};
	ck_assert_int_eq(fab_open(&fa, &h), GICE_OK);
	ck_assert_int_eq(fab_insert(h, d->addr, d->addr_len, &to_d), GICE_OK);
	arena_before = malloc(hbm_size(d->hbm));
	ck_assert_ptr_nonnull(arena_before);
	memcpy(arena_before, hbm_base(d->hbm), hbm_size(d->hbm));
	psn = msg_id = 0;
}

static void close_all(void)
{
	fab_close(h);
	free(arena_before);
	ck_assert_int_eq(gice_mem_deregister(d, rkey), GICE_OK);
	ck_assert_int_eq(gice_mem_deregister(d2, rkey2), GICE_OK);
	ck_assert_int_eq(gice_mem_free(d, region), GICE_OK);
	ck_assert_int_eq(gice_mem_free(d2, region2), GICE_OK);
	ck_assert_int_eq(gice_device_close(d2), GICE_OK);
	ck_assert_int_eq(gice_device_close(d), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

static void setup_shm(void) { provider = "shm"; open_all(); }
static void setup_tcp(void) { provider = "tcp"; open_all(); }
static void setup_udp(void) { provider = "udp"; open_all(); } /* raw datagrams */
static void setup_net(void) { provider = "net"; open_all(); } /* 1.17's native RDM over TCP */

/* As a member of the job: no MAC, no sender binding. */
static void setup_member_shm(void) { setenv("GICE_CT_AUTH", "0", 1); setup_shm(); }
static void setup_member_tcp(void) { setenv("GICE_CT_AUTH", "0", 1); setup_tcp(); }
static void setup_member_udp(void) { setenv("GICE_CT_AUTH", "0", 1); setup_udp(); }
static void setup_member_net(void) { setenv("GICE_CT_AUTH", "0", 1); setup_net(); }
static void teardown_member(void) { close_all(); unsetenv("GICE_CT_AUTH"); }

static void nap_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Drive the hostile endpoint (sends complete, what the device answers is drained). */
static void h_progress(void)
{
	fab_event_t ev[16];
	int n = fab_poll(h, ev, 16);

	for (int i = 0; i < n; i++)
		if (ev[i].type == FAB_EV_RX)
			fab_release(h, ev[i].buf);
}

/* Send one hand-built packet to d: key NULL leaves the MAC zero. */
static void h_send(ct_hdr_t hd, const uint64_t *key, const void *payload, uint32_t plen)
{
	uint8_t b[CT_HDR_BYTES];
	int rc;

	hd.magic = CT_PROTO_MAGIC;
	hd.version = CT_PROTO_VERSION;
	hd.dst_gid = gice_device_id(d);
	hd.payload_len = plen;
	/* a device on raw datagrams checks CRC32Cs (GICE_CHECKSUM=auto): the sender computes them, as
	 * anyone can, so that what stops its packets is what the case is about */
	int csum = !strcmp(provider, "udp");
	if (csum)
		hd.flags |= CT_HF_CSUM;
	ct_proto_build(&hd, b);
	if (key)
		ct_proto_sign(b, key);
	if (csum) {
		uint32_t c = htole32(ct_proto_csum(b, payload, plen));
		memcpy(b + CT_HDR_CSUM_OFF, &c, 4);
	}
	for (uint64_t ms = 0; (rc = fab_send(h, to_d, b, sizeof(b), payload, plen)) == GICE_ERR_AGAIN &&
			      ms < test_scaled(10000); ms++) {
		h_progress();
		nap_ms(1);
	}
	ck_assert_int_eq(rc, GICE_OK);
}

/* A put of 16 bytes into d's region, claiming to come from device src. */
static void h_put(uint32_t src, const uint64_t *key)
{
	static const uint8_t junk[16] = "0123456789abcdef";
	ct_hdr_t hd = {.op = CT_PKT_PUT, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = src, .msg_id = msg_id++,
		       .psn = psn++, .rkey = rkey, .roff = 128, .msg_len = sizeof(junk)};

	h_send(hd, key, junk, sizeof(junk));
}

static void h_bye(uint32_t src, const uint64_t *key)
{
	h_send((ct_hdr_t){.op = CT_PKT_BYE, .src_gid = src}, key, NULL, 0);
}

/* "Kill yourself" (a FAULT request), claiming to come from device src. */
static void h_fault_kill(uint32_t src, const uint64_t *key)
{
	h_send((ct_hdr_t){.op = CT_PKT_FAULT, .src_gid = src, .value = CT_FAULT_KILL}, key, NULL, 0);
}

static gice_stats_t stats(void)
{
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(d, &st), GICE_OK);
	return st;
}

/* Wait (driving the hostile endpoint) until statistic field of d reaches want; its value. */
#define WAIT_STAT(field, want)                                                                      \
	({                                                                                          \
		uint64_t v_ = 0;                                                                    \
		for (uint64_t ms_ = 0; ms_ < test_scaled(20000); ms_++) {                           \
			h_progress();                                                               \
			if ((v_ = stats().field) >= (want))                                         \
				break;                                                              \
			nap_ms(1);                                                                  \
		}                                                                                   \
		ck_assert_msg(v_ >= (want), #field " is %llu, expected %llu", (unsigned long long)v_, \
			      (unsigned long long)(want));                                          \
		v_;                                                                                 \
	})

/* No byte of d's memory changed. */
static void arena_unchanged(void)
{
	const uint8_t *now = hbm_base(d->hbm);
	uint64_t n = hbm_size(d->hbm);

	for (uint64_t i = 0; i < n; i++)
		if (now[i] != arena_before[i])
			ck_abort_msg("device memory changed at offset %llu: 0x%02x, was 0x%02x", (unsigned long long)i,
				     now[i], arena_before[i]);
}

/* d still works: a put to itself and one to d2 complete, and it has declared no one dead. */
static void own_traffic_completes(void)
{
	gice_counter_t c;
	ck_assert_int_eq(gice_counter_alloc(d, &c), GICE_OK);
	gice_op_t self = {.type = GICE_OP_PUT, .conn = c_self, .local = region, .bytes = 64, .rkey = rkey,
			  .roff = REGION - 64, .signal = GICE_NO_COUNTER, .completion = c};
	gice_op_t other = self;
	other.conn = c_d2;
	other.rkey = rkey2;
	ck_assert_int_eq(gice_post(d, &self), GICE_OK);
	ck_assert_int_eq(gice_post(d, &other), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(d, c, GICE_CMP_GE, 2, (int)test_scaled(10000), NULL), GICE_OK);
	ck_assert_uint_eq(stats().peers_dead, 0);
	ck_assert_int_eq(gice_counter_free(d, c), GICE_OK);
}

START_TEST(packets_without_the_jobs_mac_are_dropped_and_counted)
{
	const uint64_t other_job[2] = {0x1111, 0x2222};
	uint32_t me = gice_device_id(d), peer = gice_device_id(d2);
	uint64_t base = stats().rx_auth_bad;

	h_put(peer, NULL);      /* forged source, no MAC */
	h_put(peer, other_job); /* another job's key */
	h_put(me, NULL);        /* the device's own id */
	h_bye(me, NULL);        /* "I am you, and I am closing" */
	h_bye(peer, other_job); /* "device 1 is closing" */
	h_fault_kill(peer, NULL);      /* "kill yourself", unsigned */
	h_fault_kill(peer, other_job); /* ... signed by another job */
	WAIT_STAT(rx_auth_bad, base + 7);
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

/* Without GICE_CT_AUTH nothing proves who sent a FAULT request: a device refuses every one
 * (counted in rx_auth_bad) and its process lives on (a kill obeyed would end this test). */
START_TEST(fault_requests_without_authentication_are_refused)
{
	uint64_t base = stats().rx_auth_bad;

	h_fault_kill(gice_device_id(d2), NULL);
	WAIT_STAT(rx_auth_bad, base + 1);
	nap_ms(50); /* a kill obeyed would come from the watchdog thread */
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

/* resident set of this process in KiB */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* Packets without the job's MAC as fast as the hostile endpoint can send them, 300,000 of them
 * (GICE_HOSTILE_FLOOD=N sets the count): each is dropped and counted (over raw udp, whose full
 * socket buffers drop some, those that arrive), nothing lands, the device keeps working, and the
 * resident set of this process (the device, its peer and the hostile endpoint) grows by less
 * than FLOOD_RSS_BOUND_KIB (docs/protocol.md, "Floods") — over shm, raw udp and net (libfabric
 * 1.17's native RDM over TCP, gice's default between hosts, which reads a connection only as
 * fast as it is drained). Over tcp;ofi_rxm the flood is paced: the sender stays at most
 * FLOOD_TCP_LEAD packets ahead of what the device has counted. Unpaced, rxm buffers what it
 * reads without limit and, in about one run in eight, keeps reading inside one progress call
 * for as long as the sender outruns it (5 GB in 20 s here): no link pass ends and no heartbeat
 * leaves, so after GICE_TIMEOUT_MS the device's peer calls it hung, rightly, and the device
 * aborts. That denial of service is below gice (docs/protocol.md, "Floods"). */
#define FLOOD_RSS_BOUND_KIB (512L * 1024)
#define FLOOD_TCP_LEAD 4096
START_TEST(a_flood_of_foreign_packets_is_dropped_and_counted)
{
	long before = rss_kib(), peak = before;
	uint64_t base = stats().rx_auth_bad;
	const char *v = getenv("GICE_HOSTILE_FLOOD");
	const uint64_t n = v ? strtoull(v, NULL, 0) : 300000;

	int paced = !strcmp(provider, "tcp");

	for (uint64_t i = 0; i < n; i++) {
		h_put(gice_device_id(d2), NULL);
		if (i % 1024 == 1023 && paced && i + 1 > FLOOD_TCP_LEAD)
			WAIT_STAT(rx_auth_bad, base + i + 1 - FLOOD_TCP_LEAD);
		if (i % 4096 == 0) {
			long now = rss_kib();
			peak = now > peak ? now : peak;
		}
	}
	uint64_t got = n;
	if (!strcmp(provider, "udp")) {
		/* datagrams a full socket buffer drops never arrive: wait until the count settles */
		uint64_t last = UINT64_MAX;
		for (int quiet = 0; quiet < 20;) {
			h_progress();
			got = stats().rx_auth_bad - base;
			quiet = got == last ? quiet + 1 : 0;
			last = got;
			nap_ms(10);
		}
		ck_assert_msg(got > 0 && got <= n, "%llu of %llu datagrams counted", (unsigned long long)got,
			      (unsigned long long)n);
	} else {
		WAIT_STAT(rx_auth_bad, base + n);
	}
	long after = rss_kib();
	peak = after > peak ? after : peak;
	fprintf(stderr, "flood over %s%s: %llu packets, %llu arrived and dropped; RSS %ld KiB before, %ld peak, %ld after\n",
		provider, paced ? " (paced)" : "", (unsigned long long)n, (unsigned long long)got, before, peak, after);
	ck_assert_msg(peak - before < FLOOD_RSS_BOUND_KIB, "a flood of %llu packets over %s grew RSS by %ld KiB (bound %ld)",
		      (unsigned long long)n, provider, peak - before, FLOOD_RSS_BOUND_KIB);
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

START_TEST(the_jobs_mac_from_another_endpoint_is_dropped_and_counted)
{
	uint64_t key[2];
	uint32_t me = gice_device_id(d), peer = gice_device_id(d2);
	uint64_t base = stats().rx_auth_bad;

	/* an insider's key: whatever knows the job's secret (a process of the job); tcp names the
	 * sender of each packet (shm cannot be trusted to: fab_ofi.c) */
	ck_assert_int_eq(d->ep->source, 1);
	ct_proto_job_key(boot_secret(api_g.boot), key);
	h_put(peer, key);
	h_put(me, key);
	h_bye(me, key);
	h_bye(peer, key);
	WAIT_STAT(rx_auth_bad, base + 4);
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

/* A GET_REQ of len bytes whose requester packets are mtu bytes, from "device 1". */
static void h_get(uint64_t len, uint64_t mtu)
{
	ct_hdr_t hd = {.op = CT_PKT_GET_REQ, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = gice_device_id(d2),
		       .msg_id = msg_id++, .psn = psn++, .rkey = rkey, .roff = 0, .value = len, .aux = mtu};

	h_send(hd, NULL, NULL, 0);
}

START_TEST(get_requests_with_bad_lengths_are_refused)
{
	gice_stats_t st0 = stats();

	h_get(16, 95);              /* packets smaller than a header: the answer would wrap */
	h_get(16, 96);              /* packets of a bare header: empty answers forever */
	h_get(16, 255);             /* below the smallest GICE_MTU */
	h_get(1ull << 32, 0);       /* 4 GiB: more than a message carries */
	WAIT_STAT(nacks_sent, st0.nacks_sent + 4);
	h_get(16, 0);               /* a good one, for contrast: served */
	WAIT_STAT(rx_pkts, st0.rx_pkts + 5);
	nap_ms(50);
	gice_stats_t st = stats();
	/* the good get's one response and the NACKs; nothing sent on and on */
	ck_assert_msg(st.tx_pkts - st0.tx_pkts <= 8, "%llu packets sent for 5 requests",
		      (unsigned long long)(st.tx_pkts - st0.tx_pkts));
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

/* d still serves itself: a put and a get through its own loopback complete. */
static void loopback_completes(void)
{
	gice_counter_t c;
	ck_assert_int_eq(gice_counter_alloc(d, &c), GICE_OK);
	gice_op_t put = {.type = GICE_OP_PUT, .conn = c_self, .local = region, .bytes = 64, .rkey = rkey,
			 .roff = REGION - 64, .signal = GICE_NO_COUNTER, .completion = c};
	gice_op_t get = put;
	get.type = GICE_OP_GET;
	get.roff = REGION - 128;
	ck_assert_int_eq(gice_post(d, &put), GICE_OK);
	ck_assert_int_eq(gice_post(d, &get), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(d, c, GICE_CMP_GE, 2, (int)test_scaled(10000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_free(d, c), GICE_OK);
}

/* "Device 1" sends 1,200 puts with a bad key and never acknowledges the NACKs (the real device 1
 * drops all it sends): its NACKs fill its share of d's response pool, the rest are refused and
 * counted, and d keeps serving everyone else (itself here). */
START_TEST(a_peer_withholding_acks_starves_only_itself)
{
	gice_stats_t st0 = stats();
	uint64_t refused = st0.resp_refused, nacks = st0.nacks_sent;
	static const uint8_t junk[8] = "12345678";
	gice_stats_t st;

	ck_assert_int_eq(gice_faults_set(d2, "drop=1,ctl=1") /* its ACKs too */, GICE_OK);
	for (int i = 0; i < 1200; i++) {
		ct_hdr_t hd = {.op = CT_PKT_PUT, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = gice_device_id(d2),
			       .msg_id = msg_id++, .psn = psn++, .rkey = bad_key, .roff = 0, .msg_len = 8};
		h_send(hd, NULL, junk, sizeof(junk));
		if (i % 64 == 63) /* within d's receive windows: each refused, NACKed or not */
			WAIT_STAT(rx_pkts, st0.rx_pkts + (uint64_t)i + 1);
	}
	/* every refused put is answered by a NACK or counted as one not sent */
	for (uint64_t ms = 0; ms < test_scaled(20000); ms++) {
		st = stats();
		if (st.nacks_sent - nacks + st.resp_refused - refused >= 1200)
			break;
		h_progress();
		nap_ms(1);
	}
	/* d and d2 are its peers: d2's share is half the pool, and 8 more for NACKs */
	ck_assert_uint_eq(st.nacks_sent - nacks, 1024 / 2 + 8);
	ck_assert_uint_eq(st.resp_refused - refused, 1200 - (1024 / 2 + 8));
	arena_unchanged();
	loopback_completes();
}
END_TEST

START_TEST(rendezvous_announcements_never_read_the_devices_own_memory)
{
	uint64_t nacks = stats().nacks_sent;
	ct_hdr_t hd = {.op = CT_PKT_PUT_RTS, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = gice_device_id(d),
		       .rkey = rkey, .roff = 0, .msg_len = 4096, .aux = 0};

	uint8_t grant[CT_GRANT_BYTES];

	/* "I am you: read your bytes at offset 0 (never registered) into your region" */
	psn = 0; /* d's first packet from itself: as if its own */
	hd.psn = psn++;
	hd.msg_id = msg_id++;
	ct_proto_grant_build(0, 0, grant);
	h_send(hd, NULL, grant, sizeof(grant));
	WAIT_STAT(nacks_sent, nacks + 1);
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

/* ---- reads over the provider (GICE_PLANE=net's rendezvous): only what a grant names ---- */

/* The grant (provider key and base) of d's region registered under gice key k: what d puts in
 * its PUT_RTS and GET_GO for bytes of that region. */
static fab_mr_info_t grant_of(uint64_t k)
{
	for (uint32_t i = 0; i < d->ct->n_grants; i++)
		if (d->ct->grants[i].key == k)
			return d->ct->grants[i].info;
	ck_abort_msg("no grant for key 0x%llx", (unsigned long long)k);
	return (fab_mr_info_t){0, 0};
}

#define POISON 0xee

/* An fi_read of len bytes at offset off of grant g of d's, by a bare endpoint of the provider
 * opened for it (tcp;ofi_rxm drops a reader's connection once one of its reads failed), into
 * buf, which starts poisoned. The read's status. */
static int h_read(fab_mr_info_t g, uint64_t off, size_t len, uint8_t *buf)
{
	fab_attr_t fa = {.provider = provider, .max_packet = 16384};
	fab_ep_t *r;
	fab_addr_t a;
	fab_event_t ev[8];
	int rc, ctx, status = 1;

	memset(buf, POISON, len);
	ck_assert_int_eq(fab_open(&fa, &r), GICE_OK);
	ck_assert_int_eq(r->rma, 1);
	ck_assert_int_eq(fab_mr_reg(r, buf, len), GICE_OK);
	ck_assert_int_eq(fab_insert(r, d->addr, d->addr_len, &a), GICE_OK);
	for (uint64_t ms = 0; (rc = fab_read(r, a, 0, len, &g, off, &ctx)) == GICE_ERR_AGAIN &&
			      ms < test_scaled(10000); ms++)
		nap_ms(1);
	ck_assert_int_eq(rc, GICE_OK);
	for (uint64_t ms = 0; status == 1 && ms < test_scaled(20000); ms++) {
		int n = fab_poll(r, ev, 8);
		for (int i = 0; i < n; i++) {
			if (ev[i].type == FAB_EV_RX)
				fab_release(r, ev[i].buf);
			else if (ev[i].type == FAB_EV_READ && ev[i].ctx == &ctx)
				status = ev[i].status;
		}
		if (status == 1)
			nap_ms(1);
	}
	fab_close(r);
	ck_assert_msg(status != 1, "the read never completed");
	return status;
}

/* No byte of buf (len) came from anywhere: it is still poisoned. */
static void nothing_read(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != POISON)
			ck_abort_msg("byte %zu of a failed read arrived: 0x%02x", i, buf[i]);
}

/* Each registered region is its own provider registration: a read with its key reaches its
 * bytes and nothing beyond them (the target's provider refuses the read; tcp;ofi_rxm and net end
 * it with FI_ECANCELED: GICE_ERR_CANCELED); a deregistered region's key reads nothing; a key
 * that was never given out reads nothing. The device keeps working. */
START_TEST(reads_reach_registered_regions_only)
{
	static uint8_t buf[2 * REGION];
	fab_mr_info_t g = grant_of(rkey);
	void *p;
	uint64_t k2;

	/* the grant works: the region's bytes, all of them */
	ck_assert_int_eq(h_read(g, 0, REGION, buf), GICE_OK);
	for (size_t i = 0; i < REGION; i++)
		ck_assert_uint_eq(buf[i], region[i]);
	/* one byte past its end, the bytes after it, the arena before it */
	ck_assert_int_eq(h_read(g, REGION - 8, 16, buf), GICE_ERR_CANCELED);
	nothing_read(buf, 16);
	ck_assert_int_eq(h_read(g, REGION, REGION, buf), GICE_ERR_CANCELED);
	nothing_read(buf, REGION);
	ck_assert_int_eq(h_read(g, (uint64_t)-4096, 4096, buf), GICE_ERR_CANCELED);
	nothing_read(buf, 4096);
	/* a revoked key: registered, read once, deregistered */
	ck_assert_int_eq(gice_mem_alloc(d, REGION, &p), GICE_OK);
	memset(p, 0x77, REGION);
	ck_assert_int_eq(gice_mem_register(d, p, REGION, &k2), GICE_OK);
	fab_mr_info_t g2 = grant_of(k2);
	ck_assert_int_eq(h_read(g2, 0, 64, buf), GICE_OK);
	ck_assert_uint_eq(buf[63], 0x77);
	ck_assert_int_eq(gice_mem_deregister(d, k2), GICE_OK);
	ck_assert_int_eq(h_read(g2, 0, 64, buf), GICE_ERR_CANCELED);
	nothing_read(buf, 64);
	ck_assert_int_eq(gice_mem_free(d, p), GICE_OK);
	/* a key given out by no one */
	ck_assert_int_eq(h_read((fab_mr_info_t){bad_key, g.addr}, 0, 64, buf), GICE_ERR_CANCELED);
	nothing_read(buf, 64);
	memcpy(arena_before, hbm_base(d->hbm), hbm_size(d->hbm)); /* the second region came and went */
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

/* 0 when an endpoint of provider arg opens here (run by test_probe, in a child). */
static int provider_here(void *arg)
{
	fab_attr_t fa = {.provider = arg, .max_packet = 16384};
	fab_ep_t *ep;

	if (fab_open(&fa, &ep))
		return 1;
	fab_close(ep);
	return 0;
}

static Suite *suite(void)
{
	Suite *s = suite_create("hostile");
	int reads_on[4] = {0}; /* of prov[]: providers whose read grants are tested here */
	static const struct {
		const char *name, *outsider, *member;
		void (*setup)(void), (*setup_member)(void);
	} prov[] = {{"shm", "outsider_shm", "member_shm", setup_shm, setup_member_shm},
		    {"tcp", "outsider_tcp", "member_tcp", setup_tcp, setup_member_tcp},
		    {"udp", "outsider_udp", "member_udp", setup_udp, setup_member_udp},
		    {"net", "outsider_net", "member_net", setup_net, setup_member_net}};

	for (size_t i = 0; i < sizeof(prov) / sizeof(prov[0]); i++) {
		int reads = !strcmp(prov[i].name, "tcp") || !strcmp(prov[i].name, "net");
		int ncases = 2 + 4 + !!strcmp(prov[i].name, "shm") + reads; /* outsider, member, reads */
		if (test_probe(provider_here, (void *)prov[i].name)) {
			test_skip_cases(ncases, "provider %s: no endpoint opens here", prov[i].name);
			continue;
		}
		reads_on[i] = reads;
		TCase *tc = tcase_create(prov[i].outsider);
		tcase_add_checked_fixture(tc, prov[i].setup, close_all);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, packets_without_the_jobs_mac_are_dropped_and_counted);
		tcase_add_test(tc, a_flood_of_foreign_packets_is_dropped_and_counted);
		if (strcmp(prov[i].name, "shm"))
			tcase_add_test(tc, the_jobs_mac_from_another_endpoint_is_dropped_and_counted);
		suite_add_tcase(s, tc);
		tc = tcase_create(prov[i].member);
		tcase_add_checked_fixture(tc, prov[i].setup_member, teardown_member);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, get_requests_with_bad_lengths_are_refused);
		tcase_add_test(tc, rendezvous_announcements_never_read_the_devices_own_memory);
		tcase_add_test(tc, a_peer_withholding_acks_starves_only_itself);
		tcase_add_test(tc, fault_requests_without_authentication_are_refused);
		suite_add_tcase(s, tc);
	}
	/* libfabric 1.17's shm checks no key or bound on a remote read (it copies with
	 * process_vm_readv: docs/protocol.md, "Read grants"); raw udp has no reads */
	for (size_t i = 0; i < sizeof(prov) / sizeof(prov[0]); i++) {
		if (!reads_on[i])
			continue;
		TCase *tc = tcase_create(!strcmp(prov[i].name, "tcp") ? "reads_tcp" : "reads_net");
		tcase_add_checked_fixture(tc, prov[i].setup, close_all);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, reads_reach_registered_regions_only);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void) { return test_run_suite(suite()); }
