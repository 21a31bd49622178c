#![doc = include_str!("../README.md")]

pub mod api_keys;
pub mod background;
pub mod clock;
pub mod db;
pub mod error;
pub mod ids;
pub mod listings;
pub mod media;
pub mod objects;
pub mod page;
pub mod people;
pub mod plans;
pub mod records;
pub mod requests;
pub mod retention;
pub mod rules;
pub mod secrets;
pub mod space;
mod store;
pub mod tenancy;
pub mod volume;
pub mod webhooks;

pub use clock::{Clock, Timestamp};
pub use db::{Backend, Database, DatabaseTarget};
pub use error::{Entity, Result, Rule, StorageError};
pub use secrets::MasterKey;
pub use store::Store;
pub use tenancy::{Environment, Tenant};
