#!/usr/bin/env python3
"""Regenerates the seed corpus of ipc_request_decoder_fuzz: one well-formed frame per request type
plus classic malformations. Each file is <control byte><frame> (see request_decoder_fuzz.cc)."""
import os
import struct

MAGIC = 0x444D4452
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def frame(typ, body=b"", version=1, flags=0, length=None, magic=MAGIC, rid=1):
    if length is None:
        length = len(body)
    return struct.pack("<IHHIIQ", magic, version, typ, length, flags, rid) + body


def seed(name, control, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(bytes([control]) + data)


HELLO_DONE = 16
NEWEST = 32  # with HELLO_DONE: the connection negotiated the newest version (3)
os.makedirs(HERE, exist_ok=True)
seed("hello", 0, frame(1, struct.pack("<HHI", 1, 1, 0)))
seed("hello_no_common_version", 0, frame(1, struct.pack("<HHI", 5, 9, 0)))
seed("query_nics", HELLO_DONE, frame(2))
seed("nearest_gpu", HELLO_DONE, frame(3, struct.pack("<Ii16s", 2, -1, b"0000:17:00.0")))
seed("nearest_host", HELLO_DONE, frame(3, struct.pack("<Ii16s", 1, 0, b"")))
seed("register_host", HELLO_DONE | 1, frame(4, struct.pack("<QQII", 4096, 65536, 7, 0)))
seed("register_host_overflow", HELLO_DONE | 1, frame(4, struct.pack("<QQII", 2**64 - 10, 100, 7, 0)))
seed("register_host_ctrunc", HELLO_DONE | 8 | 4, frame(4, struct.pack("<QQII", 0, 4096, 1, 0)))
seed("register_dmabuf", HELLO_DONE | 1, frame(5, struct.pack("<QQQII", 17, 1 << 20, 0x7F0000001011, 3, 1)))
seed("deregister", HELLO_DONE, frame(6, struct.pack("<Q", 42)))
seed("list", HELLO_DONE, frame(7, struct.pack("<QII", 0, 64, 0)))
seed("diagnose", HELLO_DONE, frame(8))
FLOW_OPEN_V1 = struct.pack("<64sQII", b"node-b", 7, 64, 128)
seed("flow_open_v1", HELLO_DONE, frame(9, FLOW_OPEN_V1))
seed("flow_open_v1_on_v3", HELLO_DONE | NEWEST, frame(9, FLOW_OPEN_V1, version=3))
seed("flow_open_nic_mask", HELLO_DONE | NEWEST, frame(9, FLOW_OPEN_V1 + struct.pack("<II", 2, 0), version=3))
seed("flow_open_nic_mask_on_v1", HELLO_DONE, frame(9, FLOW_OPEN_V1 + struct.pack("<II", 2, 0)))
seed("list_flows", HELLO_DONE, frame(14, struct.pack("<QII", 0, 32, 0)))
seed("list_all_registrations", HELLO_DONE, frame(15, struct.pack("<QII", 3, 64, 0)))
seed("cc_show", HELLO_DONE, frame(16, struct.pack("<32sII", b"rail0", 0, 0)))
KNOB = struct.Struct("<40sqII")
seed("cc_set", HELLO_DONE, frame(17, struct.pack("<32sII", b"", 1, 0) + KNOB.pack(b"rpg_ai_rate", 42, 0, 0)
                                 + b"\0" * (KNOB.size * 15)))
seed("reload", HELLO_DONE, frame(18))
seed("unknown_type", HELLO_DONE, frame(99))
seed("bad_magic", HELLO_DONE, frame(2, magic=0x12345678))
seed("bad_length", HELLO_DONE, frame(6, struct.pack("<Q", 1), length=4))
seed("short", HELLO_DONE, b"RDMD\x01\x00")
