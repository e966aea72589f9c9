TESTS += test_proto test_gice
