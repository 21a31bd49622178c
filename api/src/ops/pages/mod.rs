//! The job console's pages on the ops listener, server-rendered: jobs by
//! state and queue with search and bulk actions (confirmed on a page of
//! their own that says how many jobs they touch), one job with every
//! attempt, the worker processes with quiet and stop, history charts with
//! per-agency and per-endpoint breakdowns, and the audit log. Every change
//! is a form post that redirects back with what happened, so the pages work
//! without script; the one script refreshes them every few seconds.
//!
//! One file per page; here what they share: formatting, links, the filter
//! as links carry it and the rows of the jobs table.

mod audit;
mod bulk;
mod history;
mod job;
mod jobs;
mod shared;
mod workers;

pub(super) use audit::audit_page;
pub(super) use bulk::{bulk, confirm_page};
pub(super) use history::{history_page, range_named, read_history};
pub(super) use job::{job_action, job_page, queue_control};
pub(super) use jobs::jobs_page;
pub(super) use shared::asset;
pub(super) use workers::{shown_state, worker_request, workers_page};

#[cfg(test)]
mod tests {
    use super::shared::*;

    #[test]
    fn links_back_stay_in_the_console() {
        assert_eq!(console_path(Some("/ops/?state=dead")), "/ops/?state=dead");
        assert_eq!(console_path(Some("https://evil.example/")), "/ops/");
        assert_eq!(console_path(Some("//evil.example/ops/")), "/ops/");
        assert_eq!(console_path(Some("/ops//evil.example")), "/ops/");
        assert_eq!(console_path(None), "/ops/");
        assert_eq!(console_path(Some("/ops/?a=1\r\nSet-Cookie: x")), "/ops/");
        assert_eq!(job_path("01J\r\nX: y"), "/ops/jobs/01J%0D%0AX%3A+y");
    }

    #[test]
    fn filters_make_links_that_keep_them() {
        let view = FilterView {
            state: "dead".into(),
            queue: "probe".into(),
            agency: String::new(),
            search: "a b&c".into(),
        };
        assert_eq!(view.link(1), "/ops/?state=dead&queue=probe&search=a+b%26c");
        assert_eq!(
            view.link(2),
            "/ops/?state=dead&queue=probe&search=a+b%26c&page=2"
        );
        assert_eq!(
            with_param("/ops/", "notice", "Retry: 3 jobs."),
            "/ops/?notice=Retry%3A+3+jobs."
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(250), "250 ms");
        assert_eq!(duration(2_500), "2.5 s");
        assert_eq!(duration(125_000), "2 min 5 s");
    }
}
