// The developer portal's one script. Pages are rendered on the server; every
// change goes through the public JSON API with the session cookie, its
// X-CSRF-Token, the page's environment (X-Environment) and a fresh
// X-Idempotency-Key, so the portal obeys exactly the API's rules.
(function () {
  'use strict';
  const meta = (name) => {
    const element = document.querySelector('meta[name="' + name + '"]');
    return element ? element.content : '';
  };
  const newKey = () =>
    (window.crypto && crypto.randomUUID)
      ? crypto.randomUUID()
      : String(Date.now()) + Math.random().toString(16).slice(2);

  // One JSON call to the API; resolves to {status, body, headers}.
  async function api(method, path, body) {
    const headers = { 'Accept': 'application/json', 'X-CSRF-Token': meta('csrf-token') };
    const environment = meta('environment');
    if (environment) headers['X-Environment'] = environment;
    if (method !== 'GET') headers['X-Idempotency-Key'] = newKey();
    const init = { method, headers, credentials: 'same-origin' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = text; }
    return { status: response.status, body: parsed, headers: response.headers };
  }
  window.portalApi = api;

  // What a person should read about a failed call: the envelope's message,
  // the fields it names, and what to do next.
  function explain(result) {
    const error = result.body && result.body.error;
    if (!error) return 'The request failed with status ' + result.status + '. Try again.';
    let text = error.message || error.code;
    const fields = error.details && error.details.fields;
    if (fields) {
      text += ' ' + Object.entries(fields).map(([name, why]) => name + ': ' + why).join('; ') + '.';
    }
    if (result.status === 401) text += ' Sign in again to continue.';
    if (result.status === 429) {
      const retry = result.headers.get('Retry-After');
      text += retry ? ' Try again in ' + retry + ' s.' : ' Try again shortly.';
    }
    if (result.status >= 500) text += ' Try again; if it persists, quote request ' + (error.request_id || '') + ' to support.';
    return text;
  }

  window.portalExplain = explain;

  function say(region, text, kind) {
    if (!region) return;
    region.textContent = text;
    region.className = 'status ' + (kind || '');
  }

  // A form's fields as the JSON body: checkboxes with the same name form an
  // array; `data-type="number"` fields become numbers; empty optional
  // fields are left out; `data-json` textareas are parsed.
  function bodyOf(form) {
    const body = {};
    const arrays = new Set();
    for (const box of form.querySelectorAll('input[type=checkbox][data-array]')) arrays.add(box.name);
    for (const name of arrays) body[name] = [];
    for (const element of form.elements) {
      if (!element.name || element.disabled || element.dataset.skip !== undefined) continue;
      if (element.type === 'checkbox') {
        if (arrays.has(element.name)) { if (element.checked) body[element.name].push(element.value); }
        else if (element.dataset.on !== undefined) body[element.name] = element.checked ? element.dataset.on : element.dataset.off;
        else body[element.name] = element.checked;
        continue;
      }
      if (element.value === '' && element.dataset.keepEmpty === undefined) continue;
      if (element.dataset.type === 'number') body[element.name] = Number(element.value);
      else if (element.dataset.json !== undefined) body[element.name] = JSON.parse(element.value);
      else body[element.name] = element.value;
    }
    return body;
  }

  function showOnce(form, result) {
    const field = form.dataset.once;
    const value = field && result.body && field.split('.').reduce((v, k) => (v ? v[k] : undefined), result.body);
    if (!value) return false;
    const box = document.createElement('div');
    box.className = 'secret';
    box.setAttribute('role', 'alert');
    const title = document.createElement('strong');
    title.textContent = form.dataset.onceLabel || 'Copy it now: it is shown only once.';
    const code = document.createElement('code');
    code.id = 'shown-once';
    code.textContent = value;
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'secondary';
    copy.textContent = 'Copy';
    copy.addEventListener('click', async () => {
      try { await navigator.clipboard.writeText(value); copy.textContent = 'Copied'; }
      catch (_) {
        const range = document.createRange(); range.selectNodeContents(code);
        const selection = getSelection(); selection.removeAllRanges(); selection.addRange(range);
        copy.textContent = 'Selected: press Ctrl+C';
      }
    });
    const done = document.createElement('button');
    done.type = 'button';
    done.textContent = 'I have stored it';
    done.addEventListener('click', () => location.reload());
    box.append(title, code, copy, done);
    form.after(box);
    return true;
  }

  // Forms marked data-api call the API instead of navigating.
  document.addEventListener('submit', async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.api) return;
    event.preventDefault();
    if (form.dataset.confirm && !confirm(form.dataset.confirm)) return;
    const region = document.getElementById(form.dataset.status || 'status') ||
      document.getElementById('status');
    const button = form.querySelector('button[type=submit], button:not([type])');
    let body;
    try { body = form.dataset.nobody !== undefined ? undefined : bodyOf(form); }
    catch (error) { say(region, 'The body is not valid JSON: ' + error.message, 'error'); return; }
    if (button) button.disabled = true;
    say(region, form.dataset.busy || 'Working…', 'busy');
    try {
      const result = await api(form.dataset.method || 'POST', form.dataset.api, body);
      if (result.status >= 200 && result.status < 300) {
        const verdict = result.body && result.body.verdict;
        say(region, (form.dataset.done || 'Done.') + (verdict ? ' Verdict: ' + verdict + '.' : ''), 'ok');
        if (form.dataset.redirect) { location.assign(form.dataset.redirect); return; }
        if (!showOnce(form, result) && form.dataset.stay === undefined) {
          // The page is drawn again with the change; the message survives it.
          sessionStorage.setItem('portal-status', JSON.stringify({ text: region.textContent, kind: 'ok' }));
          setTimeout(() => location.reload(), 600);
        }
      } else {
        say(region, explain(result), 'error');
      }
    } catch (error) {
      say(region, 'The service could not be reached (' + error.message + '). Check your connection and try again.', 'error');
    } finally {
      if (button) button.disabled = false;
    }
  });

  // The set-password page: the token is in the URL fragment, never sent to
  // the server in a URL.
  const setPassword = document.getElementById('set-password');
  if (setPassword) {
    const tokenOfLink = () => new URLSearchParams(location.hash.slice(1)).get('token');
    const region = document.getElementById('status');
    const checkLink = () => {
      if (!tokenOfLink()) {
        say(region, 'This page needs the link from your e-mail. Ask for a new link on the sign-in page.', 'error');
      } else {
        say(region, '', '');
      }
    };
    checkLink();
    window.addEventListener('hashchange', checkLink);
    setPassword.addEventListener('submit', async (event) => {
      event.preventDefault();
      const token = tokenOfLink();
      const password = setPassword.elements.new_password.value;
      if (password !== setPassword.elements.confirm_password.value) {
        say(region, 'The two passwords differ. Type the same password twice.', 'error');
        return;
      }
      say(region, 'Setting your password…', 'busy');
      const result = await api('POST', '/api/v1/session/password', { token: token || '', new_password: password });
      if (result.status === 201) { location.assign('/settings'); return; }
      say(region, explain(result), 'error');
    });
  }

  // The test console: sends the chosen key's request and shows the answer.
  const console_ = document.getElementById('console');
  if (console_) {
    console_.addEventListener('submit', async (event) => {
      event.preventDefault();
      const region = document.getElementById('status');
      const form = console_.elements;
      const request = { key_id: form.key_id.value, method: form.method.value, path: form.path.value };
      if (request.method === 'POST' || request.method === 'PATCH') {
        request.headers = { 'X-Idempotency-Key': newKey() };
      }
      if (form.body.value.trim() !== '') {
        try { request.body = JSON.parse(form.body.value); }
        catch (error) { say(region, 'The body is not valid JSON: ' + error.message, 'error'); return; }
      }
      say(region, 'Running…', 'busy');
      const result = await api('POST', '/api/v1/agency/test-console', request);
      if (result.status !== 200) { say(region, explain(result), 'error'); return; }
      const answer = result.body;
      say(region, 'Ran ' + request.method + ' ' + request.path + ': ' + answer.status + '.', 'ok');
      document.getElementById('answer-status').textContent = String(answer.status);
      document.getElementById('answer-headers').textContent =
        Object.entries(answer.headers).map(([name, value]) => name + ': ' + value).join('\n');
      document.getElementById('answer-body').textContent =
        typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body, null, 2);
      document.getElementById('answer').hidden = false;
    });
  }

  const carried = sessionStorage.getItem('portal-status');
  if (carried) {
    sessionStorage.removeItem('portal-status');
    try {
      const { text, kind } = JSON.parse(carried);
      say(document.getElementById('status'), text, kind);
    } catch (_) { /* nothing to show */ }
  }

  document.documentElement.dataset.ready = 'true';
})();
