//! Reaching into the document's JSON: a value at a path without inserting
//! nulls on the way, and keywords merged into a schema.

use serde_json::Value;

/// The value at `keys` inside `value`, if there is one (indexing a
/// `serde_json::Value` mutably would insert nulls on the way).
pub(super) fn at<'a>(value: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    keys.iter()
        .try_fold(value, |value, key| value.get_mut(*key))
}

pub(super) fn merge(target: &mut Value, keywords: Value) {
    let (Some(target), Value::Object(keywords)) = (target.as_object_mut(), keywords) else {
        return;
    };
    for (keyword, value) in keywords {
        match (target.get_mut(&keyword), value) {
            (Some(Value::Object(existing)), Value::Object(value)) => {
                existing.extend(value);
            }
            (_, value) => {
                target.insert(keyword, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keywords_merge_into_schemas() {
        let mut target = json!({"type": "string", "description": "x"});
        merge(&mut target, json!({"maxLength": 5}));
        assert_eq!(
            target,
            json!({"type": "string", "description": "x", "maxLength": 5})
        );
    }
}
