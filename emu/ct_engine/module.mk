LIB_SRCS += emu/ct_engine/ct_proto.c emu/ct_engine/ct_engine.c emu/ct_engine/ct_link.c emu/ct_engine/ct_link_rel.c emu/ct_engine/ct_link_rndv.c emu/ct_engine/ct_link_rx.c emu/ct_engine/ct_link_tx.c
