// The audit timeline: a window of the session's events, in seq order, once each (issue 23.2).
// Opening a session shows its newest WINDOW entries; "Load earlier" pages back; live events
// append. Each entry is who (the actor), what (the type and the one-line summary the server
// writes — the same text `sessionledger replay` prints, GET …/timeline) and when (the
// server's recordedAt, or the host's own occurredAt when it gave one — an imported
// transcript's time, CC-9 — with recordedAt in its title). The event's data is fetched and
// shown as JSON text only when its entry is opened. Nothing here reads the layout per entry:
// one read per page of entries, to keep the view at the bottom.
//
// The entries can be filtered by type and by actor (the entries loaded), and "Go to seq"
// shows any entry in one step: near the window it loads the entries between, far from it the
// window moves there ("Load later" then pages towards the newest; live events wait meanwhile).
// An entry gone to is highlighted (the audit's findings link to theirs).

import { get, sessionPath } from './api.js';
import { clockMs, h } from './dom.js';

export const WINDOW = 200;
const MAX_PAGE = 1000;  // the timeline route's largest page
const BEFORE_TARGET = 20;  // entries shown above an entry gone to in a moved window

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
  constructor(sessionId, { toast = () => {}, eventTypes = [] } = {}) {
    this.sessionId = sessionId;
    this.toast = toast;
    this.first = null;  // the seq of the first entry shown
    this.last = 0;      // the seq of the last entry shown
    this.wanted = 0;    // the highest seq known to exist
    this.fetching = false;
    this.detached = false;  // the window was moved back: live entries are not appended
    this.list = h('ol', { class: 'timeline', id: 'timeline' });
    this.earlier = h('button', {
      type: 'button', class: 'load-earlier', id: 'load-earlier', hidden: true,
      onclick: () => this.loadEarlier(),
    }, 'Load earlier');
    this.later = h('button', {
      type: 'button', class: 'load-later', id: 'load-later', hidden: true,
      onclick: () => this.loadLater(),
    }, 'Load later');
    this.#buildTools(eventTypes);
    this.el = h('section', { class: 'panel timeline-panel', 'aria-labelledby': 'timeline-title' },
      h('h3', { id: 'timeline-title' }, 'Audit timeline'), this.tools,
      h('div', { class: 'timeline-scroll' }, this.earlier, this.list, this.later));
    this.scroller = this.el.querySelector('.timeline-scroll');
    // `toggle` does not bubble: one capturing listener serves every entry.
    this.list.addEventListener('toggle', (event) => this.#opened(event.target), true);
  }

  #buildTools(eventTypes) {
    const select = (id, label, values) => {
      const el = h('select', { id, class: 'timeline-filter', onchange: () => this.#applyFilters() },
        h('option', { value: '' }, 'all'), values.map((v) => h('option', { value: v }, v)));
      return [h('label', { for: id }, label), el];
    };
    const [typeLabel, type] = select('timeline-type', 'Type', eventTypes);
    const [actorLabel, actor] = select('timeline-actor', 'Actor', []);
    this.typeFilter = type;
    this.actorFilter = actor;
    this.seqInput = h('input', {
      type: 'number', id: 'goto-seq', min: '1', step: '1', inputmode: 'numeric', class: 'goto-seq',
    });
    this.filterNote = h('p', { class: 'timeline-note', id: 'timeline-note', 'aria-live': 'polite' });
    this.tools = h('div', { class: 'timeline-tools' },
      h('div', { class: 'filter-row' }, typeLabel, type, actorLabel, actor),
      h('form', {
        class: 'goto-form', id: 'goto-form',
        onsubmit: (event) => {
          event.preventDefault();
          const seq = Number(this.seqInput.value);
          if (!Number.isSafeInteger(seq) || seq < 1) this.toast('Type the seq of an event (1 or more).');
          else this.goTo(seq);
        },
      }, h('label', { for: 'goto-seq' }, 'Go to seq'), this.seqInput,
      h('button', { type: 'submit' }, 'Go')),
      this.filterNote);
  }

  /** Only the entries of the chosen type and actor are shown (of those loaded). */
  #applyFilters() {
    const type = this.typeFilter.value;
    const actor = this.actorFilter.value;
    let shown = 0;
    let total = 0;
    for (const li of this.list.children) {
      total += 1;
      const hide = Boolean((type && li.dataset.type !== type) || (actor && li.dataset.actor !== actor));
      if (li.hidden !== hide) li.hidden = hide;
      if (!hide) shown += 1;
    }
    this.list.dataset.filtered = type || actor ? 'true' : 'false';
    this.filterNote.textContent = type || actor
      ? `${shown} of the ${total} loaded entries match${this.first > 1 ? ' (Load earlier for more)' : ''}.` : '';
  }

  /** New entries: the actor filter offers every actor seen; the filters apply to them. */
  #added(entries) {
    const actors = new Set([...this.actorFilter.options].map((o) => o.value));
    for (const e of entries) {
      if (!actors.has(e.actor)) {
        actors.add(e.actor);
        this.actorFilter.append(h('option', { value: e.actor }, e.actor));
      }
    }
    if (this.typeFilter.value || this.actorFilter.value) this.#applyFilters();
  }

  /** Show the entry with this seq, in one step, and highlight it. */
  async goTo(seq) {
    if (seq > this.wanted) {
      this.toast(`There is no event with seq ${seq}: the newest is ${this.wanted}.`);
      return false;
    }
    try {
      if (this.first === null || seq < this.first - MAX_PAGE || seq > this.last + MAX_PAGE) {
        await this.#moveTo(seq);
      } else if (seq < this.first) {
        const page = await get(`${this.path}?after=${seq - 1}&limit=${this.first - seq}`);
        this.#prepend(page.entries, page.hasEarlier);
      } else if (seq > this.last) {
        while (this.last < seq) {
          const page = await get(`${this.path}?after=${this.last}&limit=${MAX_PAGE}`);
          if (!page.entries.length) break;
          this.#append(page.entries);
        }
        this.#laterShown();
      }
    } catch (err) {
      this.toast(err.message || String(err));
      return false;
    }
    const li = this.list.querySelector(`:scope > li[data-seq="${seq}"]`);
    if (!li) return false;
    if (li.hidden) {  // filtered out: the filters give way to what was asked for
      this.typeFilter.value = '';
      this.actorFilter.value = '';
      this.#applyFilters();
    }
    for (const old of this.list.querySelectorAll(':scope > li.highlight')) {
      old.classList.remove('highlight');
      old.removeAttribute('aria-current');
    }
    li.classList.add('highlight');
    li.setAttribute('aria-current', 'true');
    li.scrollIntoView({ block: 'center' });
    li.querySelector('summary').focus({ preventScroll: true });
    return true;
  }

  /** A window starting a little before `seq`; what follows is read by "Load later". */
  async #moveTo(seq) {
    const from = Math.max(0, seq - 1 - BEFORE_TARGET);
    const page = await get(`${this.path}?after=${from}&limit=${WINDOW}`);
    this.list.replaceChildren();
    this.first = null;
    this.last = from;
    this.#append(page.entries);
    this.earlier.hidden = !(this.first > 1);
    this.#laterShown();
  }

  #laterShown() {
    this.detached = this.last < this.wanted;
    this.later.hidden = !this.detached;
    this.later.textContent = this.detached ? `Load later (${this.wanted - this.last} more)` : 'Load later';
  }

  async loadLater() {
    if (this.later.disabled) return;
    this.later.disabled = true;
    try {
      const page = await get(`${this.path}?after=${this.last}&limit=${WINDOW}`);
      this.#append(page.entries);
    } catch (err) {
      this.toast(err.message || String(err));
    } finally {
      this.later.disabled = false;
      this.#laterShown();
    }
  }

  #prepend(entries, hasEarlier) {
    const fresh = entries.filter((e) => e.seq < this.first);
    const { scrollHeight, scrollTop } = this.scroller;
    this.list.prepend(...fresh.map(entryItem));
    if (fresh.length) this.first = fresh[0].seq;
    this.scroller.scrollTop = scrollTop + this.scroller.scrollHeight - scrollHeight;
    this.earlier.hidden = !hasEarlier;
    this.#added(fresh);
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
      this.#prepend(page.entries, page.hasEarlier);
    } catch (err) {
      this.toast(err.message || String(err));
    } finally {
      this.earlier.disabled = false;
    }
  }

  /** An event with this seq exists (a live one): the entries up to it are fetched once. */
  async reach(seq) {
    this.wanted = Math.max(this.wanted, seq);
    if (this.detached) {  // the window was moved back: "Load later" counts what came
      this.#laterShown();
      return;
    }
    if (this.fetching) return;
    this.fetching = true;
    try {
      while (this.last < this.wanted && !this.detached) {
        const page = await get(`${this.path}?after=${this.last}&limit=${WINDOW}`);
        if (!page.entries.length || this.detached) break;
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
    this.#added(fresh);
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
