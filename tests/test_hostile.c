/* Description: a hostile sender against a device. The sender is a bare fabric endpoint of the
 * device's provider (fabric/, libfabric underneath; no gice device, no engine) that speaks
 * docs/protocol.md with packets built by hand: forged sources, the device's own id, another
 * job's key, the job's key from an endpoint that is not the device it claims (tcp and udp name
 * the sender of each packet; shm cannot be trusted to: fab_ofi.c), forged BYEs, floods; then, as
 * a member of the job would (GICE_CT_AUTH=0: the MAC and the sender binding off), GET_REQs with
 * bad lengths, a peer that never acknowledges, and FAULT requests (kill yourself), refused
 * without the MAC. Each case checks that the device stays up, that no byte of its memory changes
 * (the whole arena is compared), that the rejection is counted in its named statistic, and that
 * the device's own traffic still completes. Over shm, tcp, net and raw udp (whose device checks
 * CRC32Cs: the hostile sender computes them, as anyone can). Rendezvous: test_hostile_rndv.c. */
#include "tests/hostile.h"

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

/* A PUTS from "device 1" of n entries, each of 8 bytes of fill at (keys[i], roffs[i]); count is the
 * number of puts the header claims. */
static void h_puts(uint64_t count, uint32_t n, const uint64_t *keys, const uint64_t *roffs, uint8_t fill)
{
	uint8_t pl[4 * (CT_PUT_ENTRY_BYTES + 8)], bytes[8];
	uint32_t len = 0;

	memset(bytes, fill, sizeof(bytes));
	for (uint32_t i = 0; i < n; i++) {
		ct_put_entry_t pe = {.rkey = keys[i], .roff = roffs[i], .len = sizeof(bytes)};
		len += (uint32_t)ct_proto_entry_build(&pe, bytes, pl + len);
	}
	ct_hdr_t hd = {.op = CT_PKT_PUTS, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = gice_device_id(d2),
		       .msg_id = msg_id, .psn = psn++, .msg_len = len, .value = count};
	msg_id += (uint32_t)count;
	h_send(hd, NULL, pl, len);
}

/* Small puts sharing a packet (PUTS) land or fail one by one: of three, the one with a bad key is
 * refused (one NACK) and writes nothing, the two others land. One whose entries do not fill it
 * as its header says is dropped whole (rx_bad), nothing written. */
START_TEST(small_puts_in_one_packet_land_or_fail_one_by_one)
{
	gice_stats_t st0 = stats();
	const uint64_t keys[3] = {rkey, bad_key, rkey}, roffs[3] = {256, 512, 768};
	uint8_t eight[8], before[48];

	h_puts(3, 3, keys, roffs, 0xa1);
	WAIT_STAT(nacks_sent, st0.nacks_sent + 1);
	/* a completion of d's own after the landing: its counter orders the CT's writes before our
	 * reads (a counter of stats read relaxed does not; ThreadSanitizer saw the race) */
	own_traffic_completes();
	memset(eight, 0xa1, sizeof(eight));
	ck_assert_int_eq(memcmp(region + 256, eight, 8), 0);
	ck_assert_int_eq(memcmp(region + 768, eight, 8), 0);
	memset(eight, 0x5a, sizeof(eight)); /* the fill before the attack */
	ck_assert_int_eq(memcmp(region + 512, eight, 8), 0);
	ck_assert_uint_eq(stats().nacks_sent, st0.nacks_sent + 1);

	const uint64_t good[3] = {rkey, rkey, rkey}, more[3] = {1024, 1040, 1056};
	h_puts(4, 3, good, more, 0xb2); /* claims 4 puts, holds 3 */
	WAIT_STAT(rx_bad, st0.rx_bad + 1);
	own_traffic_completes();
	memset(before, 0x5a, sizeof(before));
	ck_assert_int_eq(memcmp(region + 1024, before, sizeof(before)), 0);
}
END_TEST

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

static Suite *suite(void)
{
	Suite *s = suite_create("hostile");
	static const struct {
		const char *name, *outsider, *member;
		void (*setup)(void), (*setup_member)(void);
	} prov[] = {{"shm", "outsider_shm", "member_shm", setup_shm, setup_member_shm},
		    {"tcp", "outsider_tcp", "member_tcp", setup_tcp, setup_member_tcp},
		    {"udp", "outsider_udp", "member_udp", setup_udp, setup_member_udp},
		    {"net", "outsider_net", "member_net", setup_net, setup_member_net}};

	for (size_t i = 0; i < sizeof(prov) / sizeof(prov[0]); i++) {
		int ncases = 2 + 4 + !!strcmp(prov[i].name, "shm"); /* outsider, member */
		if (test_probe(provider_here, (void *)prov[i].name)) {
			test_skip_cases(ncases, "provider %s: no endpoint opens here", prov[i].name);
			continue;
		}
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
		tcase_add_test(tc, small_puts_in_one_packet_land_or_fail_one_by_one);
		tcase_add_test(tc, a_peer_withholding_acks_starves_only_itself);
		tcase_add_test(tc, fault_requests_without_authentication_are_refused);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void) { return test_run_suite(suite()); }
