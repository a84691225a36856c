//! The JWT signing key: from configuration, or generated once and kept in the data directory
//! so tokens survive a restart.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write as _};
use std::path::Path;

use agentry_auth::RingSecrets;
use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret, SecretSlice, SecretString};

const KEY_FILE: &str = "jwt-secret";

/// The key to sign access tokens with.
///
/// # Errors
/// When the configured secret is shorter than 32 bytes, or the key file cannot be read or
/// written.
pub fn jwt_key(configured: Option<&SecretString>, data_dir: &Path) -> anyhow::Result<SecretSlice<u8>> {
    if let Some(secret) = configured {
        let bytes = secret.expose_secret().as_bytes().to_vec();
        anyhow::ensure!(
            bytes.len() >= agentry_auth::JwtAccessTokens::MIN_SECRET_BYTES,
            "AGENTRY_JWT_SECRET must be at least {} bytes",
            agentry_auth::JwtAccessTokens::MIN_SECRET_BYTES
        );
        return Ok(SecretSlice::from(bytes));
    }
    create_private_dir(data_dir)?;
    let path = data_dir.join(KEY_FILE);
    let mut key = [0u8; 64];
    RingSecrets::new().fill(&mut key);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    // `create_new` makes the first of several starting instances the one that writes the key;
    // the others read it.
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(URL_SAFE_NO_PAD.encode(key).as_bytes())
                .and_then(|()| file.sync_all())
                .with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a JWT signing key");
            Ok(SecretSlice::from(key.to_vec()))
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read_key(&path),
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

fn read_key(path: &Path) -> anyhow::Result<SecretSlice<u8>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let key = URL_SAFE_NO_PAD
        .decode(text.trim())
        .with_context(|| format!("{} does not hold a base64url key", path.display()))?;
    anyhow::ensure!(key.len() >= 32, "{} holds a key shorter than 32 bytes", path.display());
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
    fn a_configured_key_must_be_long_enough() {
        let dir = tempfile::tempdir().unwrap();
        assert!(jwt_key(Some(&SecretString::from("short")), dir.path()).is_err());
        let ok = jwt_key(Some(&SecretString::from("x".repeat(32))), dir.path()).unwrap();
        assert_eq!(ok.expose_secret().len(), 32);
        assert!(!dir.path().join(KEY_FILE).exists(), "nothing written when configured");
    }
}
