#!/usr/bin/python3
"""Reference .npy files and readings from real NumPy, for tensorfile's tests.

  npyref.py gen DIR      write vectors.json and the .npy files it names into DIR
  npyref.py load DIR     load every *.npy in DIR with numpy.load and print,
                         as JSON, what NumPy reads (or its error) per file
  npyref.py f16 FILE     read float64 values (little-endian) from FILE and
                         print their float16 bits as NumPy rounds them (JSON)

A reading is the dtype (ABI name), the shape and the little-endian bytes of
the values as NumPy holds them, with bools as 0/1 (what NumPy reads, not the
byte in the file). Run with Debian's /usr/bin/python3 and python3-numpy.
"""
import base64
import json
import os
import sys

import numpy as np

ABI = {"b1": "pred", "i1": "s8", "i2": "s16", "i4": "s32", "i8": "s64",
       "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "f2": "f16",
       "f4": "f32", "f8": "f64", "c8": "c64", "c16": "c128"}


def reading(a):
    key = a.dtype.str[1:]
    if key not in ABI:
        return {"numpy_dtype": a.dtype.str}
    if a.dtype == np.bool_:
        data = np.array(a.tolist(), dtype=np.uint8).tobytes()
    else:
        data = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes()
    return {"dtype": ABI[key], "shape": list(a.shape),
            "data": base64.b64encode(data).decode()}


def vectors():
    rng = np.random.default_rng(12)
    out = {}
    # The bug that started this: bytes other than 0 and 1 viewed as bool.
    out["bool_bytes"] = np.array([0, 2, 1, 255, 128, 0], np.uint8).view(np.bool_)
    out["bool_2x3"] = np.array([[True, False, True], [False, False, True]])
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(t)
        v = np.array([info.min, info.max, 0, 1, info.max // 3, info.min // 7], dtype=t)
        out[np.dtype(t).name] = v
        out[np.dtype(t).name + "_2x3_be"] = v.reshape(2, 3).astype(np.dtype(t).newbyteorder(">"))
    for t in (np.float16, np.float32, np.float64):
        info = np.finfo(t)
        v = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, info.max, info.tiny,
                      info.tiny / 4, info.eps, 1 / 3], dtype=t)
        out[np.dtype(t).name] = v
        out[np.dtype(t).name + "_be"] = v.astype(np.dtype(t).newbyteorder(">"))
        out[np.dtype(t).name + "_rand_3x4x5"] = rng.standard_normal((3, 4, 5)).astype(t)
    # Every float16 bit pattern, NaN payloads included.
    out["float16_all"] = np.arange(65536, dtype=np.uint16).view(np.float16)
    for t in (np.complex64, np.complex128):
        v = np.array([1 + 2j, -0.5 - 3j, complex(np.inf, np.nan), 0j], dtype=t)
        out[np.dtype(t).name] = v
        out[np.dtype(t).name + "_be"] = v.astype(np.dtype(t).newbyteorder(">"))
    out["scalar_f32"] = np.float32(2.5).reshape(())
    out["scalar_bool"] = np.array(True)
    out["empty_f64"] = np.zeros((0,), np.float64)
    out["empty_0x3_i32"] = np.zeros((0, 3), np.int32)
    out["empty_2x0x5_u16"] = np.zeros((2, 0, 5), np.uint16)
    out["rank5_u8"] = np.arange(2 * 1 * 3 * 1 * 2, dtype=np.uint8).reshape(2, 1, 3, 1, 2)
    out["fortran_f32"] = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    out["noncontig_i64"] = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    return out


def gen(d):
    os.makedirs(d, exist_ok=True)
    manifest = {}
    for name, a in vectors().items():
        versions = [(1, 0)]
        if name in ("float32", "bool_bytes", "int16_2x3_be"):
            versions += [(2, 0), (3, 0)]
        for ver in versions:
            fn = name + ("" if ver == (1, 0) else "_v%d" % ver[0]) + ".npy"
            with open(os.path.join(d, fn), "wb") as f:
                np.lib.format.write_array(f, np.asanyarray(a), version=ver)
            manifest[fn] = reading(np.load(os.path.join(d, fn)))
    # Not .npy files, and .npy files callbox does not read.
    np.savez(os.path.join(d, "archive.npz"), x=np.arange(3))
    manifest["archive.npz"] = {"error": "zip archive"}
    np.save(os.path.join(d, "strings.npy"), np.array(["a", "bc"]))
    manifest["strings.npy"] = {"error": "unsupported dtype"}
    np.save(os.path.join(d, "longdouble.npy"), np.zeros(2, np.longdouble))
    manifest["longdouble.npy"] = {"error": "unsupported dtype"}
    np.save(os.path.join(d, "structured.npy"), np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    manifest["structured.npy"] = {"error": "structured"}
    np.save(os.path.join(d, "void2.npy"), np.zeros(2, np.uint16).view("V2"))
    manifest["void2.npy"] = {"error": "bfloat16"}
    with open(os.path.join(d, "vectors.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


def load(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".npy"):
            continue
        try:
            a = np.load(os.path.join(d, fn), allow_pickle=False)
            r = reading(a)
            if a.ndim > 1 and np.isfortran(a):
                r["fortran"] = True
            out[fn] = r
        except Exception as e:  # noqa: BLE001 - any refusal is a reading
            out[fn] = {"error": "%s: %s" % (type(e).__name__, e)}
    json.dump(out, sys.stdout)


def f16(path):
    v = np.fromfile(path, dtype="<f8")
    json.dump(v.astype(np.float16).view(np.uint16).tolist(), sys.stdout)


if __name__ == "__main__":
    {"gen": gen, "load": load, "f16": f16}[sys.argv[1]](sys.argv[2])
