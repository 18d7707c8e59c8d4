"""What a call takes: Python scalars and sequences converted by NumPy's
same_kind rule, arrays read as NumPy reads them (the rule `callbox run`
follows for .npy files), DLPack and array-interface objects without a
copy, and preallocated outputs (out=)."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import callbox
from callbox import host as host_mod
from conftest import ROOT


# ---- the signature's parameters ----

def test_params_are_the_librarys(host):
    """The package reads a callback's parameters from the library
    (callbox_callback_params, 1.7), not by parsing the signature text."""
    assert host._params_of("copy2") == [host_mod.Param("x", "s16", 1), host_mod.Param("y", "f32", 1)]
    assert host._params_of("copy_mat") == [host_mod.Param("x", "f32", 2)]
    with pytest.raises(callbox.UnknownCallback, match="nope"):
        host._params_of("nope")


def _pair(host, eps):
    x, e = host.call("with_eps", np.ones(2, np.float32), eps)
    return e


def test_python_scalars_are_converted(host):
    e = _pair(host, 1e-6)  # "expected f32[], got f64[]" before
    assert e.dtype == np.float32 and e == np.float32(1e-6)
    assert _pair(host, 3) == 3.0 and _pair(host, True) == 1.0
    assert _pair(host, np.float64(0.5)) == 0.5  # a NumPy scalar: float64 -> float32 is same_kind
    y = host.call("scalar_u8", 200)  # a Python int: any integer dtype that holds it
    assert y.dtype == np.uint8 and y == 200
    assert host.call("scalar_s8", -128) == -128
    assert host.call("scalar_pred", True).dtype == np.bool_
    c = host.call("scalar_c64", 1.5)
    assert c.dtype == np.complex64 and c == 1.5


def test_lossy_scalars_are_refused(host):
    with pytest.raises(callbox.InvalidArgument,
                       match=r"argument 0 \(x\): got Python float 2\.5, the callback takes s8, and float64 -> int8 "
                             r"is not a same_kind cast \(it can lose values\): pass np\.int8\(\.\.\.\)") as e:
        host.call("scalar_s8", 2.5)
    assert e.value.callback == "scalar_s8" and e.value.code == 3
    assert str(e.value).startswith('InvalidArgument: callback "scalar_s8" refused the call before running it: argument 0 (x)')
    assert e.value.message.startswith("argument 0 (x): got Python float 2.5")
    with pytest.raises(callbox.InvalidArgument, match=r"got Python int 1000, the callback takes s8 \(s8 holds -128\.\.127"):
        host.call("scalar_s8", 1000)
    with pytest.raises(callbox.InvalidArgument, match=r"got Python int -1, the callback takes u8 \(u8 holds 0\.\.255"):
        host.call("scalar_u8", -1)
    with pytest.raises(callbox.InvalidArgument, match=r"got Python int 10+, the callback takes u8"):
        host.call("scalar_u8", 10**30)
    with pytest.raises(callbox.InvalidArgument, match=r"got Python complex \(1\+2j\), the callback takes f32.*np\.float32"):
        host.call("scalar_f32", 1 + 2j)
    with pytest.raises(callbox.InvalidArgument, match=r"got Python int 3, the callback takes pred.*np\.bool_"):
        host.call("scalar_pred", 3)
    with pytest.raises(callbox.InvalidArgument, match=r"argument 1 \(eps\): got np\.complex128 \(1\+0j\), the callback takes f32"):
        _pair(host, np.complex128(1))


def test_sequences_are_converted(host):
    y = host.call("copy_f32", [1, 2, 3])
    assert y.dtype == np.float32 and y.tolist() == [1, 2, 3]
    assert host.call("copy_u8", (0, 255)).tolist() == [0, 255]
    assert host.call("copy_mat", [[1.5, 2], [3, 4]]).tolist() == [[1.5, 2], [3, 4]]
    assert host.call("copy_c64", [1j]).tolist() == [1j]
    with pytest.raises(callbox.InvalidArgument, match=r"got a list of float64 values, the callback takes s32.*"
                                                      r"np\.asarray\(\.\.\.\)\.astype\(np\.int32\)"):
        host.call("copy_s32", [1.5, 2])
    with pytest.raises(callbox.InvalidArgument, match=r"got a list of int64 values, the callback takes u8 \(u8 holds 0\.\.255; the values span 1\.\.300\)"):
        host.call("copy_u8", [1, 300])


def test_arrays_of_another_dtype(host):
    y = host.call("copy_f32", np.arange(3, dtype=np.int32))  # int32 -> float32: same_kind
    assert y.dtype == np.float32 and y.tolist() == [0, 1, 2]
    y = host.call("copy_f32", np.array([0.1, 2.5]))  # float64 -> float32: same_kind (NumPy's rule)
    assert y.dtype == np.float32 and y.tolist() == [np.float32(0.1), 2.5]
    assert host.call("copy_s64", np.array([True, False])).tolist() == [1, 0]
    with pytest.raises(callbox.InvalidArgument,
                       match=r"argument 0 \(x\): got float64 array, the callback takes s32, and float64 -> int32 is not "
                             r"a same_kind cast \(it can lose values\): pass x\.astype\(np\.int32\)"):
        host.call("copy_s32", np.zeros(3))
    # Python ints go to any integer dtype that holds them, also past int64
    # (NumPy alone would make [2**63, 1] float64).
    np.testing.assert_array_equal(host.call("copy_u64", [2**63, 1]), np.array([2**63, 1], np.uint64))
    np.testing.assert_array_equal(host.call("copy_u64", [2**64 - 1, 0]), np.array([2**64 - 1, 0], np.uint64))
    with pytest.raises(callbox.InvalidArgument, match=r"u64 holds 0\.\.18446744073709551615; the values span -1\.\.9223372036854775808"):
        host.call("copy_u64", [-1, 2**63])
    with pytest.raises(callbox.InvalidArgument, match=r"not a same_kind cast"):
        host.call("copy_s64", [2**63, 1.5])  # a float among them: NumPy's float64, refused as before
    with pytest.raises(callbox.InvalidArgument, match=r"got int64 array, the callback takes u64"):
        host.call("copy_u64", np.arange(3))  # signed -> unsigned is not same_kind for arrays
    with pytest.raises(callbox.InvalidArgument, match=r"got complex64 array, the callback takes f32"):
        host.call("copy_f32", np.zeros(3, np.complex64))


def test_prebuilt_scale_takes_a_python_factor(demo_host):
    y = demo_host.call("scale", [1, 2, 3], 2)
    assert y.dtype == np.float32 and y.tolist() == [2, 4, 6]


# ---- item 6: one reading for arrays and .npy files ----

def _odd_arrays():
    """(callback, array) pairs NumPy reads specially: big-endian,
    Fortran order (and both), bools with bytes other than 0 and 1."""
    m = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    cube = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    bools = np.array([0, 2, 1, 255, 0, 128], np.uint8).view(np.bool_)
    return {
        "be_f32": ("copy_f32", np.arange(5, dtype=">f4") - 2),
        "be_s16": ("copy_s16", np.array([1, -2, 300], ">i2")),
        "be_c64": ("copy_c64", np.array([1 + 2j, -3j], ">c8")),
        "fortran": ("copy_mat", np.asfortranarray(m)),
        "fortran_be": ("copy_cube", np.asfortranarray(cube).astype(">f4", order="F")),
        "bool_bytes": ("copy_pred", bools),
        "bool_fortran": ("copy_pred_mat", np.asfortranarray(bools.reshape(2, 3))),
    }


@pytest.mark.parametrize("case", list(_odd_arrays()))
def test_arrays_are_read_as_numpy_reads_them(host, case):
    name, a = _odd_arrays()[case]
    before = a.tobytes(order="A")
    y = host.call(name, a)
    assert y.dtype.isnative and y.flags.c_contiguous
    want = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("=")))
    if a.dtype == np.bool_:
        assert y.view(np.uint8).max() <= 1, "bools reach the guest as 0 and 1"
        want = a != 0
    np.testing.assert_array_equal(y, want)
    assert a.tobytes(order="A") == before, "the caller's array is not modified"


@pytest.fixture(scope="session")
def callbox_cli(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed: the CLI comparison builds cmd/callbox")
    exe = tmp_path_factory.mktemp("cli") / "callbox"
    subprocess.run([go, "build", "-o", str(exe), "./cmd/callbox"], cwd=ROOT, check=True)
    return exe


@pytest.mark.parametrize("case", list(_odd_arrays()))
def test_cli_and_python_agree(host, config_path, callbox_cli, tmp_path, case):
    """`callbox run` on a .npy file and host.call on the array np.load
    reads from it give the same result, bit for bit."""
    name, a = _odd_arrays()[case]
    src, dst = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(src, a)
    loaded = np.load(src)
    assert loaded.dtype == a.dtype and np.isfortran(loaded) == np.isfortran(a)  # the file keeps the oddity
    r = subprocess.run([str(callbox_cli), "run", "-c", str(config_path), name, "--in", str(src), "--out", str(dst)],
                       capture_output=True, text=True, env=dict(os.environ, CALLBOX_LOG_LEVEL="error"))
    assert r.returncode == 0, r.stderr
    cli = np.load(dst)
    py = host.call(name, loaded)
    assert cli.dtype == py.dtype and cli.shape == py.shape
    assert cli.tobytes() == py.tobytes()


# ---- item 7: DLPack, the array interface, out= ----

class DLPackOnly:
    """A tensor type that offers only DLPack (as PyTorch or JAX arrays
    do), wrapping a NumPy array's memory."""

    def __init__(self, a, device=(1, 0)):
        self._a = a
        self._device = device

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._device


