// The cards of the waiting interactions (docs/spec.md §5 and §7, HO-2, HO-4/HO-5): questions
// and plan approvals. A card is built once per interaction and then only updated, so what the
// user selected or typed survives every refresh of the session document.

import { interactionPath, post } from './api.js';
import { countdownElement, updateCountdown } from './countdown.js';
import { h } from './dom.js';
import { renderMarkdown } from './markdown.js';

const CHIP_WIDTH = 12;  // AQ-2: a header is shown as a chip this wide
const MOVE_KEYS = new Set(['ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'Tab', 'Home',
  'End', 'PageUp', 'PageDown']);
const isText = (el) => el instanceof HTMLTextAreaElement
  || (el instanceof HTMLInputElement && el.type === 'text');

function chip(header) {
  const chars = Array.from(String(header || ''));
  if (!chars.length) return null;
  const text = chars.length > CHIP_WIDTH ? `${chars.slice(0, CHIP_WIDTH - 1).join('')}…` : chars.join('');
  return h('span', { class: 'chip', title: header }, text);
}

/** Shared by both cards: busy buttons, the error line, the respond call. */
class Card {
  constructor(item, ctx) {
    this.item = item;
    this.ctx = ctx;
    this.error = h('p', { class: 'card-error', role: 'alert', hidden: true });
    this.buttons = [];
  }

  showError(message) {
    this.error.textContent = message || '';
    this.error.hidden = !message;
  }

  /** Send the decision; once accepted, `sent` ({ title, lines }) is confirmed on the page
   * (issue 23.8): the card goes away with the next document, the confirmation stays. */
  async respond(body, sent) {
    this.showError('');
    this.setBusy(true);
    try {
      const call = await post(`${interactionPath(this.ctx.sessionId, this.item.interactionId)}/respond`, body);
      this.el.dataset.answered = call.status;
      if (sent && this.ctx.confirm) this.ctx.confirm({ interactionId: this.item.interactionId, ...sent });
      this.ctx.refresh();
    } catch (err) {
      this.setBusy(false);
      if (err.status === 409) this.ctx.refresh();
      this.showError(err.describe ? err.describe() : String(err));
    }
  }

  setBusy(busy) {
    this.el.classList.toggle('busy', busy);
    for (const button of this.buttons) button.disabled = busy || Boolean(button.dataset.blocked);
  }
}

