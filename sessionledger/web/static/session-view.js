// One session: its mode badge and switcher (and /plan with a task), Goal (start and end),
// delete, todos with progress, the waiting questions and plan approvals, the audit's verdict
// and findings (CC-10) and the audit timeline. The timeline opens on the session's newest
// entries (timeline.js); the session's SSE stream is read from there on and feeds it; after
// each event the session document (the server's read models) is
// fetched again and drawn. Documents never go backwards: one older than the last drawn
// (by version) is ignored.

import { del, get, post, put, sessionPath } from './api.js';
import { clientName, clock, fill, h } from './dom.js';
import { cardFor } from './interactions.js';
import { planHistory, revisionPanel } from './plans.js';
import { LedgerStream } from './stream.js';
import { Timeline } from './timeline.js';

export const MODES = ['plan', 'build', 'edit', 'yolo', 'auto'];
const TODO_MARKS = { pending: '○', in_progress: '◐', completed: '●' };
const REFRESH_DELAY_MS = 40;
const FINDINGS_DELAY_MS = 1000;
// CC-10: the events that can add a finding; after one, the audit is read again (not sooner
// than FINDINGS_DELAY_MS after the last read: an audit reads the whole log).
const FINDING_EVENTS = new Set(['ToolCallCompleted', 'TodosWritten', 'InteractionResolved']);

/** What makes an audit document not ok, one line each: the chain, the read models, the
 * events this build cannot decode; and its notes (not faults). */
export function auditProblems(audit) {
  const lines = [];
  const chain = audit.chain || {};
  if (chain.ok === false) {
    lines.push(chain.firstBadSeq == null ? 'the hash chain is broken'
      : `the hash chain is broken at seq ${chain.firstBadSeq}`);
  }
  for (const d of (audit.projections && audit.projections.differences) || []) {
    lines.push(`read model differs: ${typeof d === 'string' ? d : JSON.stringify(d)}`);
  }
  for (const u of audit.undecodable || []) {
    lines.push(`undecodable at seq ${u.seq}: ${u.type} event (${u.reason})`);
  }
  for (const note of audit.notes || []) lines.push(`note: ${note}`);
  return lines;
}

const EXPORT_PAGE = 10000;  // the events route's largest page

