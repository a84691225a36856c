//! argon2id password hashing.
//!
//! Hashing costs ~19 MiB and tens of milliseconds of CPU on purpose. It runs on tokio's blocking
//! pool, never on the async executor, and a semaphore bounds how many run at once so a burst of
//! logins queues instead of exhausting memory.

use std::sync::Arc;

use agentry_domain::identity::{Password, PasswordHash, PasswordHasher};
use anyhow::Context as _;
use argon2::password_hash::PasswordHasher as _;
use argon2::{Algorithm, Argon2, Params, PasswordVerifier, Version};
use async_trait::async_trait;
use tokio::sync::Semaphore;

use crate::secrets::RingSecrets;

/// argon2id cost parameters.
#[derive(Debug, Clone, Copy)]
pub struct HashingParams {
    /// Memory in KiB.
    pub memory_kib: u32,
    /// Passes.
    pub iterations: u32,
    /// Lanes.
    pub parallelism: u32,
}

impl HashingParams {
    /// OWASP's recommendation for argon2id: m=19456 KiB (19 MiB), t=2, p=1.
    pub const OWASP: Self = Self { memory_kib: 19_456, iterations: 2, parallelism: 1 };
}

/// [`PasswordHasher`] with argon2id.
#[derive(Debug, Clone)]
pub struct Argon2Hasher {
    params: Params,
    permits: Arc<Semaphore>,
    secrets: Arc<RingSecrets>,
    /// A hash of a random password, verified against when the user is unknown so that an
    /// unknown e-mail costs the same time as a wrong password.
    dummy: Arc<String>,
}

impl Argon2Hasher {
    /// A hasher with `params`, running at most `max_concurrent` hashes at once.
    ///
    /// # Errors
    /// When the parameters are outside argon2's bounds.
    pub fn new(params: HashingParams, max_concurrent: usize) -> anyhow::Result<Self> {
        let params = Params::new(params.memory_kib, params.iterations, params.parallelism, None)
            .map_err(|e| anyhow::anyhow!("invalid argon2 parameters: {e}"))?;
        let secrets = Arc::new(RingSecrets::new());
        let mut random = [0u8; 24];
        secrets.fill(&mut random);
        let dummy = hash_blocking(&params, &secrets, &random)?;
        Ok(Self {
            params,
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            secrets,
            dummy: Arc::new(dummy),
        })
    }

    async fn run_blocking<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let _permit = self.permits.acquire().await.context("password hasher is shut down")?;
        tokio::task::spawn_blocking(job).await.context("password hashing task failed")?
    }
}

fn argon2(params: &Params) -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
}

fn hash_blocking(params: &Params, secrets: &RingSecrets, password: &[u8]) -> anyhow::Result<String> {
    let mut salt = [0u8; 16];
    secrets.fill(&mut salt);
    let hash = argon2(params)
        .hash_password_with_salt(password, &salt)
        .map_err(|e| anyhow::anyhow!("argon2 hashing failed: {e}"))?;
    Ok(hash.to_string())
}

#[async_trait]
impl PasswordHasher for Argon2Hasher {
    async fn hash(&self, password: &Password) -> anyhow::Result<PasswordHash> {
        let params = self.params.clone();
        let secrets = self.secrets.clone();
        let password = password.expose().as_bytes().to_vec();
        let phc = self.run_blocking(move || hash_blocking(&params, &secrets, &password)).await?;
        Ok(PasswordHash::from_phc(phc))
    }

    async fn verify<'a>(&self, password: &Password, hash: Option<&'a PasswordHash>) -> anyhow::Result<bool> {
        let known = hash.is_some();
        let phc = match hash {
            Some(h) => h.as_str().to_owned(),
            None => self.dummy.as_ref().clone(),
        };
        let params = self.params.clone();
        let password = password.expose().as_bytes().to_vec();
        let matches = self
            .run_blocking(move || {
                // The stored hash carries its own parameters; `params` only seeds the instance.
                match argon2(&params).verify_password(&password, phc.as_str()) {
                    Ok(()) => Ok(true),
                    Err(argon2::password_hash::Error::PasswordInvalid) => Ok(false),
                    Err(e) => Err(anyhow::anyhow!("stored password hash is unreadable: {e}")),
                }
            })
            .await?;
        Ok(known && matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheap() -> Argon2Hasher {
        // Tiny parameters: the tests check behaviour, not cost.
        Argon2Hasher::new(HashingParams { memory_kib: 64, iterations: 1, parallelism: 1 }, 2).unwrap()
    }

    fn pw(s: &str) -> Password {
        Password::new(s.to_owned()).unwrap()
    }

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let h = cheap();
        let hash = h.hash(&pw("correct horse")).await.unwrap();
        assert!(hash.as_str().starts_with("$argon2id$v=19$m=64,t=1,p=1$"));
        assert!(h.verify(&pw("correct horse"), Some(&hash)).await.unwrap());
        assert!(!h.verify(&pw("correct horsf"), Some(&hash)).await.unwrap());
    }

    #[tokio::test]
    async fn hashes_are_salted() {
        let h = cheap();
        let a = h.hash(&pw("same password")).await.unwrap();
        let b = h.hash(&pw("same password")).await.unwrap();
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn unknown_users_never_verify() {
        assert!(!cheap().verify(&pw("anything at all"), None).await.unwrap());
    }

    #[tokio::test]
    async fn owasp_parameters_are_used_in_production() {
        let h = Argon2Hasher::new(HashingParams::OWASP, 1).unwrap();
        let hash = h.hash(&pw("correct horse")).await.unwrap();
        assert!(hash.as_str().starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{}", hash.as_str());
    }

    #[tokio::test]
    async fn a_corrupt_stored_hash_is_an_error_not_a_mismatch() {
        let h = cheap();
        assert!(h.verify(&pw("whatever1"), Some(&PasswordHash::from_phc("garbage"))).await.is_err());
    }
}
