// The web client's entry point (docs/spec.md §11, `GET /`): the session list, the inbox (the
// landing view, #/), the routing between sessions (#/sessions/<id>), Shift+Tab, the
// connection indicator, messages and the token login form.

import { LOGIN_PATH, get, onUnauthorized, post, put } from './api.js';
import { startTicking } from './countdown.js';
import { Inbox } from './inbox.js';
import { SessionView } from './session-view.js';
import { SessionList } from './sessions.js';

const $ = (selector) => document.querySelector(selector);
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

const streams = new Map();
const LABELS = { live: 'live', reconnecting: 'reconnecting…', connecting: 'connecting…' };

function setStatus(name, state) {
  if (state === 'closed') streams.delete(name);
  else streams.set(name, state);
  const states = [...streams.values()];
  let overall = 'live';
  if (states.includes('reconnecting')) overall = 'reconnecting';
  else if (!states.length || states.some((s) => s !== 'live')) overall = 'connecting';
  const el = $('#connection');
  el.dataset.state = overall;
  el.textContent = LABELS[overall];
  if (state === 'reconnecting' && name !== 'page') probeLogin();
}

// Token login (login.py): on a server with a token the page shows the login form until the
// token is exchanged for an HttpOnly cookie, which every request and stream then carries by
// itself. The token is only ever in the form's field and the login request's body.
async function loginState() {
  for (;;) {
    try {
      return await get(LOGIN_PATH);
    } catch (_err) {
      setStatus('page', 'reconnecting');
      await sleep(1000);
    }
  }
}

function showLogin() {
  const form = $('#login-form');
  const input = $('#login-token');
  const error = $('#login-error');
  $('.layout').hidden = true;
  $('#logout').hidden = true;
  $('#login').hidden = false;
  input.focus();
  return new Promise((resolve) => {
    form.onsubmit = async (event) => {
      event.preventDefault();
      error.hidden = true;
      try {
        const state = await post(LOGIN_PATH, { token: input.value });
        input.value = '';
        form.onsubmit = null;
        $('#login').hidden = true;
        $('.layout').hidden = false;
        resolve(state);
      } catch (err) {
        error.textContent = err.describe ? err.describe() : String(err);
        error.hidden = false;
        input.select();
      }
    };
  });
}

let loggingIn = false;
async function loginAgain() {  // the login ended while the page was open: start over after it
  if (loggingIn) return;
  loggingIn = true;
  await showLogin();
  location.reload();
}

let probing = false;
async function probeLogin() {  // a stream failed: EventSource cannot say whether it was a 401
  if (probing || loggingIn) return;
  probing = true;
  try {
    if (!(await get(LOGIN_PATH)).authenticated) loginAgain();
  } catch (_err) {
    // the server is unreachable: the stream keeps retrying
  } finally {
    probing = false;
  }
}

let toastTimer = null;
function toast(message) {
  const el = $('#toast');
  el.textContent = message;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

async function eventTypes() {
  for (;;) {
    try {
      return (await get('/v1/event-types')).eventTypes;
    } catch (_err) {
      setStatus('page', 'reconnecting');
      await sleep(1000);
    }
  }
}

/** Issue 23.3: the page itself has the focus (no button, link, field or card control). */
const pageHasFocus = () => {
  const el = document.activeElement;
  return el === null || el === document.body || el === document.documentElement;
};

/** The service-wide "auto-continue questions" setting as a switch in the top bar. */
function autoContinueSwitch() {
  const box = $('#auto-continue');
  const show = (settings) => {
    box.checked = Boolean(settings.autoContinueQuestions);
    box.disabled = false;
  };
  const load = async () => {
    try {
      show(await get('/v1/settings'));
    } catch (_err) { /* down: the connection indicator says so; read again on focus */ }
  };
  box.addEventListener('change', async () => {
    const wanted = box.checked;
    box.disabled = true;
    try {
      show(await put('/v1/settings', { autoContinueQuestions: wanted }));
    } catch (err) {
      box.checked = !wanted;
      box.disabled = false;
      toast(err.describe ? err.describe() : String(err));
    }
  });
  window.addEventListener('focus', load);
  return load();
}

async function main() {
  setStatus('page', 'connecting');
  let login = await loginState();
  if (!login.authenticated) login = await showLogin();
  $('#logout').hidden = login.via !== 'cookie';
  onUnauthorized(loginAgain);
  const types = await eventTypes();
  setStatus('page', 'closed');
  const main = $('#session-view');
  const landing = [...main.childNodes];  // the inbox: kept, and put back on #/
  const inbox = new Inbox($('#inbox-list'), { countEl: $('#inbox-count'), linkEl: $('#inbox-link'), toast });
  let view = null;
  const list = new SessionList($('#session-list'), types, {
    onStatus: (state) => setStatus('sessions', state), toast, notifyButton: $('#notify'),
    filters: {
      search: $('#session-search'), client: $('#filter-client'), mode: $('#filter-mode'),
      waiting: $('#filter-waiting'), waitingFirst: $('#sort-waiting'), count: $('#session-count'),
    },
    onChange: (sessions) => {
      inbox.update(sessions);
      if (view) view.setName(list.nameOf(view.sessionId));
    },
  });

  function route() {
    const match = location.hash.match(/^#\/sessions\/([^/?#]+)$/);
    const sessionId = match ? decodeURIComponent(match[1]) : null;
    if (view && view.sessionId === sessionId) return;
    if (view) view.stop();
    view = null;
    list.select(sessionId);
    $('#inbox-link').setAttribute('aria-current', sessionId ? 'false' : 'page');
    if (!sessionId) {
      main.replaceChildren(...landing);  // the page's own static markup: the inbox
      inbox.show(true);
      return;
    }
    inbox.show(false);
    view = new SessionView(main, sessionId, types, {
      onStatus: (state) => setStatus('session', state), toast,
    });
    view.start();
    view.setName(list.nameOf(sessionId));
  }

  window.addEventListener('hashchange', route);
  // ES-4: Shift+Tab cycles the display mode when the page itself has the focus; on any
  // control (button, link, field, …) it keeps its usual meaning: focus moves backwards.
  document.addEventListener('keydown', (event) => {
    if (event.key !== 'Tab' || !event.shiftKey || !view || !pageHasFocus()) return;
    event.preventDefault();
    view.cycleMode();
  });
  $('#new-session').addEventListener('click', async () => {
    try {
      const created = await post('/v1/sessions', {});
      location.hash = `#/sessions/${encodeURIComponent(created.sessionId)}`;
    } catch (err) {
      toast(err.describe ? err.describe() : String(err));
    }
  });
  $('#logout').addEventListener('click', async () => {
    try {
      await post('/v1/logout');
      location.reload();
    } catch (err) {
      toast(err.describe ? err.describe() : String(err));
    }
  });
  route();
  startTicking();
  autoContinueSwitch();
  for (;;) {
    try {
      await list.start();
      break;
    } catch (_err) {
      await sleep(1000);
    }
  }
  document.body.dataset.ready = 'true';
}

main();
