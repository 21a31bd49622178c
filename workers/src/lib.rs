#![doc = include_str!("../README.md")]

pub mod cli;
pub mod config;
pub mod console;
pub mod handlers;
pub mod media;
pub mod pause;
pub mod release;
pub mod runtime;
