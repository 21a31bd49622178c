//! `/ops/`: the page of queue actions apalis-board lacks. Static HTML whose
//! script calls the ops routes; every action reloads the tables and reports
//! what happened in `#status`.

use axum::response::Html;

/// The page.
pub(super) async fn page() -> Html<&'static str> {
    Html(PAGE)
}

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Listing API · queues</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #222; }
  h1 { font-size: 1.3rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
  table { border-collapse: collapse; min-width: 40rem; }
  th, td { border-bottom: 1px solid #ddd; padding: .35rem .6rem; text-align: left; vertical-align: top; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  code { font-size: 12px; }
  button { cursor: pointer; }
  #status { margin-top: 1rem; min-height: 1.4em; font-weight: 600; }
  .paused { color: #a60; }
</style>
</head>
<body>
<h1>Job queues</h1>
<p>The full dashboard (tasks, workers) is at <a href="/">/</a>. Here: dead jobs and queue controls.</p>
<div id="status" role="status"></div>
<h2>Queues</h2>
<table id="queues">
  <thead><tr><th>Queue</th><th>Pending</th><th>Scheduled</th><th>Running</th><th>Done</th><th>Dead</th><th>State</th><th></th></tr></thead>
  <tbody></tbody>
</table>
<h2>Dead jobs</h2>
<table id="dead">
  <thead><tr><th>Job</th><th>Queue</th><th>Attempts</th><th>Last error</th><th></th></tr></thead>
  <tbody></tbody>
</table>
<script>
const status = (text) => { document.getElementById('status').textContent = text; };
const cell = (text, cls) => { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; return td; };
const button = (id, label, action) => {
  const b = document.createElement('button'); b.id = id; b.textContent = label; b.onclick = action; return b;
};
async function call(method, url) {
  const response = await fetch(url, { method, credentials: 'same-origin' });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
  return body;
}
async function act(url, done) {
  try { await call('POST', url); status(done); } catch (e) { status('Failed: ' + e.message); }
  await load();
}
async function load() {
  const queues = await call('GET', '/ops/api/queues');
  const qbody = document.querySelector('#queues tbody'); qbody.replaceChildren();
  for (const q of queues) {
    const tr = document.createElement('tr'); tr.id = 'queue-' + q.queue;
    tr.append(cell(q.queue), cell(q.pending, 'num'), cell(q.scheduled, 'num'), cell(q.running, 'num'),
              cell(q.done, 'num'), cell(q.dead, 'num'), cell(q.paused ? 'paused' : 'running', q.paused ? 'paused' : ''));
    const td = document.createElement('td');
    td.append(q.paused
      ? button('resume-' + q.queue, 'Resume', () => act('/ops/api/queues/' + q.queue + '/resume', 'Resumed ' + q.queue))
      : button('pause-' + q.queue, 'Pause', () => act('/ops/api/queues/' + q.queue + '/pause', 'Paused ' + q.queue)));
    tr.append(td); qbody.append(tr);
  }
  const dead = await call('GET', '/ops/api/jobs/dead');
  const dbody = document.querySelector('#dead tbody'); dbody.replaceChildren();
  if (dead.length === 0) { const tr = document.createElement('tr'); tr.id = 'no-dead'; tr.append(cell('No dead jobs.')); dbody.append(tr); }
  for (const job of dead) {
    const tr = document.createElement('tr'); tr.id = 'dead-' + job.id;
    const id = document.createElement('td'); const code = document.createElement('code'); code.textContent = job.id; id.append(code);
    tr.append(id, cell(job.queue), cell(job.attempts, 'num'), cell(job.last_error || ''));
    const td = document.createElement('td');
    td.append(button('retry-' + job.id, 'Retry', () => act('/ops/api/jobs/' + job.id + '/retry', 'Retried ' + job.id)), ' ',
              button('discard-' + job.id, 'Discard', () => act('/ops/api/jobs/' + job.id + '/discard', 'Discarded ' + job.id)));
    tr.append(td); dbody.append(tr);
  }
  document.body.dataset.loaded = 'true';
}
load().catch((e) => status('Failed: ' + e.message));
</script>
</body>
</html>
"#;
