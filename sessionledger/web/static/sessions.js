// The session list: every session, newest first, with its display-mode badge. It follows the
// global stream from the log's head at load (any new event may reorder or add sessions) and
// refetches the list after events.

import { get } from './api.js';
import { clientName, clock, fill, h } from './dom.js';
import { LedgerStream } from './stream.js';

const REFRESH_DELAY_MS = 100;

export class SessionList {
  constructor(listEl, eventTypes, { onStatus, toast }) {
    this.listEl = listEl;
    this.eventTypes = eventTypes;
    this.onStatus = onStatus;
    this.toast = toast;
    this.sessions = [];
    this.selected = null;
    this.timer = null;
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

  async refresh() {
    try {
      this.sessions = (await get('/v1/sessions')).sessions;
      this.#draw();
    } catch (err) {
      if (err.status !== 0) this.toast(err.message);
    }
  }

  #draw() {
    if (!this.sessions.length) {
      fill(this.listEl, h('li', { class: 'empty' }, 'No sessions yet.'));
      return;
    }
    fill(this.listEl, this.sessions.map((s) => h('li', {},
      h('a', {
        href: `#/sessions/${encodeURIComponent(s.sessionId)}`, class: 'session-link',
        dataset: { sessionId: s.sessionId },
        'aria-current': s.sessionId === this.selected ? 'page' : null,
      },
      h('span', { class: `badge mode-${s.displayMode}` }, s.displayMode),
      h('span', { class: 'session-name', title: s.sessionId }, s.sessionId),
      h('time', { datetime: s.updatedAt, title: s.updatedAt }, clock(s.updatedAt)),
      s.client ? h('span', {
        class: 'session-client', dataset: { client: s.client },
        title: s.externalSessionId ? `${s.client} session ${s.externalSessionId}` : s.client,
      }, clientName(s.client)) : null))));
  }
}
