/* Description: the wire protocol codec — build/parse round trip, little-endian layout at the
 * documented offsets, and each validation rule rejecting a malformed packet with a reason. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api/gice_status.h"
#include "emu/common/siphash.h"
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
	h.csum = 0x01020304;
	h.ack = 0x05060708;
	h.mac = 0x1112131415161718ull;
	ct_proto_build(&h, pkt);
	ck_assert_uint_eq(pkt[CT_HDR_CSUM_OFF], 0x04);
	ck_assert_uint_eq(pkt[80], 0x04); /* csum at 80, ack at 84, mac at 88 (docs/protocol.md) */
	ck_assert_uint_eq(pkt[84], 0x08);
	ck_assert_uint_eq(pkt[CT_HDR_MAC_OFF], 0x18);
	ck_assert_uint_eq(pkt[95], 0x11);
}
END_TEST

/* SipHash-2-4's reference vectors: key 00..0f, input 00..(n-1) */
START_TEST(siphash_matches_the_reference_vectors)
{
	gice_sipkey_t k = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
	uint8_t in[15];

	for (int i = 0; i < 15; i++)
		in[i] = (uint8_t)i;
	ck_assert_uint_eq(gice_siphash(&k, NULL, 0), 0x726fdb47dd0e0e31ull);
	ck_assert_uint_eq(gice_siphash(&k, in, 15), 0xa129ca6149be45e5ull);
}
END_TEST

/* SipHash-1-3's (the packet MAC's) vectors from Rust libcore's test_siphash_1_3: key 00..0f,
 * input 00..(n-1), n = 0, 8, 15, 63 (an empty, a whole, a partial and the longest block run) */
START_TEST(siphash13_matches_the_reference_vectors)
{
	gice_sipkey_t k = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
	uint8_t in[63];

	for (int i = 0; i < 63; i++)
		in[i] = (uint8_t)i;
	ck_assert_uint_eq(gice_siphash13(&k, NULL, 0), 0xabac0158050fc4dcull);
	ck_assert_uint_eq(gice_siphash13(&k, in, 8), 0x369095118d299a8eull);
	ck_assert_uint_eq(gice_siphash13(&k, in, 15), 0xd320d86d2a519956ull);
	ck_assert_uint_eq(gice_siphash13(&k, in, 63), 0x9d199062b7bbb3a8ull);
}
END_TEST

/* The MAC covers every header byte but csum and itself, under the key; the checksum may be added
 * after signing and the MAC still holds. */
START_TEST(mac_covers_the_header_under_the_key)
{
	const uint64_t key[2] = {0x1234, 0x5678}, other[2] = {0x1234, 0x5679};
	uint8_t pkt[CT_HDR_BYTES + 16] = {0};
	ct_hdr_t h = sample();

	ct_proto_build(&h, pkt);
	ck_assert(!ct_proto_mac_ok(pkt, key)); /* unsigned */
	ct_proto_sign(pkt, key);
	ck_assert(ct_proto_mac_ok(pkt, key));
	ck_assert(!ct_proto_mac_ok(pkt, other)); /* another job's key */
	pkt[CT_HDR_CSUM_OFF] ^= 0xff;            /* the checksum is outside it */
	ck_assert(ct_proto_mac_ok(pkt, key));
	pkt[CT_HDR_CSUM_OFF] ^= 0xff;
	for (int off = 0; off < CT_HDR_MAC_OFF; off++) {
		if (off >= CT_HDR_CSUM_OFF && off < CT_HDR_CSUM_OFF + 4)
			continue;
		pkt[off] ^= 1; /* any other header bit: src_gid, dst_gid, psn, rkey, flags ... */
		ck_assert_msg(!ct_proto_mac_ok(pkt, key), "a flipped bit at offset %d kept the MAC", off);
		pkt[off] ^= 1;
	}
	pkt[CT_HDR_MAC_OFF + 7] ^= 0x80;
	ck_assert(!ct_proto_mac_ok(pkt, key));
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
	h.version = 2; /* version 3 added the MAC and moved csum and ack */
	ck_assert_str_eq(reject(h, len), "unsupported version");
	h = sample();
	h.op = 0;
	ck_assert_str_eq(reject(h, len), "unknown op");
	h.op = CT_PKT_MAX_;
	ck_assert_str_eq(reject(h, len), "unknown op");
	h = sample();
	h.ack = 5; /* an ack without the flag */
	ck_assert_str_eq(reject(h, len), "ack without its flag");
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
	h.op = CT_PKT_PUT_RTS; /* announces bytes, carries its grant or nothing */
	h.payload_len = 8;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 8), "rendezvous packet with a payload that is not a grant");
	h = (ct_hdr_t){.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_HEARTBEAT,
		       .flags = CT_HF_ACK, .ack = 3};
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "piggybacked ack on an unsequenced packet");
}
END_TEST

