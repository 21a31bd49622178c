#![doc = include_str!("../README.md")]

pub mod batched;
pub mod cli;
pub mod config;
pub mod console;
pub mod handlers;
pub mod mail;
pub mod media;
pub mod pause;
pub mod release;
pub mod runtime;
pub mod telemetry;
pub mod webhooks;