export class QuestionCard extends Card {
  constructor(item, ctx) {
    super(item, ctx);
    this.engaged = false;
    this.countdown = countdownElement();
    const questions = (item.payload && item.payload.questions) || [];
    this.questions = questions.map((q, i) => this.#question(q, i));
    const submit = h('button', { type: 'button', class: 'primary submit', onclick: () => this.#submit() },
      'Submit answers');
    const decline = h('button', {
      type: 'button', class: 'decline',
      onclick: () => this.respond({ decision: 'deny' }, {
        title: 'Declined to answer', lines: questions.map((q) => q.question),
      }),
    }, 'Decline to answer');
    this.buttons = [submit, decline];
    this.el = h('section', {
      class: 'card question-card', 'aria-label': 'Question',
      dataset: { interactionId: item.interactionId, callId: item.callId, kind: item.kind },
    },
    h('div', { class: 'card-head' }, h('h3', {}, 'Question'), this.countdown),
    this.questions.map((q) => q.el),
    h('div', { class: 'actions' }, submit, decline),
    this.error);
    // HO-5: moving, selecting or typing is the user engaging: it pauses the countdown.
    this.el.addEventListener('change', (event) => {
      if (!event.target.closest('.actions')) this.#engage('select');
    });
    this.el.addEventListener('input', (event) => { if (isText(event.target)) this.#engage('type'); });
    this.el.addEventListener('change', () => this.showError(''));
    this.el.addEventListener('keydown', (event) => {
      if (MOVE_KEYS.has(event.key) && !isText(event.target)) this.#engage('move');  // text: 'type'
    });
    this.update(item);
  }

  update(item) {
    this.item = item;
    const timer = item.autoResolution;
    this.el.dataset.timerState = timer ? timer.state : 'none';
    updateCountdown(this.countdown, timer);
  }

  #question(q, index) {
    const name = `${this.item.interactionId}-q${index}`;
    const type = q.multiSelect ? 'checkbox' : 'radio';
    const options = (q.options || []).map((option) => {
      const input = h('input', { type, name, value: option.label });
      const hasPreview = typeof option.preview === 'string' && option.preview !== '';
      return {
        option, input,
        el: h('div', { class: 'option' },
          h('label', {}, input, h('span', { class: 'option-label' }, option.label),
            option.description ? h('span', { class: 'option-desc' }, option.description) : null),
          // A preview is Markdown meant for a monospace box: shown as text, never as HTML.
          hasPreview ? h('pre', { class: 'preview' }, option.preview) : null),
      };
    });
    const otherInput = h('input', { type, name, value: '', class: 'other-choice' });
    const otherText = h('input', {
      type: 'text', class: 'other-text', placeholder: 'Type your own answer', 'aria-label': 'Other answer',
    });
    otherText.addEventListener('input', () => { if (otherText.value.trim()) otherInput.checked = true; });
    const skip = h('input', { type: 'checkbox', class: 'skip-box' });
    const notes = h('textarea', {
      class: 'notes', rows: 2, placeholder: 'Notes for the agent (optional)', 'aria-label': 'Notes',
    });
    const el = h('fieldset', { class: 'question', dataset: { question: q.question } },
      h('legend', {}, chip(q.header), h('span', { class: 'question-text' }, q.question),
        q.multiSelect ? h('span', { class: 'hint' }, 'choose any') : null),
      h('div', { class: 'options', role: q.multiSelect ? 'group' : 'radiogroup' },
        options.map((o) => o.el),
        h('div', { class: 'option other' },
          h('label', {}, otherInput, h('span', { class: 'option-label' }, 'Other')), otherText)),
      h('div', { class: 'question-extras' },
        h('label', { class: 'skip' }, skip, ' Skip this question'), notes));
    skip.addEventListener('change', () => {
      el.classList.toggle('skipped', skip.checked);
      for (const input of [...options.map((o) => o.input), otherInput, otherText]) input.disabled = skip.checked;
    });
    return { q, options, otherInput, otherText, skip, notes, el };
  }

  /** AQ-3: labels (joined by ", " when several), Other as free text, skipped left out. */
  #collect() {
    const answers = {};
    const annotations = {};
    const problems = [];
    for (const { q, options, otherInput, otherText, skip, notes } of this.questions) {
      const annotation = {};
      if (!skip.checked) {
        const chosen = options.filter((o) => o.input.checked);
        const labels = chosen.map((o) => o.option.label);
        if (otherInput.checked) {
          const other = otherText.value.trim();
          if (other) labels.push(other);
          else problems.push(`“${q.question}”: type your answer for Other, or choose an option`);
        }
        if (labels.length) answers[q.question] = labels.join(', ');
        if (!q.multiSelect && chosen.length === 1 && typeof chosen[0].option.preview === 'string'
            && chosen[0].option.preview !== '') annotation.preview = chosen[0].option.preview;
      }
      if (notes.value.trim()) annotation.notes = notes.value.trim();
      if (Object.keys(annotation).length) annotations[q.question] = annotation;
    }
    return { answers, annotations, problems };
  }

  #submit() {
    const { answers, annotations, problems } = this.#collect();
    if (problems.length) {
      this.showError(problems.join(' '));
      return;
    }
    const input = { questions: this.item.payload.questions, answers };
    if (Object.keys(annotations).length) input.annotations = annotations;
    const lines = this.questions.map(({ q }) => {
      const notes = annotations[q.question] && annotations[q.question].notes;
      const answer = q.question in answers ? answers[q.question] : 'no answer (skipped)';
      return `${q.question} → ${answer}${notes ? ` · notes: ${notes}` : ''}`;
    });
    this.respond({ decision: 'modify', input }, { title: 'Answers sent', lines });
  }

  async #engage(action) {
    if (this.engaged) return;
    this.engaged = true;
    const timer = this.item.autoResolution;
    if (timer && timer.state === 'paused') return;  // already paused for good
    try {
      const interaction = await post(`${interactionPath(this.ctx.sessionId, this.item.interactionId)}/activity`,
        { action });
      this.update(interaction);
    } catch (err) {
      if (err.status !== 409) this.ctx.toast(`Could not record activity: ${err.message}`);
    }
  }
}

