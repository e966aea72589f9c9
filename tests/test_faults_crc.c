/* Description: CRC-32C (emu/common/crc32c.c), the checksum that fault-injection runs rely on
 * to catch corrupted packets: the known vectors (RFC 3720 B.4), chaining across every split
 * point, the same bytes at every alignment, and the SSE4.2 path agreeing with the table on
 * 3000 random buffers of random lengths, offsets and seeds. Pure computation: no endpoint, no
 * device. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/common/crc32c.h"
#include "tests/test_faults.h"

START_TEST(test_crc32c_known_vectors)
{
	unsigned char buf[32];

	ck_assert_uint_eq(gice_crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(gice_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(gice_crc32c_hw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(gice_crc32c(0, NULL, 0), 0);
	ck_assert_uint_eq(gice_crc32c(0x12345678u, NULL, 0), 0x12345678u);
	/* RFC 3720 (iSCSI) B.4 */
	memset(buf, 0, sizeof(buf));
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x8A9136AAu);
	ck_assert_uint_eq(gice_crc32c_sw(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	ck_assert_uint_eq(gice_crc32c(0, buf, 32), 0x113FDB5Cu);
	printf("crc32c: SSE4.2 path %s\n", gice_crc32c_hw_available() ? "available" : "not available (table only)");
}
END_TEST

START_TEST(test_crc32c_chaining_unaligned)
{
	enum { LEN = 1000 };
	unsigned char *data = malloc(LEN + 16), *copy = malloc(LEN + 16);
	uint32_t whole;

	fill_random(data, LEN + 16, 42);
	whole = gice_crc32c(0, data, LEN);
	ck_assert_uint_eq(whole, gice_crc32c_sw(0, data, LEN));
	/* every split point chains to the same CRC, in both implementations */
	for (size_t n = 0; n <= LEN; n += (n < 40 ? 1 : 37)) {
		ck_assert_uint_eq(gice_crc32c(gice_crc32c(0, data, n), data + n, LEN - n), whole);
		ck_assert_uint_eq(gice_crc32c_sw(gice_crc32c_sw(0, data, n), data + n, LEN - n), whole);
		ck_assert_uint_eq(gice_crc32c_hw(gice_crc32c_hw(0, data, n), data + n, LEN - n), whole);
	}
	/* a three-way split */
	ck_assert_uint_eq(gice_crc32c(gice_crc32c(gice_crc32c(0, data, 3), data + 3, 500), data + 503, LEN - 503),
			  whole);
	/* the same bytes at every alignment give the same CRC */
	for (size_t off = 0; off < 16; off++) {
		memmove(copy + off, data, LEN);
		ck_assert_uint_eq(gice_crc32c(0, copy + off, LEN), whole);
		ck_assert_uint_eq(gice_crc32c_sw(0, copy + off, LEN), whole);
		for (size_t len = 0; len < 24; len++)
			ck_assert_uint_eq(gice_crc32c(0, copy + off, len), gice_crc32c_sw(0, data, len));
	}
	free(data);
	free(copy);
}
END_TEST

START_TEST(test_crc32c_hw_matches_table)
{
	enum { MAXLEN = 4096 + 64 };
	unsigned char *buf = malloc(MAXLEN);
	int n = 0;

	fill_random(buf, MAXLEN, 7);
	for (uint64_t i = 0; i < 3000; i++) {
		uint64_t r = mix(i);
		size_t off = r % 64, len = i < 300 ? i : (r >> 8) % (MAXLEN - 64);
		uint32_t seed = (uint32_t)(r >> 40);
		uint32_t sw = gice_crc32c_sw(seed, buf + off, len);

		ck_assert_msg(gice_crc32c_hw(seed, buf + off, len) == sw, "len %zu off %zu: hw %08x table %08x", len, off,
			      gice_crc32c_hw(seed, buf + off, len), sw);
		ck_assert_uint_eq(gice_crc32c(seed, buf + off, len), sw);
		n++;
	}
	printf("crc32c: %d random buffers agree (hw %s)\n", n, gice_crc32c_hw_available() ? "on" : "off");
	free(buf);
}
END_TEST

int main(void)
{
	struct fault_case cases[] = {
		{"crc32c_known_vectors", test_crc32c_known_vectors, 0, NULL},
		{"crc32c_chaining_unaligned", test_crc32c_chaining_unaligned, 0, NULL},
		{"crc32c_hw_matches_table", test_crc32c_hw_matches_table, 0, NULL},
	};

	return fault_main("faults_crc", cases, sizeof(cases) / sizeof(cases[0]));
}
