//! The OpenAPI document made exact: what every operation can answer, the
//! constraints the service enforces, the multipart upload as a schema, the
//! webhooks, and links between operations. Applied to the JSON the handlers'
//! annotations produce, once, when the routes are built.
//!
//! What the shared layers add to every operation is derived here rather than
//! repeated on every handler: the guard's authentication, rate limits,
//! idempotency and query-parameter rules, the body extractor's refusals, the
//! deadlines and an unavailable dependency. Constraints the handlers' types
//! cannot state (lengths, enums, patterns of the values the service accepts)
//! are in [`CONSTRAINTS`]; the schemathesis test of the suite holds the
//! document and the service to each other.

use serde_json::{Map, Value, json};
use storage::event_catalog;

/// A constraint: where (a component schema's property, or an operation's
/// parameter) and the JSON Schema keywords merged into its schema.
struct Constraint {
    /// `Schema.property`, or `METHOD /path?parameter`.
    at: &'static str,
    /// Keywords to merge.
    keywords: fn() -> Value,
}

/// `^usr_` + a ULID (Crockford base32, 26 characters).
const USER_ID: &str = "^usr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$";
/// An e-mail address as the service accepts it: no spaces, one `@`, a
/// dotted domain that neither starts nor ends with a dot. (`\x85`, NEL, is
/// white space to the service but not to ECMAScript's `\s`.)
const EMAIL: &str = r"^[^@\s\x85]+@[^@\s\x85.][^@\s\x85]*\.[^@\s\x85]*[^@\s\x85.]$";
/// A string with something besides white space.
const NOT_BLANK: &str = r"[^\s\x85]";
/// A password the rules accept: at least 8 characters with an upper and a
/// lower case letter, a digit and a special character (ASCII punctuation
/// here; the service takes any character that is neither a letter, a digit
/// nor white space).
const PASSWORD: &str = r"^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9])(?=.*[!-/:-@\[-`{-~]).{8,}$";

fn limit() -> Value {
    json!({"minimum": 1, "maximum": 200})
}

fn listing_status() -> Value {
    json!({"enum": [
        "Coming Soon", "Active", "Pending", "Sold", "Off Market", "Archived", "Cancelled",
        "coming_soon", "active", "pending", "sold", "off_market", "archived", "cancelled"
    ]})
}

fn assignable_role() -> Value {
    json!({"enum": ["photographer", "agent", "assistant", "viewer"]})
}

/// The event types an endpoint can subscribe to, by name or alias.
fn subscribable_types() -> Value {
    let names: Vec<&str> = event_catalog::entries()
        .iter()
        .filter(|entry| entry.emitted && !entry.test_only)
        .flat_map(|entry| std::iter::once(entry.event_type).chain(entry.aliases.iter().copied()))
        .collect();
    json!({"minItems": 1, "items": {"enum": names}})
}

fn user_id() -> Value {
    json!({"pattern": USER_ID})
}

