-- An agency's writes are paced by its webhook backlog: its deliveries due and
-- not yet attempted, counted per environment on every paced write.
create index webhook_deliveries_unattempted on webhook_deliveries (agency_id, is_sandbox, next_attempt_at)
    where status = 'pending' and attempts = 0;
