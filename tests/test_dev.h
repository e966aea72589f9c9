/* test_dev.h: devices for the Check test binaries that use the public API. test_dev_open opens
 * a device with attributes at and gives it one buffer of bytes from its memory, zeroed and
 * registered: the memory most cases put to and from. */
#ifndef GICE_TEST_DEV_H
#define GICE_TEST_DEV_H

#include <check.h>
#include <string.h>

#include "api/gice.h"

static inline void test_dev_open(const gice_device_attr_t *at, size_t bytes, gice_device_t **dev, uint8_t **buf,
				 uint64_t *key)
{
	void *p;

	ck_assert_int_eq(gice_device_open(at, dev), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(*dev, bytes, &p), GICE_OK);
	*buf = p;
	memset(*buf, 0, bytes);
	ck_assert_int_eq(gice_mem_register(*dev, *buf, bytes, key), GICE_OK);
}

#endif
