//! Resource limits for one render (an addition of Agentry's vendored copy; see `PATCHES.md`).
//!
//! Fuel bounds the instructions a render runs, but one instruction can allocate without bound:
//! `ns.s ~ ns.s` doubles a string per step, `'x' * n` allocates `n` bytes at once, a capture
//! block or a `join` over a repeated list grows in a loop. With limits in force on the current
//! thread ([`with_limits`]), every place that builds a string or a sequence checks, before it
//! allocates or while it grows, that
//!
//! - no single value exceeds [`Limits::max_value_bytes`] (a string's bytes, a sequence's
//!   items),
//! - the bytes of all values built so far stay within [`Limits::max_total_bytes`] (so a loop
//!   that keeps many large values alive is stopped too),
//! - the render's deadline has not passed (checked with the fuel, per instruction).
//!
//! Without limits in force nothing is checked, so the engine behaves as upstream's.
//!
//! Compiling a template folds its constant expressions (`'x' * 3` becomes `'xxx'`), which runs
//! the same operations before any render, on the thread that compiles. Folding is bounded
//! whether or not limits are in force ([`fold`]): a folded value is at most
//! [`MAX_FOLDED_BYTES`] (a larger one is left to the render, whose limits then apply), the
//! values one compilation keeps folded add up to at most [`MAX_FOLDED_TOTAL_BYTES`], and nothing
//! larger is ever allocated to find that out. A fold refused because its value would exceed the
//! limits in force marks them as hit ([`value_limit_hit`]), so a caller that compiles under
//! limits learns that the template can never render.

use std::cell::Cell;
use std::fmt;
use std::time::Instant;

use crate::error::{Error, ErrorKind};
use crate::value::{Value, ValueKind};

/// What one render may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest value a render may build: a string's length in bytes, a sequence's length in
    /// items.
    pub max_value_bytes: usize,
    /// The most bytes (strings' lengths, 16 per sequence item) all values a render builds may
    /// add up to.
    pub max_total_bytes: usize,
    /// When the render must have ended.
    pub deadline: Option<Instant>,
}

#[derive(Clone, Copy)]
struct Active {
    limits: Limits,
    used: usize,
    overflowed: bool,
}

thread_local! {
    static ACTIVE: Cell<Option<Active>> = const { Cell::new(None) };
    /// Whether the operations under way are a constant fold of the compiler ([`fold`]).
    static FOLDING: Cell<bool> = const { Cell::new(false) };
}

/// The largest value (a string's bytes, a sequence's items) the compiler builds by folding a
/// constant expression; a larger one is computed by the render, under its limits.
pub const MAX_FOLDED_BYTES: usize = 4 * 1024;

/// The most bytes the folded constants of one compilation may add up to; past it, constant
/// expressions are compiled as code and computed by the render.
pub const MAX_FOLDED_TOTAL_BYTES: usize = 256 * 1024;

/// Runs a constant fold of the compiler: every operation it runs refuses, before allocating,
/// a value over [`MAX_FOLDED_BYTES`] (and one over the limits in force, marking them as hit),
/// so `f` returns `None` instead of building it.
pub(crate) fn fold<R>(f: impl FnOnce() -> Option<R>) -> Option<R> {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            FOLDING.with(|folding| folding.set(self.0));
        }
    }
    let _restore = Restore(FOLDING.with(|folding| folding.replace(true)));
    f()
}

/// The bytes a folded constant keeps: a string's length, 16 per sequence or map item.
pub(crate) fn folded_size(value: &Value) -> usize {
    match value.kind() {
        ValueKind::String => value.as_str().map_or(0, str::len),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
            value.len().unwrap_or(0).saturating_mul(16)
        }
        _ => 0,
    }
}

/// Runs `f` with `limits` in force on this thread, restoring what was in force before.
pub fn with_limits<R>(limits: Limits, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Active>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(self.0));
        }
    }
    let _restore = Restore(ACTIVE.with(|a| a.replace(Some(Active { limits, used: 0, overflowed: false }))));
    f()
}

fn too_large(limit: usize) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("value exceeds the limit of {limit} bytes"))
}

/// Whether a value of the render under way was refused for its size (also where the refusal
/// could only surface as a failed write, in a capture block).
pub fn value_limit_hit() -> bool {
    ACTIVE.with(Cell::get).is_some_and(|a| a.overflowed)
}

