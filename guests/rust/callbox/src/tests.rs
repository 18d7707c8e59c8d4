//! Native tests of frame validation and the views: frames are laid out in a
//! buffer the way the host lays them out (ABI.md §3) and then broken.

use crate::frame::Memory;
use crate::{DType, Frame, Status};

/// One tensor of a test frame.
struct T {
    dtype: DType,
    shape: Vec<i64>,
    bytes: Vec<u8>,
    alias: Option<u32>,
}

fn t<E: Copy>(dtype: DType, shape: &[i64], data: &[E]) -> T {
    let bytes =
        unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
    T { dtype, shape: shape.to_vec(), bytes: bytes.to_vec(), alias: None }
}

fn out(dtype: DType, shape: &[i64]) -> T {
    let n: i64 = shape.iter().product();
    T { dtype, shape: shape.to_vec(), bytes: vec![0xAB; n as usize * dtype.size()], alias: None }
}

/// A laid-out frame: a 64-aligned buffer with the frame at offset 64.
struct Built {
    buf: Vec<u128>,
    descs: usize, // byte offset of the descriptors in buf
}

const AT: usize = 64;

impl Built {
    fn new(inputs: Vec<T>, outputs: Vec<T>) -> Built {
        let n = inputs.len() + outputs.len();
        let descs = AT + 32;
        let mut dims = descs + 32 * n;
        let mut data = 0;
        let all: Vec<(T, bool)> =
            inputs.into_iter().map(|t| (t, false)).chain(outputs.into_iter().map(|t| (t, true))).collect();
        let rank_total: usize = all.iter().map(|(t, _)| t.shape.len()).sum();
        let mut next = (dims + 8 * rank_total + 63) & !63;
        let mut bytes = vec![0u8; 1 << 16];
        let put32 = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        let mut input_data = vec![];
        for (k, (t, output)) in all.iter().enumerate() {
            let d = descs + 32 * k;
            let (data_at, len) = match t.alias {
                Some(a) => input_data[a as usize],
                None => {
                    let at = next;
                    bytes[at..at + t.bytes.len()].copy_from_slice(&t.bytes);
                    next = (at + t.bytes.len() + 64 + 63) & !63;
                    (at, t.bytes.len())
                }
            };
            if !output {
                input_data.push((data_at, len));
            }
            put32(&mut bytes, d, t.dtype as u32);
            put32(&mut bytes, d + 4, t.shape.len() as u32);
            put32(&mut bytes, d + 8, dims as u32);
            let flags = if *output { 1 | if t.alias.is_some() { 2 } else { 0 } } else { 0 };
            put32(&mut bytes, d + 12, flags);
            put32(&mut bytes, d + 16, data_at as u32);
            put32(&mut bytes, d + 20, len as u32);
            put32(&mut bytes, d + 24, t.alias.unwrap_or(0));
            for &s in &t.shape {
                bytes[dims..dims + 8].copy_from_slice(&s.to_le_bytes());
                dims += 8;
            }
            data = next;
        }
        let n_in = all.iter().filter(|(_, o)| !o).count();
        put32(&mut bytes, AT, 0x3158_4243);
        put32(&mut bytes, AT + 4, 1);
        put32(&mut bytes, AT + 8, n_in as u32);
        put32(&mut bytes, AT + 12, (n - n_in) as u32);
        put32(&mut bytes, AT + 16, descs as u32);
        put32(&mut bytes, AT + 20, (data - AT) as u32);
        let mut buf = vec![0u128; bytes.len() / 16];
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_mut_ptr() as *mut u8, bytes.len()) };
        Built { buf, descs }
    }

    fn bytes(&mut self) -> &mut [u8] {
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, self.buf.len() * 16) }
    }

    fn set32(&mut self, at: usize, v: u32) {
        self.bytes()[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Sets field `field` (a byte offset) of descriptor `k`.
    fn set_desc(&mut self, k: usize, field: usize, v: u32) {
        let at = self.descs + 32 * k + field;
        self.set32(at, v);
    }

    fn get_desc(&mut self, k: usize, field: usize) -> u32 {
        let at = self.descs + 32 * k + field;
        u32::from_le_bytes(self.bytes()[at..at + 4].try_into().unwrap())
    }

    fn open(&mut self) -> crate::Result<Frame<'_>> {
        let mem = Memory { base: self.buf.as_ptr() as usize, len: (self.buf.len() * 16) as u64 };
        unsafe { Frame::open(mem, AT as u32) }
    }
}

