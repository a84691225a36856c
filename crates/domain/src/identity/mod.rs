//! Identity: users, their credentials, access and refresh tokens, and the account service that
//! registers users, signs them in and keeps their sessions.

pub mod access;
mod model;
mod ports;
pub mod recovery;
pub mod refresh;
mod service;

pub use access::{
    AccessError, AccessService, AccessServiceDeps, ApiKey, ApiKeyError, ApiKeyGrant, ApiKeyName,
    ApiKeyRepository, CreatedApiKey, NewApiKey,
};
pub use model::{Company, Email, FullName, Password, PasswordHash, RegisterError, User, UserCredentials};
pub use ports::{
    AccessClaims, AccessTokenError, AccessTokens, AccountRepository, IssuedAccessToken, NewAccount,
    PasswordHasher, RefreshTokenRepository, RotateOutcome,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockAccessTokens, MockAccountRepository, MockPasswordHasher, MockRefreshTokenRepository};
pub use recovery::{
    MailRequest, OneTimeToken, OneTimeTokenRepository, RecoveryError, RecoveryPolicy, RecoveryService,
    RecoveryServiceDeps, TokenPurpose,
};
pub use refresh::{RefreshToken, RefreshTokenStatus};
pub use service::{
    AccountPolicy, AccountService, AccountServiceDeps, CurrentUser, LoginError, LogoutError, MeError,
    RefreshError, RegisterCommand, Registration, TokenPair,
};
