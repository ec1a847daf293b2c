#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ for the csv, config and tensor_file
targets (the input layouts are described at the top of each fuzz/*_fuzz.cc). The
model_dir and tokenizer seeds come from the targets themselves: run a target with
DS_FUZZ_DUMP_SEED=<path> (see scripts/fuzz.sh's header and docs/reliability.md).

    python3 fuzz/make_seeds.py
"""
import gzip
import json
import os
import struct
import zlib

ROOT = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def csv_seeds():
    # byte 0: delimiter (bits 0-2: , ; TAB | space a : '), header (8), max_field 64 (16),
    # max_fields 8 (32), gzip (64), truncate (128); byte 1: buffer size / cut.
    with open(os.path.join(ROOT, "..", "tests", "data", "csv", "rfc4180.csv"), "rb") as f:
        rfc = f.read()
    seeds = {
        "simple": b"\x08\x07a,b,c\n1,2,3\n4,5,6\n",
        "rfc4180_bom_crlf_multiline": b"\x08\x03" + rfc,
        "semicolon_quoted": b'\x09\x05x;y\n"a;b";c\r\n"say ""hi""";\n',
        "tab_no_header": b"\x02\x10a\tb\n\tc\n\"q\tq\"\td\n",
        "pipe_blank_lines_bare_cr": b"\x0b\x06h1|h2\r\r\n\nv1|v2\rv3|\n",
        "gzip_mode": b"\x48\x04name,age\nann,3\nbob,\"4\n5\"\n",
        "gzip_truncated": b"\xc8\x02name,age\nann,3\n",
        "unbalanced_quote": b'\x08\x09a,b\n1,"open\n2,3\n',
        "after_quote_garbage": b'\x08\x09a,b\n"x"y,2\n',
        "invalid_utf8": b"\x08\x01a,b\n1,\xff\xfe\n\xc3\xa9,\xe6\x97\xa5\n",
        "nul_byte": b"\x08\x01a,b\n1,x\x00y\n",
        "long_field_limit64": b"\x18\x03a,b\n" + b"x" * 80 + b",1\n",
        "many_fields_limit8": b"\x28\x03" + b",".join([b"c%d" % i for i in range(12)]) + b"\n",
        "ragged": b"\x08\x05a,b,c\n1\n1,2,3,4\n,,\n",
        "lenient_inner_quote": b"\x08\x05h,w\n5'10\",a\"b\n",
        "raw_gzip_members": b"\x08\x05" + gzip.compress(b"a,b\n1,2\n") + gzip.compress(b"3,4\n"),
        "space_delim_header_only": b"\x0c\x05one two three",
        "empty": b"\x08\x05",
    }
    for name, data in seeds.items():
        write("csv_fuzz", name, data)


def config_seeds():
    seeds = {
        "small_train": {"epochs": 1, "rnn_units": 16, "embedding_dim": 16, "batch_size": 8,
                        "seq_length": 32, "tokenizer": "char", "field_delimiter": ","},
        "reference_nulls": {"max_training_time_seconds": None, "field_delimiter": None},
        "floats_and_bigs": {"epochs": 5.0, "seed": 9200000000000000000, "learning_rate": 1e-12,
                            "gen_temp": 0.7, "max_lines": 1000000000000000},
        "dp": {"dp": True, "dp_noise_multiplier": 1.1, "dp_l2_norm_clip": 1.0,
               "dp_target_epsilon": 5, "dp_delta": 1e-5, "dp_microbatches": 1},
        "strings": {"optimizer": "adam", "rnn_initializer": "orthogonal",
                    "best_model_metric": "loss", "device": "cpu", "gpu_memory": "preallocate",
                    "gpu_memory_limit": "512MiB", "sp_model_type": "bpe",
                    "column_markers": "off", "field_delimiter_token": "<d>"},
        "wrong_type": {"epochs": "ten"},
        "unknown_key": {"epoch": 3},
        "negative": {"batch_size": -1},
    }
    for name, obj in seeds.items():
        write("config_fuzz", name + ".json", b"\x00" + json.dumps(obj).encode())
    write("config_fuzz", "flags.txt", b"\x01epochs=3\nbatch_size=8\ndp=true\nfield_delimiter=tab\n"
          b"gen_temp=0.5\nseed=42\ntokenizer=char\n")
    write("config_fuzz", "not_json", b"\x00{\"epochs\": 1,")


def tensor_seeds():
    def header_records(sections, data_start=4096):
        recs, off = b"", data_start
        offsets = []
        for name, floats in sections:
            n = name.encode().ljust(40, b"\0")
            recs += n + struct.pack("<QQII", off, len(floats), 0, 0)
            offsets.append(off)
            off = (off + 4 * len(floats) + 4095) // 4096 * 4096
        return recs, offsets, off

    def full_file(sections):
        recs, offsets, size = header_records(sections)
        body = bytearray(size)
        hdr = bytearray(4096)
        hdr[0:8] = b"DSTENSR\0"
        struct.pack_into("<IIQ", hdr, 8, 1, len(sections), size)
        hdr[32:32 + len(recs)] = recs
        for i, (name, floats) in enumerate(sections):
            data = struct.pack("<%df" % len(floats), *floats)
            body[offsets[i]:offsets[i] + len(data)] = data
            struct.pack_into("<I", hdr, 32 + 64 * i + 56, zlib.crc32(data))
        struct.pack_into("<I", hdr, 24, zlib.crc32(bytes(hdr)))
        body[0:4096] = hdr
        return bytes(body)

    two = [("params", [0.5, -1.25, 3.0, 0.0]), ("optimizer", [1.0] * 9)]
    write("tensor_file_fuzz", "raw_valid_two_sections", b"\x01" + full_file(two))
    write("tensor_file_fuzz", "raw_valid_empty", b"\x01" + full_file([]))
    # Compact form: mode 0x0e repairs size, section CRCs and header CRC.
    f = full_file(two)
    hdr_len = 32 + 64 * 2
    compact = bytes([0x0E]) + struct.pack("<H", hdr_len) + f[:hdr_len] + f[4096:]
    write("tensor_file_fuzz", "compact_repaired", compact)
    nan = [("params", [float("nan"), 1.0])]
    f = full_file(nan)
    write("tensor_file_fuzz", "compact_nan", bytes([0x0E]) + struct.pack("<H", 96) + f[:96] + f[4096:])
    write("tensor_file_fuzz", "raw_truncated", b"\x01" + full_file(two)[:5000])


if __name__ == "__main__":
    csv_seeds()
    config_seeds()
    tensor_seeds()
