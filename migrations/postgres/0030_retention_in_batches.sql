-- The retention purges delete the oldest rows first, in small batches: each
-- batch finds its rows by the index of the time they are kept by.
create index job_attempts_by_start on job_attempts (started_at);