/// The constraints the service enforces beyond the handlers' types.
const CONSTRAINTS: &[Constraint] = &[
    Constraint {
        at: "GET /api/v1/listings?limit",
        keywords: limit,
    },
    Constraint {
        at: "GET /api/v1/listings?status",
        keywords: listing_status,
    },
    Constraint {
        at: "GET /api/v1/listings?agent_id",
        keywords: user_id,
    },
    Constraint {
        at: "GET /api/v1/listings/{listing_number}/orders?limit",
        keywords: limit,
    },
    Constraint {
        at: "GET /api/v1/users?limit",
        keywords: limit,
    },
    Constraint {
        at: "GET /api/v1/users?role",
        keywords: || json!({"enum": ["media_agency", "broker", "photographer", "agent", "assistant", "viewer"]}),
    },
    Constraint {
        at: "GET /api/v1/users?active",
        keywords: || json!({"enum": ["true", "false"]}),
    },
    Constraint {
        at: "GET /api/v1/webhooks/endpoints?limit",
        keywords: limit,
    },
    Constraint {
        at: "GET /api/v1/webhooks/endpoints/{endpoint_id}/deliveries?limit",
        keywords: limit,
    },
    Constraint {
        at: "GET /api/v1/agency/changelog?change_type",
        keywords: || json!({"enum": ["added", "changed", "deprecated", "removed", "fixed", "security"]}),
    },
    Constraint {
        at: "GET /api/v1/scheduling/availability?address",
        keywords: || json!({"minLength": 1, "maxLength": 500, "pattern": NOT_BLANK}),
    },
    Constraint {
        at: "GET /api/v1/scheduling/availability?package",
        keywords: || json!({"enum": ["essentials", "standard", "premium"]}),
    },
    Constraint {
        at: "GET /api/v1/scheduling/availability?timezone",
        keywords: || {
            let names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
            json!({"enum": names})
        },
    },
    Constraint {
        at: "GET /api/v1/scheduling/availability?from",
        keywords: || json!({"format": "date-time"}),
    },
    Constraint {
        at: "GET /api/v1/scheduling/availability?to",
        keywords: || json!({"format": "date-time"}),
    },
    Constraint {
        at: "GET /api/v1/progress/{operation_id}?last_event_id",
        // Empty is the same as absent.
        keywords: || json!({"pattern": "^[0-9]*$", "maxLength": 19}),
    },
    Constraint {
        at: "GET /api/v1/progress/{operation_id}@Last-Event-ID",
        // A header is text or absent; never null.
        keywords: || json!({"type": "string", "pattern": "^[0-9]*$", "maxLength": 19}),
    },
    Constraint {
        at: "ListingIn.address",
        keywords: || json!({"minLength": 1, "maxLength": 500, "pattern": NOT_BLANK}),
    },
    Constraint {
        at: "ListingIn.owner_user_id",
        keywords: user_id,
    },
    Constraint {
        at: "ListingIn.agent_one_id",
        keywords: user_id,
    },
    Constraint {
        at: "ListingIn.agent_two_id",
        keywords: user_id,
    },
    Constraint {
        at: "ListingIn.notes",
        keywords: || json!({"maxLength": 5000}),
    },
    Constraint {
        at: "ListingIn.package",
        keywords: || json!({"enum": ["essentials", "standard", "premium", null]}),
    },
    Constraint {
        at: "StatusPatch.new_status",
        keywords: listing_status,
    },
    Constraint {
        at: "UserIn.email",
        keywords: || json!({"maxLength": 254, "pattern": EMAIL}),
    },
    Constraint {
        at: "UserIn.role",
        keywords: assignable_role,
    },
    Constraint {
        at: "UserIn.password",
        keywords: || json!({"maxLength": 128, "pattern": PASSWORD}),
    },
    Constraint {
        at: "UserIn.manager_id",
        keywords: user_id,
    },
    Constraint {
        at: "RoleIn.role",
        keywords: assignable_role,
    },
    Constraint {
        at: "StatusIn.status",
        keywords: || json!({"enum": ["active", "suspended"]}),
    },
    Constraint {
        at: "BatchCanEditIn.user_ids",
        // Each id is answered on its own (a malformed one is user_not_found).
        keywords: || json!({"minItems": 1, "maxItems": 200, "items": {"minLength": 1}}),
    },
    Constraint {
        at: "ArchiveIn.file_ids",
        keywords: || json!({"minItems": 1, "maxItems": 200}),
    },
    Constraint {
        at: "ArchiveIn.archive_name",
        keywords: || json!({"minLength": 1, "maxLength": 100, "pattern": r"^[A-Za-z0-9 ._-]+$"}),
    },
    Constraint {
        at: "EndpointIn.event_types",
        keywords: subscribable_types,
    },
    Constraint {
        at: "EndpointIn.name",
        keywords: || json!({"maxLength": 200}),
    },
    Constraint {
        at: "EndpointIn.environment",
        keywords: || json!({"enum": ["live", "sandbox", "both", null]}),
    },
    Constraint {
        at: "EndpointIn.url",
        keywords: || json!({"format": "uri", "pattern": "^https://"}),
    },
    Constraint {
        at: "EndpointPatch.event_types",
        keywords: subscribable_types,
    },
    Constraint {
        at: "EndpointPatch.name",
        keywords: || json!({"maxLength": 200}),
    },
    Constraint {
        at: "EndpointPatch.environment",
        keywords: || json!({"enum": ["live", "sandbox", "both", null]}),
    },
    Constraint {
        at: "EndpointPatch.url",
        keywords: || json!({"format": "uri", "pattern": "^https://"}),
    },
    Constraint {
        at: "KeyIn.name",
        keywords: || json!({"minLength": 1, "maxLength": 100, "pattern": NOT_BLANK}),
    },
    Constraint {
        at: "KeyIn.environment",
        keywords: || json!({"enum": ["live", "sandbox", null]}),
    },
    Constraint {
        at: "KeyIn.format",
        keywords: || json!({"enum": ["sk", "ma", null]}),
    },
    Constraint {
        at: "LoginIn.email",
        keywords: || json!({"minLength": 1}),
    },
    Constraint {
        at: "LoginIn.password",
        keywords: || json!({"minLength": 1}),
    },
    Constraint {
        at: "PasswordResetIn.email",
        keywords: || json!({"maxLength": 254, "pattern": EMAIL}),
    },
    Constraint {
        at: "NewPasswordIn.token",
        keywords: || json!({"minLength": 1}),
    },
    Constraint {
        at: "NewPasswordIn.new_password",
        keywords: || json!({"maxLength": 128, "pattern": PASSWORD}),
    },
];

