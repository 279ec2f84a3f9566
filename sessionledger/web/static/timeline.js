// The audit timeline: every event of the session, in seq order, once each — who (the actor),
// what (the type and a one-line summary) and when (the server's recordedAt, or the host's own
// data.occurredAt when it gave one — an imported transcript's time, CC-9 — with recordedAt in
// its title). Opening an entry shows the event's data as JSON text.

import { clientName, clip, clockMs, h } from './dom.js';

const display = (mode, plan) => (plan ? `plan (${mode} underneath)` : mode);

const SUMMARIES = {
  SessionCreated: (d) => {
    const state = d.executionState || {};
    const by = d.client ? ` · ${clientName(d.client)}` : '';
    return `${display(state.mode, state.planEnabled)} · ${d.host || ''} host${by} · ${d.workspace || ''}`;
  },
  SessionModeChanged: (d) =>
    `${display(d.previousMode, d.previousPlanEnabled)} → ${display(d.mode, d.planEnabled)}${d.via ? ` (${d.via})` : ''}`,
  GoalStarted: (d) => clip(d.objective),
  GoalEnded: (d) => clip(d.objective),
  MessageRecorded: (d) => `${d.role}${d.continuation ? ' (continuation)' : ''}: ${clip(d.content)}`,
  ToolCallRequested: (d) => `${d.tool} · ${d.callId}`,
  PermissionDecided: (d) => {
    const decision = d.decision || {};
    return `${d.tool}: ${decision.behavior} — ${clip(decision.reason, 100)}`;
  },
  InteractionRequested: (d) => {
    const questions = (d.payload && d.payload.questions) || [];
    return `${d.kind}: ${clip(questions.map((q) => q.question).join(' · '), 100)}`;
  },
  InteractionAutoResolutionChanged: (d) => `timer ${d.state}${d.reason ? ` (${d.reason})` : ''}`,
  InteractionUserActivity: (d) => `user activity: ${d.action}`,
  InteractionResolved: (d) => {
    if (d.decision === 'autoContinued') return 'unanswered — auto-continued';
    if (d.decision === 'withdrawn') return 'withdrawn — the agent cancelled its request';
    return `${d.decision}${d.feedback ? `: ${clip(d.feedback, 100)}` : ''}`;
  },
  ToolCallCompleted: (d) => {
    const outcome = d.status === 'cancelled' ? 'cancelled' : (d.success ? 'succeeded' : 'failed');
    return `${d.tool} ${outcome}: ${clip(d.modelContent, 100)}`;
  },
  TodosWritten: (d) => {
    const todos = d.todos || [];
    return `${todos.filter((t) => t.status === 'completed').length}/${todos.length} completed`;
  },
  ReminderInjected: (d) => `${d.kind}${d.variant ? ` (${d.variant})` : ''}`,
  SettingChanged: (d) => `${d.name}: ${d.previous} → ${d.value}`,
  PlanSubmitted: (d) => clip(d.plan, 100),
  PlanApproved: (d) => `approved${d.fileWritten ? ` · written to ${d.path}` : ' · file not written'}`,
  PlanFeedbackGiven: (d) => clip(d.feedback, 100),
  PlanRejected: (d) => `rejected${d.by ? ` by ${d.by}` : ''}`,
  PlanFileWriteFailed: (d) => clip(d.error, 100),
  SessionModelSelected: (d) => `${d.model}${d.level ? ` $${d.level}` : ''}`,
};

export function summary(envelope) {
  const data = envelope.data || {};
  const describe = SUMMARIES[envelope.type];
  try {
    if (describe) return describe(data);
  } catch (_err) {
    // fall through to the raw data
  }
  return clip(JSON.stringify(data), 140);
}

export class Timeline {
  constructor() {
    this.list = h('ol', { class: 'timeline', id: 'timeline' });
    this.el = h('section', { class: 'panel timeline-panel', 'aria-label': 'Audit timeline' },
      h('h3', {}, 'Audit timeline'), h('div', { class: 'timeline-scroll' }, this.list));
    this.scroller = this.el.querySelector('.timeline-scroll');
  }

  append(envelope) {
    const atBottom = this.scroller.scrollHeight - this.scroller.scrollTop - this.scroller.clientHeight < 40;
    const occurred = (envelope.data || {}).occurredAt;
    const when = occurred || envelope.recordedAt;
    const title = occurred ? `occurred ${occurred} (the host's time) · recorded ${envelope.recordedAt}`
      : envelope.recordedAt;
    const entry = h('li', { dataset: { seq: envelope.seq, type: envelope.type, actor: envelope.actor } },
      h('details', {},
        h('summary', {},
          h('span', { class: 'seq' }, `#${envelope.seq}`),
          h('time', { datetime: when, title, class: occurred ? 'occurred' : null }, clockMs(when)),
          h('span', { class: `actor actor-${envelope.actor}` }, envelope.actor),
          h('span', { class: 'type' }, envelope.type),
          h('span', { class: 'summary' }, summary(envelope))),
        h('pre', { class: 'event-data' }, JSON.stringify(envelope.data, null, 2))));
    this.list.append(entry);
    if (atBottom) this.scroller.scrollTop = this.scroller.scrollHeight;
  }
}
