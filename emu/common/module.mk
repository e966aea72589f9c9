LIB_SRCS += emu/common/clock.c emu/common/common.c emu/common/config.c emu/common/crc32c.c emu/common/faults.c emu/common/faults_format.c emu/common/faults_script.c emu/common/siphash.c