/// Completes the document (see the module's description).
pub fn complete(doc: &mut Value) {
    apply_constraints(doc);
    require_path_segments(doc);
    close_request_schemas(doc);
    describe_upload(doc);
    describe_progress_stream(doc);
    document_session_environment(doc);
    complete_responses(doc);
    declare_tags(doc);
    add_links(doc);
    add_webhooks(doc);
}

/// Operations a key or a session may call take the portal's environment
/// switch: `X-Environment` chooses a session's environment (a key carries its
/// own and ignores it).
fn document_session_environment(doc: &mut Value) {
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

/// The value at `keys` inside `value`, if there is one (indexing a
/// `serde_json::Value` mutably would insert nulls on the way).
fn at<'a>(value: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    keys.iter()
        .try_fold(value, |value, key| value.get_mut(*key))
}

fn merge(target: &mut Value, keywords: Value) {
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

fn apply_constraints(doc: &mut Value) {
    for constraint in CONSTRAINTS {
        let keywords = (constraint.keywords)();
        // `?name` a query parameter, `@Name` a header.
        let parameter = constraint
            .at
            .split_once('?')
            .map(|(operation, name)| (operation, name, "query"))
            .or_else(|| {
                constraint
                    .at
                    .split_once('@')
                    .map(|(operation, name)| (operation, name, "header"))
            });
        let target = match parameter {
            Some((operation, parameter, location)) => {
                let Some((method, path)) = operation.split_once(' ') else {
                    continue;
                };
                let method = method.to_ascii_lowercase();
                at(doc, &["paths", path, &method, "parameters"])
                    .and_then(Value::as_array_mut)
                    .and_then(|parameters| {
                        parameters
                            .iter_mut()
                            .find(|p| p["name"] == parameter && p["in"] == location)
                    })
                    .map(|parameter| &mut parameter["schema"])
            }
            None => {
                let Some((schema, property)) = constraint.at.split_once('.') else {
                    continue;
                };
                at(
                    doc,
                    &["components", "schemas", schema, "properties", property],
                )
            }
        };
        match target {
            Some(target) if target.is_object() => {
                // A nullable property keeps null among its enum's values.
                merge(target, keywords);
            }
            _ => tracing::error!(at = constraint.at, "an OpenAPI constraint names nothing"),
        }
    }
}

/// A path parameter is a whole, non-empty segment: an empty one would name
/// another route.
fn require_path_segments(doc: &mut Value) {
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
fn close_request_schemas(doc: &mut Value) {
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

/// The multipart upload, as a schema: `files` parts (at least one), and the
/// optional fields before them.
fn describe_upload(doc: &mut Value) {
    let schema = json!({
        "type": "object",
        "required": ["files"],
        "properties": {
            "files": {
                "type": "array",
                "minItems": 1,
                "maxItems": 200,
                "items": {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"},
                "description": "The files: JPEG, PNG, WebP, GIF, MP4 or PDF, told by their content; at most 50 MB each, 1 GB together."
            },
            "listing_number": {"type": "string", "description": "Attach the media to this listing (POST /media/upload only)."},
            "storage_strategy": {"type": "string", "enum": ["cloud", "local", "hybrid"], "description": "Where the originals are kept; before the files. local is refused in the distributed profile."},
            "enable_optimization": {"type": "string", "enum": ["true", "false", "1", "0"], "description": "Make the delivery variants (default true)."},
            "related_entity_type": {"type": "string", "maxLength": 100},
            "related_entity_id": {"type": "string", "maxLength": 100}
        }
    });
    for path in [
        "/api/v1/media/upload",
        "/api/v1/listings/{listing_number}/media",
    ] {
        if let Some(body) = at(doc, &["paths", path, "post", "requestBody"]) {
            let mut schema = schema.clone();
            if path.contains("{listing_number}")
                && let Some(properties) = schema["properties"].as_object_mut()
            {
                properties.remove("listing_number");
            }
            body["required"] = Value::Bool(true);
            body["content"]["multipart/form-data"] = json!({
                "schema": schema,
                "encoding": {"files": {"contentType": "application/octet-stream"}}
            });
        }
    }
}

/// The progress stream: each event of the `text/event-stream` body, with
/// its name, its `id` (for `Last-Event-ID`) and its JSON `data`.
fn describe_progress_stream(doc: &mut Value) {
    let event = json!({
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {
                "type": "string",
                "description": "snapshot, queued, processing, variant_done, file_done, failed or completed"
            },
            "id": {"type": "string", "pattern": "^[0-9]+$", "description": "Send it back as Last-Event-ID to resume after this event"},
            "data": {"type": "string", "contentMediaType": "application/json", "description": "The state, as JSON"},
            "retry": {"type": "integer", "minimum": 0, "description": "Milliseconds to wait before reconnecting"}
        }
    });
    let path = "/api/v1/progress/{operation_id}";
    if let Some(content) = at(doc, &["paths", path, "get", "responses", "200", "content"]) {
        content["text/event-stream"] = json!({"schema": event});
    }
}

/// What the shared layers can answer, by status: added to every operation
/// they apply to, with the error codes each status carries.
fn complete_responses(doc: &mut Value) {
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

/// Every tag an operation uses is declared, with a description.
fn declare_tags(doc: &mut Value) {
    let descriptions = [
        (
            "listings",
            "Listings (tours): lifecycle, cancellation, sections, orders",
        ),
        ("users", "The people of the caller's agency"),
        (
            "sessions",
            "Signing in to the developer settings, and impersonation",
        ),
        (
            "developer",
            "Developer settings: API keys, the changelog, the sandbox",
        ),
        (
            "media",
            "Uploads, their progress streams, variants and archives",
        ),
        (
            "webhooks",
            "Webhook endpoints, deliveries, replays, test fires and the event catalog",
        ),
        ("scheduling", "Shoot availability"),
    ];
    let mut used: Vec<String> = Vec::new();
    for item in doc["paths"].as_object().into_iter().flat_map(Map::values) {
        for operation in item.as_object().into_iter().flat_map(Map::values) {
            for tag in operation["tags"].as_array().into_iter().flatten() {
                if let Some(tag) = tag.as_str()
                    && !used.iter().any(|u| u == tag)
                {
                    used.push(tag.to_owned());
                }
            }
        }
    }
    let tags: Vec<Value> = descriptions
        .iter()
        .filter(|(name, _)| used.iter().any(|u| u == name))
        .map(|(name, description)| json!({"name": name, "description": description}))
        .chain(
            used.iter()
                .filter(|u| !descriptions.iter().any(|(name, _)| name == u))
                .map(|u| json!({"name": u})),
        )
        .collect();
    doc["tags"] = Value::Array(tags);
}

/// The links out of one response: its path, method and status, the
/// parameter it supplies, and the (name, operation id) of each target.
type Link = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// Links, so that a client (and schemathesis' stateful phase) can follow a
/// created resource into the operations on it.
fn add_links(doc: &mut Value) {
    let links: [Link; 3] = [
        (
            "/api/v1/listings",
            "post",
            "201",
            "listing_number",
            &[
                ("ReadListing", "read_listing_single"),
                ("ListingOrders", "get_listing_orders"),
                ("ChangeStatus", "update_listing_status"),
                ("CancelListing", "cancel_listing"),
                ("UpdateSection", "update_section"),
                ("UploadToListing", "upload_listing_media"),
            ],
        ),
        (
            "/api/v1/webhooks/endpoints",
            "post",
            "201",
            "endpoint_id",
            &[
                ("ReadEndpoint", "get_webhook_endpoint"),
                ("UpdateEndpoint", "update_webhook_endpoint"),
                ("TestEndpoint", "test_webhook_endpoint"),
                ("EndpointDeliveries", "list_webhook_deliveries"),
                ("RotateSecret", "rotate_webhook_secret"),
                ("DisableEndpoint", "disable_webhook_endpoint"),
                ("EnableEndpoint", "enable_webhook_endpoint"),
                ("DeleteEndpoint", "delete_webhook_endpoint"),
            ],
        ),
        (
            "/api/v1/webhooks/endpoints/{endpoint_id}/test",
            "post",
            "201",
            "delivery_id",
            &[
                ("ReadDelivery", "get_webhook_delivery"),
                ("ReplayDelivery", "replay_webhook_delivery"),
            ],
        ),
    ];
    let operation_ids = operation_ids(doc);
    for (path, method, status, parameter, targets) in links {
        let source = match parameter {
            "listing_number" => "$response.body#/listing_number",
            "endpoint_id" => "$response.body#/id",
            _ => "$response.body#/delivery/id",
        };
        let Some(response) = at(doc, &["paths", path, method, "responses", status]) else {
            tracing::error!(path, "an OpenAPI link starts at no response");
            continue;
        };
        for (name, operation_id) in targets {
            if !operation_ids.iter().any(|id| id == operation_id) {
                tracing::error!(operation_id, "an OpenAPI link names no operation");
                continue;
            }
            response["links"][*name] = json!({
                "operationId": operation_id,
                "parameters": {(*parameter): source}
            });
        }
    }
}

fn operation_ids(doc: &Value) -> Vec<String> {
    doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(Map::values)
        .flat_map(|item| item.as_object().into_iter().flat_map(Map::values))
        .filter_map(|operation| operation["operationId"].as_str().map(str::to_owned))
        .collect()
}

/// The OpenAPI 3.1 `webhooks`: one per subscribable event type, the
/// envelope around its catalog schema, with the signature headers.
fn add_webhooks(doc: &mut Value) {
    let mut webhooks = Map::new();
    for entry in event_catalog::entries().iter().filter(|e| e.emitted) {
        let mut data = entry.data_schema();
        if let Some(data) = data.as_object_mut() {
            // A JSON Schema 2020-12 document inside OpenAPI 3.1's dialect.
            data.remove("$schema");
        }
        let envelope = json!({
            "type": "object",
            "required": ["event_id", "event_type", "api_version", "timestamp", "is_sandbox", "nonce", "data"],
            "properties": {
                "event_id": {"type": "string", "description": "ULID; also X-Event-Id. The same on a replay."},
                "event_type": {"const": entry.event_type},
                "api_version": {"type": "string", "examples": [storage::events::API_VERSION]},
                "timestamp": {"type": "string", "format": "date-time"},
                "is_sandbox": {"type": "boolean"},
                "nonce": {"type": "string", "description": "New on every attempt; reject one seen within 10 minutes."},
                "data": data
            }
        });
        webhooks.insert(
            entry.event_type.to_owned(),
            json!({
                "post": {
                    "summary": entry.description,
                    "description": format!("Emitted by {}.", entry.emitted_by),
                    "operationId": format!("webhook_{}", entry.event_type.replace('.', "_")),
                    "tags": ["webhooks"],
                    "parameters": [
                        {"name": "X-Webhook-Signature", "in": "header", "required": false, "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}(, sha256=[0-9a-f]{64})*$"}, "description": "Endpoints with `signature_scheme: spec` (the default). HMAC-SHA256 of `<X-Webhook-Timestamp>.<raw body>` keyed with the endpoint's secret; while a rotated secret's overlap runs, one more signature follows, keyed with it (`sha256=<new>, sha256=<old>`): accept the delivery if any one verifies"},
                        {"name": "X-Webhook-Timestamp", "in": "header", "required": false, "schema": {"type": "string"}, "description": "Endpoints with `signature_scheme: spec`. Unix seconds; reject one older than 5 minutes"},
                        {"name": "webhook-id", "in": "header", "required": false, "schema": {"type": "string"}, "description": "Endpoints with `signature_scheme: standard_webhooks` (Standard Webhooks): the event's id, the same on every attempt and replay"},
                        {"name": "webhook-timestamp", "in": "header", "required": false, "schema": {"type": "string"}, "description": "Endpoints with `signature_scheme: standard_webhooks`: Unix seconds of signing"},
                        {"name": "webhook-signature", "in": "header", "required": false, "schema": {"type": "string", "pattern": "^v1,[A-Za-z0-9+/]{43}=( v1,[A-Za-z0-9+/]{43}=)*$"}, "description": "Endpoints with `signature_scheme: standard_webhooks`: `v1,<base64 HMAC-SHA256 of <webhook-id>.<webhook-timestamp>.<raw body>>` keyed with the bytes the secret's text after `whsec_` encodes in base64; one per valid secret, space-separated, while a rotation's overlap runs. Any Standard Webhooks library verifies it"},
                        {"name": "X-Webhook-Event-Type", "in": "header", "required": true, "schema": {"type": "string"}, "description": "The event type"},
                        {"name": "X-Event-Id", "in": "header", "required": true, "schema": {"type": "string"}, "description": "The event's id; deduplicate on it"}
                    ],
                    "requestBody": {
                        "required": true,
                        "content": {"application/json": {"schema": envelope, "example": {
                            "event_id": "01JZ3K8Q5N2P7R4S6T8V9W0XYZ",
                            "event_type": entry.event_type,
                            "api_version": storage::events::API_VERSION,
                            "timestamp": "2026-06-01T08:30:00.000Z",
                            "is_sandbox": false,
                            "nonce": "01JZ3K8Q5N2P7R4S6T8V9W0XZ0",
                            "data": entry.sample()
                        }}}
                    },
                    "responses": {
                        "2XX": {"description": "Received; answer within 10 seconds"},
                        "401": {"description": "The signature did not verify (a test fire reports Signature rejected)"}
                    }
                }
            }),
        );
    }
    doc["webhooks"] = Value::Object(webhooks);
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

    #[test]
    fn constraints_merge_into_schemas() {
        let mut target = json!({"type": "string", "description": "x"});
        merge(&mut target, json!({"maxLength": 5}));
        assert_eq!(
            target,
            json!({"type": "string", "description": "x", "maxLength": 5})
        );
    }
}