/* A FAULT request (op 14) is a header alone: kill (1) or hang (2), the delay in aux; any other
 * action, a payload or a piggybacked ack is refused. */
START_TEST(fault_request_carries_an_action_and_nothing_else)
{
	uint8_t pkt[CT_HDR_BYTES];
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_FAULT, .src_gid = 1,
		      .dst_gid = 2, .value = CT_FAULT_HANG, .aux = 250000000},
		 o;

	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, CT_HDR_BYTES, &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.value, CT_FAULT_HANG);
	ck_assert_uint_eq(o.aux, 250000000);
	ck_assert_str_eq(ct_pkt_name(CT_PKT_FAULT), "FAULT");
	h.value = 3;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "unknown fault action");
	h.value = 0;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "unknown fault action");
	h.value = CT_FAULT_KILL;
	h.payload_len = 16;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 16), "control packet with payload");
	h.payload_len = 0;
	h.flags = CT_HF_ACK;
	h.ack = 3;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "piggybacked ack on an unsequenced packet");
}
END_TEST

/* A GET_DONE (op 15) is a header alone naming the get's msg id in aux: no payload, no
 * piggybacked ack (it is unsequenced). */
START_TEST(get_done_is_a_bare_unsequenced_header)
{
	uint8_t pkt[CT_HDR_BYTES];
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_GET_DONE, .src_gid = 1,
		      .dst_gid = 2, .aux = 77},
		 o;

	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, CT_HDR_BYTES, &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.op, CT_PKT_GET_DONE);
	ck_assert_uint_eq(o.aux, 77);
	ck_assert_str_eq(ct_pkt_name(CT_PKT_GET_DONE), "GET_DONE");
	h.payload_len = 16;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 16), "control packet with payload");
	h.payload_len = 0;
	h.flags = CT_HF_ACK;
	h.ack = 3;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "piggybacked ack on an unsequenced packet");
}
END_TEST

/* A sequenced packet carries a cumulative ack in `ack` (offset 84) under CT_HF_ACK (bit 7). */
START_TEST(piggybacked_ack_round_trips)
{
	uint8_t pkt[CT_HDR_BYTES + 16] = {0};
	ct_hdr_t h = sample(), o;

	h.flags |= CT_HF_ACK;
	h.ack = 0x01020304;
	ct_proto_build(&h, pkt);
	ck_assert_uint_eq(pkt[6] & 0x80, 0x80);
	ck_assert_uint_eq(pkt[84], 0x04);
	ck_assert_uint_eq(pkt[87], 0x01);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.ack, 0x01020304);
	ck_assert_int_eq(memcmp(&h, &o, sizeof(h)), 0);
}
END_TEST

