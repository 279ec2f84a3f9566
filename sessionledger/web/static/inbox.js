// The inbox: everything waiting on a person across all sessions — questions (with their
// countdowns), plan approvals, tool approvals — the nearest deadline first, then what has no
// deadline (a plan approval, a paused or not yet timed question). It is the landing view.
// The session list says which sessions something waits in (and their names); the document of
// each of those is read (again only when its version changed) for what exactly waits.

import { get, serverNow, sessionPath } from './api.js';
import { drawTimeLeft } from './countdown.js';
import { clip, clock, fill, h, instant } from './dom.js';
import { waitingCount } from './sessions.js';

const TIMED = new Set(['hiddenGrace', 'countdown']);

/** The instant a waiting interaction auto-continues at (ms), or Infinity when it does not. */
export function deadlineOf(interaction) {
  const timer = interaction.autoResolution;
  if (!timer || !TIMED.has(timer.state)) return Infinity;
  const at = instant(timer.deadlineAt);
  return Number.isNaN(at) ? Infinity : at;
}

/** What waits, in a few words: the question(s), the plan's first line, the tool. */
export function whatWaits(interaction) {
  const payload = interaction.payload || {};
  if (interaction.kind === 'planApproval') {
    const first = String(payload.plan || '').split('\n').map((l) => l.replace(/^#+\s*/, '').trim())
      .find(Boolean);
    return { label: 'Plan approval', text: clip(first || 'a plan', 120) };
  }
  if (interaction.kind === 'askUserQuestion' || Array.isArray(payload.questions)) {
    const questions = (payload.questions || []).map((q) => q.question).filter(Boolean);
    return {
      label: questions.length > 1 ? `${questions.length} questions` : 'Question',
      text: clip(questions.join(' · ') || 'a question', 120),
    };
  }
  return { label: 'Tool approval', text: clip(payload.tool || interaction.kind || '', 120) };
}

export class Inbox {
  constructor(listEl, { countEl, linkEl, toast }) {
    this.listEl = listEl;
    this.countEl = countEl;
    this.linkEl = linkEl;
    this.toast = toast;
    this.docs = new Map();  // sessionId -> the document last read (by version)
    this.sessions = [];
    this.generation = 0;
    this.visible = false;
    this.loaded = false;
    this.listed = false;  // the session list was read at least once
  }

  /** The session list changed: the header's count now, the entries when shown. */
  update(sessions) {
    this.listed = true;
    this.sessions = sessions.filter((s) => waitingCount(s.pending));
    const total = this.sessions.reduce((sum, s) => sum + waitingCount(s.pending), 0);
    this.countEl.textContent = String(total);
    this.countEl.dataset.count = String(total);
    if (this.visible) this.refresh();
  }

  show(visible) {
    this.visible = visible;
    if (visible) this.refresh();
  }

  async refresh() {
    const generation = ++this.generation;
    const sessions = this.sessions;
    await Promise.all(sessions.map(async (s) => {
      const had = this.docs.get(s.sessionId);
      if (had && had.version >= s.version) return;
      try {
        this.docs.set(s.sessionId, await get(sessionPath(s.sessionId)));
      } catch (err) {
        if (err.status === 404 || err.status === 410) this.docs.delete(s.sessionId);
      }
    }));
    if (generation !== this.generation) return;
    const wanted = new Set(sessions.map((s) => s.sessionId));
    for (const id of [...this.docs.keys()]) if (!wanted.has(id)) this.docs.delete(id);
    this.loaded = this.listed && sessions.every((s) => this.docs.has(s.sessionId));
    this.#draw(sessions);
  }

  #draw(sessions) {
    const entries = [];
    for (const s of sessions) {
      const doc = this.docs.get(s.sessionId);
      for (const interaction of (doc && doc.interactions) || []) {
        entries.push({ session: s, interaction, deadline: deadlineOf(interaction) });
      }
    }
    // The nearest deadline first; what has none after, the longest waiting session first.
    entries.sort((a, b) => (a.deadline - b.deadline)
      || (instant(a.session.updatedAt) - instant(b.session.updatedAt))
      || (a.session.sessionId < b.session.sessionId ? -1 : 1));
    this.listEl.dataset.count = String(entries.length);
    this.listEl.dataset.ready = this.loaded ? 'true' : 'false';
    if (!entries.length) {
      fill(this.listEl, h('li', { class: 'empty' }, 'Nothing is waiting for you.'));
      return;
    }
    fill(this.listEl, entries.map(({ session, interaction, deadline }) => {
      const what = whatWaits(interaction);
      const timer = interaction.autoResolution;
      let when = null;
      if (Number.isFinite(deadline)) {
        const left = h('span', { class: 'time-left', dataset: { deadlineAt: timer.deadlineAt } });
        drawTimeLeft(left, serverNow());
        when = h('span', { class: 'inbox-deadline' }, 'auto-continues in ', left, ' · at ',
          h('time', { datetime: timer.deadlineAt }, clock(timer.deadlineAt)));
      } else if (timer && timer.state === 'paused') {
        when = h('span', { class: 'inbox-deadline' }, 'countdown paused: waits for your answer');
      } else {
        when = h('span', { class: 'inbox-deadline' }, 'no deadline: waits for you');
      }
      return h('li', {
        class: 'inbox-entry',
        dataset: { sessionId: session.sessionId, interactionId: interaction.interactionId, kind: interaction.kind },
      }, h('a', { href: `#/sessions/${encodeURIComponent(session.sessionId)}`, class: 'inbox-entry-link' },
        h('span', { class: 'inbox-session', title: session.sessionId }, session.name || session.sessionId),
        h('span', { class: 'inbox-what' }, h('strong', {}, `${what.label}: `), what.text)),
      when);
    }));
  }
}
