# Writes testdata/llamacpp_kquants.bin (see llamacpp_test.go) by calling llama.cpp's own prebuilt
# CPU library, as node-llama-cpp 3.22.1 ships it (npm install --ignore-scripts --omit=optional
# node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1), through ctypes: nothing of llama.cpp is
# copied. LIB is its bins/linux-x64/ folder; VARIANT the CPU build llama.cpp itself picks on the
# machine (haswell: AVX2 and FMA, no AVX-512).
# usage: python3 llamacpp_kquants.py LIB VARIANT OUT SEED TYPE:COUNT,...   (type ids: 10 Q2_K .. 14 Q6_K)
#
# Records, little-endian:
# uint32 type, uint32 n, uint32 R, R row bytes, n f32 activations, n/256*292 Q8_K bytes
# (quantize_row_q8_K), n f32 dequantize_row, f32 vec_dot(row, those Q8_K bytes)
import ctypes, struct, random, sys
lib, variant = sys.argv[1].rstrip("/") + "/", sys.argv[2]
sys.argv = sys.argv[2:]
base = ctypes.CDLL(lib + "libggml-base.so", mode=ctypes.RTLD_GLOBAL)
cpu = ctypes.CDLL(lib + "libggml-cpu-%s.so" % variant)
cpu.ggml_cpu_init()
types = {10: ("q2_K", 84, 80), 11: ("q3_K", 110, 108), 12: ("q4_K", 144, 0), 13: ("q5_K", 176, 0), 14: ("q6_K", 210, 208)}
rng = random.Random(int(sys.argv[2]))
which = [tuple(map(int, spec.split(":"))) for spec in sys.argv[3].split(",")]
out = open(sys.argv[1], "wb")
f16 = lambda v: struct.pack("<e", v)
for tid, count in which:
    name, bb, doff = types[tid]
    deq = getattr(base, "dequantize_row_" + name)
    dot = getattr(cpu, "ggml_vec_dot_%s_q8_K" % name)
    for rec in range(count):
        nb = [1, 2, 3, 4][rec % 4]
        n = 256 * nb
        row = bytearray(rng.getrandbits(8) for _ in range(nb * bb))
        for b in range(nb):  # sane block scales: |d| in [2^-12, 2^-4]
            o = b * bb + doff
            sign = 1 if rng.random() < 0.8 else -1
            row[o:o + 2] = f16(sign * rng.uniform(2**-12, 2**-4))
            if tid in (10, 12, 13):  # dmin follows d
                row[o + 2:o + 4] = f16(rng.uniform(2**-12, 2**-4))
        scale = [1.0, 0.01, 30.0, 1e-3, 3.0][rec % 5]
        x = [rng.gauss(0, 1) * scale for _ in range(n)]
        if rec % 7 == 3:
            x[rng.randrange(n)] *= 40  # an outlier sets its block's scale
        xb = struct.pack("<%df" % n, *x)
        q8 = ctypes.create_string_buffer(nb * 292)
        cpu.quantize_row_q8_K(ctypes.c_char_p(xb), q8, ctypes.c_int64(n))
        y = ctypes.create_string_buffer(4 * n)
        rb = ctypes.create_string_buffer(bytes(row), len(row))
        deq(rb, y, ctypes.c_int64(n))
        s = ctypes.c_float(0)
        dot(ctypes.c_int(n), ctypes.byref(s), ctypes.c_size_t(0), rb, ctypes.c_size_t(0), q8, ctypes.c_size_t(0), ctypes.c_int(1))
        out.write(struct.pack("<III", tid, n, len(row)))
        out.write(bytes(row)); out.write(xb); out.write(q8.raw); out.write(y.raw); out.write(struct.pack("<f", s.value))
