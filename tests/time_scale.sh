# time_scale.sh: sourced by the test scripts (not a test). scaled N prints N (seconds, a whole
# number) times CK_TIMEOUT_MULTIPLIER, which make asan/tsan set to 3; N when it is unset or
# below 1. Every upper time bound of a test script goes through it.
scaled() {
	awk -v n="$1" -v f="${CK_TIMEOUT_MULTIPLIER:-1}" 'BEGIN { if (!(f + 0 >= 1)) f = 1; printf "%d\n", n * f }'
}
