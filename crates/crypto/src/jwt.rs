//! JWT access tokens (HS256).
//!
//! The algorithm is pinned on both sides: a token whose header names another algorithm —
//! `none` included — is refused before its signature is looked at. Issuer, audience, expiry and
//! the `typ` claim are all required and checked, so a token minted for something else (another
//! service sharing the key, a future token type) is not accepted as an access token. Every token
//! names its session (`sid`, the refresh-token family of its sign-in), so ending the session
//! ends the token. Times are checked against the caller's clock, not the system's: expiry
//! without leeway, `iat` and `nbf` refused when more than [`JwtAccessTokens::FUTURE_LEEWAY`]
//! ahead.
//!
//! A token is presented on every request of its session, so the time-independent part of a
//! check — signature, algorithm, issuer, audience, type — is remembered per exact token text
//! (see [`Verified`]); the times are checked on every use.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use agentry_domain::identity::{AccessClaims, AccessTokenError, AccessTokens, IssuedAccessToken};
use agentry_domain::ids::{TokenFamilyId, UserId};
use anyhow::Context as _;
use chrono::{DateTime, Duration, Utc};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use secrecy::{ExposeSecret, SecretSlice};
use serde::{Deserialize, Serialize};

const ACCESS_TYPE: &str = "access";

/// How access tokens are signed and what they claim.
#[derive(Debug, Clone)]
pub struct JwtSettings {
    /// The HMAC key; at least 32 bytes.
    pub secret: SecretSlice<u8>,
    /// `iss`, e.g. the public URL of the service.
    pub issuer: String,
    /// `aud`.
    pub audience: String,
    /// Lifetime of an access token.
    pub ttl: Duration,
}

/// [`AccessTokens`] as HS256 JWTs.
pub struct JwtAccessTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    issuer: String,
    audience: String,
    ttl: Duration,
    verified: Verified,
}

impl std::fmt::Debug for JwtAccessTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAccessTokens")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Claims {
    sub: String,
    sid: String,
    iss: String,
    aud: String,
    iat: i64,
    exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nbf: Option<i64>,
    jti: String,
    typ: String,
}

impl JwtAccessTokens {
    /// Minimum key length in bytes: HS256 keys shorter than its output add no security and are
    /// guessable.
    pub const MIN_SECRET_BYTES: usize = 32;

    /// How far ahead of the verifier's clock `iat` and `nbf` may be (clock skew between
    /// instances).
    pub const FUTURE_LEEWAY: Duration = Duration::seconds(30);

    /// A codec for `settings`.
    ///
    /// # Errors
    /// When the key is shorter than [`Self::MIN_SECRET_BYTES`].
    pub fn new(settings: JwtSettings) -> anyhow::Result<Self> {
        let key = settings.secret.expose_secret();
        anyhow::ensure!(
            key.len() >= Self::MIN_SECRET_BYTES,
            "the JWT secret must be at least {} bytes, got {}",
            Self::MIN_SECRET_BYTES,
            key.len()
        );
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Times are checked in `verify` against the caller's clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = 0;
        Ok(Self {
            encoding: EncodingKey::from_secret(key),
            decoding: DecodingKey::from_secret(key),
            validation,
            issuer: settings.issuer,
            audience: settings.audience,
            ttl: settings.ttl,
            verified: Verified::default(),
        })
    }

    /// The claims of `token` when its signature and its time-independent claims check out.
    fn checked_claims(&self, token: &str) -> Result<Claims, AccessTokenError> {
        if let Some(claims) = self.verified.get(token) {
            return Ok(claims);
        }
        let data = decode::<Claims>(token, &self.decoding, &self.validation).map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => AccessTokenError::Expired,
            other => AccessTokenError::Invalid(format!("{other:?}")),
        })?;
        let claims = data.claims;
        if claims.typ != ACCESS_TYPE {
            return Err(AccessTokenError::Invalid(format!("token type {:?}", claims.typ)));
        }
        self.verified.insert(token, &claims);
        Ok(claims)
    }
}

/// Tokens already verified, by their exact text, with their claims: checking a token again
/// (base64, JSON, HMAC) was a twentieth of an authenticated request's CPU time. Only tokens
/// whose signature verified get in, so only tokens this service issued; the key never changes
/// while the process runs. Bounded: two generations of at most [`Verified::GENERATION`]
/// entries each, the older dropped whole when the newer fills (a token in use is moved to the
/// newer one, so it survives).
#[derive(Debug, Default)]
struct Verified {
    generations: Mutex<[HashMap<Box<str>, Claims>; 2]>,
}

impl Verified {
    const GENERATION: usize = 4096;