fn scale_frame() -> Built {
    Built::new(
        vec![t(DType::F32, &[2, 3], &[1f32, 2., 3., 4., 5., 6.]), t(DType::F32, &[], &[2.5f32])],
        vec![out(DType::F32, &[2, 3])],
    )
}

fn malformed(b: &mut Built) -> String {
    match b.open() {
        Ok(_) => panic!("frame accepted"),
        Err(e) => {
            assert_eq!(e.status(), Status::Internal, "{}", e);
            assert!(e.message().starts_with("callbox: malformed call frame: "), "{}", e);
            e.message().to_string()
        }
    }
}

#[test]
fn reads_inputs_and_writes_outputs() {
    let mut b = scale_frame();
    let f = b.open().unwrap();
    assert_eq!((f.inputs(), f.outputs()), (2, 1));
    let x = f.input::<f32>(0).unwrap();
    assert_eq!(x.shape(), &[2, 3]);
    assert_eq!((x.rank(), x.dim(1), x.stride(0), x.dtype()), (2, 3, 3, DType::F32));
    assert_eq!((x[5], x.at([1, 2])), (6.0, 6.0));
    assert_eq!(x.offset(&[1, 3]), None);
    assert_eq!(x.rows().map(|r| r.to_vec()).collect::<Vec<_>>(), vec![vec![1., 2., 3.], vec![4., 5., 6.]]);
    assert_eq!(f.scalar::<f32>(1).unwrap(), 2.5);
    assert!(f.scalar::<f32>(0).unwrap_err().message().contains("not a single element"));
    let mut y = f.output::<f32>(0).unwrap();
    for (y, x) in y.iter_mut().zip(x.iter()) {
        *y = x * 2.0;
    }
    *y.at_mut([0, 0]) = -1.0;
    assert_eq!(&y[..], &[-1., 4., 6., 8., 10., 12.]);
}

#[test]
fn refuses_wrong_access() {
    let mut b = scale_frame();
    let f = b.open().unwrap();
    let e = f.input::<i32>(0).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert_eq!(e.message(), "input 0 is f32, not s32");
    assert_eq!(f.input::<f32>(2).unwrap_err().message(), "input 2 does not exist: the call has 2 inputs");
    assert_eq!(f.output::<f32>(1).unwrap_err().message(), "output 1 does not exist: the call has 1 outputs");
    let _y = f.output::<f32>(0).unwrap();
    assert_eq!(f.output::<f32>(0).unwrap_err().message(), "output 0 is already borrowed");
}

#[test]
fn empty_and_scalar_shapes() {
    let mut b = Built::new(
        vec![t::<f32>(DType::F32, &[2, 0], &[]), t::<f32>(DType::F32, &[0, 4], &[])],
        vec![out(DType::F32, &[2, 0])],
    );
    let f = b.open().unwrap();
    assert_eq!(f.input::<f32>(0).unwrap().rows().map(|r| r.len()).collect::<Vec<_>>(), vec![0, 0]);
    assert_eq!(f.input::<f32>(1).unwrap().rows().count(), 0);
    assert_eq!(f.output::<f32>(0).unwrap().rows_mut().count(), 2);
    let mut b = Built::new(vec![t(DType::S64, &[], &[7i64])], vec![]);
    let f = b.open().unwrap();
    let s = f.input::<i64>(0).unwrap();
    assert_eq!((s.rank(), s.rows().count(), s.at([])), (0, 1, 7));
}