/// Checks that a value of `len` bytes (or items) may be built: within the limits in force,
/// and within [`MAX_FOLDED_BYTES`] while folding.
pub(crate) fn check_len(len: usize) -> Result<(), Error> {
    ACTIVE.with(|cell| match cell.get() {
        Some(mut a) if len > a.limits.max_value_bytes => {
            a.overflowed = true;
            cell.set(Some(a));
            Err(too_large(a.limits.max_value_bytes))
        }
        _ if len > MAX_FOLDED_BYTES && FOLDING.with(Cell::get) => Err(Error::new(
            ErrorKind::InvalidOperation,
            "the constant is too large to fold; it is computed when rendered",
        )),
        _ => Ok(()),
    })
}

/// Counts `bytes` more built by this render and checks the total.
pub(crate) fn charge(bytes: usize) -> Result<(), Error> {
    ACTIVE.with(|cell| {
        let Some(mut a) = cell.get() else { return Ok(()) };
        a.used = a.used.saturating_add(bytes);
        cell.set(Some(a));
        if a.used > a.limits.max_total_bytes {
            Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("the values built exceed the limit of {} bytes in all", a.limits.max_total_bytes),
            ))
        } else {
            Ok(())
        }
    })
}

/// Checks a value just built by a filter, a function or a method: its size and the total.
pub(crate) fn account(value: &Value) -> Result<(), Error> {
    if ACTIVE.with(Cell::get).is_none() {
        return Ok(());
    }
    let (len, bytes) = match value.kind() {
        ValueKind::String => {
            let len = value.as_str().map_or(0, str::len);
            (len, len)
        }
        ValueKind::Seq | ValueKind::Map => {
            let len = value.len().unwrap_or(0);
            (len, len.saturating_mul(16))
        }
        _ => return Ok(()),
    };
    check_len(len)?;
    charge(bytes)
}

/// The detail of the error a render that ran past its deadline ends with.
pub const DEADLINE_PASSED: &str = "the render ran past its deadline";

/// Fails once the deadline has passed.
pub(crate) fn check_deadline() -> Result<(), Error> {
    match ACTIVE.with(Cell::get).and_then(|a| a.limits.deadline) {
        Some(deadline) if Instant::now() >= deadline => {
            Err(Error::new(ErrorKind::InvalidOperation, DEADLINE_PASSED))
        }
        _ => Ok(()),
    }
}

/// A string that refuses to grow past the value limit in force.
#[derive(Debug, Default)]
pub(crate) struct LimitedString {
    buf: String,
    overflowed: bool,
}

impl LimitedString {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The string, or the limit's error when a write was refused.
    pub(crate) fn finish(self) -> Result<String, Error> {
        if self.overflowed {
            let limit = ACTIVE.with(Cell::get).map_or(0, |a| a.limits.max_value_bytes);
            return Err(too_large(limit));
        }
        ok!(charge(self.buf.len()));
        Ok(self.buf)
    }
}

impl fmt::Write for LimitedString {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if check_len(self.buf.len().saturating_add(s.len())).is_err() {
            self.overflowed = true;
            return Err(fmt::Error);
        }
        self.buf.push_str(s);
        Ok(())
    }
}

/// `value` displayed, within the limits.
pub(crate) fn display(value: &dyn fmt::Display) -> Result<String, Error> {
    let mut out = LimitedString::new();
    let _ = fmt::write(&mut out, format_args!("{value}"));
    out.finish()
}

/// Bytes (a serialiser's output) that refuse to grow past the value limit in force.
#[derive(Debug, Default)]
pub(crate) struct LimitedBytes {
    buf: Vec<u8>,
    overflowed: bool,
}

impl LimitedBytes {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Whether a write was refused.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The bytes, or the limit's error when a write was refused.
    pub(crate) fn finish(self) -> Result<Vec<u8>, Error> {
        if self.overflowed {
            let limit = ACTIVE.with(Cell::get).map_or(0, |a| a.limits.max_value_bytes);
            return Err(too_large(limit));
        }
        ok!(charge(self.buf.len()));
        Ok(self.buf)
    }
}

impl std::io::Write for LimitedBytes {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if check_len(self.buf.len().saturating_add(data.len())).is_err() {
            self.overflowed = true;
            return Err(std::io::Error::other("value too large"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
