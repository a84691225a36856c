//! The HTTP adapter's settings: which envelope, which validation status, how large a body.

/// The shape of success and error bodies (see `PRODUCT.md` §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Envelope {
    /// Bare resources; flat errors `{error, message, details: [{field, message}]}`.
    Bare,
    /// `{success: true, data}`; errors `{success: false, error: {code, message, details}}`.
    Wrapped,
}

/// Settings of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Success and error body shape.
    pub envelope: Envelope,
    /// Status of validation errors (422 or 400).
    pub validation_status: u16,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
}

impl HttpSettings {
    /// The defaults for `envelope`: 422 with bare bodies, 400 with wrapped ones.
    pub fn new(envelope: Envelope) -> Self {
        let validation_status = match envelope {
            Envelope::Bare => 422,
            Envelope::Wrapped => 400,
        };
        Self { envelope, validation_status, max_body_bytes: 1024 * 1024 }
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self::new(Envelope::Bare)
    }
}
