/* ct_proto.c: header encode/decode and validation — pure functions over bytes. */
#include "emu/ct_engine/ct_proto.h"

#include <endian.h>
#include <string.h>

#include "emu/common/common.h"
#include "emu/common/crc32c.h"
#include "emu/common/siphash.h"

_Static_assert(sizeof(ct_hdr_t) == CT_HDR_BYTES, "host view mirrors the wire layout");

#define PUT16(p, off, v) do { uint16_t t_ = htole16(v); memcpy((p) + (off), &t_, 2); } while (0)
#define PUT32(p, off, v) do { uint32_t t_ = htole32(v); memcpy((p) + (off), &t_, 4); } while (0)
#define PUT64(p, off, v) do { uint64_t t_ = htole64(v); memcpy((p) + (off), &t_, 8); } while (0)

static inline uint32_t get32(const uint8_t *p, size_t off)
{
	uint32_t v;
	memcpy(&v, p + off, 4);
	return le32toh(v);
}

static inline uint64_t get64(const uint8_t *p, size_t off)
{
	uint64_t v;
	memcpy(&v, p + off, 8);
	return le64toh(v);
}

void ct_proto_build(const ct_hdr_t *h, void *buf)
{
	uint8_t *p = buf;

	PUT32(p, 0, h->magic);
	p[4] = h->version;
	p[5] = h->op;
	p[6] = h->flags;
	p[7] = h->qos;
	PUT32(p, 8, h->src_gid);
	PUT32(p, 12, h->dst_gid);
	PUT32(p, 16, h->conn_id);
	PUT32(p, 20, h->msg_id);
	PUT32(p, 24, h->psn);
	PUT32(p, 28, h->payload_len);
	PUT64(p, 32, h->rkey);
	PUT64(p, 40, h->roff);
	PUT32(p, 48, h->msg_len);
	PUT32(p, 52, h->moff);
	PUT32(p, 56, h->sig_id);
	PUT32(p, 60, (uint32_t)h->status);
	PUT64(p, 64, h->value);
	PUT64(p, 72, h->aux);
	PUT32(p, 80, h->csum);
	PUT32(p, 84, h->ack);
	PUT64(p, 88, h->mac);
}

size_t ct_proto_next(const void *buf, size_t len)
{
	if (len < CT_HDR_BYTES)
		return 0;
	uint64_t n = (uint64_t)CT_HDR_BYTES + get32(buf, 28);
	return n <= len ? (size_t)n : 0;
}

const char *ct_pkt_name(unsigned op)
{
	switch (op) {
#define CT_PKT_NAME_(n, v, s) \
	case v:               \
		return s;
		CT_PKT_LIST(CT_PKT_NAME_)
#undef CT_PKT_NAME_
	}
	return "UNKNOWN";
}

uint32_t ct_proto_csum(const void *hdr, const void *payload, size_t plen)
{
	static const uint8_t zero[4];
	const uint8_t *h = hdr;
	uint32_t c = gice_crc32c(0, h, CT_HDR_CSUM_OFF);

	c = gice_crc32c(c, zero, 4);
	c = gice_crc32c(c, h + CT_HDR_CSUM_OFF + 4, CT_HDR_BYTES - CT_HDR_CSUM_OFF - 4);
	return plen ? gice_crc32c(c, payload, plen) : c;
}

uint64_t ct_proto_mac(const void *hdr, const uint64_t key[2])
{
	uint64_t w[CT_HDR_MAC_OFF / 8];
	gice_sipkey_t k = {key[0], key[1]};

	for (size_t i = 0; i < CT_HDR_MAC_OFF / 8; i++)
		w[i] = get64(hdr, 8 * i);
	_Static_assert(CT_HDR_CSUM_OFF % 8 == 0, "csum is the low half of a word");
	w[CT_HDR_CSUM_OFF / 8] &= ~0xffffffffull; /* csum taken as zero */
	return gice_siphash13_words(&k, w, CT_HDR_MAC_OFF / 8);
}

void ct_proto_job_key(uint64_t secret, uint64_t key[2])
{
	gice_sipkey_t k = {secret, secret ^ 0x9e3779b97f4a7c15ull};

	key[0] = gice_siphash(&k, "gice packet mac key 0", 21);
	key[1] = gice_siphash(&k, "gice packet mac key 1", 21);
}

void ct_proto_grant_build(uint64_t key, uint64_t addr, void *buf)
{
	PUT64((uint8_t *)buf, 0, key);
	PUT64((uint8_t *)buf, 8, addr);
}

void ct_proto_grant_parse(const void *buf, uint64_t *key, uint64_t *addr)
{
	*key = get64(buf, 0);
	*addr = get64(buf, 8);
}

void ct_proto_sign(void *hdr, const uint64_t key[2])
{
	PUT64((uint8_t *)hdr, CT_HDR_MAC_OFF, ct_proto_mac(hdr, key));
}

int ct_proto_mac_ok(const void *hdr, const uint64_t key[2])
{
	return (ct_proto_mac(hdr, key) ^ get64(hdr, CT_HDR_MAC_OFF)) == 0;
}

int ct_proto_csum_ok(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (len < CT_HDR_BYTES)
		return 0;
	return ct_proto_csum(p, p + CT_HDR_BYTES, len - CT_HDR_BYTES) == get32(p, CT_HDR_CSUM_OFF);
}

