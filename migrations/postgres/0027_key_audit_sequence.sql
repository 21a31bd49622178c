-- Nothing to change on PostgreSQL: processes hear of ended keys by
-- notification (storage/src/api_keys/ended.rs), not by following the key
-- audit log by position as SQLite's followers do (see the SQLite migration
-- of the same number). Kept so both backends share their numbering.
select 1;
