//! The service's keys — the JWT signing key and the key that seals stored secrets — from
//! configuration, or generated once and kept in the data directory so they survive a restart.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Write as _};
use std::path::Path;

use agentry_crypto::RingSecrets;
use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret, SecretSlice, SecretString};

use crate::Config;

const KEY_FILE: &str = "jwt-secret";
const SECRET_KEY_FILE: &str = "secret-key";

/// The key to sign access tokens with.
///
/// # Errors
/// When the configured secret is shorter than 32 bytes, or the key file cannot be read or
/// written.
pub fn jwt_key(configured: Option<&SecretString>, data_dir: &Path) -> anyhow::Result<SecretSlice<u8>> {
    if let Some(secret) = configured {
        let bytes = secret.expose_secret().as_bytes().to_vec();
        anyhow::ensure!(
            bytes.len() >= agentry_crypto::JwtAccessTokens::MIN_SECRET_BYTES,
            "AGENTRY_JWT_SECRET must be at least {} bytes",
            agentry_crypto::JwtAccessTokens::MIN_SECRET_BYTES
        );
        return Ok(SecretSlice::from(bytes));
    }
    generated_key(data_dir, KEY_FILE, 64, 32)
}

/// The key that seals secrets needed in clear later (webhook signing secrets): 32 bytes.
///
/// # Errors
/// When the configured key is not 32 bytes of base64 or hex, or the key file cannot be read or
/// written.
pub fn secret_key(configured: Option<&SecretString>, data_dir: &Path) -> anyhow::Result<SecretSlice<u8>> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    if let Some(configured) = configured {
        let text = configured.expose_secret().trim();
        let decoded = decode_hex(text)
            .or_else(|| STANDARD.decode(text).ok())
            .or_else(|| URL_SAFE.decode(text).ok())
            .or_else(|| URL_SAFE_NO_PAD.decode(text).ok());
        return match decoded {
            Some(key) if key.len() == 32 => Ok(SecretSlice::from(key)),
            _ => anyhow::bail!(
                "AGENTRY_SECRET_KEY must be 32 bytes as base64 or 64 hex digits (e.g. `openssl rand -base64 32`)"
            ),
        };
    }
    let key = generated_key(data_dir, SECRET_KEY_FILE, 32, 32)?;
    anyhow::ensure!(key.expose_secret().len() == 32, "{SECRET_KEY_FILE} must hold exactly 32 bytes");
    Ok(key)
}

/// Fingerprints of the settings every instance on one database must share, by setting name:
/// the JWT key (tokens one instance signs, the others check), the secret key (secrets one
/// seals, the others open) and the public URL (the tokens' issuer). A fingerprint is the first
/// 8 bytes of HMAC-SHA256 keyed with the value over a fixed label, in hex: equal values give
/// equal fingerprints, and a fingerprint tells nothing of its key.
///
/// # Errors
/// As [`jwt_key`] and [`secret_key`].
pub fn setting_fingerprints(config: &Config) -> anyhow::Result<BTreeMap<String, String>> {
    let jwt = jwt_key(config.jwt_secret.as_ref(), &config.data_dir)?;
    let sealing = secret_key(config.secret_key.as_ref(), &config.data_dir)?;
    Ok(BTreeMap::from([
        ("AGENTRY_JWT_SECRET".to_owned(), fingerprint(jwt.expose_secret())),
        ("AGENTRY_SECRET_KEY".to_owned(), fingerprint(sealing.expose_secret())),
        ("AGENTRY_PUBLIC_URL".to_owned(), fingerprint(config.jwt_issuer().as_bytes())),
    ]))
}

