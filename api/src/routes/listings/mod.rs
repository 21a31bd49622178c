//! The listing routes: create, list, read, orders, status, cancel, sections.
//! Each action has its own file; the wire types are in `wire`.

pub mod cancel;
pub mod create;
pub mod orders;
pub mod read;
pub mod sections;
pub mod status;
pub mod wire;
