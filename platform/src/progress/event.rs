//! What a progress stream carries: one [`ProgressState`] per published step,
//! numbered per operation. A media operation (an upload, an archive) reports
//! a [`MediaStep`] with a snapshot of the whole operation; a job that reports
//! on itself (a probe, a sandbox seeding) reports a [`JobStatus`]. The wire
//! form is the JSON these types serialise to:
//!
//! ```text
//! {"event": "variant_done", "media_id": "med_…", "variant": "web", …, "operation": {…}, "seq": 4}
//! {"status": "processing", "step": 2, "steps": 5, "attempt": 1, "seq": 2}
//! ```

use serde::{Deserialize, Serialize};
use storage::ids::MediaId;
use storage::media::OperationSnapshot;

/// A step of a media operation; `event` names it on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum MediaStep {
    /// The upload is stored and its files wait for their jobs.
    Queued,
    /// A file's job started (for an archive: packing started).
    Processing {
        /// The file, when the step is about one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_id: Option<MediaId>,
    },
    /// One variant of a file was stored.
    VariantDone {
        /// The file.
        media_id: MediaId,
        /// The variant's name.
        variant: String,
        /// Its width in pixels.
        width: u32,
        /// Its height in pixels.
        height: u32,
    },
    /// A file is done (its variants made, or packed into the archive).
    FileDone {
        /// The file.
        media_id: MediaId,
    },
    /// A file failed, with a reason fit to show.
    Failed {
        /// The file.
        media_id: MediaId,
        /// Why.
        reason: String,
    },
    /// The operation ended; its snapshot says how.
    Completed {
        /// An archive's size.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size_bytes: Option<i64>,
        /// Why an archive gave up.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl MediaStep {
    /// The wire name of the step (the SSE event name).
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Processing { .. } => "processing",
            Self::VariantDone { .. } => "variant_done",
            Self::FileDone { .. } => "file_done",
            Self::Failed { .. } => "failed",
            Self::Completed { .. } => "completed",
        }
    }

    /// The end of an operation with nothing more to say.
    pub const fn completed() -> Self {
        Self::Completed {
            size_bytes: None,
            reason: None,
        }
    }
}

/// Where a job reporting on itself stands; `status` names it on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum JobStatus {
    /// Running, at `step` of `steps` when it counts them.
    Processing {
        /// The step reached.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<u64>,
        /// Steps in all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u64>,
        /// The job's attempt (a re-run after a dead worker shows).
        attempt: usize,
    },
    /// Finished.
    Completed {
        /// Steps run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u64>,
        /// The listings a sandbox seeding left.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        listing_numbers: Option<Vec<String>>,
        /// The job's attempt.
        attempt: usize,
    },
}

/// What one published state says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressEvent {
    /// A media operation's step, with where the whole operation stands.
    Media {
        /// The step.
        #[serde(flatten)]
        step: MediaStep,
        /// The operation after the step.
        operation: OperationSnapshot,
    },
    /// A job's own status.
    Job(JobStatus),
}

impl ProgressEvent {
    /// The SSE event name: the media step's, or `state` for a job's status.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Media { step, .. } => step.name(),
            Self::Job(_) => "state",
        }
    }

    /// Whether it ends its operation: nothing is published after it.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Media {
                step: MediaStep::Completed { .. },
                ..
            } | Self::Job(JobStatus::Completed { .. })
        )
    }

    /// The operation's snapshot, for a media step.
    pub fn operation(&self) -> Option<&OperationSnapshot> {
        match self {
            Self::Media { operation, .. } => Some(operation),
            Self::Job(_) => None,
        }
    }
}

/// A published state: the event and its number in the operation's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressState {
    /// What happened.
    #[serde(flatten)]
    pub event: ProgressEvent,
    /// Per-operation order of states, from 1.
    pub seq: u64,
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use storage::ids::OperationId;
    use storage::media::FileSnapshot;

    use super::*;

    fn snapshot() -> OperationSnapshot {
        OperationSnapshot {
            operation_id: OperationId::generate(),
            kind: "upload".to_owned(),
            status: "processing".to_owned(),
            files: vec![FileSnapshot {
                media_id: MediaId::generate(),
                filename: "front.jpg".to_owned(),
                status: "processing".to_owned(),
                failure_reason: None,
                variants: vec!["web".to_owned()],
            }],
        }
    }

    #[test]
    fn media_steps_keep_their_wire_form_and_read_back() {
        let operation = snapshot();
        let media_id = operation.files[0].media_id.clone();
        let state = ProgressState {
            event: ProgressEvent::Media {
                step: MediaStep::VariantDone {
                    media_id: media_id.clone(),
                    variant: "web".to_owned(),
                    width: 2560,
                    height: 1700,
                },
                operation: operation.clone(),
            },
            seq: 4,
        };
        let wire = serde_json::to_value(&state).unwrap();
        assert_eq!(
            wire,
            json!({
                "event": "variant_done",
                "media_id": media_id,
                "variant": "web",
                "width": 2560,
                "height": 1700,
                "operation": serde_json::to_value(&operation).unwrap(),
                "seq": 4,
            })
        );
        assert_eq!(
            serde_json::from_value::<ProgressState>(wire).unwrap(),
            state
        );
        assert_eq!(state.event.name(), "variant_done");
        assert!(!state.event.is_terminal());
        let completed = ProgressEvent::Media {
            step: MediaStep::completed(),
            operation,
        };
        let wire = serde_json::to_value(&completed).unwrap();
        assert_eq!(wire["event"], "completed");
        assert!(wire.get("size_bytes").is_none() && wire.get("reason").is_none());
        assert!(completed.is_terminal());
    }

    #[test]
    fn job_statuses_keep_their_wire_form_and_read_back() {
        let state = ProgressState {
            event: ProgressEvent::Job(JobStatus::Processing {
                step: Some(2),
                steps: Some(5),
                attempt: 1,
            }),
            seq: 2,
        };
        let wire = serde_json::to_value(&state).unwrap();
        assert_eq!(
            wire,
            json!({"status": "processing", "step": 2, "steps": 5, "attempt": 1, "seq": 2})
        );
        assert_eq!(
            serde_json::from_value::<ProgressState>(wire).unwrap(),
            state
        );
        assert_eq!(state.event.name(), "state");
        let seeded = ProgressEvent::Job(JobStatus::Completed {
            steps: None,
            listing_numbers: Some(vec!["snd_active_K7M3QX9AB2".to_owned()]),
            attempt: 1,
        });
        assert!(seeded.is_terminal());
        let wire = serde_json::to_value(&seeded).unwrap();
        assert_eq!(wire["status"], "completed");
        assert!(wire.get("steps").is_none());
    }
}
