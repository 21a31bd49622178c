-- Foundation: tenants, their people and their API keys.
--
-- Timestamps are bigint microseconds since the Unix epoch in both backends, so
-- ordering, comparison and cursor positions behave identically on SQLite and
-- PostgreSQL.

-- Settings the server itself owns, such as the master-key check value that stops
-- a server from starting against a database created under another master key.
create table server_settings (
    name  text primary key,
    value text not null
);

-- The tenant: every agency-owned row refers to one.
create table agencies (
    id         text primary key,
    name       text not null,
    kind       text not null check (kind in ('media_agency', 'broker')),
    created_at bigint not null
);

create table users (
    id            text primary key,
    agency_id     text not null references agencies (id),
    role          text not null check (role in (
                      'super_admin', 'admin', 'media_agency', 'broker',
                      'photographer', 'agent', 'assistant', 'viewer')),
    -- Stored lower-cased; unique across the platform because it is the login name.
    email         text unique,
    name          text,
    manager_id    text,
    is_active     boolean not null default true,
    -- argon2 PHC string; null means a password reset is forced at first login.
    password_hash text,
    created_at    bigint not null,
    -- A manager must belong to the same agency: the hierarchy never crosses tenants.
    unique (agency_id, id),
    foreign key (agency_id, manager_id) references users (agency_id, id)
);

-- The users listing walks an agency's people oldest first.
create index users_by_agency_created on users (agency_id, created_at, id);

create table api_keys (
    id                   text primary key,
    agency_id            text not null references agencies (id),
    name                 text not null,
    -- HMAC-SHA256 of the plaintext under a server secret; the plaintext is never stored.
    key_hash             text not null unique,
    -- What a person needs to recognise the key ("sk_live_…a1b2"); not enough to use it.
    key_hint             text not null,
    format               text not null check (format in ('sk', 'ma')),
    scopes               jsonb not null,
    is_sandbox           boolean not null,
    status               text not null check (status in ('active', 'rotating', 'revoked', 'expired')),
    created_by           text references users (id),
    created_at           bigint not null,
    rotation_started_at  bigint,
    expires_at           bigint,
    revoked_at           bigint,
    rate_limit_overrides jsonb not null default '{}'
);

create index api_keys_by_agency on api_keys (agency_id, created_at);
