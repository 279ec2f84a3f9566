// The session list: the newest sessions, a page at a time ("Show more"), and every session
// something waits in wherever it is in the list, each with its display-mode badge, its name
// and what waits in it (questions, plan approvals, tool approvals, with the time left until the
// nearest deadline). It follows the global stream from the log's head at load (any new event
// may reorder or add sessions) and refetches after events. The page's title counts what waits
// across all sessions; once the user allowed it, a desktop notification tells of a question or
// plan approval asked in a session not on screen (issue 23.4). The server's list is paged
// (GET /v1/sessions?limit&cursor&waiting): the page never reads every session at once.
// The list can be searched (name, workspace, id) and filtered (client, mode, waiting only),
// with the waiting sessions first if asked. A search or a client or mode filter reads the
// newest SEARCHED sessions (not only those listed), so an older session is found too.

import { get, serverNow } from './api.js';
import { clientName, clock, fill, h } from './dom.js';
import { drawTimeLeft } from './countdown.js';
import { LedgerStream } from './stream.js';

const REFRESH_DELAY_MS = 100;
const PAGE = 100;  // sessions shown at first, and added by "Show more"
const MAX_LIMIT = 1000;  // the server's largest page
const SEARCHED = 10000;  // the newest sessions a search or a client or mode filter reads
const TITLE = 'sessionledger';
const KINDS = [
  ['questions', 'question', 'questions'],
  ['planApprovals', 'plan approval', 'plan approvals'],
  ['toolApprovals', 'tool approval', 'tool approvals'],
];

/** How many interactions wait in a session (every kind). */
export const waitingCount = (pending) => (pending
  ? KINDS.reduce((sum, [key]) => sum + (pending[key] || 0), 0) : 0);

/** Questions and plan approvals only: what a notification is for. */
const askedCount = (pending) => (pending
  ? (pending.questions || 0) + (pending.planApprovals || 0) : 0);

/** "1 question, 2 plan approvals" */
export function describeWaiting(pending) {
  return KINDS.filter(([key]) => pending && pending[key] > 0)
    .map(([key, one, many]) => `${pending[key]} ${pending[key] === 1 ? one : many}`)
    .join(', ');
}

const notifying = () => 'Notification' in window && Notification.permission === 'granted';

/** Whether a session matches the sidebar's filters (search words all found in its name,
 * workspace or id; client, mode, waiting only). */
export function matches(s, { text, client, mode, waitingOnly }) {
  if (waitingOnly && !waitingCount(s.pending)) return false;
  if (mode && s.displayMode !== mode) return false;
  if (client === '-' ? s.client : client && s.client !== client) return false;
  const haystack = `${s.name || ''}\n${s.workspace || ''}\n${s.sessionId}`.toLowerCase();
  return String(text || '').toLowerCase().split(/\s+/).filter(Boolean)
    .every((word) => haystack.includes(word));
}

/** Whether the filters search beyond the sessions listed (words, a client, a mode: waiting
 * only needs none, every waiting session is read). */
const searching = ({ text, client, mode }) => Boolean(String(text || '').trim() || client || mode);

export class SessionList {
  constructor(listEl, eventTypes, { onStatus, toast, notifyButton, filters = null, onChange = null }) {
    this.listEl = listEl;
    this.filterEls = filters;  // { search, client, mode, waiting, waitingFirst, count }
    this.onChange = onChange;  // called with the sessions after each refresh
    this.eventTypes = eventTypes;
    this.onStatus = onStatus;
    this.toast = toast;
    this.notifyButton = notifyButton || null;
    this.sessions = [];
    this.shown = PAGE;  // how many of the newest sessions to list
    this.newest = 0;  // how many of the newest sessions the last refresh read
    this.more = false;  // whether older sessions than those read exist
    this.reading = null;  // the refresh under way, if any
    this.again = false;  // whether another was asked for while it runs
    this.selected = null;
    this.timer = null;
    this.asked = null;  // sessionId -> questions + plan approvals at the last refresh
    this.#offerNotifications();
    if (filters) {
      for (const el of [filters.search, filters.client, filters.mode, filters.waiting, filters.waitingFirst]) {
        el.addEventListener(el.type === 'search' ? 'input' : 'change', () => {
          this.#draw();
          if (this.more && this.newest < SEARCHED && searching(this.#filters())) this.scheduleRefresh();
        });
      }
    }
  }

  /** The name of a session read by the list, or null. */
  nameOf(sessionId) {
    const found = this.sessions.find((s) => s.sessionId === sessionId);
    return found ? found.name || null : null;
  }

  #filters() {
    const f = this.filterEls;
    if (!f) return { text: '', client: '', mode: '', waitingOnly: false, waitingFirst: false };
    return {
      text: f.search.value, client: f.client.value, mode: f.mode.value,
      waitingOnly: f.waiting.checked, waitingFirst: f.waitingFirst.checked,
    };
  }

  /** The client filter offers every client the list holds, and "none" (this service's own). */
  #drawClientOptions() {
    const select = this.filterEls && this.filterEls.client;
    if (!select) return;
    const clients = [...new Set(this.sessions.map((s) => s.client).filter(Boolean))].sort();
    const chosen = select.value;
    if (chosen && chosen !== '-' && !clients.includes(chosen)) clients.push(chosen);
    const values = ['', '-', ...clients];
    const now = [...select.options].map((o) => o.value);
    if (now.join('\n') === values.join('\n')) return;
    fill(select, values.map((value) => h('option', { value },
      value === '' ? 'any' : value === '-' ? 'none (sessionledger)' : clientName(value))));
    select.value = chosen;
  }

