-- Which agencies call a deprecated route, so that each is e-mailed before the
-- route's removal (the changelog entry is `entry_id`), once.
create table deprecated_route_uses (
    agency_id     text not null references agencies (id),
    entry_id      text not null,
    first_used_at integer not null,
    last_used_at  integer not null,
    notified_at   integer,
    primary key (agency_id, entry_id)
) strict;