class ArrayInterfaceOnly:
    """A buffer exposing only __array_interface__ (as some array libraries
    and memory-mapped buffers do)."""

    def __init__(self, a):
        self._a = a

    @property
    def __array_interface__(self):
        return self._a.__array_interface__


@pytest.fixture
def passed_pointers(monkeypatch):
    """The data pointers of every tensor handed to the C API."""
    seen = []
    real = host_mod._tensors

    def spy(arrays):
        seen.append([a.ctypes.data for a in arrays])
        return real(arrays)

    monkeypatch.setattr(host_mod, "_tensors", spy)
    return seen


def test_numpy_arrays_pass_by_pointer(host, passed_pointers):
    x = np.arange(4, dtype=np.float32)
    host.call("copy_f32", x)
    assert passed_pointers[0] == [x.ctypes.data]


def test_dlpack_objects_zero_copy(host, passed_pointers):
    x = np.arange(6, dtype=np.float32) + 1
    y = host.call("copy_f32", DLPackOnly(x))  # "dtype object has no callbox equivalent" before
    np.testing.assert_array_equal(y, x)
    assert passed_pointers[0] == [x.ctypes.data], "the DLPack tensor's own memory is passed"
    s, f = host.call("copy2", DLPackOnly(np.array([1, -2], np.int16)), DLPackOnly(np.array([0.5], np.float32)))
    assert s.tolist() == [1, -2] and f.tolist() == [0.5]