size_t ct_proto_entry_build(const ct_put_entry_t *pe, const void *data, void *buf)
{
	uint8_t *p = buf;

	PUT64(p, 0, pe->rkey);
	PUT64(p, 8, pe->roff);
	PUT64(p, 16, pe->value);
	PUT32(p, 24, pe->sig_id);
	PUT16(p, 28, pe->len);
	p[30] = pe->flags;
	p[31] = 0;
	if (pe->len)
		memcpy(p + CT_PUT_ENTRY_BYTES, data, pe->len);
	return CT_PUT_ENTRY_BYTES + (size_t)pe->len;
}

size_t ct_proto_entry_parse(const void *buf, ct_put_entry_t *pe)
{
	const uint8_t *p = buf;
	uint16_t len;

	memcpy(&len, p + 28, 2);
	pe->rkey = get64(p, 0);
	pe->roff = get64(p, 8);
	pe->value = get64(p, 16);
	pe->sig_id = get32(p, 24);
	pe->len = le16toh(len);
	pe->flags = p[30];
	pe->data = p + CT_PUT_ENTRY_BYTES;
	return CT_PUT_ENTRY_BYTES + (size_t)pe->len;
}

static int bad(const char **why, const char *what)
{
	if (why)
		*why = what;
	return GICE_ERR_BAD_PACKET;
}

int ct_proto_parse(const void *buf, size_t len, ct_hdr_t *h, const char **why)
{
	const uint8_t *p = buf;

	if (len < CT_HDR_BYTES)
		return bad(why, "shorter than the header");
	h->magic = get32(p, 0);
	h->version = p[4];
	h->op = p[5];
	h->flags = p[6];
	h->qos = p[7];
	h->src_gid = get32(p, 8);
	h->dst_gid = get32(p, 12);
	h->conn_id = get32(p, 16);
	h->msg_id = get32(p, 20);
	h->psn = get32(p, 24);
	h->payload_len = get32(p, 28);
	h->rkey = get64(p, 32);
	h->roff = get64(p, 40);
	h->msg_len = get32(p, 48);
	h->moff = get32(p, 52);
	h->sig_id = get32(p, 56);
	h->status = (int32_t)get32(p, 60);
	h->value = get64(p, 64);
	h->aux = get64(p, 72);
	h->csum = get32(p, 80);
	h->ack = get32(p, 84);
	h->mac = get64(p, 88);

	if (h->magic != CT_PROTO_MAGIC)
		return bad(why, "bad magic");
	if (h->version != CT_PROTO_VERSION)
		return bad(why, "unsupported version");
	if (h->op == 0 || h->op >= CT_PKT_MAX_)
		return bad(why, "unknown op");
	if (h->ack && !(h->flags & CT_HF_ACK))
		return bad(why, "ack without its flag");
	if (h->payload_len > CT_MAX_PAYLOAD || h->payload_len != len - CT_HDR_BYTES)
		return bad(why, "payload length does not match packet length");
	switch (h->op) {
	case CT_PKT_PUT:
	case CT_PKT_GET_RESP:
		if ((uint64_t)h->moff + h->payload_len > h->msg_len)
			return bad(why, "payload past the message end");
		if (h->payload_len == 0 && h->msg_len != 0)
			return bad(why, "empty packet of a non-empty message");
		break;
	case CT_PKT_PUTS: {
		const uint8_t *q = p + CT_HDR_BYTES;
		size_t left = h->payload_len;
		if (h->msg_len != h->payload_len || h->moff)
			return bad(why, "small puts whose msg_len is not their payload length");
		if (h->value == 0 || h->value > CT_PUTS_MAX)
			return bad(why, "small puts of no entry or more than 64");
		for (uint64_t i = 0; i < h->value; i++) {
			ct_put_entry_t pe;
			if (left < CT_PUT_ENTRY_BYTES)
				return bad(why, "small-put entry past the payload end");
			size_t n = ct_proto_entry_parse(q, &pe);
			if (n > left)
				return bad(why, "small-put entry past the payload end");
			if ((pe.flags & ~CT_PUT_ENTRY_FLAGS) || q[31])
				return bad(why, "small-put entry with an unknown flag");
			if ((pe.flags & CT_HF_STRONG) && !(pe.flags & CT_HF_SIGNAL))
				return bad(why, "strong flag without signal");
			q += n;
			left -= n;
		}
		if (left)
			return bad(why, "bytes after the last small-put entry");
		break;
	}
	case CT_PKT_PUT_RTS: /* announce msg_len bytes, carry only the grant to read them with, or */
	case CT_PKT_GET_GO:  /* nothing (the NVLink plane) */
		if ((h->payload_len != CT_GRANT_BYTES && h->payload_len != 0) || h->moff)
			return bad(why, "rendezvous packet with a payload that is not a grant");
		break;
	default:
		if (h->payload_len || h->msg_len || h->moff)
			return bad(why, "control packet with payload");
		break;
	}
	if ((h->flags & CT_HF_STRONG) && !(h->flags & CT_HF_SIGNAL))
		return bad(why, "strong flag without signal");
	if ((h->flags & CT_HF_ACK) && (h->op == CT_PKT_ACK || h->op == CT_PKT_HEARTBEAT || h->op == CT_PKT_BYE ||
				       h->op == CT_PKT_FAULT || h->op == CT_PKT_GET_DONE))
		return bad(why, "piggybacked ack on an unsequenced packet");
	if (h->op == CT_PKT_FAULT && h->value != CT_FAULT_KILL && h->value != CT_FAULT_HANG)
		return bad(why, "unknown fault action");
	return GICE_OK;
}
