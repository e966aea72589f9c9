/* crc32c.c: CRC-32C, by the SSE4.2 crc32 instruction when the CPU has it, else slicing-by-8.
 *
 * Both work on the inverted register (init and final xor ~0 done in gice_crc32c_*), so partial
 * results chain. The table is built once (pthread_once); the CPU check is done once too and
 * its result kept in a relaxed atomic (any thread computing it gets the same answer). */
#include "emu/common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 reflected */

static uint32_t crc_table[8][256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[0][n] = c;
	}
	/* table k: the CRC of byte n followed by k zero bytes */
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xff];
}

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

uint32_t gice_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	pthread_once(&crc_table_once, crc_table_init);
	for (; len && ((uintptr_t)p & 7); len--)
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v = load_le64(p) ^ c;

		c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^ crc_table[5][(v >> 16) & 0xff] ^
		    crc_table[4][(v >> 24) & 0xff] ^ crc_table[3][(v >> 32) & 0xff] ^
		    crc_table[2][(v >> 40) & 0xff] ^ crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
	}
	for (; len; len--)
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
	return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = ~crc;

	for (; len && ((uintptr_t)p & 7); len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; len; len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

int gice_crc32c_hw_available(void)
{
	static int have = -1; /* -1: not checked yet */
	int h = __atomic_load_n(&have, __ATOMIC_RELAXED);

	if (__builtin_expect(h < 0, 0)) {
		__builtin_cpu_init();
		h = __builtin_cpu_supports("sse4.2") ? 1 : 0;
		__atomic_store_n(&have, h, __ATOMIC_RELAXED);
	}
	return h;
}

uint32_t gice_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	if (!gice_crc32c_hw_available())
		return gice_crc32c_sw(crc, buf, len);
	return crc32c_sse42(crc, buf, len);
}

uint32_t gice_crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (gice_crc32c_hw_available())
		return crc32c_sse42(crc, buf, len);
	return gice_crc32c_sw(crc, buf, len);
}

#else /* no hardware path: the table everywhere */

int gice_crc32c_hw_available(void) { return 0; }

uint32_t gice_crc32c_hw(uint32_t crc, const void *buf, size_t len) { return gice_crc32c_sw(crc, buf, len); }

uint32_t gice_crc32c(uint32_t crc, const void *buf, size_t len) { return gice_crc32c_sw(crc, buf, len); }

#endif