START_TEST(rendezvous_announcement_carries_a_length_and_its_grant_or_nothing)
{
	uint8_t pkt[CT_HDR_BYTES + CT_GRANT_BYTES] = {0};
	ct_hdr_t h = sample(), o;
	uint64_t key, addr;

	h.op = CT_PKT_PUT_RTS;
	h.payload_len = CT_GRANT_BYTES;
	h.moff = 0;
	h.msg_len = 1u << 30;
	ct_proto_build(&h, pkt);
	ct_proto_grant_build(0x0102030405060708ull, 0x1000, pkt + CT_HDR_BYTES);
	ck_assert_uint_eq(pkt[CT_HDR_BYTES], 0x08); /* little-endian key, then address */
	ck_assert_uint_eq(pkt[CT_HDR_BYTES + 9], 0x10);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.msg_len, 1u << 30);
	ct_proto_grant_parse(pkt + CT_HDR_BYTES, &key, &addr);
	ck_assert_uint_eq(key, 0x0102030405060708ull);
	ck_assert_uint_eq(addr, 0x1000);
	h.moff = 4;
	ck_assert_str_eq(reject(h, sizeof(pkt)), "rendezvous packet with a payload that is not a grant");
	/* no grant: the bytes are on the NVLink plane, at aux */
	h.moff = 0;
	h.payload_len = 0;
	h.aux = 4096;
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, CT_HDR_BYTES, &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.payload_len, 0);
	ck_assert_uint_eq(o.aux, 4096);
	h.moff = 4;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "rendezvous packet with a payload that is not a grant");
}
END_TEST

START_TEST(rendezvous_get_go_carries_a_length_and_its_grant_or_nothing_and_its_request_none)
{
	uint8_t pkt[CT_HDR_BYTES + CT_GRANT_BYTES] = {0};
	ct_hdr_t h = sample(), o;

	h.op = CT_PKT_GET_GO;
	h.flags = CT_HF_FIRST | CT_HF_LAST;
	h.payload_len = CT_GRANT_BYTES;
	h.moff = 0;
	h.msg_len = 1u << 20;
	h.value = 123456; /* where the data is in the sender's memory (the NVLink plane) */
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, sizeof(pkt), &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.msg_len, 1u << 20);
	ck_assert_uint_eq(o.value, 123456);
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 32), "payload length does not match packet length");
	h.payload_len = 32;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES + 32), "rendezvous packet with a payload that is not a grant");
	h.payload_len = 0; /* on the NVLink plane: at value */
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, CT_HDR_BYTES, &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.value, 123456);
	/* the request names its length in value, like GET_REQ: no msg_len */
	h = sample();
	h.op = CT_PKT_GET_RNDV;
	h.flags = CT_HF_FIRST | CT_HF_LAST;
	h.payload_len = 0;
	h.moff = 0;
	ck_assert_str_eq(reject(h, CT_HDR_BYTES), "control packet with payload");
	h.msg_len = 0;
	ct_proto_build(&h, pkt);
	ck_assert_int_eq(ct_proto_parse(pkt, CT_HDR_BYTES, &o, NULL), GICE_OK);
	ck_assert_uint_eq(o.op, CT_PKT_GET_RNDV);
}
END_TEST

/* PUTS (op 16): whole small puts back to back, each a 32-byte entry and its bytes; parse walks
 * them all and refuses any that does not fit exactly, naming why. */
static size_t puts_pkt(uint8_t *pkt, uint64_t count, const ct_put_entry_t *pe, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		len += ct_proto_entry_build(&pe[i], pe[i].data, pkt + CT_HDR_BYTES + len);
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_PUTS,
		      .flags = CT_HF_FIRST | CT_HF_LAST, .msg_id = 40, .psn = 9, .payload_len = (uint32_t)len,
		      .msg_len = (uint32_t)len, .value = count};
	ct_proto_build(&h, pkt);
	return CT_HDR_BYTES + len;
}

/* The len bytes at pkt are refused, with why as the reason. */
static void refused(const uint8_t *pkt, size_t len, const char *why)
{
	ct_hdr_t o;
	const char *got = NULL;

	ck_assert_int_eq(ct_proto_parse(pkt, len, &o, &got), GICE_ERR_BAD_PACKET);
	ck_assert_str_eq(got, why);
}

