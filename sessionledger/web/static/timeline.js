// The audit timeline: a window of the session's events, in seq order, once each (issue 23.2).
// Opening a session shows its newest WINDOW entries; "Load earlier" pages back; live events
// append. Each entry is who (the actor), what (the type and the one-line summary the server
// writes — the same text `sessionledger replay` prints, GET …/timeline) and when (the
// server's recordedAt, or the host's own occurredAt when it gave one — an imported
// transcript's time, CC-9 — with recordedAt in its title). The event's data is fetched and
// shown as JSON text only when its entry is opened. Nothing here reads the layout per entry:
// one read per page of entries, to keep the view at the bottom.

import { get, sessionPath } from './api.js';
import { clockMs, h } from './dom.js';

export const WINDOW = 200;

/** A type name that may wrap only between its words (InteractionAuto·Resolution·Changed). */
const typeName = (type) => String(type).split(/(?=[A-Z])/).flatMap((word, i) => (i ? [h('wbr'), word] : [word]));

function entryItem(entry) {
  const occurred = entry.occurredAt;
  const when = occurred || entry.recordedAt;
  const title = occurred ? `occurred ${occurred} (the host's time) · recorded ${entry.recordedAt}`
    : entry.recordedAt;
  return h('li', { dataset: { seq: entry.seq, type: entry.type, actor: entry.actor } },
    h('details', {},
      h('summary', {},
        h('span', { class: 'seq' }, `#${entry.seq}`),
        h('time', { datetime: when, title, class: occurred ? 'occurred' : null }, clockMs(when)),
        h('span', { class: `actor actor-${entry.actor}` }, entry.actor),
        h('span', { class: 'type' }, typeName(entry.type)),
        h('span', { class: 'summary' }, entry.summary)),
      h('pre', { class: 'event-data' }, '…')));
}

export class Timeline {
  constructor(sessionId, { toast = () => {} } = {}) {
    this.sessionId = sessionId;
    this.toast = toast;
    this.first = null;  // the seq of the first entry shown
    this.last = 0;      // the seq of the last entry shown
    this.wanted = 0;    // the highest seq known to exist
    this.fetching = false;
    this.list = h('ol', { class: 'timeline', id: 'timeline' });
    this.earlier = h('button', {
      type: 'button', class: 'load-earlier', id: 'load-earlier', hidden: true,
      onclick: () => this.loadEarlier(),
    }, 'Load earlier');
    this.el = h('section', { class: 'panel timeline-panel', 'aria-label': 'Audit timeline' },
      h('h3', {}, 'Audit timeline'), h('div', { class: 'timeline-scroll' }, this.earlier, this.list));
    this.scroller = this.el.querySelector('.timeline-scroll');
    // `toggle` does not bubble: one capturing listener serves every entry.
    this.list.addEventListener('toggle', (event) => this.#opened(event.target), true);
  }

  get path() {
    return `${sessionPath(this.sessionId)}/timeline`;
  }

  /** The newest window; resolves to its page ({entries, version, hasEarlier}). */
  async open() {
    const page = await get(`${this.path}?limit=${WINDOW}`);
    this.#append(page.entries);
    this.earlier.hidden = !page.hasEarlier;
    this.wanted = Math.max(this.wanted, page.version);
    this.list.dataset.ready = 'true';
    this.scroller.scrollTop = this.scroller.scrollHeight;
    return page;
  }

  async loadEarlier() {
    if (this.first === null || this.first <= 1 || this.earlier.disabled) return;
    this.earlier.disabled = true;
    try {
      const page = await get(`${this.path}?before=${this.first}&limit=${WINDOW}`);
      const fresh = page.entries.filter((e) => e.seq < this.first);
      const { scrollHeight, scrollTop } = this.scroller;
      this.list.prepend(...fresh.map(entryItem));
      if (fresh.length) this.first = fresh[0].seq;
      this.scroller.scrollTop = scrollTop + this.scroller.scrollHeight - scrollHeight;
      this.earlier.hidden = !page.hasEarlier;
    } catch (err) {
      this.toast(err.message || String(err));
    } finally {
      this.earlier.disabled = false;
    }
  }

  /** An event with this seq exists (a live one): the entries up to it are fetched once. */
  async reach(seq) {
    this.wanted = Math.max(this.wanted, seq);
    if (this.fetching) return;
    this.fetching = true;
    try {
      while (this.last < this.wanted) {
        const page = await get(`${this.path}?after=${this.last}&limit=${WINDOW}`);
        if (!page.entries.length) break;
        const { scrollHeight, scrollTop, clientHeight } = this.scroller;
        this.#append(page.entries);
        if (scrollHeight - scrollTop - clientHeight < 40) this.scroller.scrollTop = this.scroller.scrollHeight;
      }
    } catch (_err) {
      // the server is away: the stream's reconnection asks again (onOpen)
    } finally {
      this.fetching = false;
    }
  }

  #append(entries) {
    const fresh = entries.filter((e) => e.seq > this.last);  // never twice, always in order
    if (!fresh.length) return;
    this.list.append(...fresh.map(entryItem));
    if (this.first === null) this.first = fresh[0].seq;
    this.last = fresh[fresh.length - 1].seq;
  }

  /** An entry opened: its event's data, fetched once, as JSON text. */
  async #opened(details) {
    if (!(details instanceof HTMLDetailsElement) || !details.open || details.dataset.loaded) return;
    details.dataset.loaded = 'loading';
    const seq = Number(details.parentElement.dataset.seq);
    const pre = details.querySelector('.event-data');
    try {
      const page = await get(`${sessionPath(this.sessionId)}/events?after=${seq - 1}&limit=1`);
      const envelope = page.events[0];
      pre.textContent = JSON.stringify(envelope ? envelope.data : null, null, 2);
      details.dataset.loaded = 'true';
    } catch (err) {
      pre.textContent = `could not read the event: ${err.message}`;
      delete details.dataset.loaded;
    }
  }
}
