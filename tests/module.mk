TESTS += test_proto test_gice
TESTS += test_docs
TESTS += test_multiproc
TESTS += test_gicerun
TEST_SCRIPTS += test_netns
TEST_SCRIPTS += test_mpirun
TEST_SCRIPTS += test_demo
