//! Failure reasons safe to show an API client: built from a tool's stderr
//! with the server path and log prefixes removed, short and deduplicated.

use std::path::Path;

use super::error::PosterError;
use super::input::{file_url, local_arg};

/// The longest failure reason handed to an API client, in characters.
const MAX_REASON_CHARS: usize = 240;
/// How many distinct stderr lines make up a failure reason.
const MAX_REASON_LINES: usize = 3;

/// A [`PosterError::Unreadable`] with a fixed reason.
pub(super) fn unreadable(reason: &str) -> PosterError {
    PosterError::Unreadable(reason.to_owned())
}

/// `bytes` unless empty, in which case the input held nothing to show.
pub(super) fn non_empty(bytes: Vec<u8>, reason: &str) -> Result<Vec<u8>, PosterError> {
    if bytes.is_empty() {
        Err(unreadable(reason))
    } else {
        Ok(bytes)
    }
}

/// A short failure reason for an API client from a tool's stderr: the last
/// few distinct messages, without log prefixes and without the server path.
pub(super) fn client_reason(stderr: &[u8], input: &Path) -> String {
    let text = hide_input(&String::from_utf8_lossy(stderr), input);
    let mut messages: Vec<&str> = Vec::new();
    for message in text.lines().map(clean_message).filter(|m| !m.is_empty()) {
        messages.retain(|seen| *seen != message);
        messages.push(message);
    }
    let first_kept = messages.len().saturating_sub(MAX_REASON_LINES);
    let reason = messages[first_kept..].join("; ");
    if reason.is_empty() {
        return "the file could not be processed".to_owned();
    }
    shorten(&reason, MAX_REASON_CHARS)
}

/// Replaces every spelling of the input path the tools may echo.
fn hide_input(text: &str, input: &Path) -> String {
    let spellings = [
        file_url(input).to_string_lossy().into_owned(),
        local_arg(input).to_string_lossy().into_owned(),
        input.to_string_lossy().into_owned(),
    ];
    spellings
        .iter()
        .filter(|spelling| !spelling.is_empty())
        .fold(text.to_owned(), |text, spelling| {
            text.replace(spelling.as_str(), "the file")
        })
}

/// A stderr line without ffmpeg's `[demuxer @ 0x…]` prefix.
fn clean_message(line: &str) -> &str {
    let line = line.trim();
    match line
        .strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
    {
        Some((_, message)) => message.trim(),
        None => line,
    }
}

/// `text` cut to at most `max_chars` characters, marked with `…` when cut.
fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_reason_hides_the_path_and_log_prefixes() {
        let input = Path::new("/srv/media/tenant-a/upload.mp4");
        let stderr = b"[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d1] moov atom not found\n\
            file:/srv/media/tenant-a/upload.mp4: Invalid data found when processing input\n";
        let reason = client_reason(stderr, input);
        assert_eq!(
            reason,
            "moov atom not found; the file: Invalid data found when processing input"
        );
        let long = "x".repeat(1000);
        assert_eq!(
            client_reason(long.as_bytes(), input).chars().count(),
            MAX_REASON_CHARS + 1
        );
        assert_eq!(client_reason(b"", input), "the file could not be processed");
    }
}