def test_array_interface_objects_zero_copy(host, passed_pointers):
    x = np.arange(5, dtype=np.float32) * 2
    y = host.call("copy_f32", ArrayInterfaceOnly(x))
    np.testing.assert_array_equal(y, x)
    assert passed_pointers[0] == [x.ctypes.data]


def test_dlpack_objects_are_converted_like_arrays(host):
    y = host.call("copy_f32", DLPackOnly(np.arange(3, dtype=np.int16)))
    assert y.dtype == np.float32 and y.tolist() == [0, 1, 2]
    with pytest.raises(callbox.InvalidArgument, match="got float64 array, the callback takes s32"):
        host.call("copy_s32", DLPackOnly(np.zeros(2)))


def test_device_tensors_are_refused(host):
    gpu = DLPackOnly(np.zeros(3, np.float32), device=(2, 0))
    with pytest.raises(callbox.InvalidArgument,
                       match=r"argument 0 \(x\) is a DLPack tensor in CUDA memory \(device \(2, 0\)\): host\.call takes host "
                             r"memory; copy it to the host first .*callbox_cuda_call_dlpack"):
        host.call("copy_f32", gpu)


def test_out(host, passed_pointers):
    x = np.arange(4, dtype=np.float32)
    out = np.full(4, -1, np.float32)
    r = host.call("copy_f32", x, out=out)
    assert r is out and out.tolist() == [0, 1, 2, 3]
    assert passed_pointers[-1] == [out.ctypes.data], "results are written in place"
    s, f = np.empty(2, np.int16), np.empty(1, np.float32)
    r = host.call("copy2", np.array([7, 8], np.int16), np.array([9], np.float32), out=(s, f))
    assert r == (s, f) or (r[0] is s and r[1] is f)
    assert s.tolist() == [7, 8] and f.tolist() == [9]
    one = host.call("copy_f32", x, out=(np.empty(4, np.float32),))
    assert isinstance(one, tuple) and one[0].tolist() == [0, 1, 2, 3]
    y = host.chain("out").call("copy_f32", x + 1, out=out)
    assert y is out and out.tolist() == [1, 2, 3, 4]


def test_out_is_checked(host):
    """out= arrays: their dtypes, shapes and count are judged by the library,
    in the words every door gives (test_doors.py); what only a NumPy array
    can get wrong (byte order, layout, writability, not being one) here."""
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(callbox.InvalidArgument, match=r'callback "copy_f32" refused the call before running it: '
                                                      r"output 0: buffer is f64\[4\], result is f32\[4\]"):
        host.call("copy_f32", x, out=np.empty(4))
    with pytest.raises(callbox.InvalidArgument, match=r"output 0: buffer is f32\[5\], result is f32\[4\]"):
        host.call("copy_f32", x, out=np.empty(5, np.float32))
    with pytest.raises(callbox.InvalidArgument, match=r"out\[0\]: got >f4 array"):
        host.call("copy_f32", x, out=np.empty(4, ">f4"))
    with pytest.raises(callbox.InvalidArgument, match=r"out\[0\]: not C-contiguous"):
        host.call("copy_f32", x, out=np.empty(8, np.float32)[::2])
    ro = np.empty(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(callbox.InvalidArgument, match=r"out\[0\]: read-only"):
        host.call("copy_f32", x, out=ro)
    with pytest.raises(callbox.InvalidArgument, match=r"refused the call before running it: got 1 output buffers"):
        host.call("copy2", np.zeros(1, np.int16), np.zeros(1, np.float32), out=np.empty(1, np.int16))
    with pytest.raises(callbox.InvalidArgument, match=r"out\[0\]: a list, not a NumPy array"):
        host.call("copy_f32", x, out=([0.0] * 4,))


def test_out_untouched_when_the_call_fails(host):
    out = np.full(3, 7, np.float32)
    with pytest.raises(callbox.GuestError):
        host.call("fail", np.ones(3, np.float32), out=out)
    assert out.tolist() == [7, 7, 7]
