# The portable core's sources, relative to firmware/core. Every port (bare metal, Zephyr, unit
# tests) builds exactly this list, so no port carries its own copy of core logic.
NV_CORE_SOURCES := src/card.c src/ucode.c src/via.c src/via_att.c src/via_conn.c src/via_post.c src/via_bench.c src/pushpull.c
