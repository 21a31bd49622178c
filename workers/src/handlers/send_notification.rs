//! `notification_email`: e-mail a recorded notification to its recipient
//! through the configured relay, once.

use platform::kinds::SendNotification;

use super::{Handler, JobError, WorkerState};

impl Handler for SendNotification {
    /// Sends one notification.
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        send(self, state).await
    }
}

async fn send(job: &SendNotification, state: &WorkerState) -> Result<(), JobError> {
    let Some(mailer) = &state.platform.mailer else {
        // No relay in this process: the notification stays recorded.
        return Ok(());
    };
    let webhooks = state.platform.store.webhooks();
    let Some((notification, email, sent_at)) =
        webhooks.notification_to_send(&job.notification_id).await?
    else {
        return Ok(());
    };
    if sent_at.is_some() {
        return Ok(());
    }
    let Some(email) = email else {
        tracing::info!(notification_id = %notification.id, "notification recipient has no e-mail address; recorded only");
        return Ok(());
    };
    if notification.is_sandbox {
        // The sandbox sends no e-mail: it records what would have been sent.
        let detail = serde_json::json!({
            "notification_id": notification.id,
            "kind": notification.kind,
            "subject": notification.subject,
            "body": notification.body,
            "performed": false,
        });
        state
            .platform
            .store
            .sandbox()
            .record_email(&notification.agency_id, &email, &detail)
            .await?;
        webhooks.mark_notification_sent(&notification.id).await?;
        tracing::info!(notification_id = %notification.id, "sandbox notification recorded, not e-mailed");
        return Ok(());
    }
    let Some(body) = state
        .platform
        .store
        .accounts()
        .mail_body(&notification)
        .await?
    else {
        // A password link spent or expired before it went out: nothing to send.
        webhooks.mark_notification_sent(&notification.id).await?;
        return Ok(());
    };
    mailer
        .send(&email, &notification.subject, &body)
        .await
        .map_err(JobError)?;
    webhooks.mark_notification_sent(&notification.id).await?;
    tracing::info!(notification_id = %notification.id, kind = %notification.kind, "notification e-mailed");
    Ok(())
}
