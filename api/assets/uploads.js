// The upload page: files dropped or chosen go to /api/v1/uploads through
// tus-js-client (resumable uploads, tus 1.0) with the session cookie, its
// X-CSRF-Token and the page's environment. A shoot's new files share one
// batch (POST /api/v1/upload-batches), whose progress stream shows each file
// ready. tus-js-client keeps each unfinished upload's URL in this browser
// (localStorage), so after a reload the same files chosen again resume from
// the server's offsets instead of starting over.
(function () {
  'use strict';
  const input = document.getElementById('files');
  if (!input || !window.tus) return;
  const meta = (name) => {
    const element = document.querySelector('meta[name="' + name + '"]');
    return element ? element.content : '';
  };
  const zone = document.getElementById('drop-zone');
  const listingInput = document.getElementById('listing-number');
  const queueCard = document.getElementById('queue-card');
  const queue = document.getElementById('queue');
  const overall = document.getElementById('overall');
  const overallBar = document.getElementById('overall-bar');
  const status = document.getElementById('status');
  const environment = meta('environment') || 'live';
  const PARALLEL = 3;
  const CHUNK = 8 * 1024 * 1024;
  const PREFIX = 'listing-api/' + environment + '/';
  const files = [];

  const say = (text, kind) => {
    status.textContent = text;
    status.className = 'status ' + (kind || '');
  };
  const size = (bytes) => {
    if (bytes >= 1024 * 1024) return (bytes / (1024 * 1024)).toFixed(1) + ' MB';
    return Math.max(1, Math.round(bytes / 1024)) + ' KB';
  };
  // The envelope's message of a failed tus request, and what to do next.
  const explain = (error) => {
    const response = error && error.originalResponse;
    if (!response) return 'The connection was lost. Choose the file again to resume it.';
    let text = 'The upload was refused (' + response.getStatus() + ').';
    try {
      const body = JSON.parse(response.getBody());
      if (body && body.error && body.error.message) text = body.error.message;
    } catch (_) { /* not the envelope */ }
    if (response.getStatus() === 401) text += ' Sign in again, then choose the file again.';
    return text;
  };

  // Unfinished uploads this browser remembers, from earlier visits.
  function showEarlier() {
    const list = document.getElementById('earlier-list');
    const card = document.getElementById('earlier');
    list.textContent = '';
    let count = 0;
    for (let index = 0; index < localStorage.length; index++) {
      const key = localStorage.key(index);
      if (!key || !key.startsWith('tus::' + PREFIX)) continue;
      try {
        const entry = JSON.parse(localStorage.getItem(key));
        const item = document.createElement('li');
        const listing = entry.metadata.listing_number ? ' for ' + entry.metadata.listing_number : '';
        item.textContent = entry.metadata.filename + ' (' + size(entry.size) + ')' + listing;
        list.appendChild(item);
        count++;
      } catch (_) { /* not one of ours */ }
    }
    card.hidden = count === 0;
  }

  function updateOverall() {
    const total = files.reduce((sum, file) => sum + file.size, 0);
    const sent = files.reduce((sum, file) => sum + file.sent, 0);
    const done = files.filter((file) => file.done).length;
    const failed = files.filter((file) => file.failed).length;
    overallBar.max = Math.max(total, 1);
    overallBar.value = sent;
    let text = size(sent) + ' of ' + size(total) + ' sent; ' + done + ' of ' + files.length + ' files done';
    if (failed) text += ', ' + failed + ' stopped';
    overall.textContent = text + '.';
  }

  function row(file) {
    const item = document.createElement('li');
    const name = document.createElement('div');
    name.className = 'name';
    name.textContent = file.name;
    const bar = document.createElement('progress');
    bar.max = Math.max(file.size, 1);
    bar.value = 0;
    bar.setAttribute('aria-label', file.name);
    const state = document.createElement('div');
    state.className = 'state';
    state.textContent = 'Waiting';
    item.append(name, bar, state);
    queue.appendChild(item);
    return { item, bar, state };
  }

  function setState(entry, text, kind) {
    entry.view.state.textContent = text;
    entry.view.state.className = 'state ' + (kind || '');
  }

  // The tus upload of one file; its batch is named before it starts.
  function tusUpload(entry, listing) {
    const metadata = { filename: entry.file.name, filetype: entry.file.type || 'application/octet-stream' };
    if (listing) metadata.listing_number = listing;
    return new tus.Upload(entry.file, {
      endpoint: location.origin + '/api/v1/uploads',
      chunkSize: CHUNK,
      retryDelays: [0, 1000, 3000, 5000, 10000, 20000],
      metadata,
      headers: { 'X-CSRF-Token': meta('csrf-token'), 'X-Environment': environment },
      removeFingerprintOnSuccess: true,
      fingerprint: (file) => Promise.resolve(
        [PREFIX + listing, file.name, file.type, file.size, file.lastModified].join('/')),
      onProgress: (sent, total) => {
        entry.sent = sent;
        entry.view.bar.value = sent;
        setState(entry, size(sent) + ' of ' + size(total) + ' sent');
        updateOverall();
      },
      onAfterResponse: (_request, response) => {
        const media = response.getHeader('Upload-Media-Id');
        if (media) entry.mediaId = media;
      },
    });
  }

  function run(entry) {
    return new Promise((resolve) => {
      entry.upload.options.onSuccess = () => {
        entry.done = true;
        entry.sent = entry.size;
        entry.view.bar.value = entry.size;
        setState(entry, entry.batched ? 'Sent; making its delivery variants…' : 'Sent', 'ok');
        updateOverall();
        resolve();
      };
      entry.upload.options.onError = (error) => {
        entry.failed = true;
        setState(entry, 'Stopped: ' + explain(error), 'error');
        updateOverall();
        resolve();
      };
      setState(entry, entry.resumed ? 'Resuming…' : 'Starting…');
      entry.upload.start();
    });
  }

  // Follows the batch's progress: each file's status by its media item.
  function follow(url) {
    const source = new EventSource(url);
    const update = (event) => {
      let data;
      try { data = JSON.parse(event.data); } catch (_) { return; }
      const snapshot = data && data.operation && data.operation.files;
      if (!snapshot) return;
      for (const file of snapshot) {
        const entry = files.find((candidate) => candidate.mediaId === file.media_id);
        if (!entry) continue;
        if (file.status === 'ready') setState(entry, 'Ready', 'ok');
        else if (file.status === 'failed') setState(entry, 'Processing failed: ' + (file.failure_reason || 'no reason given'), 'error');
      }
      if (event.type === 'completed' || event.type === 'failed') {
        source.close();
        const ready = snapshot.filter((file) => file.status === 'ready').length;
        say(ready + ' of ' + snapshot.length + ' files ready' +
          (listingInput.value.trim() ? ' on listing ' + listingInput.value.trim() : '') + '.',
          event.type === 'completed' ? 'ok' : 'error');
      }
    };
    for (const name of ['queued', 'processing', 'variant_done', 'file_done', 'failed', 'completed']) {
      source.addEventListener(name, update);
    }
  }

  async function start(chosen) {
    const listing = listingInput.value.trim();
    const entries = Array.from(chosen).map((file) => ({ file, name: file.name, size: file.size, sent: 0 }));
    if (!entries.length) return;
    queueCard.hidden = false;
    for (const entry of entries) {
      entry.view = row(entry);
      entry.upload = tusUpload(entry, listing);
      const previous = await entry.upload.findPreviousUploads();
      if (previous.length) {
        entry.upload.resumeFromPreviousUpload(previous[0]);
        entry.resumed = true;
      }
      files.push(entry);
    }
    updateOverall();
    const fresh = entries.filter((entry) => !entry.resumed);
    if (fresh.length) {
      say('Opening the batch…', 'busy');
      const batch = await window.portalApi('POST', '/api/v1/upload-batches',
        { file_count: fresh.length, listing_number: listing || null });
      if (batch.status !== 201) {
        const error = batch.body && batch.body.error;
        let text = (error && error.message) || ('The batch was refused (' + batch.status + ').');
        if (batch.status === 404) text += ' Check the listing number (and the Live/Sandbox switch), then choose the files again.';
        say(text, 'error');
        for (const entry of fresh) {
          entry.failed = true;
          setState(entry, 'Not sent', 'error');
        }
        updateOverall();
        return;
      }
      for (const entry of fresh) {
        entry.upload.options.metadata.batch_id = batch.body.batch_id;
        entry.batched = true;
      }
      follow(batch.body.progress_url);
    }
    say('Uploading ' + entries.length + ' file' + (entries.length === 1 ? '' : 's') + '…', 'busy');
    const waiting = entries.slice();
    const worker = async () => {
      while (waiting.length) await run(waiting.shift());
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL, entries.length) }, worker));
    showEarlier();
    const stopped = entries.filter((entry) => entry.failed).length;
    if (stopped) {
      say(stopped + ' file' + (stopped === 1 ? '' : 's') + ' stopped; see each one\'s reason. Choose them again to resume.', 'error');
    } else if (!fresh.length) {
      say('Every file is sent.', 'ok');
    } else if (!status.className.includes('ok')) {
      say('Every file is sent; making the delivery variants…', 'busy');
    }
  }

  input.addEventListener('change', () => {
    start(input.files);
    input.value = '';
  });
  zone.addEventListener('dragover', (event) => {
    event.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (event) => {
    event.preventDefault();
    zone.classList.remove('over');
    start(event.dataTransfer.files);
  });
  showEarlier();
})();
