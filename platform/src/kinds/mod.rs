//! The job kinds: one payload type per kind, in a file of its own beside
//! its `Job` options (a stable `KIND` that names its queue, its attempts, its
//! default concurrency and its dedupe key), and here the table of queues.
//! Renaming a Rust type never orphans queued jobs because the queue is named
//! by `KIND`, not by the type; every id in a payload is typed, and serialises
//! as the same text it always did. The handler that runs a kind is the
//! workers' file of the same name (`workers/src/handlers/<kind>.rs`).

mod build_archive;
mod deliver_webhook;
mod dispatch_events;
mod job;
mod probe;
mod process_media;
mod recover_webhook_endpoint;
mod render_outputs;
mod seed_sandbox;
mod send_notification;

pub use build_archive::BuildArchive;
pub use deliver_webhook::DeliverWebhook;
pub use dispatch_events::DispatchEvents;
pub use job::Job;
pub use probe::Probe;
pub use process_media::ProcessMedia;
pub use recover_webhook_endpoint::RecoverWebhookEndpoint;
pub use render_outputs::{RenderOutputs, RenderScope};
pub use seed_sandbox::SeedSandbox;
pub use send_notification::SendNotification;

/// The names of every queue, in the order operators see them.
pub const QUEUES: [&str; 9] = [
    DispatchEvents::KIND,
    DeliverWebhook::KIND,
    RecoverWebhookEndpoint::KIND,
    SendNotification::KIND,
    ProcessMedia::KIND,
    RenderOutputs::KIND,
    BuildArchive::KIND,
    SeedSandbox::KIND,
    Probe::KIND,
];

/// The queues shared fairly between agencies (their jobs' fairness key is
/// the agency); `--agency-concurrency` caps these.
pub const AGENCY_QUEUES: [&str; 4] = [
    ProcessMedia::KIND,
    RenderOutputs::KIND,
    BuildArchive::KIND,
    Probe::KIND,
];

/// The queues shared fairly (their jobs name a [`Job::fairness_key`]):
/// between agencies, and for webhook deliveries between endpoints.
pub const FAIR_QUEUES: [&str; 5] = [
    AGENCY_QUEUES[0],
    AGENCY_QUEUES[1],
    AGENCY_QUEUES[2],
    AGENCY_QUEUES[3],
    DeliverWebhook::KIND,
];

/// A queue's default concurrency.
pub fn default_concurrency(queue: &str) -> usize {
    match queue {
        DeliverWebhook::KIND => DeliverWebhook::DEFAULT_CONCURRENCY,
        DispatchEvents::KIND => DispatchEvents::DEFAULT_CONCURRENCY,
        SeedSandbox::KIND => SeedSandbox::DEFAULT_CONCURRENCY,
        ProcessMedia::KIND => ProcessMedia::DEFAULT_CONCURRENCY,
        RenderOutputs::KIND => RenderOutputs::DEFAULT_CONCURRENCY,
        BuildArchive::KIND => BuildArchive::DEFAULT_CONCURRENCY,
        SendNotification::KIND => SendNotification::DEFAULT_CONCURRENCY,
        RecoverWebhookEndpoint::KIND => RecoverWebhookEndpoint::DEFAULT_CONCURRENCY,
        _ => Probe::DEFAULT_CONCURRENCY,
    }
}

#[cfg(test)]
mod tests {
    use storage::ids::{AgencyId, DeliveryId, EventId, MediaId, OperationId, WebhookEndpointId};
    use storage::{Environment, Tenant};

    use super::*;

