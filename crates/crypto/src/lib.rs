//! Agentry's cryptography adapters (ring, argon2, jsonwebtoken) for the domain's ports:
//! - [`Argon2Hasher`]: argon2id password hashing off the async executor, with bounded
//!   concurrency and a dummy verification for unknown users;
//! - [`JwtAccessTokens`]: HS256 JWT access tokens with the algorithm pinned and `iss`, `aud`,
//!   `typ`, `exp` validated;
//! - [`RingSecrets`]: 256-bit random tokens and their SHA-256 digests;
//! - [`RingDigests`]: SHA-256 of uploaded files, fed as they stream in;
//! - [`AesGcmCipher`], [`RingHmac`]: secrets sealed at rest, and webhook signatures.

mod cipher;
mod jwt;
mod password;
mod secrets;

pub use cipher::{AesGcmCipher, RingHmac};
pub use jwt::{JwtAccessTokens, JwtSettings};
pub use password::{Argon2Hasher, HashingParams};
pub use secrets::{RingDigests, RingSecrets};
