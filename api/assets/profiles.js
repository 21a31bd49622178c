// The delivery profile pages: a template's logo added to each output's
// watermark before portal.js posts the form; on a profile's preview, the
// focal point moved by click or keys (PATCH /api/v1/media/{id}), the page
// looked at again while outputs render, and the ZIP of the shown photos'
// outputs (POST /api/v1/media/archive, then its operation until written).
(function () {
  'use strict';
  const api = window.portalApi;
  const status = document.getElementById('status');
  const say = (region, text, kind) => {
    if (!region) return;
    region.textContent = text;
    region.className = (region.id === 'status' ? 'status ' : 'small ') + (kind || '');
  };
  // The envelope's message and what to do next, as every portal page says it.
  const explain = window.portalExplain;

  // A branded template: the chosen logo goes into every output's watermark.
  document.addEventListener('submit', (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.watermark) return;
    const logo = form.querySelector('select[data-logo]');
    const outputs = form.querySelector('textarea[name=outputs]');
    if (!logo || !outputs) return;
    try {
      const suggested = JSON.parse(form.dataset.watermark);
      const list = JSON.parse(outputs.value);
      for (const output of list) {
        output.watermark = Object.assign({}, suggested, output.watermark || {}, { media_id: logo.value });
      }
      outputs.value = JSON.stringify(list, null, 2);
    } catch (_) { /* portal.js reports JSON that does not parse */ }
  }, true);

  // Moving a focal point.
  const clamp = (value) => Math.min(1, Math.max(0, value));
  async function saveFocal(button, x, y) {
    button.disabled = true;
    say(status, 'Moving the focal point…', 'busy');
    try {
      const result = await api('PATCH', '/api/v1/media/' + button.dataset.media, {
        focal_point: { x: Math.round(x * 1000) / 1000, y: Math.round(y * 1000) / 1000 }
      });
      if (result.status === 200) {
        sessionStorage.setItem('portal-status', JSON.stringify({
          text: 'Focal point moved. The cropped outputs are being rendered around it.', kind: 'ok'
        }));
        location.reload();
        return;
      }
      say(status, explain(result), 'error');
    } catch (error) {
      say(status, 'The service could not be reached (' + error.message + '). Try again.', 'error');
    }
    button.disabled = false;
  }
  for (const button of document.querySelectorAll('button.focal')) {
    const marker = button.querySelector('.marker');
    let x = Number(button.dataset.x) / 100;
    let y = Number(button.dataset.y) / 100;
    const place = () => { marker.style.left = (x * 100) + '%'; marker.style.top = (y * 100) + '%'; };
    button.addEventListener('click', (event) => {
      // A click with the pointer sets the point where it landed; Enter or
      // Space on the focused button (no position) saves the point the keys moved.
      if (event.detail > 0) {
        const box = button.querySelector('img').getBoundingClientRect();
        x = clamp((event.clientX - box.left) / box.width);
        y = clamp((event.clientY - box.top) / box.height);
        place();
      }
      saveFocal(button, x, y);
    });
    button.addEventListener('keydown', (event) => {
      const step = event.shiftKey ? 0.01 : 0.05;
      const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
      const move = moves[event.key];
      if (!move) return;
      event.preventDefault();
      x = clamp(x + move[0]);
      y = clamp(y + move[1]);
      place();
    });
  }

  // While outputs render, look again.
  const preview = document.getElementById('preview');
  if (preview && Number(preview.dataset.pending) > 0) {
    setTimeout(() => location.reload(), 3000);
  }

  // The ZIP of the shown photos' outputs.
  const zip = document.getElementById('zip');
  if (zip) {
    const region = document.getElementById('zip-status');
    const button = document.getElementById('zip-button');
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    zip.addEventListener('submit', async (event) => {
      event.preventDefault();
      button.disabled = true;
      say(region, 'Packing the ZIP…', 'busy');
      try {
        let result = await api('POST', '/api/v1/media/archive', {
          file_ids: JSON.parse(zip.dataset.files),
          archive_name: zip.dataset.name,
          profile_id: zip.dataset.profile
        });
        if (result.status !== 202) { say(region, explain(result), 'error'); button.disabled = false; return; }
        const operation = result.body.operation_id;
        for (let tries = 0; tries < 300; tries++) {
          if (result.body.status === 'completed' && result.body.download_url) {
            const link = document.createElement('a');
            link.href = result.body.download_url;
            link.id = 'zip-download';
            link.className = 'button';
            link.textContent = 'Download ' + zip.dataset.name + '.zip';
            region.textContent = '';
            region.className = 'small';
            region.append(link);
            button.disabled = false;
            return;
          }
          if (result.body.status === 'failed') {
            say(region, 'The ZIP could not be packed. Try again; if it keeps failing, quote operation ' + operation + ' to support.', 'error');
            button.disabled = false;
            return;
          }
          say(region, 'Packing the ZIP… (' + (tries + 1) + ' s)', 'busy');
          await sleep(1000);
          result = await api('GET', '/api/v1/media/archive/' + operation);
          if (result.status !== 200) { say(region, explain(result), 'error'); button.disabled = false; return; }
        }
        say(region, 'The ZIP is taking long. Come back later: operation ' + operation + ' goes on in the background.', 'error');
      } catch (error) {
        say(region, 'The service could not be reached (' + error.message + '). Try again.', 'error');
      }
      button.disabled = false;
    });
  }
})();
