//! The document's catalog: every tag described, links between operations,
//! and the webhooks the service sends, from the event catalog.

use serde_json::{Map, Value, json};

use super::json::at;

use storage::rules::event_catalog;

/// Every tag an operation uses is declared, with a description.
pub(super) fn declare_tags(doc: &mut Value) {
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
        (
            "uploads",
            "Resumable uploads (tus 1.0) and the batches that group a shoot's uploads",
        ),
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
pub(super) fn add_links(doc: &mut Value) {
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
pub(super) fn add_webhooks(doc: &mut Value) {
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
                "api_version": {"type": "string", "examples": [storage::rules::events::API_VERSION]},
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
                            "api_version": storage::rules::events::API_VERSION,
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
