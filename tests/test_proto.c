/* Description: the wire protocol codec — build/parse round trip, little-endian layout at the
 * documented offsets, and each validation rule rejecting a malformed packet with a reason. */
#include <check.h>
#include <string.h>

#include "api/gice_status.h"
#include "emu/ct_engine/ct_proto.h"

static ct_hdr_t sample(void)
{
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_PUT,
		      .flags = CT_HF_FIRST | CT_HF_SIGNAL, .qos = 2, .src_gid = 3, .dst_gid = 4, .conn_id = 5,
		      .msg_id = 6, .psn = 7, .payload_len = 16, .rkey = 0x1122334455667788ull, .roff = 4096,
		      .msg_len = 100, .moff = 32, .sig_id = 9, .value = 0xabcdefull, .aux = 11};
	return h;
}

START_TEST(round_trip_keeps_every_field)
{
	uint8_t pkt[CT_HDR_BYTES + 16] = {0};
	ct_hdr_t h = sample(), o;

	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_int_eq(memcmp(&h, &o, sizeof(h)), 0);
}
END_TEST

START_TEST(layout_is_little_endian_at_documented_offsets)
{
	uint8_t pkt[CT_HDR_BYTES + 16] = {0};
	ct_hdr_t h = sample();

	ct_proto_build(&h, pkt);
	ck_assert_uint_eq(pkt[0], 'G');
	ck_assert_uint_eq(pkt[3], 'E');
	ck_assert_uint_eq(pkt[5], CT_PKT_PUT);
	ck_assert_uint_eq(pkt[32], 0x88); /* rkey low byte first */
	ck_assert_uint_eq(pkt[39], 0x11);
	ck_assert_uint_eq(pkt[52], 32);   /* moff */
}
END_TEST

static const char *reject(ct_hdr_t h, size_t len)
{
	uint8_t pkt[CT_HDR_BYTES + 64] = {0};
	ct_hdr_t o;
	const char *why = NULL;

	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, len, &o, &why), GICE_ERR_BAD_PACKET);
	ck_assert_ptr_nonnull(why);
	return why;
}

START_TEST(malformed_headers_are_rejected_with_a_reason)
{
	ct_hdr_t h = sample();
	size_t len = CT_HDR_BYTES + 16;

	ck_assert_str_eq(reject(h, 10), "shorter than the header");
	h.magic = 1;
	ck_assert_str_eq(reject(h, len), "bad magic");
	h = sample();
	h.version = CT_PROTO_VERSION + 1;
	ck_assert_str_eq(reject(h, len), "unsupported version");
	h.version = 1; /* version 2 added piggybacked acks, bundles and rendezvous gets */
	ck_assert_str_eq(reject(h, len), "unsupported version");
	h = sample();
	h.op = 0;
	ck_assert_str_eq(reject(h, len), "unknown op");
	h.op = CT_PKT_MAX_;
	ck_assert_str_eq(reject(h, len), "unknown op");
	h = sample();
	h.ack = 5; /* an ack without the flag */
	ck_assert_str_eq(reject(h, len), "reserved field not zero");
	h = sample();
	h.reserved = 1;
	ck_assert_str_eq(reject(h, len), "reserved field not zero");
	h = sample();
	h.job = 1;
	ck_assert_str_eq(reject(h, len), "reserved field not zero");
	h = sample();
	ck_assert_str_eq(reject(h, len + 1), "payload length does not match packet length");
	h.moff = 90; /* 90 + 16 > 100 */
	ck_assert_str_eq(reject(h, len), "payload past the message end");
	h = sample();
	h.op = CT_PKT_ACK;
	ck_assert_str_eq(reject(h, len), "control packet with payload");
	h = sample();
	h.flags = CT_HF_STRONG;
	ck_assert_str_eq(reject(h, len), "strong flag without signal");
	h = sample();
	h.op = CT_PKT_PUT_RTS; /* announces bytes, carries none */
	ck_assert_str_eq(reject(h, len), "control packet with payload");
	h = (ct_hdr_t){.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_HEARTBEAT,
		       .flags = CT_HF_ACK, .ack = 3};
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "piggybacked ack on an unsequenced packet");
}
END_TEST

/* A sequenced packet carries a cumulative ack in `ack` (offset 88) under CT_HF_ACK (bit 7). */
START_TEST(piggybacked_ack_round_trips)
{
	uint8_t pkt[CT_HDR_BYTES + 16] = {0};
	ct_hdr_t h = sample(), o;

	h.flags |= CT_HF_ACK;
	h.ack = 0x01020304;
	ct_proto_build(&h, pkt);
	ck_assert_uint_eq(pkt[6] & 0x80, 0x80);
	ck_assert_uint_eq(pkt[88], 0x04);
	ck_assert_uint_eq(pkt[91], 0x01);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.ack, 0x01020304);
	ck_assert_int_eq(memcmp(&h, &o, sizeof(h)), 0);
}
END_TEST

START_TEST(rendezvous_announcement_carries_a_length_but_no_payload)
{
	uint8_t pkt[CT_HDR_BYTES] = {0};
	ct_hdr_t h = sample(), o;

	h.op = CT_PKT_PUT_RTS;
	h.payload_len = 0;
	h.moff = 0;
	h.msg_len = 1u << 30;
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.msg_len, 1u << 30);
	h.moff = 4;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "control packet with payload");
}
END_TEST

START_TEST(rendezvous_get_go_carries_a_length_but_no_payload_and_its_request_none)
{
	uint8_t pkt[CT_HDR_BYTES] = {0};
	ct_hdr_t h = sample(), o;

	h.op = CT_PKT_GET_GO;
	h.flags = CT_HF_FIRST | CT_HF_LAST;
	h.payload_len = 0;
	h.moff = 0;
	h.msg_len = 1u << 20;
	h.value = 123456; /* where the data is in the sender's memory */
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.msg_len, 1u << 20);
	ck_assert_uint_eq(o.value, 123456);
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 16), "payload length does not match packet length");
	h.payload_len = 16;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 16), "control packet with payload");
	/* the request names its length in value, like GET_REQ: no msg_len */
	h = sample();
	h.op = CT_PKT_GET_RNDV;
	h.flags = CT_HF_FIRST | CT_HF_LAST;
	h.payload_len = 0;
	h.moff = 0;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "control packet with payload");
	h.msg_len = 0;
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.op, CT_PKT_GET_RNDV);
}
END_TEST

START_TEST(packet_names_cover_every_op)
{
	ck_assert_str_eq(ct_pkt_name(CT_PKT_PUT), "PUT");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_NACK), "NACK");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_GET_RNDV), "GET_RNDV");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_GET_GO), "GET_GO");
	ck_assert_str_eq(ct_pkt_name(99), "UNKNOWN");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("codec");
	tcase_add_test(tc, round_trip_keeps_every_field);
	tcase_add_test(tc, layout_is_little_endian_at_documented_offsets);
	tcase_add_test(tc, malformed_headers_are_rejected_with_a_reason);
	tcase_add_test(tc, piggybacked_ack_round_trips);
	tcase_add_test(tc, packet_names_cover_every_op);
	tcase_add_test(tc, rendezvous_announcement_carries_a_length_but_no_payload);
	tcase_add_test(tc, rendezvous_get_go_carries_a_length_but_no_payload_and_its_request_none);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
