// One session: its mode badge and switcher, Goal, todos with progress, the waiting questions
// and plan approvals, the session's findings (CC-10) and the audit timeline. The timeline
// opens on the session's newest entries (timeline.js); the session's SSE stream is read from
// there on and feeds it; after each event the session document (the server's read models) is
// fetched again and drawn. Documents never go backwards: one older than the last drawn
// (by version) is ignored.

import { get, post, sessionPath } from './api.js';
import { clientName, clock, fill, h } from './dom.js';
import { cardFor } from './interactions.js';
import { LedgerStream } from './stream.js';
import { Timeline } from './timeline.js';

export const MODES = ['plan', 'build', 'edit', 'yolo', 'auto'];
const TODO_MARKS = { pending: '○', in_progress: '◐', completed: '●' };
const REFRESH_DELAY_MS = 40;
const FINDINGS_DELAY_MS = 1000;
// CC-10: the events that can add a finding; after one, the audit is read again (not sooner
// than FINDINGS_DELAY_MS after the last read: an audit reads the whole log).
const FINDING_EVENTS = new Set(['ToolCallCompleted', 'TodosWritten', 'InteractionResolved']);

/** One finding of the audit document as a line of text (CC-10). */
export function findingText(finding) {
  const quoted = (items) => (items || []).map((t) => `"${t}"`).join(', ');
  if (finding.kind === 'write_in_plan') {
    const subject = finding.path || finding.command;
    return `${finding.tool}${subject ? ` ${subject}` : ''} while Plan was on`;
  }
  if (finding.kind === 'dropped_unfinished_todos') {
    return `unfinished todos dropped: ${quoted(finding.dropped)}`;
  }
  if (finding.kind === 'unanswered_question') {
    return `${finding.decision}: ${quoted(finding.questions) || '(no question text)'}`;
  }
  return '';
}

export class SessionView {
  constructor(root, sessionId, eventTypes, { onStatus, toast }) {
    this.root = root;
    this.sessionId = sessionId;
    this.eventTypes = eventTypes;
    this.onStatus = onStatus;
    this.toast = toast;
    this.doc = null;
    this.cards = new Map();
    this.requested = new Map();
    this.lastResolution = null;
    this.lastSeq = 0;
    this.refreshTimer = null;
    this.findingsTimer = null;
    this.stopped = false;
    this.isGone = false;
    this.stream = null;
    this.opened = null;
  }

  start() {
    this.#build();
    this.refresh();
    this.refreshFindings();
    this.opened = this.#open();
  }