    fn get(&self, token: &str) -> Option<Claims> {
        let mut generations = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
        let [newer, older] = &mut *generations;
        if let Some(claims) = newer.get(token) {
            return Some(claims.clone());
        }
        let (token, claims) = older.remove_entry(token)?;
        let found = claims.clone();
        Self::put(&mut generations, token, claims);
        Some(found)
    }

    fn insert(&self, token: &str, claims: &Claims) {
        let mut generations = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
        Self::put(&mut generations, token.into(), claims.clone());
    }

    fn put(generations: &mut [HashMap<Box<str>, Claims>; 2], token: Box<str>, claims: Claims) {
        if generations[0].len() >= Self::GENERATION {
            generations.swap(0, 1);
            generations[0].clear();
        }
        generations[0].insert(token, claims);
    }
}

impl AccessTokens for JwtAccessTokens {
    fn issue(
        &self,
        user: &UserId,
        session: &TokenFamilyId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<IssuedAccessToken> {
        let claims = Claims {
            sub: user.to_string(),
            sid: session.to_string(),
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
            iat: now.timestamp(),
            exp: (now + self.ttl).timestamp(),
            nbf: None,
            jti: uuid::Uuid::now_v7().simple().to_string(),
            typ: ACCESS_TYPE.to_owned(),
        };
        let token = encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .context("encoding an access token")?;
        Ok(IssuedAccessToken { token, expires_in: self.ttl.num_seconds() })
    }

    fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<AccessClaims, AccessTokenError> {
        let claims = self.checked_claims(token)?;
        let now_secs = now.timestamp();
        if claims.exp <= now_secs {
            return Err(AccessTokenError::Expired);
        }
        let latest = (now + Self::FUTURE_LEEWAY).timestamp();
        if claims.iat > latest || claims.nbf.is_some_and(|nbf| nbf > latest) {
            return Err(AccessTokenError::Invalid("issued or valid from the future".into()));
        }
        let expires_at = DateTime::from_timestamp(claims.exp, 0)
            .ok_or_else(|| AccessTokenError::Invalid("exp out of range".into()))?;
        Ok(AccessClaims {
            user_id: UserId::from_string(claims.sub),
            session_id: TokenFamilyId::from_string(claims.sid),
            token_id: claims.jti,
            expires_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    fn settings(key: &[u8]) -> JwtSettings {
        JwtSettings {
            secret: SecretSlice::from(key.to_vec()),
            issuer: "agentry".into(),
            audience: "agentry-api".into(),
            ttl: Duration::hours(1),
        }
    }

    fn codec() -> JwtAccessTokens {
        JwtAccessTokens::new(settings(&[7u8; 32])).unwrap()
    }

    impl JwtAccessTokens {
        fn verify_now(&self, token: &str) -> Result<AccessClaims, AccessTokenError> {
            self.verify(token, Utc::now())
        }
    }

    fn user() -> UserId {
        UserId::from_string("usr_1")
    }

    fn session() -> TokenFamilyId {
        TokenFamilyId::from_string("rtf_1")
    }

    #[test]
    fn issued_tokens_verify_with_their_claims() {
        let c = codec();
        let issued = c.issue(&user(), &session(), Utc::now()).unwrap();
        assert_eq!(issued.expires_in, 3600);
        let claims = c.verify(&issued.token, Utc::now()).unwrap();
        assert_eq!(claims.user_id, user());
        assert!(claims.expires_at > Utc::now());
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(JwtAccessTokens::new(settings(&[1u8; 31])).is_err());
    }

    #[test]
    fn expired_tokens_are_refused_as_expired() {
        let c = codec();
        let issued = c.issue(&user(), &session(), Utc::now() - Duration::hours(2)).unwrap();
        assert_eq!(c.verify(&issued.token, Utc::now()), Err(AccessTokenError::Expired));
    }

    #[test]
    fn a_token_signed_with_another_key_is_refused() {
        let other = JwtAccessTokens::new(settings(&[8u8; 32])).unwrap();
        let issued = other.issue(&user(), &session(), Utc::now()).unwrap();
        assert!(matches!(codec().verify(&issued.token, Utc::now()), Err(AccessTokenError::Invalid(_))));
    }

    fn forge(header: &str, claims: serde_json::Value, signature: &str) -> String {
        format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims.to_string()),
            signature
        )
    }

    fn valid_claims(typ: &str) -> serde_json::Value {
        let now = Utc::now().timestamp();
        serde_json::json!({"sub": "usr_1", "sid": "rtf_1", "iss": "agentry", "aud": "agentry-api",
            "iat": now, "exp": now + 600, "jti": "x", "typ": typ})
    }

    #[test]
    fn alg_none_is_refused() {
        let token = forge(r#"{"alg":"none","typ":"JWT"}"#, valid_claims("access"), "");
        assert!(matches!(codec().verify(&token, Utc::now()), Err(AccessTokenError::Invalid(_))));
    }

    #[test]
    fn other_token_types_issuers_and_audiences_are_refused() {
        let key = EncodingKey::from_secret(&[7u8; 32]);
        let sign = |claims: serde_json::Value| encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap();
        let c = codec();
        assert!(c.verify_now(&sign(valid_claims("access"))).is_ok(), "control case");
        assert!(c.verify_now(&sign(valid_claims("refresh"))).is_err());
        let mut wrong_iss = valid_claims("access");
        wrong_iss["iss"] = "someone-else".into();
        assert!(c.verify_now(&sign(wrong_iss)).is_err());
        let mut wrong_aud = valid_claims("access");
        wrong_aud["aud"] = "other-api".into();
        assert!(c.verify_now(&sign(wrong_aud)).is_err());
        let mut no_exp = valid_claims("access");
        no_exp.as_object_mut().unwrap().remove("exp");
        assert!(c.verify_now(&sign(no_exp)).is_err());
    }

    #[test]
    fn tokens_from_the_future_or_without_a_session_are_refused() {
        let key = EncodingKey::from_secret(&[7u8; 32]);
        let sign = |claims: serde_json::Value| encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap();
        let c = codec();
        let now = Utc::now().timestamp();
        let mut claims = valid_claims("access");
        claims["iat"] = (now + 20).into();
        assert!(c.verify_now(&sign(claims.clone())).is_ok(), "within the leeway");
        claims["iat"] = (now + 120).into();
        assert!(c.verify_now(&sign(claims)).is_err(), "iat ahead");
        let mut claims = valid_claims("access");
        claims["nbf"] = (now + 120).into();
        assert!(c.verify_now(&sign(claims)).is_err(), "nbf ahead");
        let mut claims = valid_claims("access");
        claims.as_object_mut().unwrap().remove("sid");
        assert!(c.verify_now(&sign(claims)).is_err(), "no session");
    }

    #[test]
    fn a_remembered_token_is_still_checked_for_time_and_exact_text() {
        let c = codec();
        let t0 = Utc::now();
        let issued = c.issue(&user(), &session(), t0).unwrap();
        assert!(c.verify(&issued.token, t0).is_ok(), "verified once, now remembered");
        // The memo holds what does not depend on time; the times are checked on every use.
        let early = t0 - Duration::minutes(5);
        assert!(matches!(c.verify(&issued.token, early), Err(AccessTokenError::Invalid(_))), "iat ahead");
        assert_eq!(c.verify(&issued.token, t0 + Duration::hours(2)), Err(AccessTokenError::Expired));
        // Any other text is a different token, checked in full.
        let mut tampered = issued.token.clone();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        assert!(matches!(c.verify(&tampered, t0), Err(AccessTokenError::Invalid(_))));
        assert!(c.verify(&issued.token, t0).is_ok());
    }

    #[test]
    fn the_memo_of_verified_tokens_is_bounded_and_keeps_what_is_in_use() {
        let c = codec();
        let t0 = Utc::now();
        let kept = c.issue(&user(), &session(), t0).unwrap().token;
        c.verify(&kept, t0).unwrap();
        for _ in 0..(2 * Verified::GENERATION + 10) {
            let token = c.issue(&user(), &session(), t0).unwrap().token;
            c.verify(&token, t0).unwrap();
            c.verify(&kept, t0).unwrap();
        }
        let generations = c.verified.generations.lock().unwrap();
        assert!(generations.iter().all(|g| g.len() <= Verified::GENERATION));
        assert!(generations.iter().any(|g| g.contains_key(kept.as_str())), "a token in use stays");
    }

    #[test]
    fn expiry_follows_the_callers_clock() {
        let c = codec();
        let t0 = Utc::now();
        let issued = c.issue(&user(), &session(), t0).unwrap();
        let claims = c.verify(&issued.token, t0 + Duration::minutes(59)).unwrap();
        assert_eq!(claims.session_id, session());
        assert_eq!(c.verify(&issued.token, t0 + Duration::minutes(61)), Err(AccessTokenError::Expired));
    }

    #[test]
    fn garbage_is_refused() {
        for t in ["", "abc", "a.b.c", "Zm9v.YmFy.YmF6"] {
            assert!(matches!(codec().verify(t, Utc::now()), Err(AccessTokenError::Invalid(_))), "{t}");
        }
    }
}
