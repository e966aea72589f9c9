/* siphash.c: SipHash-c-d, written from the paper's specification (c compression rounds per
 * 8-byte word, d finalization rounds; the last word holds the remaining bytes and len mod 256
 * in its top byte): 2-4 and 1-3. */
#include "emu/common/siphash.h"

#include <endian.h>
#include <string.h>

/* SipHash with c compression and d finalization rounds (constants: inlined and unrolled). */
static inline uint64_t siphash_cd(const gice_sipkey_t *key, const void *buf, size_t len, int c, int d)
{
	const uint8_t *p = buf;
	uint64_t v0 = key->k0 ^ 0x736f6d6570736575ull, v1 = key->k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = key->k0 ^ 0x6c7967656e657261ull, v3 = key->k1 ^ 0x7465646279746573ull;
	uint64_t m, b = (uint64_t)len << 56;
	size_t words = len / 8;

	for (size_t i = 0; i < words; i++, p += 8) {
		memcpy(&m, p, 8);
		m = le64toh(m);
		v3 ^= m;
		for (int r = 0; r < c; r++)
			GICE_SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	for (size_t i = 0; i < (len & 7); i++)
		b |= (uint64_t)p[i] << (8 * i);
	v3 ^= b;
	for (int r = 0; r < c; r++)
		GICE_SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	for (int r = 0; r < d; r++)
		GICE_SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t gice_siphash(const gice_sipkey_t *key, const void *buf, size_t len) { return siphash_cd(key, buf, len, 2, 4); }

uint64_t gice_siphash13(const gice_sipkey_t *key, const void *buf, size_t len) { return siphash_cd(key, buf, len, 1, 3); }
