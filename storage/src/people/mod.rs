//! An agency and its people: the agency itself (`agencies`), its users and
//! their hierarchy (`users`), accounts with passwords and password links
//! (`accounts`), the developer settings' sessions (`sessions`), users'
//! preferences (`preferences`) and the agency's sandbox fixtures
//! (`sandbox`).

pub mod accounts;
pub mod agencies;
pub mod preferences;
pub mod sandbox;
pub mod sessions;
pub mod users;
