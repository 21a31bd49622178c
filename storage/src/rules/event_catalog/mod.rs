//! The catalog of subscribable webhook event types. Its data, every type with
//! its category, description, emission site, aliases, the JSON Schema of its
//! `data` and a sample, is `catalog.yaml` beside this file, embedded at build
//! time and read once; the tests (`tests.rs`) hold every schema, sample and
//! emitted type to it.

use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::rules::events::EventType;

#[cfg(test)]
mod tests;

/// The JSON Schema dialect of every data schema.
pub const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The catalog's text, as shipped in the binary.
const CATALOG_YAML: &str = include_str!("catalog.yaml");

/// One subscribable event type.
#[derive(Clone, Debug)]
pub struct CatalogEntry {
    /// The canonical name (variant B's where the specification's lists differ).
    pub event_type: &'static str,
    /// The group it is listed under: `billing`, `invoice`, `listing`, `media`,
    /// `scheduling`, `user` or `webhook`.
    pub category: &'static str,
    /// What happened, for people choosing what to subscribe to.
    pub description: &'static str,
    /// Where the service emits it: a route or an operator command; for a type
    /// not emitted yet, what will emit it.
    pub emitted_by: &'static str,
    /// Other names that resolve to this type (variant A's).
    pub aliases: &'static [&'static str],
    /// Whether the service emits it today. False for types the specification
    /// lists that nothing emits yet: they can be subscribed to but never arrive.
    pub emitted: bool,
    /// Delivered only to the endpoint being tested, never fanned out to
    /// subscribers (`webhook.test_fire`).
    pub test_only: bool,
    schema: Value,
    sample: Value,
}

impl CatalogEntry {
    /// The JSON Schema (2020-12) of the event's `data` object.
    pub fn data_schema(&self) -> Value {
        self.schema.clone()
    }

    /// A realistic `data` object, valid against [`Self::data_schema`].
    pub fn sample(&self) -> Value {
        self.sample.clone()
    }
}

/// An entry as `catalog.yaml` writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryText {
    event_type: String,
    category: String,
    emitted: bool,
    emitted_by: String,
    description: String,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    test_only: bool,
    /// The object schema's `properties`, `required` and any other keyword.
    data: Map<String, Value>,
    sample: Value,
}

impl EntryText {
    /// The entry, its schema wrapped in the envelope every data schema shares.
    /// The catalog lives as long as the process, so its text is kept for good.
    fn into_entry(self) -> CatalogEntry {
        let mut schema = Map::new();
        schema.insert("$schema".to_owned(), SCHEMA_DIALECT.into());
        schema.insert(
            "title".to_owned(),
            format!("{} data", self.event_type).into(),
        );
        schema.insert("description".to_owned(), self.description.clone().into());
        schema.insert("type".to_owned(), "object".into());
        // Receivers must tolerate new keys: a data shape may grow within an api_version.
        schema.insert("additionalProperties".to_owned(), true.into());
        schema.extend(self.data);
        let aliases: Vec<&'static str> = self
            .aliases
            .into_iter()
            .map(|alias| &*alias.leak())
            .collect();
        CatalogEntry {
            event_type: self.event_type.leak(),
            category: self.category.leak(),
            description: self.description.leak(),
            emitted_by: self.emitted_by.leak(),
            aliases: aliases.leak(),
            emitted: self.emitted,
            test_only: self.test_only,
            schema: Value::Object(schema),
            sample: self.sample,
        }
    }
}

/// The catalog, read from its embedded text on first use. The text is part of
/// the binary and its tests parse it, so a catalog that does not parse is a
/// build that never passed them.
static ENTRIES: LazyLock<Vec<CatalogEntry>> = LazyLock::new(|| {
    serde_yaml_ng::from_str::<Vec<EntryText>>(CATALOG_YAML)
        .expect("catalog.yaml parses (its tests check it)")
        .into_iter()
        .map(EntryText::into_entry)
        .collect()
});

impl EventType {
    /// This type's catalog entry.
    ///
    /// # Panics
    ///
    /// If the embedded catalog lacks the type, which its tests rule out.
    pub fn catalog_entry(self) -> &'static CatalogEntry {
        resolve(self.as_str())
            .unwrap_or_else(|| panic!("{} is missing from catalog.yaml", self.as_str()))
    }
}

/// Every subscribable type, ordered by category, then name.
pub fn entries() -> &'static [CatalogEntry] {
    &ENTRIES
}

/// The entry named `name` (canonical or alias, exact; surrounding whitespace
/// is ignored).
pub fn resolve(name: &str) -> Option<&'static CatalogEntry> {
    let name = name.trim();
    entries()
        .iter()
        .find(|entry| entry.event_type == name || entry.aliases.contains(&name))
}

/// The canonical name of `name` (canonical or alias).
pub fn canonical(name: &str) -> Option<&'static str> {
    resolve(name).map(|entry| entry.event_type)
}

/// Every alias with the canonical name it stands for, in catalog order.
pub fn aliases() -> Vec<(&'static str, &'static str)> {
    entries()
        .iter()
        .flat_map(|entry| entry.aliases.iter().map(|alias| (*alias, entry.event_type)))
        .collect()
}
