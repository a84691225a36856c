//! Page-numbered lists: `page` from 1, `per_page` 1–100 (default 20). Out-of-range values are
//! validation errors, never silently clamped.

use crate::validation::{FieldError, FieldErrorKind, ValidationErrors, Validator};

/// A validated page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// 1-based page number.
    pub page: u32,
    /// Items per page.
    pub per_page: u32,
}

impl Default for Page {
    fn default() -> Self {
        Self { page: 1, per_page: Self::DEFAULT_PER_PAGE }
    }
}

impl Page {
    /// Items per page when the client does not say.
    pub const DEFAULT_PER_PAGE: u32 = 20;
    /// Most items per page.
    pub const MAX_PER_PAGE: u32 = 100;

    /// Validates raw query values.
    ///
    /// # Errors
    /// [`ValidationErrors`] naming `page` or `per_page` when out of range.
    pub fn new(page: Option<i64>, per_page: Option<i64>) -> Result<Self, ValidationErrors> {
        let mut v = Validator::new();
        let page = v.check("page", bounded(page.unwrap_or(1), 1, i64::from(u32::MAX), "page"));
        let per_page = v.check(
            "per_page",
            bounded(
                per_page.unwrap_or(i64::from(Self::DEFAULT_PER_PAGE)),
                1,
                i64::from(Self::MAX_PER_PAGE),
                "per_page",
            ),
        );
        let (page, per_page) = v.finish((page, per_page))?;
        Ok(Self { page, per_page })
    }

    /// Rows to skip.
    pub fn offset(&self) -> i64 {
        (i64::from(self.page) - 1) * i64::from(self.per_page)
    }

    /// Rows to take.
    pub fn limit(&self) -> i64 {
        i64::from(self.per_page)
    }
}

fn bounded(value: i64, min: i64, max: i64, name: &str) -> Result<u32, FieldError> {
    if (min..=max).contains(&value) {
        u32::try_from(value).map_err(|_| FieldError::new(name, FieldErrorKind::OutOfRange, "out of range"))
    } else {
        Err(FieldError::new(
            name,
            FieldErrorKind::OutOfRange,
            format!("{name} must be between {min} and {max}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_bounds_and_offsets() {
        assert_eq!(Page::new(None, None).unwrap(), Page { page: 1, per_page: 20 });
        let p = Page::new(Some(3), Some(100)).unwrap();
        assert_eq!((p.offset(), p.limit()), (200, 100));
        for (page, per_page, field) in
            [(Some(0), None, "page"), (None, Some(0), "per_page"), (None, Some(101), "per_page")]
        {
            assert_eq!(Page::new(page, per_page).unwrap_err().0[0].field, field);
        }
    }
}