export class PlanCard extends Card {
  constructor(item, ctx) {
    super(item, ctx);
    const payload = item.payload || {};
    const question = (payload.questions && payload.questions[0] && payload.questions[0].question)
      || 'Review this implementation plan.';
    const body = h('div', { class: 'plan-body markdown' });
    body.innerHTML = renderMarkdown(payload.plan || '', { headingBase: 3 });  // escaped by the renderer
    const prompts = Array.isArray(payload.allowedPrompts) && payload.allowedPrompts.length
      ? h('div', { class: 'allowed-prompts' }, h('h4', {}, 'Prompts the plan asks to allow'),
        h('ul', {}, payload.allowedPrompts.map((p) => h('li', {}, h('code', {}, p.tool), ' ', p.prompt))))
      : null;
    this.feedback = h('textarea', {
      class: 'feedback', rows: 2, 'aria-label': 'Feedback',
      placeholder: 'What should change? Sent to the agent as your message; Plan stays on.',
    });
    const approve = h('button', {
      type: 'button', class: 'primary approve',
      onclick: () => this.respond({ decision: 'approve' }, { title: 'Plan approved', lines: [] }),
    }, 'Approve');
    const send = h('button', { type: 'button', class: 'send-feedback', onclick: () => this.#sendFeedback() },
      'Send feedback');
    const reject = h('button', {
      type: 'button', class: 'reject',
      onclick: () => this.respond({ decision: 'deny' }, { title: 'Plan rejected', lines: [] }),
    }, 'Reject');
    send.dataset.blocked = 'empty';
    send.disabled = true;
    this.feedback.addEventListener('input', () => {
      if (this.feedback.value.trim()) delete send.dataset.blocked;
      else send.dataset.blocked = 'empty';
      send.disabled = Boolean(send.dataset.blocked) || this.el.classList.contains('busy');
    });
    this.buttons = [approve, send, reject];
    this.heading = h('h3', {}, 'Plan approval');
    this.revision = h('div', { class: 'revision-slot' });
    // The decision stays on screen (sticky) while a long plan is read.
    this.el = h('section', {
      class: 'card plan-card', 'aria-label': 'Plan approval',
      dataset: { interactionId: item.interactionId, callId: item.callId, kind: item.kind },
    },
    h('div', { class: 'card-head' }, this.heading, chip('Plan')),
    h('p', { class: 'question-text' }, question),
    this.revision,
    body, prompts,
    h('div', { class: 'plan-decision', role: 'group', 'aria-label': 'Your decision on this plan' },
      h('div', { class: 'actions' }, approve, reject),
      h('div', { class: 'feedback-row' }, this.feedback, send),
      this.error));
  }

  update(item) {
    this.item = item;
  }

  /** This plan is a revision (v2 and later): say so, with the feedback and the diff. */
  showRevision(history, panel) {
    this.el.dataset.version = String(history.version);
    if (history.version < 2) return;
    this.heading.textContent = `Plan approval · v${history.version}`;
    this.revision.replaceChildren(panel);
  }

  #sendFeedback() {
    const feedback = this.feedback.value.trim();
    if (feedback) {
      this.respond({ decision: 'feedback', feedback }, { title: 'Feedback sent; Plan stays on', lines: [feedback] });
    }
  }
}

/** The card for one waiting interaction, by its kind. */
export function cardFor(item, ctx) {
  return item.kind === 'planApproval' ? new PlanCard(item, ctx) : new QuestionCard(item, ctx);
}
