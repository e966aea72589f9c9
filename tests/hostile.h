/* hostile.h: a hostile sender against a device, for the tests that play one (test_hostile.c:
 * forged, flooding and misbehaving senders; test_hostile_rndv.c: rendezvous reads and
 * announcements). The sender is a bare fabric endpoint of the device's provider (fabric/,
 * libfabric underneath; no gice device, no engine) that speaks docs/protocol.md with packets
 * built by hand. The fixture opens the target d and a second device d2 of the job, one
 * registered region on each, and keeps a copy of d's whole memory to compare against. */
#ifndef GICE_TESTS_HOSTILE_H
#define GICE_TESTS_HOSTILE_H

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

static inline void open_all(void)
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

static inline void close_all(void)
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

static inline void setup_shm(void) { provider = "shm"; open_all(); }
static inline void setup_tcp(void) { provider = "tcp"; open_all(); }
static inline void setup_udp(void) { provider = "udp"; open_all(); } /* raw datagrams */
static inline void setup_net(void) { provider = "net"; open_all(); } /* 1.17's native RDM over TCP */

/* As a member of the job: no MAC, no sender binding. */
static inline void setup_member_shm(void) { setenv("GICE_CT_AUTH", "0", 1); setup_shm(); }
static inline void setup_member_tcp(void) { setenv("GICE_CT_AUTH", "0", 1); setup_tcp(); }
static inline void setup_member_udp(void) { setenv("GICE_CT_AUTH", "0", 1); setup_udp(); }
static inline void setup_member_net(void) { setenv("GICE_CT_AUTH", "0", 1); setup_net(); }
static inline void teardown_member(void) { close_all(); unsetenv("GICE_CT_AUTH"); }

static inline void nap_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Drive the hostile endpoint (sends complete, what the device answers is drained). */
static inline void h_progress(void)
{
	fab_event_t ev[16];
	int n = fab_poll(h, ev, 16);

	for (int i = 0; i < n; i++)
		if (ev[i].type == FAB_EV_RX)
			fab_release(h, ev[i].buf);
}

/* Send one hand-built packet to d: key NULL leaves the MAC zero. */
static inline void h_send(ct_hdr_t hd, const uint64_t *key, const void *payload, uint32_t plen)
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
static inline void h_put(uint32_t src, const uint64_t *key)
{
	static const uint8_t junk[16] = "0123456789abcdef";
	ct_hdr_t hd = {.op = CT_PKT_PUT, .flags = CT_HF_FIRST | CT_HF_LAST, .src_gid = src, .msg_id = msg_id++,
		       .psn = psn++, .rkey = rkey, .roff = 128, .msg_len = sizeof(junk)};

	h_send(hd, key, junk, sizeof(junk));
}

static inline void h_bye(uint32_t src, const uint64_t *key)
{
	h_send((ct_hdr_t){.op = CT_PKT_BYE, .src_gid = src}, key, NULL, 0);
}

/* "Kill yourself" (a FAULT request), claiming to come from device src. */
static inline void h_fault_kill(uint32_t src, const uint64_t *key)
{
	h_send((ct_hdr_t){.op = CT_PKT_FAULT, .src_gid = src, .value = CT_FAULT_KILL}, key, NULL, 0);
}

static inline gice_stats_t stats(void)
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
static inline void arena_unchanged(void)
{
	const uint8_t *now = hbm_base(d->hbm);
	uint64_t n = hbm_size(d->hbm);

	for (uint64_t i = 0; i < n; i++)
		if (now[i] != arena_before[i])
			ck_abort_msg("device memory changed at offset %llu: 0x%02x, was 0x%02x", (unsigned long long)i,
				     now[i], arena_before[i]);
}

/* d still works: a put to itself and one to d2 complete, and it has declared no one dead. */
static inline void own_traffic_completes(void)
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

/* 0 when an endpoint of provider arg opens here (run by test_probe, in a child). */
static inline int provider_here(void *arg)
{
	fab_attr_t fa = {.provider = arg, .max_packet = 16384};
	fab_ep_t *ep;

	if (fab_open(&fa, &ep))
		return 1;
	fab_close(ep);
	return 0;
}

#endif
