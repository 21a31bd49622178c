-- External side effects of sandbox activity (e-mails, payments) are never
-- performed: they are recorded here instead, so a developer can see what
-- would have happened.
create table sandbox_side_effects (
    id         text primary key,
    agency_id  text not null references agencies (id),
    kind       text not null check (kind in ('email', 'payment')),
    -- The recipient of an e-mail, the listing number of a payment.
    subject    text not null,
    -- JSON with what would have been sent or charged.
    detail     text not null,
    created_at bigint not null
);

create index sandbox_side_effects_by_agency on sandbox_side_effects (agency_id, created_at);

-- Notifications about sandbox resources are recorded as no-ops, never e-mailed.
alter table notifications add column is_sandbox boolean not null default false;