START_TEST(small_puts_share_a_packet_entry_by_entry)
{
	static const uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[3] = {9, 10, 11};
	ct_put_entry_t pe[3] = {
		{.rkey = 0x1122334455667788ull, .roff = 64, .len = 8, .data = a},
		{.rkey = 7, .roff = 5, .value = 0xabcdef, .sig_id = 33, .len = 3,
		 .flags = CT_HF_SIGNAL | CT_HF_SIG_ADD | CT_HF_STRONG, .data = b},
		{.rkey = 7, .roff = 0, .len = 0, .data = NULL},
	};
	uint8_t pkt[CT_HDR_BYTES + 256];
	size_t len = puts_pkt(pkt, 3, pe, 3);
	ct_hdr_t o;
	const char *why = NULL;

	ck_assert_uint_eq(len, CT_HDR_BYTES + 3 * CT_PUT_ENTRY_BYTES + 11);
	ck_assert_int_eq(ct_proto_parse(pkt, len, &o, &why), GICE_OK);
	ck_assert_uint_eq(o.op, CT_PKT_PUTS);
	ck_assert_uint_eq(o.value, 3);
	/* the entry layout: rkey, roff, value, sig_id, len, flags, zero; then the bytes */
	const uint8_t *q = pkt + CT_HDR_BYTES + CT_PUT_ENTRY_BYTES + 8;
	ck_assert_uint_eq(q[16], 0xef);
	ck_assert_uint_eq(q[24], 33);
	ck_assert_uint_eq(q[28], 3);
	ck_assert_uint_eq(q[30], CT_HF_SIGNAL | CT_HF_SIG_ADD | CT_HF_STRONG);
	ck_assert_uint_eq(q[CT_PUT_ENTRY_BYTES + 2], 11);
	q = pkt + CT_HDR_BYTES;
	for (int i = 0; i < 3; i++) {
		ct_put_entry_t x;
		q += ct_proto_entry_parse(q, &x);
		ck_assert_uint_eq(x.rkey, pe[i].rkey);
		ck_assert_uint_eq(x.roff, pe[i].roff);
		ck_assert_uint_eq(x.value, pe[i].value);
		ck_assert_uint_eq(x.sig_id, pe[i].sig_id);
		ck_assert_uint_eq(x.len, pe[i].len);
		ck_assert_uint_eq(x.flags, pe[i].flags);
		ck_assert(x.len == 0 || memcmp(x.data, pe[i].data, x.len) == 0);
	}
	ck_assert_ptr_eq(q, pkt + len);

	/* each way of not fitting */
	refused(pkt, puts_pkt(pkt, 4, pe, 3), "small-put entry past the payload end");
	refused(pkt, puts_pkt(pkt, 2, pe, 3), "bytes after the last small-put entry");
	refused(pkt, puts_pkt(pkt, 0, pe, 0), "small puts of no entry or more than 64");
	refused(pkt, puts_pkt(pkt, CT_PUTS_MAX + 1, pe, 1), "small puts of no entry or more than 64");
	static const struct {
		size_t off; /* of the byte changed in a packet of one 8-byte put */
		uint8_t to;
		const char *why;
	} bad[] = {
		{CT_HDR_BYTES + 28, 9, "small-put entry past the payload end"}, /* claims 9 bytes; 8 follow */
		{CT_HDR_BYTES + 30, CT_HF_CSWAP, "small-put entry with an unknown flag"},
		{CT_HDR_BYTES + 31, 1, "small-put entry with an unknown flag"},
		{CT_HDR_BYTES + 30, CT_HF_STRONG, "strong flag without signal"},
		{48, 1, "small puts whose msg_len is not their payload length"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		len = puts_pkt(pkt, 1, pe, 1);
		pkt[bad[i].off] = bad[i].to;
		refused(pkt, len, bad[i].why);
	}
}
END_TEST

START_TEST(packet_names_cover_every_op)
{
	ck_assert_str_eq(ct_pkt_name(CT_PKT_PUT), "PUT");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_NACK), "NACK");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_GET_RNDV), "GET_RNDV");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_GET_GO), "GET_GO");
	ck_assert_str_eq(ct_pkt_name(CT_PKT_PUTS), "PUTS");
	ck_assert_str_eq(ct_pkt_name(99), "UNKNOWN");
}
END_TEST

/* docs/protocol.md's tables say what ct_proto.h does: every header field at its offset and size,
 * every op with its number, every flag with its bit. */
