//! Typed tensor views: dense row-major data plus a shape.

use core::fmt;
use core::ops::{Deref, DerefMut};

use crate::dtype::DType;

/// An input: `&[T]` (it derefs to one) with a shape, row-major.
#[derive(Clone, Copy)]
pub struct Tensor<'f, T> {
    data: &'f [T],
    shape: &'f [i64],
    dtype: DType,
}

/// An output: `&mut [T]` (it derefs to one) with a shape, row-major.
pub struct TensorMut<'f, T> {
    data: &'f mut [T],
    shape: &'f [i64],
    dtype: DType,
}

/// Row-major shape arithmetic, shared by both views. The frame validated
/// the shape, so every dimension and stride fits in a `usize`.
macro_rules! shape_methods {
    () => {
        /// The dimensions, major to minor; empty for a rank-0 tensor.
        pub fn shape(&self) -> &'f [i64] {
            self.shape
        }
        /// The number of dimensions.
        pub fn rank(&self) -> usize {
            self.shape.len()
        }
        /// Dimension `axis`. Panics when `axis >= rank`, as a slice does.
        pub fn dim(&self, axis: usize) -> usize {
            self.shape[axis] as usize
        }
        /// The element type (`T` is `u16` for f16 and bf16 alike).
        pub fn dtype(&self) -> DType {
            self.dtype
        }
        /// Elements between consecutive indices along `axis`: the product of
        /// the dimensions after it.
        pub fn stride(&self, axis: usize) -> usize {
            self.shape[axis + 1..].iter().map(|&d| d as usize).product()
        }
        /// The position in the data of the element at `index` (one index
        /// per dimension), or `None` when it is out of bounds.
        pub fn offset(&self, index: &[usize]) -> Option<usize> {
            if index.len() != self.shape.len() {
                return None;
            }
            let mut at = 0;
            for (&i, &d) in index.iter().zip(self.shape) {
                if i >= d as usize {
                    return None;
                }
                at = at * d as usize + i;
            }
            Some(at)
        }
        /// Elements per row: the last dimension (1 for a rank-0 tensor).
        fn row_len(&self) -> usize {
            self.shape.last().map_or(1, |&d| d as usize)
        }
        /// Rows: the product of all but the last dimension.
        fn row_count(&self) -> usize {
            self.shape.iter().rev().skip(1).map(|&d| d as usize).product()
        }
    };
}

impl<'f, T> Tensor<'f, T> {
    pub(crate) fn new(data: &'f [T], shape: &'f [i64], dtype: DType) -> Self {
        Tensor { data, shape, dtype }
    }

    shape_methods!();

    /// The data, for the whole call.
    pub fn data(&self) -> &'f [T] {
        self.data
    }

    /// The element at a multi-index, `x.at([i, j])`. Panics when out of
    /// bounds, as slice indexing does.
    #[track_caller]
    pub fn at<const N: usize>(&self, index: [usize; N]) -> T
    where
        T: Copy,
    {
        self.data[checked(self.offset(&index), &index, self.shape)]
    }

    /// The slices along the last axis, in order: for `f32[b, n]`, `b` rows
    /// of `n` elements (also when `n` is 0). A rank-0 tensor is one row.
    pub fn rows(&self) -> Rows<'f, T> {
        Rows { rest: self.data, row_len: self.row_len(), left: self.row_count() }
    }
}

impl<'f, T> TensorMut<'f, T> {
    pub(crate) fn new(data: &'f mut [T], shape: &'f [i64], dtype: DType) -> Self {
        TensorMut { data, shape, dtype }
    }

    shape_methods!();

    /// The data, for the whole call.
    pub fn into_data(self) -> &'f mut [T] {
        self.data
    }

    /// The element at a multi-index, `*y.at_mut([i, j]) = v`. Panics when
    /// out of bounds, as slice indexing does.
    #[track_caller]
    pub fn at_mut<const N: usize>(&mut self, index: [usize; N]) -> &mut T {
        let at = checked(self.offset(&index), &index, self.shape);
        &mut self.data[at]
    }

    /// The mutable slices along the last axis; see [`Tensor::rows`].
    pub fn rows_mut(&mut self) -> RowsMut<'_, T> {
        RowsMut { row_len: self.row_len(), left: self.row_count(), rest: &mut *self.data }
    }
}

impl<T> Deref for Tensor<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T> Deref for TensorMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T> DerefMut for TensorMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

#[track_caller]
fn checked(at: Option<usize>, index: &[usize], shape: &[i64]) -> usize {
    match at {
        Some(at) => at,
        None => panic!("index {} is out of bounds for shape {}", List(index), List(shape)),
    }
}

impl<T> fmt::Debug for Tensor<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}{})", self.dtype, List(self.shape))
    }
}

impl<T> fmt::Debug for TensorMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorMut({}{})", self.dtype, List(self.shape))
    }
}

/// Formats a shape or an index as signatures do: `[2,3]`, `[]`. (`{:?}`
/// would pull the whole `Debug` machinery into every module.)
pub(crate) struct List<'a, T>(pub(crate) &'a [T]);

impl<T: fmt::Display> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            v.fmt(f)?;
        }
        f.write_str("]")
    }
}

/// The rows of a [`Tensor`].
pub struct Rows<'f, T> {
    rest: &'f [T],
    row_len: usize,
    left: usize,
}

impl<'f, T> Iterator for Rows<'f, T> {
    type Item = &'f [T];
    fn next(&mut self) -> Option<&'f [T]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (row, rest) = self.rest.split_at(self.row_len);
        self.rest = rest;
        Some(row)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for Rows<'_, T> {}

/// The rows of a [`TensorMut`].
pub struct RowsMut<'a, T> {
    rest: &'a mut [T],
    row_len: usize,
    left: usize,
}

impl<'a, T> Iterator for RowsMut<'a, T> {
    type Item = &'a mut [T];
    fn next(&mut self) -> Option<&'a mut [T]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (row, rest) = core::mem::take(&mut self.rest).split_at_mut(self.row_len);
        self.rest = rest;
        Some(row)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for RowsMut<'_, T> {}
