-- An agency's events not yet fanned out, per environment: write pacing counts
-- them on every paced write, and an ordered endpoint's fan-out takes its
-- agency's earlier ones. Through `events_by_tenant` both read every event the
-- agency ever committed, a cost that grew with its history.
create index events_undispatched_by_tenant on events (agency_id, is_sandbox, seq)
    where dispatched_at is null;
