#![doc = include_str!("../README.md")]

pub mod admin;
pub mod batched;
pub mod config;
pub mod direct_upload;
pub mod dispatch;
pub mod kinds;
pub mod mail;
pub mod media_stores;
pub mod progress;
pub mod queue;
pub mod resumable;
pub mod services;
pub mod telemetry;
pub mod webhooks;

pub use kinds::Job;
pub use queue::{JobQueue, PushOptions, QueueError, QueueTarget};
pub use services::Platform;
