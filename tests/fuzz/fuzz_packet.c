/* fuzz_packet.c: libFuzzer target over the receive path's pure part — a fabric message split into
 * packets (ct_proto_next), each decoded and validated (ct_proto_parse), its checksum and MAC
 * checked — with any bytes at all. A crash, a sanitizer report, or a parse that accepts what the
 * documented rules reject (checked below) is a finding. Run with `make fuzz FUZZ_SECONDS=N`; the
 * seed corpus (tests/fuzz/corpus) holds one packet of each op (a PUT_RTS in both forms) and a
 * bundle. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/gice_status.h"
#include "emu/ct_engine/ct_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t key[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};

	while (size) {
		size_t n = ct_proto_next(data, size);
		ct_hdr_t h;
		const char *why = NULL;

		if (!n)
			break;
		if (n < CT_HDR_BYTES || n > size)
			abort(); /* next promised a whole packet */
		(void)ct_proto_csum_ok(data, n);
		(void)ct_proto_mac_ok(data, key);
		if (ct_proto_parse(data, n, &h, &why) == GICE_OK) {
			/* what parse accepts keeps the documented invariants */
			if (h.payload_len != n - CT_HDR_BYTES || h.payload_len > CT_MAX_PAYLOAD || h.op == 0 ||
			    h.op >= CT_PKT_MAX_ || h.version != CT_PROTO_VERSION)
				abort();
			if ((h.op == CT_PKT_PUT || h.op == CT_PKT_GET_RESP) &&
			    (uint64_t)h.moff + h.payload_len > h.msg_len)
				abort();
			if ((h.op == CT_PKT_PUT_RTS || h.op == CT_PKT_GET_GO) && h.payload_len != CT_GRANT_BYTES &&
			    h.payload_len != 0)
				abort(); /* a rendezvous packet carries its grant or nothing (the plane) */
			if (h.op != CT_PKT_PUT && h.op != CT_PKT_GET_RESP && h.op != CT_PKT_PUT_RTS &&
			    h.op != CT_PKT_GET_GO && h.op != CT_PKT_PUTS && h.payload_len)
				abort();
			if (h.op == CT_PKT_PUTS) {
				/* value entries fill the payload exactly, each within it */
				size_t at = 0;
				if (h.value == 0 || h.value > CT_PUTS_MAX || h.msg_len != h.payload_len)
					abort();
				for (uint64_t i = 0; i < h.value; i++) {
					ct_put_entry_t pe;
					if (h.payload_len - at < CT_PUT_ENTRY_BYTES)
						abort();
					at += ct_proto_entry_parse(data + CT_HDR_BYTES + at, &pe);
					if (at > h.payload_len || (pe.flags & ~CT_PUT_ENTRY_FLAGS))
						abort();
				}
				if (at != h.payload_len)
					abort();
			}
		} else if (!why) {
			abort(); /* a rejection names its reason */
		}
		data += n;
		size -= n;
	}
	return 0;
}
