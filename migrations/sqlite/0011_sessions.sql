-- Sessions of the in-product developer settings: a cookie whose secret is stored
-- only as a keyed hash, bound to one user (or, while impersonating, to the
-- target with the real user kept in impersonator_id).
create table sessions (
    id              text primary key,
    token_hash      text not null unique,
    user_id         text not null references users (id),
    impersonator_id text references users (id),
    created_at      integer not null,
    last_seen_at    integer not null,
    expires_at      integer not null,
    ended_at        integer
) strict;

create index sessions_by_expiry on sessions (expires_at);

alter table users add column last_login_at integer;
