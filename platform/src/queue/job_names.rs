//! The ids a job's payload names, as both queues index them for the
//! console's searches by an id and by a listing number (whose listing,
//! media, events and deliveries the jobs name): the Redis queue in its
//! `{queue}:names` set ([`super::redis_index`]), the SQLite queue in its
//! `job_names` table ([`super::search_index`]).

use serde_json::Value;

/// Characters of the ULID that follows an id's prefix.
const ULID_LENGTH: usize = 26;

/// The name `text` is indexed by when a payload holds it as a value: a whole
/// id as ours are shaped (a ULID: 26 letters and digits, at least one a
/// digit; most kinds put one to twelve letters and an underscore ahead of
/// it, events and jobs none), in lower case. None for any other text, a part
/// of an id included (that is free text). The Redis queue's Lua function
/// `names_of` applies the same rule to payloads.
pub fn as_name(text: &str) -> Option<String> {
    let name = text.to_ascii_lowercase();
    let (prefix, ulid) = match name.split_once('_') {
        Some((prefix, ulid)) => (Some(prefix), ulid),
        None => (None, name.as_str()),
    };
    let shaped = prefix.is_none_or(|prefix| {
        (1..=12).contains(&prefix.len()) && prefix.bytes().all(|b| b.is_ascii_lowercase())
    }) && ulid.len() == ULID_LENGTH
        && ulid
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && ulid.bytes().any(|b| b.is_ascii_digit());
    shaped.then_some(name)
}

/// Deepest a payload's values are looked at for names (the top level is 1).
const DEPTH: usize = 4;

/// The names ([`as_name`]) `payload` holds as values, at any depth up to
/// [`DEPTH`], except its top-level `agency_id` (the agency indexes hold
/// that), each once, in the order they are met.
pub fn names_of(payload: &Value) -> Vec<String> {
    fn visit(value: &Value, depth: usize, key: Option<&str>, names: &mut Vec<String>) {
        match value {
            Value::String(text) if !(depth == 1 && key == Some("agency_id")) => {
                if let Some(name) = as_name(text)
                    && !names.contains(&name)
                {
                    names.push(name);
                }
            }
            Value::Object(map) if depth < DEPTH => {
                for (key, value) in map {
                    visit(value, depth + 1, Some(key), names);
                }
            }
            Value::Array(items) if depth < DEPTH => {
                for value in items {
                    visit(value, depth + 1, None, names);
                }
            }
            _ => {}
        }
    }
    let mut names = Vec::new();
    visit(payload, 0, None, &mut names);
    names
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{as_name, names_of};

    #[test]
    fn a_name_is_a_whole_id_in_lower_case() {
        let id = "evt_01HQ5ABCDEFGHJKMNPQRSTVWXY";
        assert_eq!(
            as_name(id).as_deref(),
            Some("evt_01hq5abcdefghjkmnpqrstvwxy")
        );
        // Events and jobs have no prefix.
        assert_eq!(
            as_name("01HQ5ABCDEFGHJKMNPQRSTVWXY").as_deref(),
            Some("01hq5abcdefghjkmnpqrstvwxy")
        );
        assert_eq!(
            as_name("RECOVERY_01HQ5ABCDEFGHJKMNPQRSTVWXY").as_deref(),
            Some("recovery_01hq5abcdefghjkmnpqrstvwxy")
        );
        for text in [
            // Part of an id, or more than one.
            &id[..20],
            "evt_01HQ5ABCDEFGHJKMNPQRSTVWXYZ",
            "evt_01HQ5ABCDEFGHJKMNPQRSTVWXY evt_01HQ5ABCDEFGHJKMNPQRSTVWXY",
            // An empty prefix, a prefix too long or not of letters, no digit.
            "_01HQ5ABCDEFGHJKMNPQRSTVWXY",
            "abcdefghijklm_01HQ5ABCDEFGHJKMNPQRSTVWXY",
            "ev1_01HQ5ABCDEFGHJKMNPQRSTVWXY",
            "evt_ABCDEFGHJKMNPQRSTVWXYZABCD",
            "evt_01HQ5ABCDEFGHJKMNPQRSTVW-Y",
            "no such text",
        ] {
            assert_eq!(as_name(text), None, "{text}");
        }
    }

    #[test]
    fn a_payload_names_its_ids_but_not_its_agency() {
        let event = "evt_01HQ5ABCDEFGHJKMNPQRSTVWXY";
        let media = "med_01HQ5ABCDEFGHJKMNPQRSTVWXZ";
        let payload = json!({
            "agency_id": "agc_01HQ5ABCDEFGHJKMNPQRSTVWX0",
            "event_ids": [event, event],
            "listing": {"media": [{"id": media, "deep": {"too": "lst_01HQ5ABCDEFGHJKMNPQRSTVWX1"}}]},
            "note": format!("{event}/retried"),
            "owner": {"agency_id": "agc_01HQ5ABCDEFGHJKMNPQRSTVWX2"},
        });
        assert_eq!(
            names_of(&payload),
            [
                "evt_01hq5abcdefghjkmnpqrstvwxy",
                "med_01hq5abcdefghjkmnpqrstvwxz",
                // An agency named below the top level is a name like any.
                "agc_01hq5abcdefghjkmnpqrstvwx2",
            ]
        );
    }
}
