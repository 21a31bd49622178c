-- Uploads and archives: an operation, its media items (one per uploaded file)
-- and each item's delivery variants. Objects live in the object store under
-- object_key; rows are written only once every part of a request is stored.
create table media_operations (
    id           text primary key,
    agency_id    text not null references agencies (id),
    is_sandbox   boolean not null,
    kind         text not null check (kind in ('upload', 'archive')),
    listing_id   text references listings (id),
    status       text not null check (status in ('processing', 'completed', 'failed')),
    -- For an archive: its name and, once written, its object.
    archive_name text,
    archive_key  text,
    created_at   bigint not null,
    completed_at bigint
);

create index media_operations_by_tenant on media_operations (agency_id, is_sandbox, created_at);

create table media_items (
    id                  text primary key,
    operation_id        text not null references media_operations (id),
    agency_id           text not null references agencies (id),
    is_sandbox          boolean not null,
    listing_id          text references listings (id),
    position            integer not null,
    filename            text not null,
    size_bytes          bigint not null,
    media_type          text not null check (media_type in ('jpeg', 'png', 'webp', 'gif', 'mp4', 'pdf')),
    content_sha256      text not null,
    object_key          text not null,
    storage_strategy    text not null check (storage_strategy in ('cloud', 'local', 'hybrid')),
    enable_optimization boolean not null,
    related_entity_type text,
    related_entity_id   text,
    status              text not null check (status in ('queued', 'processing', 'ready', 'failed')),
    failure_reason      text,
    duration_seconds    double precision,
    created_at          bigint not null,
    updated_at          bigint not null
);

create index media_items_by_operation on media_items (operation_id, position);
create index media_items_by_listing on media_items (listing_id, created_at);

create table media_variants (
    media_id   text not null references media_items (id),
    name       text not null,
    object_key text not null,
    format     text not null,
    width      integer not null,
    height     integer not null,
    size_bytes bigint not null,
    primary key (media_id, name)
);

-- Progress states of one operation come from several workers at once: each
-- takes the next number here, and the persisted latest state only moves forward.
alter table media_operations add column progress_seq bigint not null default 0;
alter table operation_progress add column seq bigint not null default 0;
