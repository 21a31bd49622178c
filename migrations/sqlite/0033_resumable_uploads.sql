-- Resumable uploads (tus 1.0 at /api/v1/uploads). An upload is created with
-- its length and metadata, receives its bytes in parts (one object per
-- request that added bytes, under <tenant>/uploads/<upload id>/), and once
-- every byte is there becomes a media item of its operation, exactly as a
-- file of POST /media/upload does. The offset moves only by a part's commit,
-- conditional on the offset the part started at, so two requests racing for
-- the same bytes (a client's retry while its cut request still drains, on
-- any replica) cannot both land.
create table uploads (
    id                  text primary key,
    agency_id           text not null references agencies (id),
    is_sandbox          integer not null check (is_sandbox in (0, 1)),
    -- The batch: the operation whose progress follows every upload of a shoot.
    operation_id        text not null references media_operations (id),
    -- The media item the upload becomes (its original's key is built from it).
    media_id            text not null,
    listing_id          text references listings (id),
    upload_length       integer not null check (upload_length >= 0),
    upload_offset       integer not null default 0 check (upload_offset >= 0),
    filename            text not null,
    filetype            text,
    storage_strategy    text not null check (storage_strategy in ('cloud', 'local', 'hybrid')),
    enable_optimization integer not null check (enable_optimization in (0, 1)),
    related_entity_type text,
    related_entity_id   text,
    -- Upload-Metadata as the client sent it (HEAD repeats it).
    metadata            text not null,
    state               text not null check (state in ('receiving', 'completed', 'terminated', 'expired')),
    created_at          integer not null,
    -- Receiving: when it is abandoned unless bytes arrive (each part moves
    -- it on). Ended: when its row is forgotten.
    expires_at          integer not null,
    ended_at            integer
) strict;

create index uploads_by_expiry on uploads (state, expires_at);
create index uploads_by_operation on uploads (operation_id, state);

create table upload_parts (
    upload_id    text not null references uploads (id),
    start_offset integer not null,
    length       integer not null check (length > 0),
    object_key   text not null,
    primary key (upload_id, start_offset)
) strict;

-- A batch of resumable uploads announces how many files it will hold; its
-- operation completes once that many uploads were created and every one has
-- ended. Null for an upload whose files all arrive in one request.
alter table media_operations add column expected_items integer;