/** Save `text` as a file named `name` (a download of a blob: nothing leaves the browser). */
function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = h('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

const FINDINGS_OPEN = 5;  // a group of more findings than this starts collapsed
const FINDING_KINDS = {
  write_in_plan: 'Writes while Plan was on',
  dropped_unfinished_todos: 'Unfinished todos dropped',
  unanswered_question: 'Questions nobody answered',
  clock_stepped_back: 'Clock stepped back',
};

/** A finding kind's name for a person (the kind itself when it has none). */
export const findingKindName = (kind) => FINDING_KINDS[kind] || String(kind).replace(/_/g, ' ');

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
  if (finding.kind === 'clock_stepped_back') {
    return `recorded at ${finding.recordedAt}, before the event it follows (${finding.previousRecordedAt}): the server's clock was set back`;
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
    this.sent = null;  // the answer last sent from this page: { title, lines, pendingThen }
    this.dismissed = new Set();  // notices closed by the user, by interaction id
    this.lastSeq = 0;
    this.refreshTimer = null;
    this.findingsTimer = null;
    this.auditGeneration = 0;
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
      onStatus: (state) => {
        this.onStatus(state);
        // a stream that fails may have met a session deleted since the window was read (410):
        // the document's refresh tells which, and a deleted session then shows its banner
        if (state === 'reconnecting') this.scheduleRefresh();
      },
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
    if (envelope.type === 'InteractionRequested') {
      this.requested.set(data.interactionId, { ...data, seq: envelope.seq });
    }
    if (envelope.type === 'InteractionResolved') {
      this.lastResolution = { ...data, recordedAt: envelope.recordedAt, seq: envelope.seq };
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

  /** The session's name (from the session list) as the view's heading; its id until known. */
  setName(name) {
    if (!name || this.title.dataset.named === name) return;
    this.title.textContent = name;
    this.title.dataset.named = name;
  }

  #build() {
    this.title = h('h2', { class: 'session-title', id: 'session-title' }, this.sessionId);
    this.badge = h('span', { id: 'mode-badge', class: 'badge', 'aria-label': 'Display mode' }, '…');
    this.underneath = h('span', { class: 'underneath' });
    this.modeButtons = MODES.map((mode) => h('button', {
      type: 'button', class: 'mode-button', dataset: { mode }, 'aria-pressed': 'false',
      onclick: () => this.#changeMode({ mode }),
    }, mode));
    this.banner = h('p', { class: 'banner', id: 'session-banner', hidden: true });
    this.#buildPlanTask();
    this.#buildDelete();
    this.workspace = h('span', { class: 'workspace' });
    this.client = h('span', { class: 'client', id: 'session-client', hidden: true });
    this.#buildAnswerIn();
    this.#buildGoal();
    this.notice = h('div', { class: 'notice', id: 'auto-continued', hidden: true, role: 'status' });
    this.withdrawn = h('div', { class: 'notice', id: 'withdrawn', hidden: true, role: 'status' });
    this.sentNotice = h('div', { class: 'notice sent', id: 'answers-sent', hidden: true, role: 'status' });
    this.cardsEl = h('div', { class: 'cards', id: 'interactions' });
    this.nothingWaiting = h('p', { class: 'panel empty nothing-waiting' },
      'No question or plan is waiting for you.');
    this.todos = h('section', { class: 'panel todos', id: 'todos', 'aria-label': 'Todos' });
    this.#buildAudit();
    this.timeline = new Timeline(this.sessionId, { toast: this.toast, eventTypes: this.eventTypes });
    const head = h('header', { class: 'session-head' },
      h('div', { class: 'title' }, this.title, h('span', { class: 'session-id' }, this.sessionId), this.workspace,
        this.client, this.answerIn),
      h('div', { class: 'mode' }, this.badge, this.underneath,
        h('div', { class: 'mode-switcher', role: 'group', 'aria-label': 'Mode', title: 'Shift+Tab cycles the mode' },
          this.modeButtons),
        this.planTaskForm),
      h('div', { class: 'session-actions' }, this.#buildExport(), this.deleteButton, this.deleteConfirm));
    fill(this.root, h('div', { class: 'session', dataset: { sessionId: this.sessionId } },
      head, this.banner,
      h('div', { class: 'columns' },
        h('div', { class: 'main-col' }, this.goal, this.sentNotice, this.notice, this.withdrawn, this.cardsEl,
          this.nothingWaiting, this.todos, this.audit),
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

  /** The audit's verdict (ok, or what is wrong: the first bad seq, differences, undecodable
   * events) and its findings (CC-10), drawn as text; a deleted session's audit stays readable. */
  async refreshFindings() {
    const generation = ++this.auditGeneration;  // an older read that ends later is dropped
    let audit;
    try {
      audit = await get(`${sessionPath(this.sessionId)}/audit`);
      if (generation !== this.auditGeneration) return;
    } catch (err) {
      if (generation !== this.auditGeneration) return;
      if (!this.stopped && err.status === 0) this.#drawVerdict(null, 'The audit could not be read: the server cannot be reached.');
      if (!this.stopped && err.status === 404) this.#clearAudit(`There is no session ${this.sessionId}: nothing to audit.`);
      return;  // otherwise the session document's refresh reports what is wrong
    }
    if (this.stopped) return;
    this.#drawVerdict(audit);
    this.#drawFindings(Array.isArray(audit && audit.findings) ? audit.findings : []);
  }

  /** The findings grouped by kind (a heading with the count; a group of more than
   * FINDINGS_OPEN collapsed), each linked to its entry in the timeline. */
  #drawFindings(findings) {
    this.findings.dataset.count = String(findings.length);
    const groups = new Map();
    for (const f of findings) {
      const kind = String(f.kind);
      if (!groups.has(kind)) groups.set(kind, []);
      groups.get(kind).push(f);
    }
    fill(this.findings, h('h4', {}, 'Findings'),
      findings.length
        ? [...groups].map(([kind, items]) => h('details', {
          class: 'finding-group', dataset: { kind, count: String(items.length) },
          open: items.length <= FINDINGS_OPEN,
        },
        h('summary', {}, h('h5', { class: 'finding-group-title' },
          findingKindName(kind), h('span', { class: 'finding-count' }, ` (${items.length})`))),
        h('ul', { class: 'finding-list' }, items.map((f) => h('li', {
          class: 'finding', dataset: { kind, seq: String(f.seq) },
        },
        h('button', {
          type: 'button', class: 'finding-seq link-button', title: `Show event ${f.seq} in the timeline`,
          onclick: () => this.timeline.goTo(Number(f.seq)),
        }, `seq ${f.seq}`), ' ',
        h('span', { class: 'finding-kind' }, kind), ': ',
        h('span', { class: 'finding-detail' }, findingText(f)))))))
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

  /** The audit panel emptied (a verdict and findings of a session that changed are stale). */
  #clearAudit(message) {
    this.#drawVerdict(null, message);
    this.findings.dataset.count = '0';
    fill(this.findings, h('h4', {}, 'Findings'), h('p', { class: 'empty' }, 'None read.'));
  }

  #gone(message) {
    if (!this.isGone) {  // the audit drawn before is stale: it is read again (or cleared)
      this.#clearAudit('Checking again…');
      clearTimeout(this.findingsTimer);
      this.findingsTimer = null;
      this.refreshFindings();
    }
    this.isGone = true;
    this.banner.textContent = message;
    this.banner.hidden = false;
    for (const button of this.modeButtons) button.disabled = true;
    for (const control of this.root.querySelectorAll('.session-control')) control.disabled = true;
    this.deleteConfirm.hidden = true;
    this.deleteButton.setAttribute('aria-expanded', 'false');
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

  /** CC-9: a session another program created names it and its own id for the session, and
   * where its questions and plan approvals are answered. */
  #drawClient(doc) {
    this.client.hidden = !doc.client;
    this.answerIn.hidden = !doc.answerIn;
    if (!doc.client) return;
    const external = doc.externalSessionId ? ` · session ${doc.externalSessionId}` : '';
    this.client.textContent = `${clientName(doc.client)}${external}`;
    this.client.title = `client ${doc.client}`;
    this.client.dataset.client = doc.client;
    this.answerHost.textContent = `in ${clientName(doc.client)}`;
    for (const button of [this.answerHere, this.answerHost]) {
      button.setAttribute('aria-pressed', String(button.dataset.answerIn === doc.answerIn));
    }
  }

  /** Where a hosted session's questions and plan approvals are answered: here (its hook waits
   * for this page, the TUI or the CLI) or in the host's own dialog (PUT …/answer-in). */
  #buildAnswerIn() {
    const choice = (answerIn, label, title) => h('button', {
      type: 'button', class: 'answer-in-button', dataset: { answerIn }, 'aria-pressed': 'false',
      title, onclick: () => this.#setAnswerIn(answerIn),
    }, label);
    this.answerHere = choice('here', 'here',
      'Its questions and plans wait here: answer them on this page, the TUI or the CLI');
    this.answerHost = choice('host', 'in the host',
      'Its questions and plans are asked in its own dialog');
    this.answerIn = h('div', {
      class: 'answer-in', id: 'answer-in', role: 'group', hidden: true,
      'aria-label': 'Where its questions are answered',
    }, h('span', { class: 'answer-in-label' }, 'Answer questions'), this.answerHere, this.answerHost);
  }

  async #setAnswerIn(answerIn) {
    try {
      this.apply(await put(`${sessionPath(this.sessionId)}/answer-in`, { answerIn }));
    } catch (err) {
      this.toast(err.describe ? err.describe() : String(err));
    }
  }

  #drawGoal(goal) {
    fill(this.goalState,
      goal ? h('p', { class: 'goal-objective' }, goal.objective) : h('p', { class: 'empty' }, 'No goal.'));
    this.goal.dataset.active = goal ? 'true' : 'false';
    this.goalForm.hidden = Boolean(goal);
    this.goalEnd.hidden = !goal;
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
      confirm: (sent) => this.#confirmSent(sent),
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
        if (item.kind === 'planApproval') this.#planVersions(card, item);
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

  /** A plan waiting for approval after feedback on an earlier one: which version it is, the
   * feedback, the diff (plans.js). */
  async #planVersions(card, item) {
    try {
      const history = await planHistory(this.sessionId, (this.doc ? this.doc.version : this.lastSeq) + 1);
      if (this.stopped || this.cards.get(item.interactionId) !== card) return;
      card.showRevision(history, history.previous
        ? revisionPanel(history, String((item.payload && item.payload.plan) || '')) : null);
    } catch (_err) {
      // the server is away or the session gone: the plan is shown without its history
    }
  }

  /** HO-4: the last question resolved by the timer, while nothing was resolved after it; or
   * (D157) the last one withdrawn because the agent's request was cancelled. */
  #drawNotice() {
    const last = this.lastResolution;
    const notices = { autoContinued: this.notice, withdrawn: this.withdrawn };
    // Issue 23.8: a notice about an earlier question gives way to a newer one waiting.
    const pending = (this.doc && this.doc.interactions) || [];
    const newerWaiting = last && pending.some((i) => {
      const asked = this.requested.get(i.interactionId);
      return !asked || asked.seq > last.seq;
    });
    for (const [decision, el] of Object.entries(notices)) {
      if (!last || last.decision !== decision || newerWaiting || this.dismissed.has(last.interactionId)) {
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
        questions.length ? h('ul', {}, questions.map((q) => h('li', {}, q))) : null,
        this.#dismissButton(last.interactionId));
      el.dataset.interactionId = last.interactionId;
      el.hidden = false;
    }
    this.#drawSent(pending);
  }

  #dismissButton(interactionId) {
    return h('button', {
      type: 'button', class: 'dismiss', 'aria-label': 'Dismiss this notice',
      onclick: () => {
        this.dismissed.add(interactionId);
        if (this.sent && this.sent.interactionId === interactionId) this.sent = null;
        this.#drawNotice();
      },
    }, 'Dismiss');
  }

  /** Issue 23.8: what the page just sent for a card, shown once the card is gone. */
  #confirmSent(sent) {
    const pending = (this.doc && this.doc.interactions) || [];
    this.sent = { ...sent, at: new Date().toISOString(),
      pendingThen: new Set(pending.map((i) => i.interactionId)) };
    this.#drawSent(pending);
  }

  /** The confirmation stays until the user dismisses it or a new question or plan waits. */
  #drawSent(pending) {
    const sent = this.sent;
    if (sent && pending.some((i) => !sent.pendingThen.has(i.interactionId))) this.sent = null;
    if (!this.sent) {
      this.sentNotice.hidden = true;
      return;
    }
    fill(this.sentNotice,
      h('strong', {}, sent.title),
      h('span', { class: 'notice-time' }, ` at ${clock(sent.at)}`),
      sent.lines.length ? h('ul', {}, sent.lines.map((line) => h('li', {}, line))) : null,
      this.#dismissButton(sent.interactionId));
    this.sentNotice.dataset.interactionId = sent.interactionId;
    this.sentNotice.hidden = false;
  }

  async #changeMode(body) {
    if (this.banner && !this.banner.hidden) return false;
    try {
      this.apply(await post(`${sessionPath(this.sessionId)}/mode`, body));
      return true;
    } catch (err) {
      this.toast(err.describe ? err.describe() : String(err));
      return false;
    }
  }

  // -- the controls (issue 23.6): /plan with a task, Goal, delete, the audit ---------------------

  /** `/plan TASK`: Plan on, the task recorded as the user's message (POST …/mode). */
  #buildPlanTask() {
    this.planTask = h('input', {
      type: 'text', id: 'plan-task', class: 'session-control', autocomplete: 'off',
      placeholder: 'What should be planned?',
    });
    this.planTaskForm = h('form', {
      class: 'plan-task', id: 'plan-task-form', 'aria-label': '/plan with a task',
      onsubmit: async (event) => {
        event.preventDefault();
        const task = this.planTask.value.trim();
        if (!task) {
          this.toast('Type the task to plan first.');
          this.planTask.focus();
          return;
        }
        if (await this.#changeMode({ mode: 'plan', task })) this.planTask.value = '';
      },
    },
    h('label', { for: 'plan-task', class: 'visually-hidden' }, 'Task for /plan'), this.planTask,
    h('button', { type: 'submit', class: 'session-control' }, 'Plan this task'));
  }

  #buildGoal() {
    this.goalState = h('div', { class: 'goal-state' });
    this.goalInput = h('input', {
      type: 'text', id: 'goal-objective-input', class: 'session-control', autocomplete: 'off',
      placeholder: 'What should the agent pursue on its own?',
    });
    this.goalError = h('p', { class: 'panel-error', id: 'goal-error', role: 'alert', hidden: true });
    this.goalForm = h('form', {
      class: 'goal-start', id: 'goal-start',
      onsubmit: (event) => {
        event.preventDefault();
        const objective = this.goalInput.value.trim();
        if (!objective) this.#goalMessage('Type the goal\'s objective first.');
        else this.#goalCommand('POST', { objective });
      },
    },
    h('label', { for: 'goal-objective-input' }, 'Objective'), this.goalInput,
    h('button', { type: 'submit', class: 'session-control' }, 'Start goal'));
    this.goalEnd = h('button', {
      type: 'button', class: 'session-control goal-end', id: 'goal-end', hidden: true,
      onclick: () => this.#goalCommand('DELETE'),
    }, 'End goal');
    this.goal = h('section', { class: 'panel goal', id: 'goal', 'aria-labelledby': 'goal-title' },
      h('h3', { id: 'goal-title' }, 'Goal'), this.goalState, this.goalForm, this.goalEnd, this.goalError);
  }

  #goalMessage(message) {
    this.goalError.textContent = message || '';
    this.goalError.hidden = !message;
  }

  /** Start (POST) or end (DELETE) the goal; a refusal (ES-5, 409) is shown and changes nothing. */
  async #goalCommand(method, body) {
    this.#goalMessage('');
    const path = `${sessionPath(this.sessionId)}/goal`;
    try {
      this.apply(method === 'POST' ? await post(path, body) : await del(path));
      if (method === 'POST') this.goalInput.value = '';
    } catch (err) {
      this.#goalMessage(err.describe ? err.describe() : String(err));
    }
  }

  /** Delete the session (DELETE /v1/sessions/{id}) after a confirmation step. */
  /** Export: the session's events as JSON Lines (each line the envelope exactly as
   * GET …/events gives it, seq 1 to the head) and its audit as JSON; also once deleted. */
  #buildExport() {
    const button = (id, label, run) => h('button', {
      type: 'button', id, class: 'export-button',
      onclick: async (event) => {
        const el = event.currentTarget;
        el.disabled = true;
        try {
          await run();
        } catch (err) {
          this.toast(`Export failed: ${err.describe ? err.describe() : String(err)}`);
        } finally {
          el.disabled = false;
        }
      },
    }, label);
    return h('div', { class: 'export', role: 'group', 'aria-label': 'Export this session' },
      button('export-events', 'Export events (JSONL)', () => this.#exportEvents()),
      button('export-audit', 'Export audit (JSON)', () => this.#exportAudit()));
  }

  async #exportEvents() {
    const lines = [];
    let after = 0;
    for (;;) {
      const page = await get(`${sessionPath(this.sessionId)}/events?after=${after}&limit=${EXPORT_PAGE}`);
      for (const envelope of page.events) lines.push(JSON.stringify(envelope));
      if (!page.events.length) break;
      after = page.events[page.events.length - 1].seq;
      if (after >= page.version) break;
    }
    download(`${this.sessionId}.events.jsonl`, lines.length ? `${lines.join('\n')}\n` : '',
      'application/x-ndjson');
  }

  async #exportAudit() {
    const audit = await get(`${sessionPath(this.sessionId)}/audit`);
    download(`${this.sessionId}.audit.json`, `${JSON.stringify(audit, null, 2)}\n`, 'application/json');
  }

  #buildDelete() {
    this.deleteButton = h('button', {
      type: 'button', class: 'session-control danger', id: 'delete-session',
      'aria-expanded': 'false', 'aria-controls': 'delete-confirm',
      onclick: () => this.#askDelete(true),
    }, 'Delete session…');
    const yes = h('button', {
      type: 'button', class: 'session-control danger', id: 'confirm-delete', onclick: () => this.#delete(),
    }, 'Delete');
    this.cancelDelete = h('button', {
      type: 'button', id: 'cancel-delete', onclick: () => this.#askDelete(false),
    }, 'Cancel');
    this.deleteError = h('p', { class: 'panel-error', role: 'alert', hidden: true });
    this.deleteConfirm = h('div', {
      class: 'delete-confirm', id: 'delete-confirm', role: 'group', hidden: true,
      'aria-labelledby': 'delete-confirm-text',
      onkeydown: (event) => {
        if (event.key === 'Escape') this.#askDelete(false);
      },
    },
    h('p', { id: 'delete-confirm-text' },
      'Delete this session? It takes no more commands; its events and audit stay readable until it is purged.'),
    h('div', { class: 'actions' }, yes, this.cancelDelete), this.deleteError);
  }

  #askDelete(open) {
    this.deleteConfirm.hidden = !open;
    this.deleteButton.setAttribute('aria-expanded', String(open));
    this.deleteError.hidden = true;
    (open ? this.cancelDelete : this.deleteButton).focus();
  }

  async #delete() {
    try {
      await del(sessionPath(this.sessionId));
    } catch (err) {
      if (err.status !== 410) {
        this.deleteError.textContent = err.describe ? err.describe() : String(err);
        this.deleteError.hidden = false;
        return;
      }
    }
    if (this.stream) this.stream.close();
    this.#gone('This session was deleted. Its events stay readable until it is purged.');
    this.#readRest();
  }

  #buildAudit() {
    this.verdict = h('div', { class: 'audit-verdict', id: 'audit-verdict', role: 'status' }, 'Checking…');
    this.findings = h('div', { class: 'findings', id: 'findings' }, h('h4', {}, 'Findings'));
    this.audit = h('section', { class: 'panel audit', id: 'audit', 'aria-labelledby': 'audit-title' },
      h('div', { class: 'panel-head' }, h('h3', { id: 'audit-title' }, 'Audit'),
        h('button', { type: 'button', id: 'audit-again', onclick: () => this.refreshFindings() },
          'Check again')),
      this.verdict, this.findings);
  }

  /** The verdict of `GET …/audit`: ok, or each thing that is wrong. */
  #drawVerdict(audit, failure) {
    if (!audit) {
      this.verdict.dataset.ok = 'unknown';
      fill(this.verdict, failure);
      return;
    }
    const problems = auditProblems(audit);
    this.verdict.dataset.ok = String(Boolean(audit.ok));
    const chain = audit.chain || {};
    this.verdict.dataset.firstBadSeq = chain.firstBadSeq == null ? '' : String(chain.firstBadSeq);
    const events = `${audit.events} ${audit.events === 1 ? 'event' : 'events'}`;
    fill(this.verdict,
      h('p', { class: 'verdict-line' },
        h('strong', {}, audit.ok ? 'Audit ok' : 'Audit failed'),
        audit.ok ? ` — ${events}: the hash chain holds and the read models match the log`
          : ' — what is wrong:',
        h('span', { class: 'notice-time' }, ` · checked at ${clock(new Date().toISOString())}`)),
      problems.length ? h('ul', { class: 'audit-problems' }, problems.map((line) => h('li', {}, line))) : null);
  }
}
