-- Direct uploads (POST /api/v1/direct-uploads, the S3 profile): the client
-- sends a file's parts straight to the object store by pre-signed URLs of an
-- S3 multipart upload, then asks the API to complete it. Such an upload is a
-- row of `uploads` like a tus one (same batch, expiry, states and hand-over
-- to the media pipeline); these columns say which door it came through and
-- what the store's multipart upload is.
alter table uploads add column transport text not null default 'tus'
    check (transport in ('tus', 'direct'));
-- The object store's multipart upload id (direct only).
alter table uploads add column store_upload_id text;
-- The size of every part but the last (direct only).
alter table uploads add column part_size bigint;
-- The sha256 the client declared (hex, direct only): the worker checks the
-- stored bytes against it before it derives anything from them.
alter table uploads add column declared_sha256 text;

-- The expiry sweep's read of ended uploads due to be forgotten (`state <>
-- 'receiving' and expires_at <= $1 order by expires_at`): a partial index
-- of exactly that condition serves it in order, where `uploads_by_expiry`
-- would read each ended state's range and sort them.
create index uploads_ended_by_expiry on uploads (expires_at) where state <> 'receiving';

-- A tus upload's running sha256 after its first `upload_offset` bytes (the
-- hash's serialized state), moved on by each part's commit with the offset,
-- so the completion knows the file's digest without reading it back.
alter table uploads add column sha256_state bytea;