    #[test]
    fn the_fair_queues_are_the_kinds_with_a_fairness_key() {
        let agency = AgencyId::generate();
        let tenant = Tenant::new(agency.clone(), Environment::Live);
        let media = ProcessMedia::new(&tenant, &OperationId::generate(), &MediaId::generate());
        assert_eq!(media.fairness_key(), Some(agency.to_string()));
        assert!(FAIR_QUEUES.contains(&ProcessMedia::KIND));
        assert!(FAIR_QUEUES.contains(&BuildArchive::KIND));
        assert!(FAIR_QUEUES.contains(&Probe::KIND));
        let endpoint = WebhookEndpointId::generate();
        let delivery = DeliverWebhook::of(storage::webhooks::DueAttempt {
            delivery_id: DeliveryId::generate(),
            endpoint_id: endpoint.clone(),
            attempt: 2,
        });
        assert_eq!(delivery.attempt, 2);
        assert_eq!(delivery.fairness_key(), Some(endpoint.to_string()));
        assert!(FAIR_QUEUES.contains(&DeliverWebhook::KIND));
        assert!(!AGENCY_QUEUES.contains(&DeliverWebhook::KIND));
        assert!(
            AGENCY_QUEUES
                .iter()
                .all(|queue| FAIR_QUEUES.contains(queue))
        );
        // A job pushed before deliveries named their endpoint still reads.
        let earlier: DeliverWebhook =
            serde_json::from_str(r#"{"delivery_id":"whd_01JD00000000000000000000AA","attempt":1}"#)
                .unwrap();
        assert_eq!(earlier.fairness_key(), None);
        assert!(!FAIR_QUEUES.contains(&DispatchEvents::KIND));
    }

    #[test]
    fn kinds_are_stable_and_distinct() {
        assert_eq!(DispatchEvents::KIND, "outbox_dispatch");
        assert_eq!(Probe::KIND, "probe");
        let mut names = QUEUES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), QUEUES.len());
    }

    #[test]
    fn dispatch_jobs_are_chunked_and_keyed_by_their_events() {
        let ids: Vec<EventId> = (0..250).map(|_| EventId::generate()).collect();
        let jobs = DispatchEvents::chunked(ids.clone());
        assert_eq!(
            jobs.iter()
                .map(|job| job.event_ids.len())
                .collect::<Vec<_>>(),
            [100, 100, 50]
        );
        let flattened: Vec<EventId> = jobs.iter().flat_map(|job| job.event_ids.clone()).collect();
        assert_eq!(flattened, ids);
        let again = DispatchEvents::chunked(ids);
        assert_eq!(jobs[0].dedupe_key(), again[0].dedupe_key());
        assert_ne!(jobs[0].dedupe_key(), jobs[1].dedupe_key());
        assert!(DispatchEvents::chunked(Vec::new()).is_empty());
    }

    #[test]
    fn dedupe_keys_name_the_work() {
        let tenant = Tenant::new(AgencyId::generate(), Environment::Sandbox);
        let operation = OperationId::generate();
        let media = MediaId::generate();
        let job = ProcessMedia::new(&tenant, &operation, &media);
        assert_eq!(job.dedupe_key(), Some(format!("media:{media}")));
        assert_eq!(job.tenant(), tenant);
        let delivery = DeliverWebhook {
            delivery_id: DeliveryId::generate(),
            attempt: 3,
            endpoint_id: None,
        };
        assert_eq!(
            delivery.dedupe_key(),
            Some(format!("{}:3", delivery.delivery_id))
        );
        let probe = Probe {
            operation_id: operation,
            agency_id: tenant.agency_id.clone(),
            is_sandbox: true,
            steps: 1,
            step_ms: 1,
            fail: false,
        };
        assert_eq!(
            probe.dedupe_key(),
            Some(format!("probe:{}", probe.operation_id))
        );
    }

    #[test]
    fn payloads_keep_their_wire_form() {
        let media = MediaId::generate();
        let operation = OperationId::generate();
        let agency = AgencyId::generate();
        let job = ProcessMedia {
            media_id: media.clone(),
            operation_id: operation.clone(),
            agency_id: agency.clone(),
            is_sandbox: false,
        };
        let wire = serde_json::json!({
            "media_id": media.as_str(),
            "operation_id": operation.as_str(),
            "agency_id": agency.as_str(),
            "is_sandbox": false,
        });
        assert_eq!(serde_json::to_value(&job).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ProcessMedia>(wire).unwrap(), job);
        let malformed = serde_json::json!({"delivery_id": "whd_x", "attempt": 1});
        assert!(serde_json::from_value::<DeliverWebhook>(malformed).is_err());
    }
}
