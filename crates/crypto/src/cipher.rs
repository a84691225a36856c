//! Secrets that must be used in clear later (webhook signing secrets), sealed for storage with
//! AES-256-GCM, and HMAC-SHA256 for signatures — both from `ring`.

use agentry_domain::webhooks::{Hmac, SealedSecret, SecretCipher};
use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The format tag of sealed values, so a later format can sit beside this one.
const VERSION: &str = "v1";

/// [`SecretCipher`] with AES-256-GCM: a random 96-bit nonce per value (values are few, so
/// random nonces stay far from their collision bound), the owning row's id as associated data
/// (a value copied to another row does not open), stored as `v1.<base64url(nonce ‖ ciphertext ‖
/// tag)>`.
pub struct AesGcmCipher {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for AesGcmCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AesGcmCipher(..)")
    }
}

impl AesGcmCipher {
    /// Bytes of key it needs.
    pub const KEY_BYTES: usize = 32;

    /// A cipher under `key` (32 bytes).
    ///
    /// # Errors
    /// When the key is not 32 bytes long.
    pub fn new(key: &[u8]) -> anyhow::Result<Self> {
        anyhow::ensure!(key.len() == Self::KEY_BYTES, "the secret key must be {} bytes", Self::KEY_BYTES);
        let key = UnboundKey::new(&AES_256_GCM, key).map_err(|_| anyhow::anyhow!("invalid AES-256 key"))?;
        Ok(Self { key: LessSafeKey::new(key), rng: SystemRandom::new() })
    }
}

impl SecretCipher for AesGcmCipher {
    fn seal(&self, context: &str, plaintext: &str) -> anyhow::Result<SealedSecret> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| anyhow::anyhow!("no randomness for a nonce"))?;
        let mut data = plaintext.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data,
            )
            .map_err(|_| anyhow::anyhow!("sealing a secret failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(SealedSecret(format!("{VERSION}.{}", URL_SAFE_NO_PAD.encode(out))))
    }

    fn open(&self, context: &str, sealed: &SealedSecret) -> anyhow::Result<String> {
        let encoded = sealed.0.strip_prefix("v1.").context("a sealed secret of an unknown format")?;
        let mut data = URL_SAFE_NO_PAD.decode(encoded).context("a sealed secret that is not base64")?;
        anyhow::ensure!(data.len() > NONCE_LEN, "a sealed secret that is too short");
        let (nonce, rest) = data.split_at_mut(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| anyhow::anyhow!("a bad nonce"))?;
        let plain = self.key.open_in_place(nonce, Aad::from(context.as_bytes()), rest).map_err(|_| {
            anyhow::anyhow!("a sealed secret did not open: another key, another row, or altered")
        })?;
        String::from_utf8(plain.to_vec()).context("a sealed secret that is not UTF-8")
    }
}

/// [`Hmac`] with `ring`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RingHmac;

impl Hmac for RingHmac {
    fn sha256(&self, key: &[u8], message: &[u8]) -> [u8; 32] {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
        let tag = ring::hmac::sign(&key, message);
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn sealed_secrets_open_only_with_their_key_and_row() {
        let cipher = AesGcmCipher::new(&[7; 32]).unwrap();
        let sealed = cipher.seal("whk_1", "whsec_abc").unwrap();
        assert!(!sealed.0.contains("whsec_abc"));
        assert_eq!(cipher.open("whk_1", &sealed).unwrap(), "whsec_abc");
        // Two seals of one secret differ (fresh nonces).
        assert_ne!(cipher.seal("whk_1", "whsec_abc").unwrap(), sealed);
        assert!(cipher.open("whk_2", &sealed).is_err());
        assert!(AesGcmCipher::new(&[8; 32]).unwrap().open("whk_1", &sealed).is_err());
        let mut altered = sealed.0.clone().into_bytes();
        let last = altered.len() - 2;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert!(cipher.open("whk_1", &SealedSecret(String::from_utf8(altered).unwrap())).is_err());
        assert!(AesGcmCipher::new(&[7; 16]).is_err());
    }

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        let mac = RingHmac.sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }
}
