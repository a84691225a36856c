//! The refresh-token family as a state machine.
//!
//! Each login starts a *family*. Every refresh presents the family's newest token, which is then
//! *rotated* (spent) and replaced by a successor. A rotated token presented again means two
//! parties hold the family's tokens — one of them stole it — so the whole family is revoked and
//! both must sign in again (OAuth 2.0 Security BCP, "refresh token rotation").
//!
//! ```text
//!            present (valid)             present again
//!  Active ───────────────────▶ Rotated ───────────────▶ family Revoked
//!    │  logout / reset / reuse
//!    └───────────────────────▶ Revoked
//! ```

use chrono::{DateTime, Utc};

use crate::ids::{RefreshTokenId, TokenFamilyId, UserId};
use crate::secrets::SecretDigest;

crate::string_enum! {
    /// Where one token of a family stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum RefreshTokenStatus {
        /// The family's newest token; it may be presented once.
        Active => "active",
        /// Spent by a refresh; presenting it again is reuse.
        Rotated => "rotated",
        /// Revoked by logout, password reset or reuse detection.
        Revoked => "revoked",
    }
}

/// One refresh token as stored (by digest; the token itself is never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshToken {
    /// Its identifier.
    pub id: RefreshTokenId,
    /// The family it belongs to.
    pub family_id: TokenFamilyId,
    /// The user it signs in.
    pub user_id: UserId,
    /// The digest of the token.
    pub digest: SecretDigest,
    /// Where it stands.
    pub status: RefreshTokenStatus,
    /// When it was issued.
    pub issued_at: DateTime<Utc>,
    /// When it stops being accepted.
    pub expires_at: DateTime<Utc>,
}

/// What to do with a presented refresh token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Valid: rotate it and issue a successor.
    Rotate,
    /// Refuse it and leave the family alone (expired or already revoked).
    Refuse,
    /// Refuse it and revoke its whole family: it was used before.
    RevokeFamily,
}

/// Decides what a presentation of `token` at `now` does.
pub fn on_presented(token: &RefreshToken, now: DateTime<Utc>) -> Decision {
    match token.status {
        RefreshTokenStatus::Active if now < token.expires_at => Decision::Rotate,
        RefreshTokenStatus::Active => Decision::Refuse,
        // A spent token is reuse whenever it comes back, even past its expiry: the family's
        // newer tokens may still be alive in the wrong hands.
        RefreshTokenStatus::Rotated => Decision::RevokeFamily,
        RefreshTokenStatus::Revoked => Decision::Refuse,
    }
}

/// Decides what a [`Decision::Rotate`] whose storage step found the token no longer active does:
/// another request presented the same token at the same moment, which is reuse too.
pub fn on_lost_rotation_race() -> Decision {
    Decision::RevokeFamily
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;

    fn token(status: RefreshTokenStatus) -> RefreshToken {
        let issued_at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        RefreshToken {
            id: RefreshTokenId::from_string("rtk_1"),
            family_id: TokenFamilyId::from_string("rtf_1"),
            user_id: UserId::from_string("usr_1"),
            digest: SecretDigest::from_string("d"),
            status,
            issued_at,
            expires_at: issued_at + Duration::days(30),
        }
    }

    /// Every status against every moment that matters: before expiry, at it, after it.
    #[test]
    fn decision_table_is_exhaustive() {
        use Decision::*;
        use RefreshTokenStatus::*;
        let cases = [
            (Active, -1, Rotate),
            (Active, 0, Refuse),
            (Active, 1, Refuse),
            (Rotated, -1, RevokeFamily),
            (Rotated, 0, RevokeFamily),
            (Rotated, 1, RevokeFamily),
            (Revoked, -1, Refuse),
            (Revoked, 0, Refuse),
            (Revoked, 1, Refuse),
        ];
        for (status, offset_secs, expected) in cases {
            let t = token(status);
            let now = t.expires_at + Duration::seconds(offset_secs);
            assert_eq!(on_presented(&t, now), expected, "{status:?} at expiry{offset_secs:+}s");
        }
    }

    #[test]
    fn losing_a_rotation_race_is_reuse() {
        assert_eq!(on_lost_rotation_race(), Decision::RevokeFamily);
    }

    #[test]
    fn statuses_round_trip_through_their_names() {
        for s in [RefreshTokenStatus::Active, RefreshTokenStatus::Rotated, RefreshTokenStatus::Revoked] {
            assert_eq!(RefreshTokenStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(RefreshTokenStatus::parse("spent"), None);
    }
}