fn fingerprint(value: &[u8]) -> String {
    use agentry_domain::webhooks::Hmac as _;
    let mac = agentry_crypto::RingHmac.sha256(value, b"agentry setting fingerprint");
    mac[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

/// A key of `len` random bytes kept in `data_dir/file` (0600), made by the first of several
/// starting instances (`create_new`), read by the others and by every later start.
fn generated_key(data_dir: &Path, file: &str, len: usize, min_len: usize) -> anyhow::Result<SecretSlice<u8>> {
    create_private_dir(data_dir)?;
    let path = data_dir.join(file);
    let mut key = vec![0u8; len];
    RingSecrets::new().fill(&mut key);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(URL_SAFE_NO_PAD.encode(&key).as_bytes())
                .and_then(|()| file.sync_all())
                .with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a key");
            Ok(SecretSlice::from(key))
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read_key(&path, min_len),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// Creates `dir` (and its parents) readable by this user only (0700) when it does not exist;
/// an existing directory is left as it is.
///
/// # Errors
/// When it cannot be created.
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.as_os_str().is_empty() || dir.exists() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).with_context(|| format!("creating {}", dir.display()))
}

fn read_key(path: &Path, min_len: usize) -> anyhow::Result<SecretSlice<u8>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let key = URL_SAFE_NO_PAD
        .decode(text.trim())
        .with_context(|| format!("{} does not hold a base64url key", path.display()))?;
    anyhow::ensure!(key.len() >= min_len, "{} holds a key shorter than {min_len} bytes", path.display());
    Ok(SecretSlice::from(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_is_kept_and_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let dir = dir.as_path();
        let first = jwt_key(None, dir).unwrap();
        let second = jwt_key(None, dir).unwrap();
        assert_eq!(first.expose_secret(), second.expose_secret());
        assert_eq!(first.expose_secret().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "the data directory is created private");
        }
    }

    #[test]
    fn fingerprints_follow_the_values_and_never_show_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config { data_dir: dir.path().to_path_buf(), ..Config::default() };
        config.jwt_secret = Some(SecretString::from("j".repeat(32)));
        let first = setting_fingerprints(&config).unwrap();
        assert_eq!(setting_fingerprints(&config).unwrap(), first, "the generated secret key is kept");
        assert!(first.values().all(|f| f.len() == 16 && !f.contains("jjjj")));
        config.jwt_secret = Some(SecretString::from("k".repeat(32)));
        config.public_url = Some("https://agentry.example.com".into());
        let second = setting_fingerprints(&config).unwrap();
        let differing: Vec<&String> = first.keys().filter(|k| first[*k] != second[*k]).collect();
        assert_eq!(differing, ["AGENTRY_JWT_SECRET", "AGENTRY_PUBLIC_URL"]);
    }

    #[test]
    fn a_configured_key_must_be_long_enough() {
        let dir = tempfile::tempdir().unwrap();
        assert!(jwt_key(Some(&SecretString::from("short")), dir.path()).is_err());
        let ok = jwt_key(Some(&SecretString::from("x".repeat(32))), dir.path()).unwrap();
        assert_eq!(ok.expose_secret().len(), 32);
        assert!(!dir.path().join(KEY_FILE).exists(), "nothing written when configured");
    }

    #[test]
    fn the_secret_key_is_32_bytes_configured_or_generated() {
        let dir = tempfile::tempdir().unwrap();
        let generated = secret_key(None, dir.path()).unwrap();
        assert_eq!(generated.expose_secret().len(), 32);
        assert_eq!(secret_key(None, dir.path()).unwrap().expose_secret(), generated.expose_secret());
        let hex = SecretString::from("ab".repeat(32));
        assert_eq!(secret_key(Some(&hex), dir.path()).unwrap().expose_secret(), &[0xab; 32]);
        let b64 = SecretString::from("AQ".repeat(21) + "AQ==");
        assert!(secret_key(Some(&b64), dir.path()).is_err(), "31 bytes are refused");
        let b64 = SecretString::from(base64::engine::general_purpose::STANDARD.encode([1u8; 32]));
        assert_eq!(secret_key(Some(&b64), dir.path()).unwrap().expose_secret(), &[1; 32]);
        assert!(secret_key(Some(&SecretString::from("not a key")), dir.path()).is_err());
    }
}
