-- Which agencies call a deprecated route, so that each is e-mailed before the
-- route's removal (the changelog entry is `entry_id`), once.
create table deprecated_route_uses (
    agency_id     text not null references agencies (id),
    entry_id      text not null,
    first_used_at bigint not null,
    last_used_at  bigint not null,
    notified_at   bigint,
    primary key (agency_id, entry_id)
);
