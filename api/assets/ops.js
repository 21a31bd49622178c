// The job console's one script: auto-refresh. Every few seconds the page
// fetches itself (same URL, so the filters stay) and swaps in the new
// content, unless the operator is typing in a field or turned it off.
(() => {
  const main = () => document.getElementById('console');
  const toggle = document.getElementById('auto-refresh');
  const stored = window.localStorage.getItem('ops-auto-refresh');
  if (toggle && stored !== null) toggle.checked = stored === 'on';
  if (toggle) toggle.addEventListener('change', () => {
    window.localStorage.setItem('ops-auto-refresh', toggle.checked ? 'on' : 'off');
  });
  // A notice belongs to the action that caused it, not to every refresh.
  const url = new URL(window.location.href);
  if (url.searchParams.has('notice') || url.searchParams.has('problem')) {
    url.searchParams.delete('notice');
    url.searchParams.delete('problem');
    window.history.replaceState(null, '', url.toString());
  }
  const seconds = Number(main() && main().dataset.refresh) || 0;
  if (seconds <= 0) return;
  let busy = false;
  const refresh = async () => {
    const current = main();
    if (busy || !current || (toggle && !toggle.checked)) return;
    const focused = document.activeElement;
    if (focused && current.contains(focused) && focused.matches('input, select, textarea')) return;
    busy = true;
    try {
      const response = await fetch(window.location.href, { credentials: 'same-origin', cache: 'no-store' });
      if (!response.ok) return;
      const next = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById('console');
      if (next) {
        const status = current.querySelector('#status');
        current.innerHTML = next.innerHTML;
        const fresh = current.querySelector('#status');
        if (status && fresh && fresh.textContent === '') fresh.replaceWith(status);
        document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      }
    } catch (_) {
      // The next tick tries again; the page keeps what it shows.
    } finally {
      busy = false;
    }
  };
  window.setInterval(refresh, seconds * 1000);
})();
