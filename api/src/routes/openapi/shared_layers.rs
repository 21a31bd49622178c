//! What the shared layers add to every operation they apply to, derived
//! here rather than repeated on every handler: the portal's environment
//! switch, path segments that are never empty, request bodies that refuse
//! unknown fields, and every status the guard, the body extractor, the
//! deadlines and an unavailable dependency can answer, with its error codes.

use serde_json::{Map, Value, json};

use super::json::at;

/// Operations a key or a session may call take the portal's environment
/// switch: `X-Environment` chooses a session's environment (a key carries its
/// own and ignores it).
pub(super) fn document_session_environment(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for item in paths.values_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for operation in item.values_mut() {
            let security = operation["security"].to_string();
            if !(security.contains("session_cookie") && security.contains("api_key")) {
                continue;
            }
            let parameter = json!({
                "name": "X-Environment",
                "in": "header",
                "required": false,
                "description": "With a session: live (default) or sandbox, the developer settings' environment switch. A key's environment is its own; with a key the header is ignored.",
                "schema": {"type": "string", "enum": ["live", "sandbox"]},
            });
            match operation
                .get_mut("parameters")
                .and_then(Value::as_array_mut)
            {
                Some(parameters) => parameters.push(parameter),
                None => operation["parameters"] = json!([parameter]),
            }
        }
    }
}

/// A path parameter is a whole, non-empty segment: an empty one would name
/// another route.
pub(super) fn require_path_segments(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for item in paths.values_mut() {
        for operation in item
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            let parameters = operation
                .get_mut("parameters")
                .and_then(Value::as_array_mut);
            for parameter in parameters.into_iter().flatten() {
                if parameter["in"] == "path" && parameter["schema"].is_object() {
                    parameter["schema"]["minLength"] = json!(1);
                    parameter["schema"]["pattern"] = json!("^[^/]+$");
                }
            }
        }
    }
}

/// Every request body the service reads refuses unknown fields.
pub(super) fn close_request_schemas(doc: &mut Value) {
    let mut names = Vec::new();
    for item in doc["paths"].as_object().into_iter().flat_map(Map::values) {
        for operation in item.as_object().into_iter().flat_map(Map::values) {
            if let Some(reference) =
                operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].as_str()
            {
                names.push(
                    reference
                        .trim_start_matches("#/components/schemas/")
                        .to_owned(),
                );
            }
        }
    }
    // Objects nested in request bodies too.
    names.push("FloorplanFileBody".to_owned());
    for name in names {
        if let Some(schema) = at(doc, &["components", "schemas", &name])
            && schema["type"] == "object"
            && schema.get("additionalProperties").is_none()
        {
            schema["additionalProperties"] = Value::Bool(false);
        }
    }
}

/// What the shared layers can answer, by status: added to every operation
/// they apply to, with the error codes each status carries.
pub(super) fn complete_responses(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, operation) in item.iter_mut() {
            let security = operation["security"].to_string();
            let key = security.contains("api_key");
            let session = security.contains("session_cookie");
            let has_body = operation.get("requestBody").is_some();
            let json_body = operation["requestBody"]["content"]
                .get("application/json")
                .is_some();
            let unsafe_method = matches!(method.as_str(), "post" | "patch" | "put" | "delete");
            let mut added: Vec<(&str, &str, Vec<&str>)> = Vec::new();
            if key || session {
                let mut codes = vec!["auth.missing_key", "auth.invalid_key"];
                if session {
                    codes = vec!["auth.session_required"];
                    if key {
                        codes.extend(["auth.missing_key", "auth.invalid_key"]);
                    }
                }
                added.push(("401", "Not authenticated", codes));
                let mut forbidden = vec!["permission_denied", "transport.tls_required"];
                if key {
                    forbidden.push("auth.scope_denied");
                }
                if session {
                    forbidden.push("auth.csrf_failed");
                }
                added.push(("403", "Not allowed", forbidden));
            }
            if key && unsafe_method {
                if matches!(method.as_str(), "post" | "patch") {
                    added.push(("400", "Bad request", vec!["idempotency.missing"]));
                }
                added.push((
                    "409",
                    "The idempotency key is in use",
                    vec!["idempotency_key_conflict", "idempotency_key_in_progress"],
                ));
            }
            if has_body {
                if json_body {
                    added.push(("400", "Bad request", vec!["request.malformed"]));
                    added.push((
                        "415",
                        "request.unsupported_media_type: the body must be JSON",
                        vec!["request.unsupported_media_type"],
                    ));
                }
                added.push((
                    "413",
                    "request.too_large: the body is too large",
                    vec!["request.too_large"],
                ));
            }
            added.push((
                "422",
                "validation.failed: details.fields names each bad field, parameter or header",
                vec!["validation.failed"],
            ));
            if key {
                added.push((
                    "429",
                    "rate_limit.exceeded: a budget is spent; Retry-After gives the seconds to wait",
                    vec!["rate_limit.exceeded"],
                ));
            }
            added.push((
                "500",
                "server.internal: an unexpected error; safe to retry with the same idempotency key",
                vec!["server.internal"],
            ));
            let streams = path.ends_with("/progress/{operation_id}");
            let mut unavailable = vec!["server.not_ready"];
            if !streams {
                unavailable.push("server.timeout");
            }
            added.push((
                "503",
                "A dependency does not answer, or the request ran past its deadline; retry after Retry-After",
                unavailable,
            ));
            let responses = &mut operation["responses"];
            for (status, description, codes) in added {
                add_response(responses, status, description, &codes);
            }
            tag_error_codes(responses);
        }
    }
}

/// Adds `codes` to the response for `status`, creating it (with the error
/// envelope) if the handler did not document it.
fn add_response(responses: &mut Value, status: &str, description: &str, codes: &[&str]) {
    if responses.get(status).is_none() {
        responses[status] = json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}
        });
    }
    let response = &mut responses[status];
    let mut known: Vec<Value> = response["x-error-codes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for code in codes {
        if !known.iter().any(|c| c == code) {
            known.push(Value::from(*code));
        }
    }
    response["x-error-codes"] = Value::Array(known);
}

/// Adds to each documented error response the codes its description names
/// (`listing_not_found`, `upload.no_files: …`).
fn tag_error_codes(responses: &mut Value) {
    let Some(responses) = responses.as_object_mut() else {
        return;
    };
    for (status, response) in responses.iter_mut() {
        if !status.starts_with('4') && !status.starts_with('5') {
            continue;
        }
        let description = response["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut codes: Vec<Value> = response["x-error-codes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for word in
            description.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        {
            let word = word.trim_end_matches('.');
            let shaped = !word.is_empty()
                && word.starts_with(|c: char| c.is_ascii_lowercase())
                && word
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
                && (word.contains('_') || word.contains('.'))
                && !word.contains("..");
            if shaped && !codes.iter().any(|c| c == word) {
                codes.push(Value::from(word));
            }
        }
        if !codes.is_empty() {
            response["x-error-codes"] = Value::Array(codes);
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_from_descriptions() {
        let mut responses = json!({
            "404": {"description": "listing_not_found, also for another agency's"},
            "400": {"description": "upload.no_files: no files part; upload.malformed"},
            "200": {"description": "ok_value"}
        });
        tag_error_codes(&mut responses);
        assert_eq!(
            responses["404"]["x-error-codes"],
            json!(["listing_not_found"])
        );
        assert_eq!(
            responses["400"]["x-error-codes"],
            json!(["upload.no_files", "upload.malformed"])
        );
        assert!(responses["200"].get("x-error-codes").is_none());
    }
}
