/* ct_fault_peek.c: what the fault injector (fabric/fab_fault.h) may know of a gice packet: its
 * link, sequence number and whether it starts an operation. Reads the fixed header fields at
 * their wire offsets (ct_proto.h), checks magic and version, validates nothing else: the
 * receiver does that. */
#include <endian.h>
#include <string.h>

#include "emu/ct_engine/ct_internal.h"

static uint32_t rd32(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, 4);
	return le32toh(v);
}

int ct_fault_classify(const void *buf, size_t len, fab_fault_pkt_t *out)
{
	const uint8_t *b = buf;
	uint8_t op, flags;
	uint32_t plen;

	if (len < CT_HDR_BYTES || rd32(b, 0) != CT_PROTO_MAGIC || b[4] != CT_PROTO_VERSION)
		return -1;
	op = b[5];
	flags = b[CT_HDR_FLAGS_OFF];
	plen = rd32(b, 28);
	if (plen > CT_MAX_PAYLOAD)
		return -1;
	*out = (fab_fault_pkt_t){.src = rd32(b, 8), .dst = rd32(b, 12), .msg_id = rd32(b, 20), .psn = rd32(b, 24),
				 .len = CT_HDR_BYTES + (size_t)plen, .hdr_len = CT_HDR_BYTES};
	out->seq = op != CT_PKT_ACK && op != CT_PKT_HEARTBEAT && op != CT_PKT_BYE && op != CT_PKT_FAULT &&
		   op != CT_PKT_GET_DONE;
	out->op_start = (flags & CT_HF_FIRST) && (op == CT_PKT_PUT || op == CT_PKT_PUTS || op == CT_PKT_GET_REQ || op == CT_PKT_ATOMIC_REQ ||
						  op == CT_PKT_PUT_RTS || op == CT_PKT_GET_RNDV);
	out->put = op == CT_PKT_PUT || op == CT_PKT_PUTS || op == CT_PKT_PUT_RTS;
	return 0;
}
