#![doc = include_str!("../README.md")]

pub mod app;
pub mod binaries;
pub mod browser;
pub mod database;
pub mod deployment;
pub mod receiver;
pub mod s3;
pub mod services;
pub mod smtp;
pub mod tools;

pub use app::{TestAgency, TestApp, TestAppBuilder};
pub use database::TestDatabase;
pub use storage::Backend;

/// A fresh idempotency key for a mutating request.
pub fn idempotency_key() -> String {
    format!("it-{}", ulid::Ulid::generate())
}

/// The sha256 of `bytes` in hex, as a media item records its content's.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Defines one test per backend: `name::sqlite` and `name::postgres`, each an
/// async test whose body sees `backend`.
#[macro_export]
macro_rules! backend_tests {
    ($( $(#[$meta:meta])* async fn $name:ident($backend:ident) $body:block )*) => {
        $(
            $(#[$meta])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn run($backend: $crate::Backend) $body

                #[tokio::test]
                async fn sqlite() {
                    run($crate::Backend::Sqlite).await;
                }

                #[tokio::test]
                async fn postgres() {
                    run($crate::Backend::Postgres).await;
                }
            }
        )*
    };
}