  async start() {
    const health = await get('/healthz');
    await this.refresh();
    this.stream = new LedgerStream('/v1/events/stream', this.eventTypes, {
      after: health.headPosition || 0,
      onEvent: () => this.scheduleRefresh(),
      onOpen: () => this.scheduleRefresh(),
      onStatus: this.onStatus,
    }).start();
  }

  select(sessionId) {
    this.selected = sessionId;
    this.#draw();
  }

  scheduleRefresh() {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.refresh();
    }, REFRESH_DELAY_MS);
  }

  showMore() {
    this.shown += PAGE;
    this.scheduleRefresh();
  }

  /** Up to `count` sessions of the list (only the waiting ones with `waiting`), newest first,
   *  read a page of at most MAX_LIMIT at a time; and whether more exist. */
  async #read(count, waiting = false) {
    const sessions = [];
    let cursor = null;
    while (sessions.length < count) {
      const limit = Math.min(MAX_LIMIT, count - sessions.length);
      const query = `limit=${limit}${waiting ? '&waiting=true' : ''}`
        + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : '');
      const page = await get(`/v1/sessions?${query}`);
      sessions.push(...page.sessions);
      cursor = page.next;
      if (!cursor) return { sessions, more: false };
    }
    return { sessions, more: true };
  }

  /** Read the list again and draw it. One read at a time: a refresh asked for while one runs
   *  is one more read after it (so each read lands, however busy the stream or the typing),
   *  and the promise returned settles once the list is as fresh as when it was asked for. */
  refresh() {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      try {
        do {
          this.again = false;
          await this.#reread();
        } while (this.again);
      } finally {
        this.reading = null;
      }
    })();
    return this.reading;
  }

  async #reread() {
    try {
      const count = searching(this.#filters()) ? Math.max(this.shown, SEARCHED) : this.shown;
      const [{ sessions, more }, { sessions: waiting }] = await Promise.all([
        this.#read(count), this.#read(Infinity, true)]);
      const listed = new Set(sessions.map((s) => s.sessionId));
      const older = waiting.filter((s) => !listed.has(s.sessionId));
      this.sessions = [...sessions, ...older];  // both newest first: older ones after
      this.newest = sessions.length;
      this.more = more;
      this.#draw();
      this.#notify();
      if (this.onChange) this.onChange(this.sessions);
    } catch (err) {
      if (err.status !== 0) this.toast(err.message);
    }
  }

  // "Notify me" asks for the permission only when clicked, never on load.
  #offerNotifications() {
    const button = this.notifyButton;
    if (!button) return;
    const update = () => {
      button.hidden = !('Notification' in window) || Notification.permission !== 'default';
    };
    update();
    button.addEventListener('click', async () => {
      try {
        await Notification.requestPermission();
      } catch (_err) {
        // an old browser's callback form, or a refusal: the button stays or goes below
      }
      update();
    });
  }

  // A question or plan approval newly asked in a session not on screen (another session, or
  // this page in the background): one notification per session and refresh. The first list
  // is only the baseline: nothing that waited before the page opened is announced.
  #notify() {
    const before = this.asked;
    this.asked = new Map(this.sessions.map((s) => [s.sessionId, askedCount(s.pending)]));
    if (before === null || !notifying()) return;
    for (const s of this.sessions) {
      const now = this.asked.get(s.sessionId);
      if (now <= (before.get(s.sessionId) || 0)) continue;
      if (s.sessionId === this.selected && document.visibilityState === 'visible') continue;
      const note = new Notification(`Waiting for you: ${s.name || s.sessionId}`, {
        body: describeWaiting(s.pending), tag: `sessionledger-${s.sessionId}`,
      });
      note.onclick = () => {
        window.focus();
        location.hash = `#/sessions/${encodeURIComponent(s.sessionId)}`;
      };
    }
  }

  #draw() {
    const total = this.sessions.reduce((sum, s) => sum + waitingCount(s.pending), 0);
    document.title = total ? `(${total}) ${TITLE}` : TITLE;
    this.#drawClientOptions();
    const filters = this.#filters();
    const searched = searching(filters);
    // Unsearched: the newest `shown` and every waiting one; searched: every session read.
    const pool = searched ? this.sessions
      : this.sessions.filter((s, i) => i < this.shown || waitingCount(s.pending));
    let shown = pool.filter((s) => matches(s, filters));
    if (filters.waitingFirst) {
      shown = [...shown.filter((s) => waitingCount(s.pending)), ...shown.filter((s) => !waitingCount(s.pending))];
    }
    const matched = shown.length;
    if (searched) shown = shown.slice(0, this.shown);  // a page of the matches at a time
    if (this.filterEls) {
      const unread = searched && this.more ? ` (the newest ${this.newest} searched)` : '';
      this.filterEls.count.textContent = matched !== pool.length || unread
        ? `${matched} of ${pool.length} sessions shown${unread}` : '';
    }
    if (!this.sessions.length) {
      fill(this.listEl, h('li', { class: 'empty' }, 'No sessions yet.'));
      return;
    }
    if (!shown.length) {
      fill(this.listEl, h('li', { class: 'empty' }, 'No session matches.'));
      return;
    }
    // A redraw replaces the links: a keyboard user's focus stays on the session it was on.
    const focused = this.listEl.contains(document.activeElement)
      ? document.activeElement.dataset.sessionId : undefined;
    fill(this.listEl, shown.map((s) => h('li', { class: waitingCount(s.pending) ? 'waiting' : null },
      h('a', {
        href: `#/sessions/${encodeURIComponent(s.sessionId)}`, class: 'session-link',
        dataset: { sessionId: s.sessionId },
        'aria-current': s.sessionId === this.selected ? 'page' : null,
      },
      h('span', { class: `badge mode-${s.displayMode}` }, s.displayMode),
      h('span', {
        class: 'session-name', title: s.workspace ? `${s.sessionId} · ${s.workspace}` : s.sessionId,
      }, s.name || s.sessionId),
      attention(s.pending),
      h('time', { datetime: s.updatedAt, title: s.updatedAt }, clock(s.updatedAt)),
      s.client ? h('span', {
        class: 'session-client', dataset: { client: s.client },
        title: s.externalSessionId ? `${s.client} session ${s.externalSessionId}` : s.client,
      }, clientName(s.client)) : null))));
    if (searched ? matched > shown.length : this.more || this.newest > this.shown) {
      this.listEl.append(h('li', { class: 'more' }, h('button', {
        type: 'button', class: 'show-more', onclick: () => this.showMore(),
      }, 'Show more sessions')));
    }
    if (focused !== undefined) {
      const again = [...this.listEl.querySelectorAll('.session-link')]
        .find((link) => link.dataset.sessionId === focused);
      if (again) again.focus();
    }
  }
}

/** The badge of what waits in a session, with the time left until its nearest deadline. */
function attention(pending) {
  const count = waitingCount(pending);
  if (!count) return null;
  const text = describeWaiting(pending);
  let left = null;
  if (pending.deadlineAt) {
    left = h('span', {
      class: 'time-left', dataset: { deadlineAt: pending.deadlineAt },
      title: `auto-continues at ${clock(pending.deadlineAt)}`,
    });
    drawTimeLeft(left, serverNow());
  }
  return h('span', {
    class: 'attention', role: 'status', dataset: { count: String(count) },
    'aria-label': pending.deadlineAt
      ? `${text} waiting; auto-continues at ${clock(pending.deadlineAt)}` : `${text} waiting`,
  }, h('span', { class: 'attention-what' }, text), left ? ' · ' : null, left);
}