  /** The timeline's newest window first; the stream then starts at its head (issue 23.2). */
  async #open() {
    let page = null;
    try {
      page = await this.timeline.open();
    } catch (_err) {
      // unreachable or gone: the document's refresh says which; the stream starts at 0
    }
    if (this.stopped) return;
    if (page) {
      this.lastSeq = Math.max(this.lastSeq, page.version);
      await this.#recall(page.entries);
    }
    if (this.stopped || this.isGone) return;
    this.stream = new LedgerStream(`${sessionPath(this.sessionId)}/events/stream`, this.eventTypes, {
      onEvent: (envelope) => this.#onEvent(envelope),
      onStatus: this.onStatus,
      onOpen: () => {
        this.scheduleRefresh();
        this.timeline.reach(this.lastSeq);
      },
      after: this.lastSeq,
    }).start();
  }

  /** HO-4, D157: the last resolution in the window and the questions it answered, read from
   * their events (one page), so the auto-continued or withdrawn notice survives a reload. */
  async #recall(entries) {
    const resolved = entries.filter((e) => e.type === 'InteractionResolved').pop();
    if (!resolved) return;
    const asked = entries.filter((e) => e.type === 'InteractionRequested' && e.seq < resolved.seq);
    const from = asked.length ? asked[0].seq : resolved.seq;
    let page;
    try {
      page = await get(`${sessionPath(this.sessionId)}/events?after=${from - 1}&limit=${resolved.seq - from + 1}`);
    } catch (_err) {
      return;
    }
    for (const envelope of page.events) this.#remember(envelope);
    this.#drawNotice();
  }

  #remember(envelope) {
    const data = envelope.data || {};
    if (envelope.type === 'InteractionRequested') this.requested.set(data.interactionId, data);
    if (envelope.type === 'InteractionResolved') {
      this.lastResolution = { ...data, recordedAt: envelope.recordedAt };
    }
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.refreshTimer);
    clearTimeout(this.findingsTimer);
    if (this.stream) this.stream.close();
  }

  cycleMode() {
    return this.#changeMode({ cycle: true });
  }

  // -- the page's skeleton -------------------------------------------------------------------

  #build() {
    this.badge = h('span', { id: 'mode-badge', class: 'badge', 'aria-label': 'Display mode' }, '…');
    this.underneath = h('span', { class: 'underneath' });
    this.modeButtons = MODES.map((mode) => h('button', {
      type: 'button', class: 'mode-button', dataset: { mode }, 'aria-pressed': 'false',
      onclick: () => this.#changeMode({ mode }),
    }, mode));
    this.banner = h('p', { class: 'banner', id: 'session-banner', hidden: true });
    this.workspace = h('span', { class: 'workspace' });
    this.client = h('span', { class: 'client', id: 'session-client', hidden: true });
    this.goal = h('section', { class: 'panel goal', id: 'goal', 'aria-label': 'Goal' });
    this.notice = h('div', { class: 'notice', id: 'auto-continued', hidden: true, role: 'status' });
    this.withdrawn = h('div', { class: 'notice', id: 'withdrawn', hidden: true, role: 'status' });
    this.cardsEl = h('div', { class: 'cards', id: 'interactions' });
    this.nothingWaiting = h('p', { class: 'panel empty nothing-waiting' },
      'No question or plan is waiting for you.');
    this.todos = h('section', { class: 'panel todos', id: 'todos', 'aria-label': 'Todos' });
    this.findings = h('section', { class: 'panel findings', id: 'findings', 'aria-label': 'Findings' },
      h('h3', {}, 'Findings'));
    this.timeline = new Timeline(this.sessionId, { toast: this.toast });
    const head = h('header', { class: 'session-head' },
      h('div', { class: 'title' }, h('h2', { class: 'session-id' }, this.sessionId), this.workspace,
        this.client),
      h('div', { class: 'mode' }, this.badge, this.underneath,
        h('div', { class: 'mode-switcher', role: 'group', 'aria-label': 'Mode', title: 'Shift+Tab cycles the mode' },
          this.modeButtons)));
    fill(this.root, h('div', { class: 'session', dataset: { sessionId: this.sessionId } },
      head, this.banner,
      h('div', { class: 'columns' },
        h('div', { class: 'main-col' }, this.goal, this.notice, this.withdrawn, this.cardsEl, this.nothingWaiting,
          this.todos, this.findings),
        this.timeline.el)));
  }

  // -- events and documents ------------------------------------------------------------------

  #onEvent(envelope) {
    if (envelope.seq <= this.lastSeq) return;
    this.lastSeq = envelope.seq;
    this.timeline.reach(envelope.seq);
    this.#remember(envelope);
    if (envelope.type === 'SessionDeleted') {
      if (this.stream) this.stream.close();  // the server ends the stream; its route answers 410 from now on
      this.#gone('This session was deleted. Its events stay readable until it is purged.');
      return;
    }
    if (FINDING_EVENTS.has(envelope.type)) this.#scheduleFindings();
    this.scheduleRefresh();
  }

  /** A deleted session has no stream (410): its events page stays readable until purged. */
  async #readRest() {
    await this.opened;
    for (;;) {
      let page;
      try {
        page = await get(`${sessionPath(this.sessionId)}/events?after=${this.lastSeq}&limit=1000`);
      } catch (_err) {
        return;
      }
      const before = this.lastSeq;
      for (const envelope of page.events) this.#onEvent(envelope);
      if (this.stopped || this.lastSeq === before) return;
    }
  }

  scheduleRefresh() {
    if (this.refreshTimer !== null || this.stopped) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      this.refresh();
    }, REFRESH_DELAY_MS);
  }

  async refresh() {
    try {
      this.apply(await get(sessionPath(this.sessionId)));
    } catch (err) {
      if (this.stopped) return;
      if (err.status === 410) {
        if (this.stream) this.stream.close();
        this.#gone('This session was deleted. Its events stay readable until it is purged.');
        this.#readRest();
      }
      else if (err.status === 404) {
        if (this.stream) this.stream.close();
        this.#gone(`There is no session ${this.sessionId}.`);
      } else if (err.status !== 0) this.toast(err.message);  // 0: down; the stream reconnects
    }
  }

  #scheduleFindings() {
    if (this.findingsTimer !== null || this.stopped) return;
    this.findingsTimer = setTimeout(() => {
      this.findingsTimer = null;
      this.refreshFindings();
    }, FINDINGS_DELAY_MS);
  }

  /** CC-10: the audit's findings, drawn as text (a deleted session's audit stays readable). */
  async refreshFindings() {
    let audit;
    try {
      audit = await get(`${sessionPath(this.sessionId)}/audit`);
    } catch (_err) {
      return;  // the session document's refresh reports what is wrong
    }
    if (this.stopped) return;
    const findings = Array.isArray(audit && audit.findings) ? audit.findings : [];
    this.findings.dataset.count = String(findings.length);
    fill(this.findings, h('h3', {}, 'Findings'),
      findings.length
        ? h('ul', { class: 'finding-list' }, findings.map((f) => h('li', {
          class: 'finding', dataset: { kind: String(f.kind), seq: String(f.seq) },
        },
        h('span', { class: 'finding-seq' }, `seq ${f.seq}`), ' ',
        h('span', { class: 'finding-kind' }, String(f.kind)), ': ',
        h('span', { class: 'finding-detail' }, findingText(f)))))
        : h('p', { class: 'empty' }, 'No findings.'));
  }

  apply(doc) {
    if (this.stopped || (this.doc && doc.version < this.doc.version)) return;
    this.doc = doc;
    this.root.querySelector('.session').dataset.version = doc.version;
    this.workspace.textContent = doc.workspace || '';
    this.#drawClient(doc);
    this.#drawMode(doc);
    this.#drawGoal(doc.executionState.goal);
    this.#drawTodos(doc.todos || []);
    this.#drawCards(doc.interactions || []);
    this.#drawNotice();
  }

  #gone(message) {
    this.isGone = true;
    this.banner.textContent = message;
    this.banner.hidden = false;
    for (const button of this.modeButtons) button.disabled = true;
    this.#drawCards([]);
  }

  // -- drawing --------------------------------------------------------------------------------

  #drawMode(doc) {
    const { displayMode } = doc;
    const { mode, planEnabled } = doc.executionState;
    this.badge.textContent = displayMode;
    this.badge.dataset.mode = displayMode;
    this.badge.className = `badge mode-${displayMode}`;
    this.underneath.textContent = planEnabled ? `${mode} underneath` : '';
    for (const button of this.modeButtons) {
      button.setAttribute('aria-pressed', String(button.dataset.mode === displayMode));
    }
  }

  /** CC-9: a session another program created names it and its own id for the session. */
  #drawClient(doc) {
    this.client.hidden = !doc.client;
    if (!doc.client) return;
    const external = doc.externalSessionId ? ` · session ${doc.externalSessionId}` : '';
    this.client.textContent = `${clientName(doc.client)}${external}`;
    this.client.title = `client ${doc.client}`;
    this.client.dataset.client = doc.client;
  }

  #drawGoal(goal) {
    fill(this.goal, h('h3', {}, 'Goal'),
      goal ? h('p', { class: 'goal-objective' }, goal.objective) : h('p', { class: 'empty' }, 'No goal.'));
    this.goal.dataset.active = goal ? 'true' : 'false';
  }

  #drawTodos(todos) {
    const done = todos.filter((t) => t.status === 'completed').length;
    const progress = h('span', { class: 'todo-progress', id: 'todo-progress' }, `${done}/${todos.length}`);
    fill(this.todos,
      h('h3', {}, 'Todos ', progress),
      h('progress', { max: Math.max(1, todos.length), value: done, 'aria-label': 'completed/total' }),
      todos.length
        ? h('ol', { class: 'todo-list' }, todos.map((t) => h('li', { class: `todo status-${t.status}`, dataset: { status: t.status } },
          h('span', { class: 'todo-mark', 'aria-hidden': 'true' }, TODO_MARKS[t.status] || '·'),
          h('span', { class: 'todo-content' }, t.content),
          h('span', { class: `priority priority-${t.priority}` }, t.priority))))
        : h('p', { class: 'empty' }, 'No todos.'));
  }

  #drawCards(interactions) {
    const ctx = {
      sessionId: this.sessionId, toast: this.toast, refresh: () => this.scheduleRefresh(),
    };
    const wanted = new Set(interactions.map((i) => i.interactionId));
    for (const [id, card] of this.cards) {
      if (!wanted.has(id)) {
        card.el.remove();
        this.cards.delete(id);
      }
    }
    interactions.forEach((item, index) => {
      let card = this.cards.get(item.interactionId);
      if (card) card.update(item);
      else {
        card = cardFor(item, ctx);
        this.cards.set(item.interactionId, card);
      }
      // Move a card only when it is out of place: moving a node would take the focus away.
      if (this.cardsEl.children[index] !== card.el) {
        this.cardsEl.insertBefore(card.el, this.cardsEl.children[index] || null);
      }
    });
    this.cardsEl.dataset.count = String(interactions.length);
    this.cardsEl.hidden = interactions.length === 0;
    this.nothingWaiting.hidden = interactions.length > 0;
  }

  /** HO-4: the last question resolved by the timer, while nothing was resolved after it; or
   * (D157) the last one withdrawn because the agent's request was cancelled. */
  #drawNotice() {
    const last = this.lastResolution;
    const notices = { autoContinued: this.notice, withdrawn: this.withdrawn };
    for (const [decision, el] of Object.entries(notices)) {
      if (!last || last.decision !== decision) {
        el.hidden = true;
        continue;
      }
      const asked = this.requested.get(last.interactionId);
      const questions = asked && asked.kind === 'planApproval' ? ['The plan approval']
        : ((asked && asked.payload && asked.payload.questions) || []).map((q) => q.question);
      const title = decision === 'withdrawn'
        ? 'Withdrawn — the agent cancelled its request; nobody answered'
        : 'Unanswered — auto-continued';
      fill(el,
        h('strong', {}, title),
        h('span', { class: 'notice-time' }, ` at ${clock(last.recordedAt)}`),
        questions.length ? h('ul', {}, questions.map((q) => h('li', {}, q))) : null);
      el.dataset.interactionId = last.interactionId;
      el.hidden = false;
    }
  }

  async #changeMode(body) {
    if (this.banner && !this.banner.hidden) return;
    try {
      this.apply(await post(`${sessionPath(this.sessionId)}/mode`, body));
    } catch (err) {
      this.toast(err.describe ? err.describe() : String(err));
    }
  }
}
