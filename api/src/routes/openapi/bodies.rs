//! The bodies no type describes: the multipart upload as a schema, and the
//! progress stream's server-sent events.

use serde_json::{Value, json};

use super::json::at;

/// The multipart upload, as a schema: `files` parts (at least one), and the
/// optional fields before them.
pub(super) fn describe_upload(doc: &mut Value) {
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
pub(super) fn describe_progress_stream(doc: &mut Value) {
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
