-- Listings, their orders and shoot appointments, owners' cancellation fee
-- tiers, and the transactional outbox of events.
--
-- Every agency-owned row carries agency_id and is_sandbox; every query filters
-- on both. References to users are composite (agency_id, user id) so a listing
-- can never point at another agency's people.

create table listings (
    id             text primary key,
    agency_id      text not null references agencies (id),
    is_sandbox     boolean not null,
    -- The public slug; unique platform-wide because the canonical page URL is.
    listing_number text not null unique,
    status         text not null check (status in (
                       'coming_soon', 'active', 'pending', 'sold', 'off_market', 'archived', 'cancelled')),
    address        text not null,
    owner_user_id  text not null,
    agent_one_id   text not null,
    agent_two_id   text,
    package        text not null,
    notes          text,
    -- Set when the listing's invoice is paid: status changes need both.
    activated_at   bigint,
    billed_at      bigint,
    tour3d_url     text,
    -- JSON array of {url, label, original_label}.
    floorplan      jsonb not null default '[]',
    created_at     bigint not null,
    updated_at     bigint not null,
    foreign key (agency_id, owner_user_id) references users (agency_id, id),
    foreign key (agency_id, agent_one_id) references users (agency_id, id),
    foreign key (agency_id, agent_two_id) references users (agency_id, id)
);

create index listings_by_tenant_created on listings (agency_id, is_sandbox, created_at, id);

create table orders (
    id                text primary key,
    agency_id         text not null references agencies (id),
    is_sandbox        boolean not null,
    listing_id        text not null references listings (id),
    package           text not null,
    -- Minor units (cents) of currency.
    amount            bigint not null check (amount >= 0),
    currency          text not null,
    invoice_number    text not null unique,
    invoice_state     text not null check (invoice_state in ('draft', 'open', 'paid', 'void')),
    payment_reference text,
    paid_at           bigint,
    voided_at         bigint,
    created_at        bigint not null,
    updated_at        bigint not null
);

create index orders_by_listing on orders (listing_id, created_at, id);

-- One shoot per listing; scheduling again moves it.
create table appointments (
    id              text primary key,
    agency_id       text not null references agencies (id),
    is_sandbox      boolean not null,
    listing_id      text not null unique references listings (id),
    scheduled_at    bigint not null,
    photographer_id text,
    status          text not null check (status in ('scheduled', 'cancelled', 'completed')),
    created_at      bigint not null,
    updated_at      bigint not null
);

-- An owner's cancellation fee schedule; an owner without rows gets the default
-- tier. The largest hours_before decides the no-fee cutoff.
create table cancellation_fee_tiers (
    agency_id     text not null references agencies (id),
    owner_user_id text not null,
    hours_before  bigint not null check (hours_before > 0),
    amount        bigint not null check (amount >= 0),
    currency      text not null,
    primary key (owner_user_id, hours_before),
    foreign key (agency_id, owner_user_id) references users (agency_id, id)
);

-- The transactional outbox: each state change writes its event here in the
-- same transaction. seq gives the insertion order.
create table events (
    seq           bigint generated always as identity primary key,
    event_id      text not null unique,
    agency_id     text not null references agencies (id),
    is_sandbox    boolean not null,
    event_type    text not null,
    api_version   text not null,
    occurred_at   bigint not null,
    data          jsonb not null,
    -- Set once the dispatcher has fanned the event out to its deliveries.
    dispatched_at bigint
);

create index events_by_tenant on events (agency_id, is_sandbox, seq);
create index events_undispatched on events (seq) where dispatched_at is null;
