// Plan versions: a plan submitted after the user's feedback on an earlier one is a revision.
// Its history is read from the session's log, newest first: each `PlanFeedbackGiven` before
// it (the earlier plan and the feedback on it) is one earlier version, up to a plan approved,
// rejected or cancelled, or a change of mode, which start a new plan. The revision is shown
// with the feedback that led to it and a line diff against the version before (an LCS).

import { get, sessionPath } from './api.js';
import { h } from './dom.js';

const PAGE = 1000;  // timeline entries per read, reading backwards
const MAX_PAGES = 5;  // how far back a plan's history is looked for
const STOPS = new Set(['PlanApproved', 'PlanRejected', 'PlanApprovalCancelled', 'SessionModeChanged']);
const MAX_CELLS = 4_000_000;  // the LCS table's size beyond which the diff is whole blocks

/**
 * The earlier versions of the plan waiting at the session's head (before `beforeSeq`):
 * { version, previous: { plan, feedback, seq } | null }.
 */
export async function planHistory(sessionId, beforeSeq) {
  const feedbackSeqs = [];
  let before = beforeSeq;
  scan: for (let page = 0; page < MAX_PAGES && before > 1; page += 1) {
    const window = await get(`${sessionPath(sessionId)}/timeline?before=${before}&limit=${PAGE}`);
    const entries = window.entries || [];
    for (let i = entries.length - 1; i >= 0; i -= 1) {
      const entry = entries[i];
      if (STOPS.has(entry.type)) break scan;
      if (entry.type === 'PlanFeedbackGiven') feedbackSeqs.push(entry.seq);
    }
    if (!window.hasEarlier || !entries.length) break;
    before = entries[0].seq;
  }
  if (!feedbackSeqs.length) return { version: 1, previous: null };
  const seq = feedbackSeqs[0];
  const events = await get(`${sessionPath(sessionId)}/events?after=${seq - 1}&limit=1`);
  const data = (events.events[0] && events.events[0].data) || {};
  return {
    version: feedbackSeqs.length + 1,
    previous: { plan: String(data.plan || ''), feedback: String(data.feedback || ''), seq },
  };
}

/** The lines of `before` and `after` as [op, line]: op is ' ' (kept), '-' (removed), '+'. */
export function lineDiff(before, after) {
  const a = String(before).split('\n');
  const b = String(after).split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA -= 1; endB -= 1; }
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const head = a.slice(0, start).map((line) => [' ', line]);
  const tail = a.slice(endA).map((line) => [' ', line]);
  const n = midA.length;
  const m = midB.length;
  if ((n + 1) * (m + 1) > MAX_CELLS) {
    return [...head, ...midA.map((l) => ['-', l]), ...midB.map((l) => ['+', l]), ...tail];
  }
  // lengths[i][j]: the LCS of midA[i:] and midB[j:]
  const lengths = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lengths[i][j] = midA[i] === midB[j] ? lengths[i + 1][j + 1] + 1
        : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  const mid = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (midA[i] === midB[j]) { mid.push([' ', midA[i]]); i += 1; j += 1; }
    else if (lengths[i + 1][j] >= lengths[i][j + 1]) { mid.push(['-', midA[i]]); i += 1; }
    else { mid.push(['+', midB[j]]); j += 1; }
  }
  while (i < n) { mid.push(['-', midA[i]]); i += 1; }
  while (j < m) { mid.push(['+', midB[j]]); j += 1; }
  return [...head, ...mid, ...tail];
}

const MARKS = {
  '+': { cls: 'diff-add', mark: '+', said: 'added: ' },
  '-': { cls: 'diff-del', mark: '−', said: 'removed: ' },
  ' ': { cls: 'diff-same', mark: ' ', said: '' },
};

/** The revision's panel: what it is, the feedback that led to it, the diff (as text). */
export function revisionPanel({ version, previous }, plan) {
  const diff = lineDiff(previous.plan, plan);
  const added = diff.filter(([op]) => op === '+').length;
  const removed = diff.filter(([op]) => op === '-').length;
  return h('div', { class: 'plan-revision', dataset: { version: String(version) } },
    h('p', { class: 'revision-line' },
      h('strong', {}, `Revision v${version}`), ` of a plan you gave feedback on (v${version - 1}).`),
    h('div', { class: 'revision-feedback' },
      h('h4', {}, `Your feedback on v${version - 1}`),
      h('blockquote', { class: 'feedback-text' }, previous.feedback || '(none)')),
    h('details', { class: 'plan-diff-box', open: true },
      h('summary', {}, `Changes from v${version - 1}: ${added} ${added === 1 ? 'line' : 'lines'} added, `
        + `${removed} removed`),
      h('ol', { class: 'plan-diff', 'aria-label': `Changes from v${version - 1}` },
        diff.map(([op, line]) => {
          const { cls, mark, said } = MARKS[op];
          return h('li', { class: `diff-line ${cls}` },
            h('span', { class: 'diff-mark', 'aria-hidden': 'true' }, mark),
            said ? h('span', { class: 'visually-hidden' }, said) : null,
            h('span', { class: 'diff-text' }, line || '\u00a0'));
        }))));
}
