#![doc = include_str!("../README.md")]

pub mod admin;
pub mod dispatch;
pub mod kinds;
pub mod progress;
pub mod queue;

pub use kinds::Job;
pub use queue::{JobQueue, PushOptions, QueueError, QueueTarget};
