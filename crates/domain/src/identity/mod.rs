//! Identity: users, their credentials, access and refresh tokens, and the account service that
//! registers users, signs them in and keeps their sessions.

pub mod access;
mod model;
mod ports;
pub mod recovery;
pub mod refresh;
mod service;

pub use access::{AccessError, AccessService, AccessServiceDeps, ApiKeyError, CreatedApiKey, NewApiKey};
pub use model::{
    ApiKey, ApiKeyGrant, ApiKeyName, Company, Email, FullName, OneTimeToken, Password, PasswordHash,
    RegisterError, TokenPurpose, User, UserCredentials,
};
pub use ports::{
    AccessClaims, AccessTokenError, AccessTokens, AccountRepository, ApiKeyRepository, IssuedAccessToken,
    NewAccount, OneTimeTokenRepository, PasswordHasher, RefreshTokenRepository, RotateOutcome,
};
#[cfg(any(test, feature = "mock"))]
pub use ports::{
    MockAccessTokens, MockAccountRepository, MockApiKeyRepository, MockOneTimeTokenRepository,
    MockPasswordHasher, MockRefreshTokenRepository,
};
pub use recovery::{MailRequest, RecoveryError, RecoveryPolicy, RecoveryService, RecoveryServiceDeps};
pub use refresh::{RefreshToken, RefreshTokenStatus};
pub use service::{
    AccountPolicy, AccountService, AccountServiceDeps, CurrentUser, LoginError, LogoutError, MeError,
    RefreshError, RegisterCommand, Registration, TokenPair,
};