#[test]
fn pred_bytes_are_checked_and_outputs_start_false() {
    let mut b = Built::new(vec![t(DType::Pred, &[3], &[0u8, 1, 2])], vec![out(DType::Pred, &[2])]);
    let f = b.open().unwrap();
    assert_eq!(f.input::<bool>(0).unwrap_err().message(), "input 0 is pred, but element 2 is 2, not 0 or 1");
    assert_eq!(f.input::<u8>(0).unwrap_err().message(), "input 0 is pred, not u8");
    assert_eq!(f.input::<u16>(0).unwrap_err().message(), "input 0 is pred, not u16, f16 or bf16");
    assert_eq!(&*f.output::<bool>(0).unwrap(), &[false, false]);
}

#[test]
fn half_floats_view_as_u16() {
    let mut b =
        Built::new(vec![t(DType::F16, &[1], &[0x3c00u16]), t(DType::BF16, &[1], &[0x3f80u16])], vec![]);
    let f = b.open().unwrap();
    assert_eq!(f.input::<u16>(0).unwrap()[0], 0x3c00);
    assert_eq!(f.input::<u16>(1).unwrap().dtype(), DType::BF16);
}

#[test]
fn aliased_outputs_are_not_lent() {
    let mut x = t(DType::F32, &[2], &[1f32, 2.]);
    let mut o = t(DType::F32, &[2], &[0f32, 0.]);
    o.alias = Some(0);
    x.alias = None;
    let mut b = Built::new(vec![x], vec![o]);
    let f = b.open().unwrap();
    assert_eq!(
        f.output::<f32>(0).unwrap_err().message(),
        "output 0 passes input 0 through; it has no buffer to write"
    );
}

#[test]
fn malformed_frames_are_refused() {
    let mut b = scale_frame();
    b.set32(AT, 0x1234);
    assert!(malformed(&mut b).contains("magic 0x00001234"));

    let mut b = scale_frame();
    b.set32(AT + 20, 1 << 20);
    assert!(malformed(&mut b).contains("does not fit"));

    let mut b = scale_frame();
    b.set32(AT + 12, 1000);
    assert!(malformed(&mut b).contains("1002 descriptors"));

    let mut b = scale_frame();
    b.set_desc(0, 0, 13);
    assert_eq!(malformed(&mut b), "callbox: malformed call frame: input 0: unknown dtype code 13");

    let mut b = scale_frame();
    b.set_desc(1, 4, 33);
    assert!(malformed(&mut b).contains("input 1: rank 33"));

    let mut b = scale_frame();
    b.set_desc(0, 20, 20);
    assert!(malformed(&mut b).contains("input 0: byte_len 20 does not match f32[2,3]"));

    let mut b = scale_frame();
    let data = b.get_desc(0, 16);
    b.set_desc(0, 16, data + 8);
    assert!(malformed(&mut b).contains("not 16-aligned"));

    let mut b = scale_frame();
    let data = b.get_desc(0, 16);
    b.set_desc(2, 16, data + 16);
    assert_eq!(malformed(&mut b), "callbox: malformed call frame: output 0 overlaps input 0");

    let mut b = scale_frame();
    b.set_desc(2, 12, 0);
    assert!(malformed(&mut b).contains("output 0: flags 0x0"));

    let mut b = scale_frame();
    b.set_desc(0, 12, 2);
    assert!(malformed(&mut b).contains("input 0: flags 0x2"));

    let mut b = scale_frame();
    let dims = b.get_desc(0, 8);
    b.set32(dims as usize, u32::MAX); // dims[0] = 2^32 - 1 with dims[1] = 3
    assert!(malformed(&mut b).contains("does not match"));

    let mut b = scale_frame();
    let dims = b.get_desc(0, 8);
    b.set32(dims as usize + 4, 0x8000_0000); // dims[0] negative
    assert!(malformed(&mut b).contains("does not match"));

    let b = scale_frame();
    let mem = Memory { base: b.buf.as_ptr() as usize, len: 80 };
    assert!(unsafe { Frame::open(mem, AT as u32) }.is_err());
    assert!(unsafe { Frame::open(mem, 0) }.is_err());
    assert!(unsafe { Frame::open(mem, 68) }.is_err());
}