static const char *slurp_doc(void)
{
	static char buf[1 << 17];
	FILE *f = fopen("docs/protocol.md", "r");
	size_t n;

	ck_assert_msg(f != NULL, "docs/protocol.md not found: run the test from the repository root");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

/* the number of lines of doc that start with prefix (a table row such as "| 88 | 8 | `mac` |") */
static int rows(const char *doc, const char *prefix)
{
	char want[192];
	int n = 0;

	ck_assert_int_lt(snprintf(want, sizeof(want), "\n%s", prefix), (int)sizeof(want));
	for (const char *p = doc; (p = strstr(p, want)); p++)
		n++;
	return n;
}

START_TEST(the_documented_tables_match_the_code)
{
	const char *doc = slurp_doc();
	char row[160];
	struct {
		const char *name;
		size_t off, size;
	} f[] = {
#define F(n) {#n, offsetof(ct_hdr_t, n), sizeof(((ct_hdr_t *)0)->n)}
		F(magic), F(version), F(op),     F(flags), F(qos),    F(src_gid), F(dst_gid), F(conn_id),
		F(msg_id), F(psn),    F(payload_len), F(rkey), F(roff), F(msg_len), F(moff),  F(sig_id),
		F(status), F(value),  F(aux),    F(csum),  F(ack),    F(mac),
#undef F
	};
	size_t total = 0;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		snprintf(row, sizeof(row), "| %zu | %zu | `%s` |", f[i].off, f[i].size, f[i].name);
		ck_assert_msg(rows(doc, row) == 1, "docs/protocol.md lacks the header row \"%s\"", row);
		total += f[i].size;
	}
	ck_assert_uint_eq(total, CT_HDR_BYTES); /* every byte is a listed field */
	ck_assert_uint_eq(CT_HDR_FLAGS_OFF, offsetof(ct_hdr_t, flags));
	ck_assert_uint_eq(CT_HDR_CSUM_OFF, offsetof(ct_hdr_t, csum));
	ck_assert_uint_eq(CT_HDR_MAC_OFF, offsetof(ct_hdr_t, mac));
#define OP_ROW(n, v, name)                                                                      \
	ck_assert_int_lt(snprintf(row, sizeof(row), "| %d | `%s` |", v, name), (int)sizeof(row)); \
	ck_assert_msg(rows(doc, row) == 1, "docs/protocol.md lacks the op row \"%s\"", row);
	CT_PKT_LIST(OP_ROW)
#undef OP_ROW
	struct {
		const char *name;
		unsigned v;
	} fl[] = {{"FIRST", CT_HF_FIRST},   {"LAST", CT_HF_LAST},   {"SIGNAL", CT_HF_SIGNAL}, {"SIG_ADD", CT_HF_SIG_ADD},
		  {"STRONG", CT_HF_STRONG}, {"CSWAP", CT_HF_CSWAP}, {"CSUM", CT_HF_CSUM},     {"ACK", CT_HF_ACK}};
	for (unsigned i = 0; i < sizeof(fl) / sizeof(fl[0]); i++) {
		ck_assert_uint_eq(fl[i].v, 1u << i);
		snprintf(row, sizeof(row), "| %u | `0x%02x` | `%s` |", i, fl[i].v, fl[i].name);
		ck_assert_msg(rows(doc, row) == 1, "docs/protocol.md lacks the flag row \"%s\"", row);
	}
	snprintf(row, sizeof(row), "# The gice wire protocol (version %d)", CT_PROTO_VERSION);
	ck_assert_msg(strstr(doc, row) != NULL, "docs/protocol.md's title does not say version %d", CT_PROTO_VERSION);
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
	tcase_add_test(tc, fault_request_carries_an_action_and_nothing_else);
	tcase_add_test(tc, get_done_is_a_bare_unsequenced_header);
	tcase_add_test(tc, packet_names_cover_every_op);
	tcase_add_test(tc, small_puts_share_a_packet_entry_by_entry);
	tcase_add_test(tc, siphash_matches_the_reference_vectors);
	tcase_add_test(tc, siphash13_matches_the_reference_vectors);
	tcase_add_test(tc, mac_covers_the_header_under_the_key);
	tcase_add_test(tc, the_documented_tables_match_the_code);
	tcase_add_test(tc, rendezvous_announcement_carries_a_length_and_its_grant_or_nothing);
	tcase_add_test(tc, rendezvous_get_go_carries_a_length_and_its_grant_or_nothing_and_its_request_none);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
