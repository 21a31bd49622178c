//! The two sections of a listing the public API may change, and the rules of
//! their payloads: `tour3d` (a 3D-tour URL, set or removed) and `floorplan`
//! (1–20 files of {url, label}, set, replaced or appended). A payload that
//! breaks a rule is refused with the field and the reason.

use serde::{Deserialize, Serialize};

use crate::error::Rule;

/// Most floorplan files one request may carry, and a floorplan may hold.
pub const MAX_FLOORPLAN_FILES: usize = 20;
/// Longest floorplan label, in characters.
pub const MAX_LABEL_CHARS: usize = 64;
/// Longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// A floorplan file as stored: the label sanitized for use in paths, and the
/// label the client sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloorplanFile {
    /// Where the file is.
    pub url: String,
    /// The label with path-unsafe characters removed.
    pub label: String,
    /// The label as the client sent it.
    pub original_label: String,
}

/// What a tour3d patch does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tour3dOperation {
    /// Point the section at this URL.
    Set(String),
    /// Clear the section.
    Remove,
}

/// What a floorplan patch does with its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorplanOperation {
    /// Make the floorplan exactly these files.
    Set,
    /// The same as `Set`: the specification names both.
    Replace,
    /// Add these files after the existing ones.
    Append,
}

impl FloorplanOperation {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Replace => "replace",
            Self::Append => "append",
        }
    }
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Rule {
    Rule::InvalidSectionPayload {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Checks that `text` is an absolute http(s) URL.
fn check_url(field: &str, text: &str) -> Result<String, Rule> {
    let text = text.trim();
    if text.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if text.chars().count() > MAX_URL_LEN {
        return Err(invalid(
            field,
            format!("must be at most {MAX_URL_LEN} characters"),
        ));
    }
    let parsed = url::Url::parse(text).map_err(|_| invalid(field, "must be an absolute URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid(field, "must be an http or https URL with a host"));
    }
    Ok(text.to_owned())
}

/// The label with path-unsafe characters removed: separators, reserved
/// filename characters, control characters, leading dots and runs of
/// whitespace.
pub fn sanitize_label(label: &str) -> String {
    let kept: String = label
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .filter(|c| {
            !c.is_control()
                && !matches!(
                    c,
                    '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' | '%'
                )
        })
        .collect();
    let collapsed = kept
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    collapsed.trim_start_matches('.').trim().to_owned()
}

/// Validates a tour3d patch.
pub fn tour3d_operation(
    operation: Option<&str>,
    url: Option<&str>,
) -> Result<Tour3dOperation, Rule> {
    match operation {
        None => Err(invalid("operation", "is required: set or remove")),
        Some("set") => match url {
            None => Err(invalid("url", "is required when operation is set")),
            Some(url) => check_url("url", url).map(Tour3dOperation::Set),
        },
        Some("remove") => match url {
            Some(_) => Err(invalid("url", "must be omitted when operation is remove")),
            None => Ok(Tour3dOperation::Remove),
        },
        Some(_) => Err(invalid("operation", "must be set or remove")),
    }
}

/// A floorplan file as the client sent it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct FloorplanFileIn {
    /// Where the file is.
    pub url: Option<String>,
    /// Its label.
    pub label: Option<String>,
}

/// Validates a floorplan patch and returns the files to store.
pub fn floorplan_operation(
    operation: Option<&str>,
    files: Option<&[FloorplanFileIn]>,
) -> Result<(FloorplanOperation, Vec<FloorplanFile>), Rule> {
    let operation = match operation {
        None => return Err(invalid("operation", "is required: set, replace or append")),
        Some("set") => FloorplanOperation::Set,
        Some("replace") => FloorplanOperation::Replace,
        Some("append") => FloorplanOperation::Append,
        Some(_) => return Err(invalid("operation", "must be set, replace or append")),
    };
    let files = files.ok_or_else(|| invalid("files", "is required"))?;
    if files.is_empty() || files.len() > MAX_FLOORPLAN_FILES {
        return Err(invalid(
            "files",
            format!(
                "must hold 1 to {MAX_FLOORPLAN_FILES} files, got {}",
                files.len()
            ),
        ));
    }
    let mut stored = Vec::with_capacity(files.len());
    for (index, file) in files.iter().enumerate() {
        let url_field = format!("files[{index}].url");
        let label_field = format!("files[{index}].label");
        let url = check_url(
            &url_field,
            file.url
                .as_deref()
                .ok_or_else(|| invalid(&url_field, "is required"))?,
        )?;
        let original = file
            .label
            .as_deref()
            .ok_or_else(|| invalid(&label_field, "is required"))?;
        let chars = original.chars().count();
        if original.trim().is_empty() || chars > MAX_LABEL_CHARS {
            return Err(invalid(
                &label_field,
                format!("must be 1 to {MAX_LABEL_CHARS} characters, got {chars}"),
            ));
        }
        let label = sanitize_label(original);
        if label.is_empty() {
            return Err(invalid(
                &label_field,
                "has no characters that are safe in a file name",
            ));
        }
        stored.push(FloorplanFile {
            url,
            label,
            original_label: original.to_owned(),
        });
    }
    Ok((operation, stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(url: &str, label: &str) -> FloorplanFileIn {
        FloorplanFileIn {
            url: Some(url.into()),
            label: Some(label.into()),
        }
    }

    fn field_of(rule: Rule) -> String {
        match rule {
            Rule::InvalidSectionPayload { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tour3d_needs_a_url_to_set_and_none_to_remove() {
        assert_eq!(
            tour3d_operation(Some("set"), Some("https://tours.example.com/t/1")),
            Ok(Tour3dOperation::Set("https://tours.example.com/t/1".into()))
        );
        assert_eq!(
            tour3d_operation(Some("remove"), None),
            Ok(Tour3dOperation::Remove)
        );
        assert_eq!(
            field_of(tour3d_operation(Some("set"), None).unwrap_err()),
            "url"
        );
        assert_eq!(
            field_of(tour3d_operation(Some("set"), Some("not a url")).unwrap_err()),
            "url"
        );
        assert_eq!(
            field_of(tour3d_operation(Some("set"), Some("ftp://x.example.com/a")).unwrap_err()),
            "url"
        );
        assert_eq!(
            field_of(tour3d_operation(Some("remove"), Some("https://a.example")).unwrap_err()),
            "url"
        );
        assert_eq!(
            field_of(tour3d_operation(Some("delete"), None).unwrap_err()),
            "operation"
        );
        assert_eq!(
            field_of(tour3d_operation(None, None).unwrap_err()),
            "operation"
        );
    }

    #[test]
    fn floorplan_counts_labels_and_urls_are_checked() {
        let ok = [file("https://cdn.example.com/f1.pdf", "Ground floor")];
        let (operation, stored) = floorplan_operation(Some("append"), Some(&ok)).unwrap();
        assert_eq!(operation, FloorplanOperation::Append);
        assert_eq!(stored[0].label, "Ground floor");

        let none: [FloorplanFileIn; 0] = [];
        assert_eq!(
            field_of(floorplan_operation(Some("set"), Some(&none)).unwrap_err()),
            "files"
        );
        let many: Vec<_> = (0..21)
            .map(|i| file("https://cdn.example.com/f.pdf", &format!("F{i}")))
            .collect();
        assert_eq!(
            field_of(floorplan_operation(Some("set"), Some(&many)).unwrap_err()),
            "files"
        );
        let long = [file("https://cdn.example.com/f.pdf", &"L".repeat(65))];
        assert_eq!(
            field_of(floorplan_operation(Some("set"), Some(&long)).unwrap_err()),
            "files[0].label"
        );
        let exactly_64 = [file("https://cdn.example.com/f.pdf", &"L".repeat(64))];
        assert!(floorplan_operation(Some("set"), Some(&exactly_64)).is_ok());
        let bad_url = [
            file("https://cdn.example.com/a.pdf", "A"),
            file("nope", "B"),
        ];
        assert_eq!(
            field_of(floorplan_operation(Some("set"), Some(&bad_url)).unwrap_err()),
            "files[1].url"
        );
        assert_eq!(
            field_of(floorplan_operation(Some("merge"), Some(&ok)).unwrap_err()),
            "operation"
        );
        assert_eq!(
            field_of(floorplan_operation(Some("set"), None).unwrap_err()),
            "files"
        );
        let only_unsafe = [file("https://cdn.example.com/a.pdf", "///")];
        assert_eq!(
            field_of(floorplan_operation(Some("set"), Some(&only_unsafe)).unwrap_err()),
            "files[0].label"
        );
    }

    #[test]
    fn labels_lose_path_unsafe_characters_only() {
        assert_eq!(sanitize_label("../../etc/passwd"), "etcpasswd");
        assert_eq!(
            sanitize_label("Floor 1: Kitchen/Dining"),
            "Floor 1 KitchenDining"
        );
        assert_eq!(sanitize_label("  Upper\tLevel  \n"), "Upper Level");
        assert_eq!(sanitize_label("Büro – Etage 2"), "Büro – Etage 2");
        assert_eq!(sanitize_label("a<b>c|d?e*f\"g\\h%00"), "abcdefgh00");
    }
}
