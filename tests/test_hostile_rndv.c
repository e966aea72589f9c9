/* Description: rendezvous against a hostile or mismatched sender (the hostile sender of
 * hostile.h). As a member of the job (GICE_CT_AUTH=0): a PUT_RTS that would make the device read
 * its own memory is refused; a PUT_RTS without a grant (its bytes on the NVLink plane) is copied
 * from the sender's memory when the device maps the sender, and refused with
 * GICE_ERR_UNSUPPORTED, the cause named, when it does not (GICE_PLANE=net), where a read without
 * a grant could only fail inside the provider. Reads over the provider (tcp and net) reach the
 * registered regions a grant names and nothing else. Each refusal leaves the device's memory
 * unchanged and its own traffic working. */
#include "tests/hostile.h"

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

/* A PUT_RTS of 4096 bytes without a grant, as device d2 announces a put of its region2 on the
 * NVLink plane: aux is their device offset there. It adds 1 to d's counter sig once landed (0:
 * no signal). */
static uint32_t h_rts_on_plane(gice_counter_t sig)
{
	uint64_t at = (uint64_t)(region2 - (uint8_t *)hbm_base(d2->hbm));
	ct_hdr_t hd = {.op = CT_PKT_PUT_RTS, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = gice_device_id(d2),
		       .msg_id = msg_id++, .psn = psn++, .rkey = rkey, .roff = 512, .msg_len = 4096, .aux = at};

	if (sig) {
		hd.flags |= CT_HF_SIGNAL | CT_HF_SIG_ADD;
		hd.sig_id = sig;
		hd.value = 1;
	}
	h_send(hd, NULL, NULL, 0);
	return hd.msg_id;
}

/* d maps d2 (the default GICE_PLANE=auto; one process): it copies the bytes from d2's memory. */
START_TEST(an_announcement_without_a_grant_is_copied_on_the_plane)
{
	gice_stats_t st0 = stats();
	gice_counter_t landed;

	ck_assert_int_eq(gice_counter_alloc(d, &landed), GICE_OK);
	memset(region2, 0xc3, 4096);
	h_rts_on_plane(landed);
	/* its signal: the bytes are in (the wait orders our reads after the copy) */
	for (uint64_t ms = 0; gice_counter_read(d, landed) < 1 && ms < test_scaled(20000); ms++) {
		h_progress();
		nap_ms(1);
	}
	ck_assert_int_eq(gice_counter_wait(d, landed, GICE_CMP_GE, 1, 1, NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_free(d, landed), GICE_OK);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(region[512 + i], 0xc3);
	ck_assert_uint_eq(stats().nacks_sent, st0.nacks_sent);
	memcpy(arena_before, hbm_base(d->hbm), hbm_size(d->hbm)); /* the put landed */
	own_traffic_completes();
}
END_TEST

/* d does not map d2 (GICE_PLANE=net): nothing says where to read, so the put fails, NACKed with
 * GICE_ERR_UNSUPPORTED and logged with the values and the cause. */
START_TEST(an_announcement_without_a_grant_is_refused_off_the_plane)
{
	char log[4096], want[320];
	uint64_t nacks = stats().nacks_sent;
	struct test_log rts_log; /* d's log from the announcement to its NACK */

	test_log_begin(&rts_log);
	uint32_t id = h_rts_on_plane(0);
	uint64_t got = 0;
	for (uint64_t ms = 0; (got = stats().nacks_sent) < nacks + 1 && ms < test_scaled(20000); ms++) {
		h_progress();
		nap_ms(1);
	}
	test_log_end(&rts_log, log, sizeof(log));
	ck_assert_uint_eq(got, nacks + 1);
	snprintf(want, sizeof(want),
		 "PUT_RTS from device %u (msg %u): key 0x%llx offset 512 length 4096, its bytes at offset %llu of "
		 "device %u on the NVLink plane (no grant came with them), which this device does not map: "
		 "GICE_ERR_UNSUPPORTED",
		 gice_device_id(d2), id, (unsigned long long)rkey, (unsigned long long)(region2 - (uint8_t *)hbm_base(d2->hbm)),
		 gice_device_id(d2));
	ck_assert_msg(strstr(log, want), "expected \"%s\" in the log:\n%s", want, log);
	arena_unchanged();
	own_traffic_completes();
}
END_TEST

static void setup_member_off_plane(void (*setup)(void))
{
	setenv("GICE_PLANE", "net", 1);
	setup();
}
static void setup_off_plane_shm(void) { setup_member_off_plane(setup_member_shm); }
static void setup_off_plane_tcp(void) { setup_member_off_plane(setup_member_tcp); }
static void setup_off_plane_udp(void) { setup_member_off_plane(setup_member_udp); }
static void setup_off_plane_net(void) { setup_member_off_plane(setup_member_net); }
static void teardown_off_plane(void) { teardown_member(); unsetenv("GICE_PLANE"); }
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

static Suite *suite(void)
{
	Suite *s = suite_create("hostile_rndv");
	static const struct {
		const char *name, *member, *off_plane, *reads;
		void (*setup)(void), (*setup_member)(void), (*setup_off_plane)(void);
	} prov[] = {{"shm", "member_shm", "off_plane_shm", NULL, setup_shm, setup_member_shm, setup_off_plane_shm},
		    {"tcp", "member_tcp", "off_plane_tcp", "reads_tcp", setup_tcp, setup_member_tcp, setup_off_plane_tcp},
		    {"udp", "member_udp", "off_plane_udp", NULL, setup_udp, setup_member_udp, setup_off_plane_udp},
		    {"net", "member_net", "off_plane_net", "reads_net", setup_net, setup_member_net, setup_off_plane_net}};

	for (size_t i = 0; i < sizeof(prov) / sizeof(prov[0]); i++) {
		if (test_probe(provider_here, (void *)prov[i].name)) {
			test_skip_cases(3 + !!prov[i].reads, "provider %s: no endpoint opens here", prov[i].name);
			continue;
		}
		TCase *tc = tcase_create(prov[i].member);
		tcase_add_checked_fixture(tc, prov[i].setup_member, teardown_member);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, rendezvous_announcements_never_read_the_devices_own_memory);
		tcase_add_test(tc, an_announcement_without_a_grant_is_copied_on_the_plane);
		suite_add_tcase(s, tc);
		tc = tcase_create(prov[i].off_plane);
		tcase_add_checked_fixture(tc, prov[i].setup_off_plane, teardown_off_plane);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, an_announcement_without_a_grant_is_refused_off_the_plane);
		suite_add_tcase(s, tc);
		/* libfabric 1.17's shm checks no key or bound on a remote read (it copies with
		 * process_vm_readv: docs/protocol.md, "Read grants"); raw udp has no reads */
		if (!prov[i].reads)
			continue;
		tc = tcase_create(prov[i].reads);
		tcase_add_checked_fixture(tc, prov[i].setup, close_all);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, reads_reach_registered_regions_only);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void) { return test_run_suite(suite()); }
